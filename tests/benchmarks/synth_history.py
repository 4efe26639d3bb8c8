"""Write a synthetic repository shaped like postgres.git with `git fast-import`, for the history-scale benchmark.

Usage: .venv/bin/python -m tests.benchmarks.synth_history OUT.git [--commits 60000] [--branches 40] [--tags 810]
       [--merges 6] [--backpatch 0.2] [--seed 1]

What postgres.git has and this copies (defaults): ~60,000 commits on master's first-parent chain over ~30 years,
~40 stable branches (REL_18_STABLE ... REL_10_STABLE, REL9_6_STABLE ... REL7_0_STABLE, oldest first in time), each
branched from master once a "year" and living five "years" of back-patches: a master commit is cherry-picked onto
every live branch with probability `--backpatch` (same subject and author, a new sha, a later commit date),
~810 annotated release tags spread over the branches (REL_17_5, REL9_6_24, and REL_N_BETA1/RC1 on master before
branching), a few merge commits on master, one small file changed per commit, every message ending in a trailer
block as PostgreSQL's do (Author, Reviewed-by, Discussion). ~850 refs in all. A bare repository,
HEAD on master; nothing is packed beyond what fast-import writes. Prints progress and how long it took.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

START = 820_000_000  # 1995-12: postgres.git's first commit is from July 1996
SPAN = 30 * 365 * 86400
LIFE = 5  # a stable branch gets back-patches for this many branch intervals ("years")
AUTHORS = [f"Developer {chr(65 + i)} <dev{i}@example.org>" for i in range(24)]
AREAS = ["executor", "optimizer", "parser", "storage", "access", "catalog", "commands", "utils", "bin", "docs"]


@dataclass(frozen=True)
class Shape:
    """What to generate; the defaults are postgres.git's size."""

    commits: int = 60_000
    branches: int = 40
    tags: int = 810
    merges: int = 6
    backpatch: float = 0.2
    seed: int = 1


@dataclass
class Summary:
    """What was written: counts a test or the benchmark can check against git's own."""

    master_commits: int = 0
    branch_commits: dict[str, int] = field(default_factory=dict)
    side_commits: int = 0
    merges: int = 0
    tags: dict[str, str] = field(default_factory=dict)  # tag -> the branch it is on
    seconds: float = 0.0

    @property
    def total_commits(self) -> int:
        return self.master_commits + sum(self.branch_commits.values()) + self.side_commits


def branch_names(n: int) -> list[str]:
    """`n` stable-branch names, newest first, as postgres.git spells them (REL_18_STABLE ... REL9_6_STABLE ...)."""
    majors: list[tuple[int, int]] = [(m, 0) for m in range(18, 9, -1)]
    for major, last_minor in ((9, 6), (8, 4), (7, 4), (6, 5)):
        majors += [(major, minor) for minor in range(last_minor, -1, -1)]
    names = [f"REL_{a}_STABLE" if a >= 10 else f"REL{a}_{b}_STABLE" for a, b in majors]
    names += [f"REL_OLD_{i}_STABLE" for i in range(max(0, n - len(names)))]  # beyond postgres.git's count
    return names[:n]


def release_prefix(branch: str) -> str:
    """REL_17_STABLE -> REL_17_, REL9_6_STABLE -> REL9_6_: a release tag is the prefix plus the minor number."""
    return branch[: -len("STABLE")]


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n%s\n" % (len(raw), raw)


class _Writer:
    """Streams fast-import commands; marks number the commits."""

    def __init__(self, out: Callable[[bytes], object]) -> None:
        self.out = out
        self.mark = 0

    def commit(
        self,
        ref: str,
        author: str,
        when: int,
        subject: str,
        path: str,
        content: str,
        parent: int | None = None,
        merge: int | None = None,
    ) -> int:
        self.mark += 1
        who = author.encode()
        parts = [
            b"commit %s\nmark :%d\n" % (ref.encode(), self.mark),
            b"author %s %d +0000\ncommitter %s %d +0000\n" % (who, when, who, when),
            _data(
                f"{subject}\n\nSynthetic history for perffarm's scale benchmark.\n\n"
                f"Author: {author}\nReviewed-by: {author}\nDiscussion: https://postgr.es/m/synth-{self.mark}@example.org"
            ),
        ]
        if parent is not None:
            parts.append(b"from :%d\n" % parent)
        if merge is not None:
            parts.append(b"merge :%d\n" % merge)
        raw = content.encode()
        parts.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(raw), raw))
        self.out(b"".join(parts))
        return self.mark

    def tag(self, name: str, mark: int, when: int) -> None:
        self.out(
            b"tag %s\nfrom :%d\ntagger Release Manager <rm@example.org> %d +0000\n%s"
            % (name.encode(), mark, when, _data(f"PostgreSQL release {name}"))
        )


def generate(shape: Shape, write: Callable[[bytes], object], progress: Callable[[str], None] | None = None) -> Summary:
    """Emit the fast-import stream for `shape` through `write`; deterministic for a given shape."""
    rng = random.Random(shape.seed)
    w = _Writer(write)
    summary = Summary()
    names = branch_names(shape.branches)
    n_branches = len(names)
    # Branch i (0 = newest) leaves master at this first-parent position; the oldest leaves a 1/(n+1) into history.
    interval = shape.commits / (n_branches + 1)
    branch_at = {names[i]: int(shape.commits - (i + 1) * interval) for i in range(n_branches)}
    by_position: dict[int, list[str]] = {}
    for name, pos in branch_at.items():
        by_position.setdefault(pos, []).append(name)
    # Tags: BETA1/RC1 on master just before each branch point (newer majors only), the rest as minor releases
    # spread over each branch's life; whatever does not divide evenly goes to the newest branches.
    pre = [n for n in names if n.startswith("REL_")][: max(0, min(n_branches, shape.tags // 10))]
    minors_total = max(0, shape.tags - 2 * len(pre))
    minors = {n: minors_total // n_branches + (1 if i < minors_total % n_branches else 0) for i, n in enumerate(names)}
    merge_every = shape.commits // (shape.merges + 1) if shape.merges else 0
    tips: dict[str, int] = {}  # live branch -> its newest commit's mark
    last: dict[str, int] = {}  # every branch -> its newest commit's mark (live or not)
    born: dict[str, int] = {}
    done_minors = dict.fromkeys(names, 0)
    master_tip: int | None = None
    step = max(1, shape.commits // 20)

    def when(pos: float) -> int:
        return START + int(SPAN * pos / max(1, shape.commits))

    def branch_commit(name: str, author: str, subject: str, path: str, pos: int) -> None:
        summary.branch_commits[name] = summary.branch_commits.get(name, 0) + 1
        tips[name] = last[name] = w.commit(
            f"refs/heads/{name}", author, when(pos) + 60, subject, path, f"{name} {subject}\n", parent=tips[name]
        )
        # Minor releases every so often along the branch's expected life (LIFE intervals x backpatch rate).
        expected = max(1.0, LIFE * interval * shape.backpatch)
        due = int(minors[name] * summary.branch_commits[name] / expected)
        while done_minors[name] < min(due, minors[name]):
            done_minors[name] += 1
            tag = f"{release_prefix(name)}{done_minors[name]}"
            w.tag(tag, tips[name], when(pos) + 120)
            summary.tags[tag] = name

    for pos in range(shape.commits):
        author = rng.choice(AUTHORS)
        area = rng.choice(AREAS)
        path = f"src/{area}/file{rng.randrange(200):03d}.c"
        subject = f"Fix {area} corner case #{pos}"
        if merge_every and pos % merge_every == 0 and master_tip is not None and summary.merges < shape.merges:
            side = master_tip
            for k in range(3):  # a short side branch, merged back: master's first parent stays the mainline
                side = w.commit(
                    "refs/heads/side-work",
                    author,
                    when(pos) - 3600 + k,
                    f"Side work {k} for merge #{pos}",
                    path,
                    f"side {pos} {k}\n",
                    parent=side,
                )
                summary.side_commits += 1
            master_tip = w.commit(
                "refs/heads/master",
                author,
                when(pos),
                f"Merge side work #{pos}",
                path,
                f"merge {pos}\n",
                parent=master_tip,
                merge=side,
            )
            summary.merges += 1
        else:
            master_tip = w.commit(
                "refs/heads/master", author, when(pos), subject, path, f"{subject}\n", parent=master_tip
            )
        summary.master_commits += 1
        for name in by_position.get(pos, []):
            if name in pre:
                w.tag(f"{release_prefix(name)}BETA1", master_tip, when(pos) + 1)
                w.tag(f"{release_prefix(name)}RC1", master_tip, when(pos) + 2)
                summary.tags[f"{release_prefix(name)}BETA1"] = "master"
                summary.tags[f"{release_prefix(name)}RC1"] = "master"
            tips[name], born[name] = master_tip, pos
            last[name] = master_tip
            summary.branch_commits.setdefault(name, 0)
        for name in [n for n in tips if pos - born[n] > LIFE * interval]:
            del tips[name]  # end of life: no more back-patches
        for name in sorted(tips, key=lambda n: born[n], reverse=True):
            if pos > born[name] and rng.random() < shape.backpatch:
                branch_commit(name, author, subject, path, pos)
        if progress and (pos + 1) % step == 0:
            progress(f"{pos + 1}/{shape.commits} master commits, {summary.total_commits} in all, {w.mark} marks")
    # Releases not yet reached (a young branch, or one with fewer back-patches than expected): tag its tip.
    for name in names:
        tip = last.get(name)
        while tip is not None and done_minors[name] < minors[name]:
            done_minors[name] += 1
            tag = f"{release_prefix(name)}{done_minors[name]}"
            w.tag(tag, tip, when(shape.commits) + done_minors[name])
            summary.tags[tag] = name
    write(b"done\n")
    return summary


def write_repo(out: Path, shape: Shape, progress: Callable[[str], None] | None = None) -> Summary:
    """Create the bare repository `out` (must not exist) from `shape` with one `git fast-import`."""
    if out.exists():
        raise FileExistsError(f"{out} exists; give a new path")
    t0 = time.perf_counter()
    subprocess.run(["git", "init", "--bare", "--quiet", "--initial-branch=master", "--", str(out)], check=True)
    proc = subprocess.Popen(
        ["git", "fast-import", "--quiet", "--done", "--active-branches=64"],
        cwd=out,
        stdin=subprocess.PIPE,
    )
    assert proc.stdin is not None
    try:
        summary = generate(shape, proc.stdin.write, progress)
        proc.stdin.close()
    finally:
        rc = proc.wait()
    if rc != 0:
        raise RuntimeError(f"git fast-import exited with status {rc}")
    if summary.merges:  # the side branches are merged: no ref of their own, as in postgres.git
        subprocess.run(["git", "update-ref", "-d", "refs/heads/side-work"], cwd=out, check=True)
    summary.seconds = time.perf_counter() - t0
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Shape()
    parser.add_argument("out", type=Path, help="path of the new bare repository")
    parser.add_argument("--commits", type=int, default=defaults.commits, help="first-parent commits on master")
    parser.add_argument("--branches", type=int, default=defaults.branches, help="stable branches")
    parser.add_argument("--tags", type=int, default=defaults.tags, help="release tags (annotated)")
    parser.add_argument("--merges", type=int, default=defaults.merges, help="merge commits on master")
    parser.add_argument("--backpatch", type=float, default=defaults.backpatch, help="back-patch probability")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args(argv)
    if args.commits < 1 or args.branches < 0 or args.tags < 0 or args.merges < 0 or not 0 <= args.backpatch <= 1:
        parser.error("counts must be >= 0 (commits >= 1) and --backpatch within 0..1")
    shape = Shape(args.commits, args.branches, args.tags, args.merges, args.backpatch, args.seed)
    summary = write_repo(args.out, shape, lambda line: print(line, flush=True))
    refs = 1 + len(summary.branch_commits) + len(summary.tags)
    print(
        f"wrote {args.out}: {summary.total_commits} commits ({summary.master_commits} on master's first-parent chain, "
        f"{sum(summary.branch_commits.values())} back-patches on {len(summary.branch_commits)} branches, "
        f"{summary.merges} merges), {len(summary.tags)} tags, {refs} refs in {summary.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
