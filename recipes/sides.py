"""Sides: N builds measured interleaved in one job on a worker (release archaeology, try-jobs, paired runs).

A farm *job* (master/jobs) measures 2 to 8 **sides** together, each a commit of the repository, optionally with a
patch applied, and its result is the sides' raw samples side by side (``perffarm-result``,
docs/result-schema.md); a commit's run is measured the same way, as one side (two when paired: recipes/paired.py).
Every side is measured in the same session, slices and rounds alternating between them (Vondra's and Callaghan's
method: all versions under the same conditions), never as N runs at different times.

The runner's build phase of a job (``--job``, master/job_steps.py's step job-build) gives each side a tree of its
own (exported from the worker's clone with ``git archive``, fetched by sha when the clone lacks it, the patch
checked with ``git apply --check`` and applied) and calls the recipe's ``SideSupport.build``; the bench phase calls
its ``bench``, which returns each side's workload results (``SideSupport`` and ``Side`` are in recipes/api.py, the
contract between the runner and a recipe).
"""

from __future__ import annotations

import filecmp
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from recipes import sandbox as sandboxing
from recipes.api import BuildFailed, Context, Side, checkout_layout

LABELS = "ABCDEFGH"
MAX_SIDES = len(LABELS)  # each side is a running server for the whole job on the PostgreSQL recipes
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
PATCH_LIMIT = 1 << 20  # bytes; the master refuses larger patches before anything is queued


UNTRUSTED = "untrusted"  # under the work directory: what a patched side builds, removed at every job's start


def untrusted_dir(ctx: Context, label: str | None = None) -> Path:
    """Where a patched side's tree, build directory and install live: a directory of their own that no cache and no
    later build reads (recipes/sandbox.py), emptied at the start of every job build and after its bench."""
    root = ctx.work_dir / UNTRUSTED
    return root if label is None else root / label


def side_layout(ctx: Context, place: str) -> tuple[Path, Path]:
    """(tree, recipe work directory) of a side that runs no one else's code: laid out under work/sides/<place> (its
    label, or the layout its caller gave it: recipes.api.Side.place) as a commit build is
    under its builder directory (recipes.api.checkout_layout), so the compiler sees the same command lines as the
    commit builds of that commit and hits their ccache entries. The work directory (build trees) outlives the job;
    the tree is kept too, and each export synced into it (sync_tree), so that make sees which files changed."""
    return checkout_layout(ctx.work_dir / "sides" / place)


def open_sandbox(ctx: Context, sides: Sequence[Side]) -> Context:
    """The context for a job: with a patched side, a working sandbox its code runs in (every side's server and
    clients too, so that all sides are measured under the same conditions), or BuildFailed saying why there is
    none: a try-job's patch never runs outside it. Without a patch, the context as it was."""
    if not any(s.untrusted for s in sides):
        return ctx
    try:
        box = sandboxing.check(ctx.work_dir / "sandbox")
    except sandboxing.SandboxUnavailable as e:
        raise BuildFailed(f"this worker cannot run a try-job's patch: {e}") from None
    return replace(ctx, sandbox=box)


def parse_sides(specs: Sequence[str], patches: Sequence[str]) -> list[Side]:
    """`LABEL=SHA` and `LABEL=FILE` arguments as sides, in label order; ValueError says what is wrong."""
    sides: dict[str, Side] = {}
    for spec in specs:
        label, _, sha = spec.partition("=")
        if label not in LABELS or not SHA_RE.match(sha):
            raise ValueError(f"--side {spec!r}: expected LABEL=SHA with LABEL one of {LABELS} and a full 40-hex sha")
        if label in sides:
            raise ValueError(f"--side {label} given twice")
        sides[label] = Side(label, sha)
    if not 2 <= len(sides) <= MAX_SIDES:
        raise ValueError(f"a job has 2 to {MAX_SIDES} sides, got {len(sides)}")
    for spec in patches:
        label, _, file = spec.partition("=")
        if label not in sides or not file:
            raise ValueError(f"--patch {spec!r}: expected LABEL=FILE for one of the sides {''.join(sides)}")
        sides[label] = Side(label, sides[label].sha, Path(file))
    return [sides[k] for k in sorted(sides)]


def sync_tree(fresh: Path, tree: Path) -> int:
    """Make `tree` hold what `fresh` holds, moving over only the files that differ (they keep `fresh`'s newer
    modification time) and removing what `fresh` lacks, then remove `fresh`; returns how many paths changed.

    Why: a side's build directory is kept between jobs (an incremental build), and make and ninja rebuild what is
    older than its sources. A file whose content is the same keeps its old time, so nothing is rebuilt for it; a
    changed file is newer than every object, so what depends on it is. Exporting over the tree instead left the
    last job's objects standing for the new commit's code."""
    changed = 0
    wanted: set[Path] = set()  # every path `fresh` holds, relative to it
    tree.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(fresh):
        rel = Path(dirpath).relative_to(fresh)
        have = tree / rel
        wanted.update(rel / n for n in [*dirnames, *filenames])
        links = [n for n in dirnames if (Path(dirpath) / n).is_symlink()]  # a link to a directory: a file here
        for name in links:
            dirnames.remove(name)
        for name in dirnames:
            target = have / name
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                target.unlink()
            if not target.exists():
                target.mkdir()
                changed += 1
        for name in [*filenames, *links]:
            new, old = Path(dirpath) / name, have / name
            if _same(new, old):
                continue
            if old.is_dir() and not old.is_symlink():
                sandboxing.remove_tree(old)
            os.replace(new, old)
            changed += 1
    for dirpath, dirnames, filenames in os.walk(tree, topdown=True):
        rel = Path(dirpath).relative_to(tree)
        for name in [*filenames, *dirnames]:
            if rel / name not in wanted:
                gone = Path(dirpath) / name
                if gone.is_dir() and not gone.is_symlink():
                    sandboxing.remove_tree(gone)
                    dirnames.remove(name)
                else:
                    gone.unlink()
                changed += 1
    sandboxing.remove_tree(fresh)
    return changed


def _same(new: Path, old: Path) -> bool:
    """Whether `old` is already what `new` is: the same symlink target, or a file of the same mode and bytes."""
    if new.is_symlink() or old.is_symlink():
        return new.is_symlink() and old.is_symlink() and os.readlink(new) == os.readlink(old)
    try:
        a, b = new.stat(), old.stat()
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(b.st_mode) or a.st_size != b.st_size or stat.S_IMODE(a.st_mode) != stat.S_IMODE(b.st_mode):
        return False
    return filecmp.cmp(new, old, shallow=False)


def _have(ctx: Context, sha: str) -> bool:
    probe = ctx.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=ctx.src_dir, check=False, capture=True)
    return probe.returncode == 0


def prepare(ctx: Context, side: Side) -> Side:
    """The side with its own tree under the work directory: the commit exported from the worker's clone (fetched
    by sha from the clone's origin when missing), the patch checked and applied."""
    if not _have(ctx, side.sha):
        ctx.log(f"side {side.label}: {side.sha[:12]} is not in this clone; fetching it from origin")
        ctx.run(
            ["git", "fetch", "--quiet", "--no-tags", "origin", side.sha], cwd=ctx.src_dir, check=False, timeout=1800
        )
        if not _have(ctx, side.sha):
            raise BuildFailed(
                f"side {side.label}: commit {side.sha} is neither in this worker's clone nor fetchable from its "
                "origin; is it a commit of the watched repository?"
            )
    untrusted = side.untrusted
    tree = untrusted_dir(ctx, side.label) / "src" if untrusted else side_layout(ctx, side.place)[0]
    # an untrusted side's tree is made afresh (its build directory is too); any other side's tree is kept, and the
    # export (patched when the patch is the caller's own) synced into it, as its build directory is kept too
    fresh = tree if untrusted else tree.parent / f"{tree.name}.export"
    sandboxing.remove_tree(fresh)
    fresh.mkdir(parents=True)
    archive = tree.parent / f"{side.label}.tar"
    try:
        ctx.run(["git", "archive", "--format=tar", "-o", str(archive), side.sha], cwd=ctx.src_dir, timeout=600)
        # --touch: git archive stamps every file with the commit's date, older than the objects of the last job's
        # build of this side, so make would take a changed file for built; extracted now, a file is newer than them
        ctx.run(["tar", "-xf", str(archive), "--touch", "-C", str(fresh)], timeout=600)
    finally:
        archive.unlink(missing_ok=True)
    if side.patch is not None:
        _apply(ctx, side, side.patch.resolve(), fresh, ctx.sandbox if untrusted else None)
        ctx.log(f"side {side.label}: {side.sha[:12]} + patch {side.patch_id}")
    else:
        ctx.log(f"side {side.label}: {side.sha[:12]}")
    if not untrusted:
        changed = sync_tree(fresh, tree)
        ctx.log(f"side {side.label}: {changed} files of the tree changed since its last build")
    return replace(side, tree=tree)


def prepared(ctx: Context, side: Side) -> Side:
    """The side with its tree: as given when it has one, else exported by `prepare`. A recipe's build calls it for
    the sides it compiles, and only for those: exporting a side it has cached would rewrite a kept tree that the
    next side may build incrementally from."""
    return side if side.tree is not None else prepare(ctx, side)


def build_place(ctx: Context, side: Side) -> tuple[Path, Path, str]:
    """(tree, recipe work directory, build name) a side that runs no one else's code is compiled in: a run's
    checked-out commit (Side.checkout) in the builder's own checkout and build directory, named after the ref it
    was asked for; any other side in its kept tree and build directory (side_layout), exported now (`prepared`) and
    named "job". Called by a recipe's build for the sides it compiles, and only for those."""
    if side.checkout:
        return ctx.src_dir, ctx.work_dir, ctx.ref
    tree = prepared(ctx, side).tree
    assert tree is not None
    return tree, side_layout(ctx, side.place)[1], "job"


def _apply(ctx: Context, side: Side, patch: Path, tree: Path, sandbox: sandboxing.Sandbox | None) -> None:
    """Apply the side's patch to `tree`, or BuildFailed saying why it does not apply."""
    size = patch.stat().st_size
    if size > PATCH_LIMIT:
        raise BuildFailed(f"side {side.label}: the patch is {size} bytes, over the {PATCH_LIMIT}-byte limit")
    # The tree is no repository: git must not find an enclosing one (it would apply paths relative to that
    # repository's root). --unsafe-paths is never given: git apply refuses paths outside the tree. In a
    # sandbox that sees only the tree (rw) and the patch (ro), as a second wall.
    alone = {"GIT_CEILING_DIRECTORIES": str(tree.parent)}
    box = sandbox.seeing(ro=[patch], rw=[tree]) if sandbox is not None else None
    check = ctx.run(
        ["git", "apply", "--check", "--verbose", str(patch)],
        cwd=tree,
        env=alone,
        check=False,
        capture=True,
        sandbox=box,
    )
    if check.returncode != 0:
        raise BuildFailed(
            f"side {side.label}: the patch does not apply to {side.sha[:12]}: " + " ".join(check.stdout.split())[-400:]
        )
    ctx.run(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=tree, env=alone, sandbox=box)
