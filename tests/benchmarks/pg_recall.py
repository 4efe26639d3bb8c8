"""Recall on injected regressions (issue 27, item 4): of a list of backend functions, how many would the default
per-commit profile (pg-quick) alert on if a commit made each of them slower by a fixed amount?

    .venv/bin/python -m tests.benchmarks.pg_recall --repo R [--work W] [--iterations 100] [--json OUT] [--resume]

R is a PostgreSQL repository (scripts/pg-source-repo.sh R makes one). For each function of FUNCTIONS, a test-only
patch puts a volatile busy loop of `--iterations` rounds at the start of its body (pg_inject.entry_loop_patch:
about 5.5 instructions a round, so a fixed ~550 instructions per call at 100), the tree is rebuilt incrementally
in one build directory (one file changes), and the profile's instruction workloads only are counted on it (the
three instr-* workloads and the operation suite; the wall-clock ones could not see ~550 instructions a call on
this box). Each workload's count is then judged the way the farm judges an instruction series: a history of
`--history` commits at the unpatched count, then two commits at the patched one (the steady rule wants a step to
last two commits), through the farm's own detection (master.verbs.detect.analyse with the [detection] settings,
which uses master/detect/steady.py for such series), the Benjamini-Hochberg step over the profile's instruction
series ([detection] fdr) and the alert rules (master.alerts.rules.severity with the [alerts] settings: steady
series alert from `steady_warn`). A function is found when at least one workload alerts. The figure is printed
twice: for the profile before the operation suite (the instr-* workloads alone) and for the whole profile.

With --samples 1 (the default: the counts repeat to ~1e-5, tests/integration/test_pg_operations.py) each patched
build is counted once and that count stands for both samples of its commits; the unpatched build is counted
--samples times (at least 2). Results are written to --json after every function, and --resume skips the
functions already there: a run takes about two hours on a loaded 2-core box.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from master import compare
from master.alerts.rules import Line, severity
from master.detect.fdr import benjamini_hochberg
from master.detect.model import Direction, Kind, Series
from master.settings import load_settings
from master.verbs.detect import analyse
from recipes import callgrind
from recipes.api import Context, checkout_layout
from recipes.pg.build import BuildSpec, Install, build_install
from recipes.pg.coverage import base_name
from recipes.pg.profile import (
    CALLGRIND_OPTION,
    WORKLOAD_KINDS,
    callgrind_file,
    load_profile,
    result_names,
    run_bench,
    workloads,
)
from tests.benchmarks.pg_inject import entry_loop_patch

# Where real regressions land, across the areas of docs/coverage.md; every one is also a named function of
# recipes/pg/coverage-functions.json. docs/coverage.md lists them with the verdicts.
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "executor nodes": (
        "ExecSeqScan",
        "ExecIndexScan",
        "ExecIndexOnlyScan",
        "ExecBitmapHeapScan",
        "ExecNestLoop",
        "ExecScanHashBucket",
        "ExecMergeJoin",
        "ExecSort",
        "ExecAgg",
        "ExecWindowAgg",
        "ExecSubPlan",
        "ExecLimit",
        "ExecAppend",
        "ExecModifyTable",
        "LookupTupleHashEntry",
    ),
    "planner": (
        "standard_join_search",
        "add_paths_to_joinrel",
        "create_index_paths",
        "clauselist_selectivity",
        "get_matching_partitions",
    ),
    "utility commands": (
        "NextCopyFrom",
        "DoCopyTo",
        "DefineIndex",
        "heap_vacuum_rel",
        "compute_scalar_stats",
        "RI_FKey_check",
        "ExecCallTriggerFunc",
    ),
    "access methods": (
        "_bt_doinsert",
        "btbuild",
        "_hash_doinsert",
        "ginbuild",
        "gistbuild",
        "spgbuild",
        "brinbuild",
        "heap_insert",
        "heap_update",
        "heap_page_prune_opt",
        "toast_save_datum",
        "detoast_attr",
    ),
    "data types": (
        "numeric_mul",
        "float8_accum",
        "textlike",
        "RE_compile_and_cache",
        "varstr_cmp",
        "jsonb_in",
        "jsonb_contains",
        "arraycontains",
        "timestamptz_trunc",
        "to_tsvector_byid",
    ),
}
ROUND_COST = 5.5  # instructions a round of pg_inject.entry_loop_patch's loop costs at -O2 (module docstring)
BEFORE = ("instr-point-select", "instr-point-select-prepared", "instr-simple-update")  # the profile before #27


def instruction_workloads(profile: Mapping[str, Any]) -> list[str]:
    return [n for w in workloads(profile) if WORKLOAD_KINDS[w.kind].phase == "instructions" for n in result_names(w)]


def measure(
    ctx: Context,
    install: Install,
    profile: Mapping[str, Any],
    samples: int,
    names: Sequence[str] = (),
    keep: bool = False,
) -> dict[str, Any]:
    """workload -> {"unit", "samples"}: the profile's instruction workloads (or `names` of them) counted on
    `install`; with `keep`, each one's callgrind profile of its first sample is kept (`callgrind_file`)."""
    names = list(names) or instruction_workloads(profile)
    options = {**ctx.options, "workloads": ",".join(names), "instruction_samples": str(samples), "coverage": "0"}
    options[CALLGRIND_OPTION] = "1" if keep else "0"
    run = Context(ctx.src_dir, ctx.work_dir, ctx.state_dir, ctx.sha, ctx.ref, options)
    results = run_bench(run, profile, {"run": install}, threads=os.cpu_count() or 2, count_instructions={"run"})
    out = {}
    for w in results["run"]:
        m = next(m for m in w.metrics if m.name == "instructions")
        out[w.name] = {"unit": m.unit, "samples": list(m.samples)}
    return out


def _function(key: str) -> str:
    """The function a profile key is of: clones, labels and callgrind's recursion level (`heap_insert'2`, a call
    of heap_insert made inside another) removed."""
    return re.sub(r"'\d+$", "", base_name(key))


def weights(profile: callgrind.Profile, functions: Collection[str]) -> dict[str, dict[str, int]]:
    """function -> {"inclusive", "calls", "activations", "total"} in one callgrind profile, for the `functions` it
    calls at all.

    Compiler clones (`foo.constprop.0`) and same-named statics count as the function (recipes.pg.coverage.base_name).
    `inclusive` is the outermost activations' cost (a call made inside another, `foo'2`, is already in it) and
    `calls` the calls into it from other functions; `activations` counts every call, the nested ones too (heap_insert
    inserting a row's TOAST chunks calls heap_insert for each): an injected loop runs once per activation."""
    out: dict[str, dict[str, int]] = {}
    for key, f in profile.functions.items():
        name = base_name(key)
        if name in functions:
            w = out.setdefault(name, {"inclusive": 0, "calls": 0, "activations": 0, "total": profile.total})
            w["inclusive"] += f.inclusive_cost
    for (caller, callee), e in profile.edges.items():
        name = _function(callee)
        if name in out:
            out[name]["activations"] += e.calls
            if base_name(callee) == name and base_name(caller) != name:
                out[name]["calls"] += e.calls
    return {k: v for k, v in out.items() if v["calls"] > 0}


def base_weights(ctx: Context, names: Sequence[str], functions: Collection[str]) -> dict[str, dict[str, Any]]:
    """function -> workload -> its weights there (`weights`), from the base build's kept profiles."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        path = callgrind_file(ctx, "run", name)
        if not path.exists():
            raise SystemExit(f"pg_recall: no callgrind profile of {name} at {path}: the base run kept none")
        for function, w in weights(callgrind.parse(path), functions).items():
            out.setdefault(function, {})[name] = w
    return out


def cost_per_call(w: Mapping[str, int]) -> float:
    """The function's cost per activation (its loop runs once per activation, nested ones included)."""
    return w["inclusive"] / max(w.get("activations", w["calls"]), 1)


def rounds_for(per_workload: Mapping[str, Mapping[str, int]], fraction: float) -> tuple[int, str]:
    """The busy-loop rounds that add `fraction` of the function's own cost per call, sized in the workload where
    the function weighs most (its largest inclusive share), and that workload."""
    where = max(per_workload, key=lambda n: (per_workload[n]["inclusive"] / max(per_workload[n]["total"], 1), n))
    w = per_workload[where]
    return max(1, round(fraction * cost_per_call(w) / ROUND_COST)), where


def judge(
    base: Mapping[str, Any], patched: Mapping[str, Any], history: int = 10, settings: Any = None
) -> dict[str, str]:
    """workload -> alert severity ("warn", "critical") for every workload whose series would alert on the step from
    `base` to `patched` counts (absent: no alert), as the farm decides it (module docstring)."""
    settings = settings or load_settings(environ={})
    found = []
    for name, b in base.items():
        p = patched.get(name)
        if p is None:
            continue
        after = p["samples"] if len(p["samples"]) >= 2 else p["samples"] * 2
        groups = [b["samples"]] * history + [after] * 2
        commits = [f"base{i}" for i in range(history)] + ["patched0", "patched1"]
        report = analyse(Series.from_samples(groups, commits), Direction.LOWER, settings.detection)
        for cp in report.change_points:
            if cp.index == history:
                found.append((name, b["unit"], cp))
    keep = benjamini_hochberg([cp.pvalue for _, _, cp in found], settings.detection.fdr, m=max(len(base), 1))
    out = {}
    for (name, unit, cp), kept in zip(found, keep):
        if not kept or cp.kind is not Kind.REGRESSION:
            continue
        line = Line(
            0, "", "", "pg-quick", name, "instructions", "master", unit, "lower", cp.kind.value,
            cp.commit, cp.commit, None, cp.index, None, cp.ratio, None, None, cp.pvalue,
        )  # fmt: skip
        level = severity(line, settings.alerts)
        if level is not None:
            out[name] = level
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, help="a PostgreSQL repository (scripts/pg-source-repo.sh makes one)")
    ap.add_argument("--rev", default="HEAD", help="the commit to inject into (default HEAD)")
    ap.add_argument("--work", default=str(Path.home() / ".cache/perffarm/recall"), help="clone, build and installs")
    ap.add_argument(
        "--iterations", type=int, default=100, help="busy-loop rounds per call, the per-call model (default 100)"
    )
    ap.add_argument(
        "--fraction",
        type=float,
        default=0.0,
        help="the proportional model instead: make each function this much slower (0.10: 10%% of its own cost a call)",
    )
    ap.add_argument("--samples", type=int, default=1, help="counts per patched build (the unpatched: at least 2)")
    ap.add_argument("--history", type=int, default=10, help="unpatched commits before the step (default 10)")
    ap.add_argument("--functions", default="", help="comma-separated subset of FUNCTIONS (default all)")
    ap.add_argument("--json", dest="json_out", default="", help="write every measurement and verdict here")
    ap.add_argument("--resume", action="store_true", help="skip the functions --json already has")
    ap.add_argument(
        "--reuse",
        default="",
        help="an earlier --json of the same model and commit: the functions it found are judged again from its "
        "counts against this run's base (a profile with more workloads), not rebuilt",
    )
    args = ap.parse_args(argv)
    if not 0 <= args.fraction <= 10:
        ap.error(f"--fraction {args.fraction}: give a share of the function's own cost, e.g. 0.10 for 10%")
    wanted = [f for fs in FUNCTIONS.values() for f in fs]
    if args.functions:
        unknown = [f for f in args.functions.split(",") if f and f not in wanted]
        if unknown:
            ap.error(f"--functions: {', '.join(unknown)} not in the list (tests/benchmarks/pg_recall.py FUNCTIONS)")
        wanted = [f for f in args.functions.split(",") if f]
    work = Path(args.work).resolve()
    sha = compare._resolve(Path(args.repo), args.rev, args.repo)
    src = compare._clone(args.repo, work)
    # data directories on tmpfs in a root of its own: a run's start sweeps its root of directories it takes for
    # a killed run's, and other builders' counts must not be among them
    pgdata = Path("/dev/shm") / f"perffarm-recall-{os.getuid()}" if Path("/dev/shm").is_dir() else work / "pgdata"
    ctx = Context(src, checkout_layout(work)[1], work / "state", sha, "recall", {"pgdata": str(pgdata)})
    ctx.state_dir.mkdir(parents=True, exist_ok=True)
    profile = load_profile("quick")
    spec = BuildSpec()
    out_path = Path(args.json_out) if args.json_out else None
    model = {"fraction": args.fraction} if args.fraction else {"iterations": args.iterations}
    doc: dict[str, Any] = {**model, "rev": sha, "functions": {}}
    if args.resume and out_path is not None and out_path.exists():
        doc = json.loads(out_path.read_text())
        if {k: doc.get(k) for k in model} != model:
            raise SystemExit(f"pg_recall: {out_path} was measured with another model; give another --json")
    settings = load_settings(environ={})
    started = time.monotonic()
    if "base" not in doc or "weights" not in doc:
        compare._checkout(src, sha, None)
        base_install = build_install(ctx, spec, src=src, sha=sha, ref="recall")
        names = instruction_workloads(profile)
        doc["base"] = measure(ctx, base_install, profile, max(2, args.samples), keep=True)
        doc["weights"] = base_weights(ctx, names, [f for fs in FUNCTIONS.values() for f in fs])
        if out_path is not None:
            out_path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    if args.reuse:
        reuse(doc, json.loads(Path(args.reuse).read_text()), wanted, args.history, settings)
    for i, function in enumerate(wanted):
        if function in doc["functions"]:
            continue
        t0 = time.monotonic()
        # a patch in a function changes only the counts of the workloads that call it: the others keep their
        # unpatched counts and are not measured again (the judgement still spans every workload of the profile)
        called = doc["weights"].get(function, {})
        if not called:
            doc["functions"][function] = {"counts": {}, "alerts": {}, "moved": {}, "called_by": []}
            print(f"[{i + 1}/{len(wanted)}] {function}: called by no instruction workload", flush=True)
            continue
        sized_in = None
        rounds = args.iterations
        if args.fraction:
            rounds, sized_in = rounds_for(called, args.fraction)
        patch = work / "inject.diff"
        compare._checkout(src, sha, None)
        patch.write_text(entry_loop_patch(src, function, rounds))
        compare._checkout(src, sha, patch)
        install = build_install(ctx, spec, src=src, sha=f"{sha}-recall-{function}-{rounds}", ref="recall")
        names = sorted(called)
        if args.fraction:  # only where the loop is at most CAP x the fraction of the function's cost a call: the
            # others cannot count (found_in), and a loop sized for a call that does much would make one that does
            # little (a node called per row) thousands of times slower under valgrind
            names = [n for n in names if rounds * ROUND_COST <= CAP * args.fraction * cost_per_call(called[n])]
        counts = measure(ctx, install, profile, args.samples, names=names)
        alerts = judge(doc["base"], counts, args.history, settings)
        moved = {w: counts[w]["samples"][0] / doc["base"][w]["samples"][0] - 1 for w in counts if w in doc["base"]}
        doc["functions"][function] = {
            "counts": counts,
            "alerts": alerts,
            "moved": moved,
            "called_by": sorted(called),
            "rounds": rounds,
            "sized_in": sized_in,
        }
        before = sorted(w for w in alerts if w in BEFORE)
        print(
            f"[{i + 1}/{len(wanted)}] {function} ({rounds} rounds a call): {len(alerts)} workloads alert "
            f"({', '.join(sorted(alerts)) or '-'}); "
            f"the profile before the operation suite: {', '.join(before) or 'none'}"
            f" ({time.monotonic() - t0:.0f} s)",
            flush=True,
        )
        if out_path is not None:
            out_path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    compare._checkout(src, sha, None)
    report(doc, wanted)
    print(f"command: {' '.join([sys.executable, '-m', 'tests.benchmarks.pg_recall', *sys.argv[1:]])}")
    print(f"elapsed {time.monotonic() - started:.0f} s, load average {os.getloadavg()[0]:.1f} at the end")
    return 0


def reuse(doc: dict[str, Any], old: Mapping[str, Any], wanted: Sequence[str], history: int, settings: Any) -> None:
    """Take the functions `old` found (same model and commit, measured on a profile with fewer workloads) into
    `doc` without rebuilding them: their patched counts are judged again against `doc`'s base, so the
    Benjamini-Hochberg step spans every workload of this profile; a workload the old run did not measure counts as
    unmoved (it can only add alerts, so this can only understate)."""
    if old.get("rev") != doc.get("rev") or old.get("fraction") != doc.get("fraction"):
        raise SystemExit("pg_recall: --reuse needs a run of the same commit and model")
    for function in wanted:
        r = old["functions"].get(function)
        if function in doc["functions"] or r is None or not found_in(old, function):
            continue
        counts = {w: c for w, c in r["counts"].items() if w in doc["base"]}
        alerts = judge(doc["base"], counts, history, settings)
        moved = {w: counts[w]["samples"][0] / doc["base"][w]["samples"][0] - 1 for w in counts}
        doc["functions"][function] = {**r, "counts": counts, "alerts": alerts, "moved": moved, "reused": True}


def model_name(doc: Mapping[str, Any]) -> str:
    if doc.get("fraction"):
        return f"each function {doc['fraction']:.0%} slower (its own cost per call)"
    return f"{doc['iterations']} rounds per call"


CAP = 1.5  # the proportional model counts an alert where the function got at most CAP x --fraction slower


def realised(doc: Mapping[str, Any], function: str, workload: str) -> float | None:
    """How much slower the patch made the function in `workload`: the workload's move over the function's
    inclusive share of it (None where the function's weight there is unknown)."""
    r = doc["functions"][function]
    w = doc.get("weights", {}).get(function, {}).get(workload)
    if not w or workload not in r["moved"] or not w["inclusive"]:
        return None
    return float(r["moved"][workload] / (w["inclusive"] / w["total"]))


def found_in(doc: Mapping[str, Any], function: str) -> list[str]:
    """The alerting workloads that count: all of them for the per-call model; for the proportional one, those
    where the function got at most CAP x --fraction slower (a fixed number of rounds a call is 10% of the
    function's cost where it was sized, and more where the function does less a call)."""
    r = doc["functions"][function]
    if not doc.get("fraction"):
        return sorted(r["alerts"])
    out = []
    for w in sorted(r["alerts"]):
        slower = realised(doc, function, w)
        if slower is not None and slower <= CAP * doc["fraction"]:
            out.append(w)
    return out


def report(doc: Mapping[str, Any], wanted: Sequence[str]) -> None:
    rows = [(f, doc["functions"][f], found_in(doc, f)) for f in wanted if f in doc["functions"]]
    old = sum(1 for _, _, found in rows if any(w in BEFORE for w in found))
    new = sum(1 for _, _, found in rows if found)
    category = {f: c for c, fs in FUNCTIONS.items() for f in fs}
    print(f"\n{'function':<24} {'category':<18} {'before':<7} {'after':<6} {'slower':>7}  largest move (workload)")
    for f, r, found in rows:
        top = max(r["moved"].items(), key=lambda kv: abs(kv[1])) if r["moved"] else ("-", 0.0)
        where = r.get("sized_in")
        slower = realised(doc, f, where) if where else None
        print(
            f"{f:<24} {category.get(f, '-'):<18} {'yes' if any(w in BEFORE for w in found) else 'no':<7} "
            f"{'yes' if found else 'no':<6} {'-' if slower is None else f'{slower:.1%}':>7}  "
            f"{top[1]:+.3%} ({top[0]})" + (f"; counted: {', '.join(found[:3])}" if found else "")
        )
    n = max(len(rows), 1)
    print(
        f"\nrecall, {model_name(doc)}: before the operation suite {old} of {len(rows)} "
        f"({old / n:.0%}), the default profile now {new} of {len(rows)} ({new / n:.0%})"
    )


if __name__ == "__main__":
    sys.exit(main())
