"""`perffarm compare --repo PATH A B [C ...] [--patch FILE] [--profile quick | --recipe NAME]`: measure commits
side by side.

Every commit is a side of one job, built and measured by the recipe's own side entry points
(`recipes.api.SideSupport`: the same code a farm job runs on a worker, found through the recipe registry, so any
recipe with sides can be compared). With --patch, the last commit has the patch applied. The sides are measured
interleaved, and each workload's ratio to the first is printed (B/A, C/A, ...: rQPS for throughput) with its 95%
confidence interval. With three or more revisions this is release archaeology as Vondra and Callaghan do it:
every version measured under the same conditions, in one session, not N runs at different times
(docs/releases.md). No master needed. The commits are exported from a private clone under --work, never the
user's repository, into one kept tree and build directory, so each side's build is incremental from the last,
and the install cache makes a repeated comparison start at once.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from master.explain import report as counter_report
from master.profiles import report
from master.profiles.diff import Reconciliation
from recipes import ab, registry
from recipes.api import (
    CALLGRIND_OPTION,
    Context,
    RecipeFailure,
    Side,
    WorkloadResult,
    callgrind_file,
    checkout_layout,
    side_file,
)
from recipes.pg.profile import profile_names
from recipes.sides import LABELS, MAX_SIDES

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_FOUND = 1  # a regression: compare is a gate (master/cliargs.py)
MAX_REVISIONS = MAX_SIDES  # each side is a running server for the whole job; more would not fit a small box's memory
LAYOUT = "compare"  # the one kept tree and build directory every side is built in, one after the other


def default_work_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perffarm" / "compare"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "revisions",
        nargs="+",
        metavar="REV",
        help=f"2 to {MAX_REVISIONS} commits (sha, branch or tag): the first is the base every other is measured "
        "against (A B: B/A; A B C: B/A and C/A). Use the same commit twice with --patch to test a patch",
    )
    p.add_argument("--repo", required=True, help="path (or URL) of a PostgreSQL git repository")
    p.add_argument("--patch", help="a patch file applied on top of the last revision (git apply)")
    p.add_argument(
        "--profile",
        choices=profile_names(),
        help="the PostgreSQL workload profile, i.e. the recipe pg-PROFILE (default quick; sweeps: the seeds' "
        "client-count sweeps for release archaeology)",
    )
    p.add_argument(
        "--recipe",
        help="the recipe that builds and measures the sides, by name (recipes/; e.g. pg-full); any recipe with "
        "sides. Default pg-quick",
    )
    p.add_argument(
        "--work",
        default=str(default_work_dir()),
        help="persistent directory for the clone, build trees and installs (default %(default)s)",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="profile overrides, e.g. samples=20, duration_s=5, workloads=pgbench-ro-prepared-c1",
    )
    p.add_argument(
        "--overlay-effects",
        action="store_true",
        help="also measure the last revision under each variant its recipe offers, in the same job, and print what "
        "each changes: on PostgreSQL, without each per-major conf overlay that applies to it (e.g. since-18.conf), so "
        "a release table never blames the code for a setting",
    )
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="json: print every raw sample and estimate as JSON on standard output (the table goes to stderr)",
    )
    p.add_argument(
        "--json", dest="json_out", metavar="FILE", help="also write the JSON of --format json to FILE (old spelling)"
    )
    p.add_argument(
        "--explain-dir",
        help="where to write, per instruction workload, the per-function diff and differential flame graph of the "
        "sides' callgrind profiles as HTML and SVG (default WORK/explain)",
    )
    p.add_argument("--all-metrics", action="store_true", help="show latency/CPU metrics too, not just the primary")


def _git(args: Sequence[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RecipeFailure(f"git {' '.join(args[:3])} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout.strip()


def _clone(repo: str, work: Path) -> Path:
    """A private clone under `work` (created once, then fetched), so the user's checkout is never touched."""
    src = checkout_layout(work)[0]
    if not (src / ".git").exists():
        work.mkdir(parents=True, exist_ok=True)
        _git(["clone", "--quiet", "--no-checkout", "--", repo, str(src)])
    else:
        _git(["fetch", "--quiet", "--force", "--tags", "--", repo, "+refs/heads/*:refs/remotes/origin/*"], cwd=src)
    return src


def _checkout(src: Path, sha: str, patch: Path | None) -> None:
    """Check out `sha` (git rewrites only the files that differ, keeping incremental builds incremental)."""
    _git(["checkout", "--quiet", "--force", "--detach", sha], cwd=src)
    _git(["clean", "-fdxq"], cwd=src)
    if patch is not None:
        _git(["apply", "--whitespace=nowarn", str(patch)], cwd=src)


class InputProblem(RecipeFailure):
    """The command line names something that is not there (a repository, a revision): exit 2, nothing built."""


def _is_url(repo: str) -> bool:
    return "://" in repo or (":" in repo.split("/", 1)[0] and not Path(repo).exists())  # scp-like user@host:path


def _repo_problem(repo: str) -> str | None:
    """Why --repo cannot be read (a local path that is not a git repository), or None."""
    if _is_url(repo):
        return None
    path = Path(repo)
    if not path.is_dir():
        return f"--repo {repo}: no such directory; give the path or URL of a PostgreSQL git repository"
    proc = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=path, capture_output=True, text=True)
    if proc.returncode != 0:
        return f"--repo {repo}: not a git repository ({proc.stderr.strip()[:200] or 'git rev-parse failed'})"
    return None


def _resolve(where: Path, rev: str, repo: str, remote: bool = False) -> str:
    """The commit `rev` names in the repository at `where` (in a clone of a URL, a branch is origin/<name>)."""
    if not rev.strip() or rev.startswith("-"):
        raise InputProblem(f"{rev!r} is not a revision: give a commit sha, branch or tag of {repo}")
    for candidate in (rev, f"origin/{rev}") if remote else (rev,):
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"],
            cwd=where,
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            return proc.stdout.strip()
    raise InputProblem(f"{rev!r} is not a commit, branch or tag of {repo} (git rev-parse found no such commit)")


def run(args: argparse.Namespace) -> int:
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"perffarm compare: --option {item!r}: expected KEY=VALUE", file=sys.stderr)
            return EXIT_USAGE
        options[key] = value
    revisions = list(args.revisions)
    if not 2 <= len(revisions) <= MAX_REVISIONS:
        print(
            f"perffarm compare: give 2 to {MAX_REVISIONS} revisions (got {len(revisions)}): the first is the base",
            file=sys.stderr,
        )
        return EXIT_USAGE
    work = Path(args.work).resolve()
    patch = Path(args.patch).resolve() if args.patch else None
    if patch is not None and not patch.is_file():
        print(f"perffarm compare: no such patch file: {patch}", file=sys.stderr)
        return EXIT_USAGE
    if args.profile and args.recipe:
        print("perffarm compare: give --profile or --recipe, not both (--profile P is --recipe pg-P)", file=sys.stderr)
        return EXIT_USAGE
    recipe_name = args.recipe or f"pg-{args.profile or 'quick'}"
    try:
        recipe = registry.get(recipe_name)
    except registry.UnknownRecipe as e:
        print(f"perffarm compare: --recipe: {e}", file=sys.stderr)
        return EXIT_USAGE
    entry = recipe.sides
    labels = LABELS[: len(revisions)]
    if (problem := _repo_problem(args.repo)) is not None:
        print(f"perffarm compare: {problem}", file=sys.stderr)
        return EXIT_USAGE
    remote = _is_url(args.repo)
    try:
        if remote:  # a URL has no work tree to read revisions in: clone first, then resolve in the clone
            src = _clone(args.repo, work)
            shas = [_resolve(src, rev, args.repo, remote=True) for rev in revisions]
        else:  # a bad revision is said before anything is cloned
            shas = [_resolve(Path(args.repo), rev, args.repo) for rev in revisions]
            src = _clone(args.repo, work)
        state = work / "state"
        shutil.rmtree(state, ignore_errors=True)  # what an earlier comparison left is never explained again
        state.mkdir(parents=True)
        # instruction workloads keep each side's callgrind file: where the instructions went, at no extra run
        ctx = Context(
            src_dir=src,
            work_dir=checkout_layout(work)[1],
            state_dir=state,
            sha=shas[-1],
            ref="compare",
            options={CALLGRIND_OPTION: "1", **options},
        )
        sides: list[Side] = []
        for i, (label, sha) in enumerate(zip(labels, shas)):
            own = patch if i == len(shas) - 1 else None
            # one side at a time in one kept tree: each build is incremental from the last (recipes/sides.py)
            side = Side(label, sha, own, own_patch=True, layout=LAYOUT)
            entry.build(ctx, [side])
            sides.append(side)
        info = {s.label: dict(entry.describe(ctx, s)) if entry.describe else {} for s in sides}
        effects: dict[str, tuple[str, str]] = {}  # variant -> (its side's label, what it changes)
        if args.overlay_effects:
            last = sides[-1]
            offered = entry.variants(ctx, last) if entry.variants else {}
            if not offered:
                raise RecipeFailure(
                    f"--overlay-effects: recipe {recipe.name} offers no variant of {labels[-1]} "
                    f"({_version(info, last)}; on PostgreSQL: no conf overlay of the profile applies to its major)"
                )
            if len(sides) + len(offered) > MAX_REVISIONS:
                raise RecipeFailure(
                    f"--overlay-effects adds {len(offered)} sides to {len(sides)}: at most {MAX_REVISIONS} in one job"
                )
            for name, what in offered.items():
                variant = dataclasses.replace(last, label=LABELS[len(sides)], variant=name)
                entry.build(ctx, [variant])
                sides.append(variant)
                effects[name] = (variant.label, what)
                ctx.log(f"{variant.label}: {labels[-1]} {what}")
        ctx.log(f"comparing {', '.join(s.label for s in sides)} with recipe {recipe.name}")
        results = {label: list(rs) for label, rs in entry.bench(ctx, sides).items()}
    except InputProblem as e:
        print(f"perffarm compare: {e.message}", file=sys.stderr)
        return EXIT_USAGE
    except RecipeFailure as e:
        print(f"perffarm compare: {e.message}", file=sys.stderr)
        if e.log_excerpt:
            print(e.log_excerpt[-4000:], file=sys.stderr)
        return EXIT_FAILED
    vs_base = {label: ab.compare(results[labels[0]], results[label], labels=(labels[0], label)) for label in labels[1:]}
    names = [
        f"{label} = {rev} ({sha[:12]})" + (f" + {patch.name}" if patch and i == len(shas) - 1 else "")
        for i, (label, rev, sha) in enumerate(zip(labels, revisions, shas))
    ]
    shown = {c.metric for cs in vs_base.values() for c in cs}
    # the primary metrics, unless asked for all; a recipe that has none of PostgreSQL's shows all of its own
    metrics = None if args.all_metrics or not shown & set(ab.PRIMARY_METRICS) else ["tps"]
    # with --format json the tables go to stderr: standard output is the document alone
    with contextlib.redirect_stdout(sys.stderr if args.format == "json" else sys.stdout):
        print()
        print("   ".join(names))
        if len(labels) == 2:
            print(
                "B/A is the order-balanced mean ratio of the paired rounds (rQPS for throughput) with its 95% t "
                "interval; a metric that can read 0, the median ratio with a bootstrap interval."
            )
            print(ab.format_table(vs_base["B"], metrics))
        else:
            print(
                "Each row is one version's order-balanced mean ratio to A, all measured interleaved in one job (rQPS "
                "for throughput), with its 95% t interval; a metric that can read 0, the median ratio with a bootstrap "
                "interval."
            )
            print(
                ab.format_versions(labels, {s.label: _version(info, s) for s in sides[: len(labels)]}, vs_base, metrics)
            )
        counted = [w.name for w in results.get(labels[0], ()) if any(m.name == "instructions" for m in w.metrics)]
        moved = [w for w in counted if any(_moved(cs, w) for cs in vs_base.values())]
        if len(moved) < len(counted):
            print(
                f"\n{len(counted) - len(moved)} of {len(counted)} instruction workloads counted the same on every side "
                f"(within {UNMOVED:.2%} of {labels[0]}): not explained"
            )
        per_side = {label: measured(results.get(label, ())) for label in labels}
        counters = {label: counter_report.compare(per_side[labels[0]], per_side[label]) for label in labels[1:]}
        for label, cr in counters.items():
            if cr is not None:  # system calls, WAL and buffers per query: exact, like instructions (docs/explain.md)
                print()
                said = cr.summary or "no exact counter changed"
                print(f"What the exact counters say, {label} vs {labels[0]}: {said}")
                print(cr.table)
        sampled = {label: _sampled_waits(ctx, label) for label in labels}
        waits = {label: counter_report.compare_waits(sampled[labels[0]], sampled[label]) for label in labels[1:]}
        for label, wr in waits.items():
            if wr is not None:  # where the backends waited during the pgbench samples (recipes/pg/waits.py)
                print()
                said = wr.summary or "no wait's share moved beyond its noise"
                print(f"Where the backends waited, {label} vs {labels[0]}: {said}")
                print(wr.table)
        explained = _explain(ctx, labels, moved)
        explain_dir = Path(args.explain_dir) if args.explain_dir else work / "explain"
        reconciled = [_reconcile(e, results) for e in explained]
        for e, rec in zip(explained, reconciled):
            print()
            print(report.text(e))
            if rec is not None:
                print(
                    f"profile totals vs the measured instructions per query (the profiled sample): "
                    f"{e.a_label} {rec.error_a:+.4%}, {e.b_label} {rec.error_b:+.4%} "
                    + (
                        "(reconciled)"
                        if rec.ok
                        else f"(NOT within {rec.tolerance:.1%}: the profile is not of that work)"
                    )
                )
            print(f"flame graph and table: {report.write_html(e, explain_dir)}")
        overlay_effects = {
            name: ab.compare(results[label], results[labels[-1]], labels=(label, labels[-1]))
            for name, (label, _) in effects.items()
        }
        for name, cs in overlay_effects.items():
            print()
            print(
                f"What {name} changes on {labels[-1]} ({_version(info, sides[len(labels) - 1])}): with / without it, "
                f"measured in the same job ({effects[name][1]}):"
            )
            print(ab.format_table(cs, metrics))
    if args.json_out or args.format == "json":
        doc: dict[str, object] = {
            "a": shas[0],
            "b": shas[1],
            "patch": str(patch) if patch else None,
            "profile": args.profile or (recipe.name[3:] if recipe.name.startswith("pg-") else None),
            "recipe": recipe.name,
            "options": options,
            "comparisons": [c.to_json() for c in vs_base["B"]],
            "versions": [
                {
                    "label": label,
                    "revision": rev,
                    "sha": sha,
                    "major": info[label].get("major"),
                    "version": info[label].get("version"),
                }
                for label, rev, sha in zip(labels, revisions, shas)
            ],
            "vs_first": {label: [c.to_json() for c in cs] for label, cs in vs_base.items()},
            "overlay_effects": {name: [c.to_json() for c in cs] for name, cs in overlay_effects.items()},
            "counters": {
                label: [dataclasses.asdict(c) | {"text": c.text()} for c in cr.changes]
                for label, cr in counters.items()
                if cr is not None
            },
            "waits": {
                label: [dataclasses.asdict(c) | {"text": c.text()} for c in wr.changes]
                for label, wr in waits.items()
                if wr is not None
            },
            "explained": [
                {
                    "workload": e.workload,
                    "a": e.a_label,
                    "b": e.b_label,
                    "summary": e.summary(),
                    "rows": [dataclasses.asdict(r) for r in e.diff.rows],
                    "reconciled": dataclasses.asdict(rec) | {"ok": rec.ok} if rec is not None else None,
                }
                for e, rec in zip(explained, reconciled)
            ],
        }
        text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
        if args.format == "json":
            sys.stdout.write(text)
        if args.json_out:
            try:
                Path(args.json_out).write_text(text)
            except OSError as e:
                print(f"perffarm compare: cannot write --json {args.json_out}: {e.strerror}", file=sys.stderr)
                return EXIT_FAILED
    # a gate: exit 1 when any side measured worse than A (its CI excludes 1 in the bad direction)
    regressions = [c for cs in vs_base.values() for c in cs if c.verdict == "regression"]
    return EXIT_FOUND if regressions else EXIT_OK


def _reconcile(e: report.Explained, results: Mapping[str, Sequence[WorkloadResult]]) -> Reconciliation | None:
    """The profiles' totals per query against each side's measured instructions per query of the sample they
    profile (the first: recipes/pg/profile.py keeps sample 0's callgrind output)."""

    def first(label: str) -> float | None:
        for w in results.get(label, ()):
            if w.name == e.workload:
                for m in w.metrics:
                    if m.name == "instructions" and m.samples:
                        return m.samples[0]
        return None

    a, b = first(e.a_label), first(e.b_label)
    return e.diff.reconcile(a, b) if a and b else None


def _sampled_waits(ctx: Context, label: str) -> dict[str, list[dict[str, object]]]:
    """The wait events a side sampled during its pgbench samples, per workload ({} when none were sampled)."""
    path = side_file(ctx.state_dir, "waits", label)
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _version(info: Mapping[str, Mapping[str, object]], side: Side) -> str:
    """What the recipe says the side's build is (PostgreSQL: its version), else its commit."""
    return str(info.get(side.label, {}).get("version") or side.sha[:12])


def measured(results: Sequence[WorkloadResult]) -> dict[str, dict[str, tuple[str, tuple[float, ...]]]]:
    """A side's workload results as workload -> metric -> (unit, samples) (what master.explain compares)."""
    return {w.name: {m.name: (m.unit, tuple(m.samples)) for m in w.metrics} for w in results}


# Instruction counts that differ by less than this are the same work (steady series agree within it,
# master/detect/steady.py): their per-function diff is not printed. Dozens of operations would otherwise each get
# a table of nothing.
UNMOVED = 1e-4


def _moved(comparisons: Sequence[ab.Comparison], workload: str) -> bool:
    for c in comparisons:
        if c.workload == workload and c.metric == "instructions" and c.a and c.b:
            a, b = statistics.median(c.a), statistics.median(c.b)
            return a <= 0 or abs(b / a - 1) >= UNMOVED
    return False


def _explain(ctx: Context, labels: Sequence[str], names: Sequence[str]) -> list[report.Explained]:
    """Each side after A against A, per instruction workload whose profiles both sides kept."""
    out = []
    for name in names:
        a = report.load(callgrind_file(ctx.state_dir, labels[0], name))
        for label in labels[1:]:
            b = report.load(callgrind_file(ctx.state_dir, label, name))
            if a is not None and b is not None:
                ctx.log(f"{name}: profiles parsed in {a.parse_seconds:.1f} s (A) and {b.parse_seconds:.1f} s ({label})")
                out.append(report.explain(name, labels[0], a, label, b))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="perffarm compare", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
