"""`perffarm bisect`: start a bisection (on the running farm, or `--local`), follow it, list them."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

from master import cliargs, store, webapi
from master.bisection import local, state
from master.settings import load_settings
from master.textsafe import visible as v


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`bisect start|list|show ID`; the old spellings (`bisect --good ...`, `--list`, `--status ID`) still work."""
    _start_arguments(p)
    p.add_argument(
        "--status", type=cliargs.row_id, metavar="ID", help="show a bisection (old spelling of `bisect show ID`)"
    )
    p.add_argument("--list", action="store_true", help="list bisections (old spelling of `bisect list`)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    sub = cliargs.actions(p, "bisect_command")
    _start_arguments(cliargs.action(sub, "start", "start a bisection (on the farm, or --local)"))
    s = cliargs.action(sub, "list", "bisections, newest first")
    s.add_argument("--format", choices=["text", "json"])
    s = cliargs.action(sub, "show", "one bisection: state, culprit, rQPS, probes, log")
    s.add_argument("status", type=cliargs.row_id, metavar="ID")
    s.add_argument("--format", choices=["text", "json"])


def _start_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--good", help="a commit (sha or unique prefix) or tag known to be fast")
    p.add_argument("--bad", help="a later commit or tag on the same branch known to be slow")
    p.add_argument("--workload", help="the workload to bisect, e.g. pgbench-ro-prepared-c2")
    p.add_argument("--metric", help="the metric (default: the workload's first, e.g. throughput)")
    p.add_argument("--branch", default="master", help="branch whose first-parent history is searched (default master)")
    p.add_argument("--builder", help="measure on this builder, recipe@worker (default: the one that measured the ends)")
    p.add_argument(
        "--local",
        action="store_true",
        help="run the bisection here and now, without a master: build and bench each probe on this machine",
    )
    p.add_argument("--wait", action="store_true", help="after submitting to the master, wait until it ends")


def run(args: argparse.Namespace) -> int:
    settings = load_settings(getattr(args, "config", None))
    if not settings.results_db.exists():
        return cliargs.no_results_db("bisect", settings.results_db, "nothing measured yet")
    if args.status is not None:
        return _status(settings, args.status, args.format)
    if args.list or getattr(args, "bisect_command", None) == "list":
        return _list(settings, args.format)
    missing = [f"--{n}" for n in ("good", "bad", "workload") if not getattr(args, n)]
    if missing:
        print(
            f"perffarm bisect: {', '.join(missing)} required (`bisect start --good A --bad B --workload W`; or "
            "`bisect show ID`, `bisect list`)",
            file=sys.stderr,
        )
        return 2
    conn = store.connect(settings.results_db)
    try:
        with store.transaction(conn):
            bisection_id = state.create(
                conn,
                good=args.good,
                bad=args.bad,
                workload=args.workload,
                metric=args.metric,
                branch=args.branch,
                builder=args.builder,
                requested_by="cli --local" if args.local else "cli",
            )
    except state.BisectionError as e:
        print(f"perffarm bisect: {v(e)}", file=sys.stderr)
        return 2
    finally:
        conn.close()
    print(f"bisection {bisection_id} created")
    if args.local:
        local.run(settings, bisection_id, say=lambda line: print(v(line)))
        return _status(settings, bisection_id, args.format)
    if webapi.get(settings.web_port, "masters") is None:
        print(
            f"note: the master at {settings.web_url} is not running; the bisection starts when it does "
            f"(`make run`), or run it here with --local",
            file=sys.stderr,
        )
    else:
        print(f"submitted to the master at {settings.web_url}; its probes appear there as builds")
    if not args.wait:
        print(f"follow it with: perffarm bisect --status {bisection_id}")
        return 0
    while True:
        conn = store.connect_readonly(settings.results_db)
        try:
            current = state.get(conn, bisection_id).state
        finally:
            conn.close()
        if current != "running":
            return _status(settings, bisection_id, args.format)
        time.sleep(2)


def _status(settings, bisection_id: int, fmt: str) -> int:
    conn = store.connect_readonly(settings.results_db)
    try:
        try:
            b = state.get(conn, bisection_id)
        except state.BisectionError as e:
            print(f"perffarm bisect: {v(e)}", file=sys.stderr)
            return 2
        culprit = store.commits.commit(conn, b.culprit)
    finally:
        conn.close()
    doc = {k: x for k, x in dataclasses.asdict(b).items() if k not in ("log", "commits")}
    doc["log"] = json.loads(b.log)
    doc["range_commits"] = len(b.commits) - 1
    doc["culprit_subject"] = culprit.subject if culprit else None
    doc["culprit_author"] = culprit.author if culprit else None
    if fmt == "json":
        print(json.dumps(doc, indent=1, sort_keys=True))
        return 0
    print(
        f"bisection {b.id}: {v(b.state)}  ({v(b.workload)}/{v(b.metric)} on "
        f"{v(b.builder)}, {v(b.branch)}, {doc['range_commits']} commits "
        f"{v(b.good[:12])}..{v(b.bad[:12])})"
    )
    if b.culprit:
        print(f"culprit   {v(b.culprit)}\n          {v(doc['culprit_subject'])}\n          {v(doc['culprit_author'])}")
        print(f"rQPS      {b.ratio:.4f}  95% CI [{b.ci_low:.4f}, {b.ci_high:.4f}] against {v((b.parent or '')[:12])}")
    if b.reason:
        print(f"reason    {v(b.reason)}")
    print(f"probes    {b.probes} commits, {b.rounds} runs, {b.samples} samples")
    print("log:")
    for line in doc["log"]:
        print(f"  {v(line)}")
    return 0


LIST_FIELDS = ("id", "state", "workload", "metric", "branch", "good", "bad", "culprit", "probes", "rounds")


def _list(settings, fmt: str) -> int:
    conn = store.connect_readonly(settings.results_db)
    try:
        rows = store.bisections.newest_first(conn)
    finally:
        conn.close()
    if fmt == "json":
        print(json.dumps([{k: getattr(r, k) for k in LIST_FIELDS} for r in rows], indent=1))
        return 0
    for r in rows:
        print(
            f"{r.id:>4} {v(r.state):<16} {v(r.workload)}/{v(r.metric)} {v(r.branch)} "
            f"{v(r.good[:10])}..{v(r.bad[:10])} culprit {v((r.culprit or '-')[:12])} "
            f"({r.probes} probes, {r.rounds} runs)"
        )
    return 0
