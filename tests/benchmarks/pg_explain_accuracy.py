"""Accuracy of the culprit's explanation (issue #29 item 4): inject one regression of each kind into real PostgreSQL
and see whether the farm's explanation names the right counter (or wait) first.

    .venv/bin/python -m tests.benchmarks.pg_explain_accuracy --repo R [--rev HEAD] [--work W] [--kinds K,...] \
        [--json OUT]

R is a PostgreSQL repository (scripts/pg-source-repo.sh R makes one of 15.18). Each kind is a test-only patch of
tests/benchmarks/pg_inject.py applied to `--rev`, measured against `--rev` itself by the farm's own compare path
(`python -m master.compare REV REV --patch P --json ...`, the quick profile restricted with `--option
workloads=...` to what the kind needs), and the JSON it writes is read back the way its pages rank it
(master/explain: the counters' summary names the change with the largest share of its kind; the waits' summary
the largest move of a wait other than CPU):

* syscall: `syscall_patch`, an open and a close of /dev/null per executor run; instr-point-select; expected
  first: openat or close.
* wal: `wal_record_patch`, one XLOG_NOOP record per committed transaction; instr-simple-update; WAL records or
  bytes.
* buffer: `buffer_access_patch`, the row's block read once more per returned heap row; instr-point-select; shared
  buffer hits.
* lock: `lock_hold_patch(application="pgbench")`, one LWLock held per executor run of pgbench's backends
  (`--hold-us` adds a sleep inside the hold; `--lock-application ''` makes every backend take it, the wait
  sampler's too: docs/explain.md, "An observer effect to know"); pgbench-ro-prepared-c2; the wait
  LWLock:AutovacuumSchedule.
* cpu (the control): `busy_loop_patch`, a volatile loop per executor run; instr-point-select and
  pgbench-ro-prepared-c2; nothing named, instructions per query up.

What "named" means: a counter is named when the farm lists it (the counters list only changes whose samples do
not overlap and that pass the floors of master/explain/counters.py); a wait is named when the farm lists it as
moved and its share rose (a wait whose share fell, or CPU, is not a cause the page blames). The first named is the
top counter when any counter is listed, else the top rising wait. A kind is **correct** when the first named is
its expected one (for the control: nothing named, and instructions per query up), **misnamed** when something
else comes first, **missed** when nothing is named. Everything else the farm listed is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from master import compare
from tests.benchmarks.pg_inject import (
    buffer_access_patch,
    busy_loop_patch,
    lock_hold_patch,
    syscall_patch,
    wal_record_patch,
)

CPU = "CPU"
# the pgbench options of the real-PostgreSQL contention test (tests/integration/test_postgres_recipes.py): 8
# paired rounds of 2 s at two clients, enough backend-samples for the waits to be judged
PGBENCH = {"samples": "8", "duration_s": "2", "warmup_s": "1"}
BUSY_LOOP = 2000  # rounds: ~12,000 instructions per executor run, +13% of a point select's
HOLD_US = 0  # no sleep in the hold (1000: the real-PostgreSQL contention test's, a 97% loss at two clients)
# only pgbench's backends take the lock: the wait sampler's own query never holds it (no observer effect)
LOCK_APPLICATION = "pgbench"


@dataclass(frozen=True)
class Kind:
    name: str
    what: str  # one line: the injected regression
    patch: Callable[[Path, str], str]  # (repo, sha) -> unified diff
    workloads: tuple[str, ...]
    expected: tuple[str, ...]  # counters (metric names) or waits that are right first; () for the control
    options: Mapping[str, str] = field(default_factory=dict)


def kinds(hold_us: int = HOLD_US, busy_loop: int = BUSY_LOOP, application: str = LOCK_APPLICATION) -> tuple[Kind, ...]:
    """The five kinds; `hold_us` and `busy_loop` size the lock and the control; the lock is taken by backends of
    `application` only ("" for every backend, the wait sampler's too)."""
    hold = f", across a {hold_us} µs sleep" if hold_us else ""
    who = f", by {application}'s backends" if application else ", by every backend"
    return (
        Kind(
            "syscall",
            "open + close of /dev/null per executor run",
            lambda repo, sha: syscall_patch(repo, 1, sha=sha),
            ("instr-point-select",),
            ("syscalls.openat", "syscalls.close"),
        ),
        Kind(
            "wal",
            "one XLOG_NOOP WAL record per committed transaction",
            lambda repo, sha: wal_record_patch(repo, 1, sha=sha),
            ("instr-simple-update",),
            ("wal_records", "wal_bytes"),
        ),
        Kind(
            "buffer",
            "the row's block read once more per returned heap row",
            lambda repo, sha: buffer_access_patch(repo, sha=sha),
            ("instr-point-select",),
            ("buffers_hit",),
        ),
        Kind(
            "lock",
            f"an LWLock held per executor run{hold}{who}",
            lambda repo, sha: lock_hold_patch(repo, hold_us=hold_us, sha=sha, application=application or None),
            ("pgbench-ro-prepared-c2",),
            ("LWLock:AutovacuumSchedule",),
            PGBENCH,
        ),
        Kind(
            "cpu",
            f"a busy loop of {busy_loop} rounds per executor run (control)",
            lambda repo, sha: busy_loop_patch(repo, busy_loop, sha=sha),
            ("instr-point-select", "pgbench-ro-prepared-c2"),
            (),
            PGBENCH,
        ),
    )


KINDS = kinds()


@dataclass(frozen=True)
class Verdict:
    first: str  # what the farm named first ("" for nothing)
    first_text: str  # as the farm printed it
    verdict: str  # correct, misnamed or missed
    also: tuple[str, ...]  # every other counter or wait move the farm listed, as printed
    instructions: float | None  # B/A of instructions per query, when an instruction workload ran
    tps: tuple[float, float, float] | None = None  # B/A of throughput with its 95% interval, when pgbench ran


def judge(kind: Kind, doc: Mapping[str, Any]) -> Verdict:
    """What the farm named first in compare's JSON `doc`, against what `kind` injected (see the module docstring)."""
    counters = list(doc.get("counters", {}).get("B", []))
    waits = list(doc.get("waits", {}).get("B", []))
    instr = [c["ratio"] for c in doc.get("comparisons", []) if c["metric"] == "instructions"]
    ratio = max(instr, key=lambda r: abs(r - 1)) if instr else None
    tps = next(
        ((c["ratio"], c["ci_low"], c["ci_high"]) for c in doc.get("comparisons", []) if c["metric"] == "tps"), None
    )
    top: dict[str, Any] | None = None
    first = ""
    if counters:  # master/explain/counters.summary: the change with the largest share of its kind
        top = max(counters, key=lambda c: abs(c["share"]))
        first = top["metric"]
    else:  # master/explain/waits.summary: the largest move of a wait other than CPU; blamed only when it rose
        moved = [w for w in waits if w["wait"] != CPU]
        if moved:
            lead = max(moved, key=lambda w: abs(w["after"] - w["before"]))
            if lead["after"] > lead["before"]:
                top, first = lead, lead["wait"]
    also = tuple(f"{c['workload']}: {c['text']}" for c in (*counters, *waits) if c is not top and c.get("wait") != CPU)
    if kind.expected:
        verdict = "missed" if not first else "correct" if first in kind.expected else "misnamed"
    elif first:
        verdict = "misnamed"
    else:  # the control: the counts see a CPU-bound change only in instructions
        verdict = "correct" if ratio is not None and ratio > 1.005 else "missed"
    text = f"{top['workload']}: {top['text']}" if top is not None else "nothing"
    return Verdict(first, text, verdict, also, ratio, tps)


def run_kind(kind: Kind, repo: str, sha: str, work: Path, out: Path, samples: int) -> dict[str, Any]:
    """One kind through `python -m master.compare`: its command, exit status, seconds and JSON (None if it failed)."""
    patch = out / f"{kind.name}.patch"
    patch.write_text(kind.patch(Path(repo), sha))
    doc_path = out / f"{kind.name}.json"
    doc_path.unlink(missing_ok=True)
    options = {"workloads": ",".join(kind.workloads), "scale": "1", "instruction_samples": str(samples)}
    options.update(kind.options)
    argv = [sys.executable, "-m", "master.compare", "--repo", repo, "--work", str(work), sha, sha]
    argv += ["--patch", str(patch), "--json", str(doc_path)]
    argv += [f"--option={k}={v}" for k, v in options.items()]
    t0 = time.monotonic()
    load = os.getloadavg()[0]
    with (out / f"{kind.name}.log").open("w") as log:
        rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT).returncode
    doc = json.loads(doc_path.read_text()) if doc_path.exists() else None  # written only when the job ran
    return {
        "command": argv,
        "rc": rc,
        "seconds": time.monotonic() - t0,
        "load": [load, os.getloadavg()[0]],
        "doc": doc,
    }


def table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, help="a PostgreSQL repository (scripts/pg-source-repo.sh makes one)")
    ap.add_argument("--rev", default="HEAD", help="the commit to inject into (default HEAD)")
    ap.add_argument(
        "--work", default=str(Path.home() / ".cache/perffarm/accuracy"), help="compare's --work: clone, builds"
    )
    ap.add_argument("--kinds", default=",".join(k.name for k in KINDS), help="comma-separated subset (default all)")
    ap.add_argument("--hold-us", type=int, default=HOLD_US, help="lock: the sleep it is held across (0: none)")
    ap.add_argument(
        "--lock-application",
        default=LOCK_APPLICATION,
        help="lock: the application_name whose backends take it (default %(default)s; '' for every backend)",
    )
    ap.add_argument("--busy-loop", type=int, default=BUSY_LOOP, help="control: busy-loop rounds per executor run")
    ap.add_argument("--instruction-samples", type=int, default=1, help="counts per side (exact: 1 is enough)")
    ap.add_argument("--out", default="", help="directory for the patches, logs and compare JSON (default WORK/out)")
    ap.add_argument("--json", dest="json_out", default="", help="write every kind's result and verdict here")
    args = ap.parse_args(argv)
    known = {k.name: k for k in kinds(args.hold_us, args.busy_loop, args.lock_application)}
    wanted = [k for k in args.kinds.split(",") if k]
    if not wanted or any(k not in known for k in wanted):
        ap.error(f"--kinds: choose from {', '.join(known)}")
    work = Path(args.work).resolve()
    out = Path(args.out).resolve() if args.out else work / "out"
    out.mkdir(parents=True, exist_ok=True)
    sha = compare._resolve(Path(args.repo), args.rev, args.repo)
    command = " ".join([sys.executable, "-m", "tests.benchmarks.pg_explain_accuracy", *(argv or sys.argv[1:])])
    started, load0 = time.monotonic(), os.getloadavg()[0]
    print(f"$ {command}\nrev {sha[:12]}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    results: dict[str, Any] = {}
    rows = [
        (
            "kind",
            "injected",
            "expected first",
            "the farm named first",
            "verdict",
            "instructions B/A",
            "throughput B/A",
            "s",
        )
    ]
    for name in wanted:
        kind = known[name]
        got = run_kind(kind, args.repo, sha, work, out, args.instruction_samples)
        if got["doc"] is None:
            v = Verdict("", f"compare failed (exit {got['rc']}; {out / (name + '.log')})", "failed", (), None)
        else:
            v = judge(kind, got["doc"])
        results[name] = {**got, "verdict": v.__dict__, "expected": list(kind.expected), "what": kind.what}
        instr = f"{v.instructions:.4f}" if v.instructions is not None else "-"
        tps = f"{v.tps[0]:.3f} [{v.tps[1]:.3f}, {v.tps[2]:.3f}]" if v.tps is not None else "-"
        rows.append(
            (name, kind.what, " or ".join(kind.expected) or "nothing", v.first_text, v.verdict, instr, tps,
             f"{got['seconds']:.0f}")
        )  # fmt: skip
        print(f"{name}: {v.verdict}: {v.first_text} ({got['seconds']:.0f} s, load {got['load'][1]:.1f})", flush=True)
        for line in v.also:
            print(f"    also listed: {line}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(results, indent=1, sort_keys=True, default=str) + "\n")
    counts = {x: sum(1 for r in results.values() if r["verdict"]["verdict"] == x) for x in ("correct", "misnamed")}
    elapsed = time.monotonic() - started
    print()
    print(table(rows))
    print(
        f"\n{counts['correct']} of {len(results)} named correctly, {counts['misnamed']} misnamed, "
        f"{len(results) - sum(counts.values())} missed or failed; elapsed {elapsed:.0f} s; "
        f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    print(f"command: {command}")
    return 0 if counts["correct"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
