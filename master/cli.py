"""The `perffarm` command: run the farm, see its status, export results, detect changes in your own data.

Light to start: this module imports the settings and the standard library only. Each verb imports what it uses
(the results store, the statistics, the HTTP client, the site's templates) and a verb whose code lives with its
feature (MOUNTED) has its module imported only when that verb is parsed, so `perffarm --help` and `perffarm
status` do not pay for numpy, scipy, requests or jinja2 (tests/unit/test_import_graph.py holds it).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as dt
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from master import cliargs
from master.redact import redact_text
from master.settings import Settings, SettingsError, describe, load_settings
from master.textsafe import visible as v

EXIT_OK, EXIT_FOUND, EXIT_USAGE = cliargs.EXIT_OK, cliargs.EXIT_FOUND, cliargs.EXIT_USAGE


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(getattr(args, "config", None))


def _when(ts: float | None) -> str:
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


# ------------------------------------------------------------------------------------------------- run


def cmd_run(args: argparse.Namespace) -> int:
    from master import launcher

    return launcher.run(_settings(args), check_repo=not args.no_repo_check)


# ------------------------------------------------------------------------------------------------- migrate


def cmd_migrate(args: argparse.Namespace) -> int:
    """Bring the results database to this code's schema, unless a master runs on the data directory."""
    from master import launcher, store
    from master.store.migrations import MIGRATIONS

    settings = _settings(args)
    db = settings.results_db
    current = len(MIGRATIONS)
    if not db.exists():
        print(f"no results database at {db}: nothing to migrate (whatever creates it creates it at schema {current})")
        return 0
    version = store.connection.schema_version(db)
    if version == current:
        print(f"{db} is at schema version {version}, this code's: nothing to migrate")
        return 0
    if version > current:
        raise store.StoreError(store.connection._newer(version))
    running = launcher.running_master(settings)
    if running is not None:
        # The running master is at the database's schema (every master migrates when it starts), so it is older
        # code than this: a newer schema would stop it ("newer than this code").
        print(
            f"perffarm migrate: {db} is at schema version {version}, this code's is {current}, and a master runs on "
            f"this data directory ({running}). Migrating would break that master, which is older code. Stop it, "
            "then run `perffarm migrate` again, or start the master of this checkout (`perffarm run`, `make run`), "
            "which migrates before it starts; nothing was changed",
            file=sys.stderr,
        )
        return 1
    store.connect(db, migrate=True).close()
    print(f"migrated {db} from schema version {version} to {current}")
    return 0


# ------------------------------------------------------------------------------------------------- status


def cmd_status(args: argparse.Namespace) -> int:
    from master import webapi
    from master.deferred import backlog

    settings = _settings(args)
    out: dict = {"master": settings.web_url, "master_running": False, "workers": [], "queue": [], "latest": []}
    masters = webapi.get(settings.web_port, "masters")
    if masters is not None:
        out["master_running"] = True
        workers = webapi.get(settings.web_port, "workers") or {"workers": []}
        for w in workers["workers"]:
            about = settings.worker_about.get(w["name"], ("", "", ""))
            out["workers"].append(
                {
                    "name": w["name"],
                    "connected": bool(w.get("connected_to")),
                    "machine_name": about[0] or None,  # workers.about: what people call its machine
                    "owner": about[1] or None,
                    "description": about[2] or None,
                }
            )
        reqs = webapi.get(settings.web_port, "buildrequests?complete=false") or {"buildrequests": []}
        listed = (webapi.get(settings.web_port, "builders") or {"builders": []})["builders"]
        builders = {b["builderid"]: b["name"] for b in listed}
        for r in reqs["buildrequests"]:
            out["queue"].append(
                {
                    "builder": builders.get(r["builderid"], r["builderid"]),
                    "claimed": bool(r.get("claimed")),
                    "submitted_at": r.get("submitted_at"),
                }
            )
    if settings.results_db.exists():
        from master import store
        from master.alerts.health import channel_health

        conn = store.connect_readonly(settings.results_db)
        try:
            tags = set(store.commits.tags(conn)) - set(store.commits.branch_heads(conn))
            for row in store.latest_per_ref(conn):
                if row.ref in tags and not getattr(args, "tags", False):  # a row per tag and builder: on request
                    out["tag_rows_hidden"] = out.get("tag_rows_hidden", 0) + 1
                else:
                    out["latest"].append(dataclasses.asdict(row))
            out["counts"] = store.counts(conn)
            out["channels"] = [dataclasses.asdict(h) for h in channel_health(conn, settings.alerts)]
            out["refused"] = [dataclasses.asdict(r) for r in store.workers.refused_logins(conn)]
            out["refused_results"] = [dataclasses.asdict(r) for r in store.machines.refusals(conn)]
            out["bisections"] = [
                {
                    k: getattr(b, k)
                    for k in ("id", "state", "workload", "branch", "good", "bad", "culprit", "probes", "rounds")
                }
                for b in store.bisections.running_or_finished_since(conn, dt.datetime.now().timestamp() - 86400)
            ]
        finally:
            conn.close()
    report = settings.data_dir / "reconcile.json"
    try:
        rec = json.loads(report.read_bytes()) if report.exists() else None
        if rec is not None and not isinstance(rec, dict):
            raise ValueError("not an object")
    except (OSError, ValueError) as e:
        rec = None
        out["reconcile_error"] = f"{report} is unreadable ({e}); the next reconcile pass rewrites it"
    if rec is not None:
        out["reconcile"] = {
            "last_pass": _when(rec.get("at")),
            "missing": len(rec.get("missing", [])),
            "requeued": rec.get("requeued", []),
            "gave_up": rec.get("gave_up", []),
        }
    deferred = backlog(settings)
    out["deferred"] = {"waiting": deferred.waiting, "oldest": _when(deferred.oldest), "gave_up": deferred.gave_up}
    # a gate for scripts and monitoring: exit 1 when the master is down (EXIT_FOUND), after printing all of it
    code = EXIT_OK if out["master_running"] else EXIT_FOUND
    if args.format == "json":
        print(json.dumps(out, indent=1, sort_keys=True, default=str))
        return code
    state = "running" if out["master_running"] else "NOT running (start it with `make run`)"
    print(f"master      {settings.web_url} {state}")
    for w in out["workers"]:
        about = ", ".join(v(x) for x in (w["machine_name"], w["owner"]) if x)
        print(
            f"worker      {v(w['name']):<20} {'connected' if w['connected'] else 'DISCONNECTED'}"
            + (f"  ({about})" if about else "")
        )
    for r in out.get("refused", []):
        why = "wrong password" if r["reason"] == "wrong-password" else "not in workers.names"
        print(
            f"refused     {v(r['name']):<20} {why}, {r['attempts']} attempt(s) from {v(r['address']) or '?'}, "
            f"last {_when(r['last_seen'])}"
        )
    for r in out.get("refused_results", []):
        bound = f", bound to {v(r['bound_worker'])}" if r["bound_worker"] else ""
        print(
            f"refused     {r['attempts']} result(s) of {v(r['worker'])} for machine {v(r['machine_id'])}{bound}, "
            f"last {_when(r['last_seen'])}:\n            {v(r['reason'])}"
        )
    if out["master_running"]:
        print(f"queue       {len(out['queue'])} build request(s) waiting or running")
        for q in out["queue"]:
            print(f"            {v(q['builder'])}  {'running' if q['claimed'] else 'waiting'}")
    if "reconcile_error" in out:
        print(f"reconcile   {v(out['reconcile_error'])}")
    if "reconcile" in out:
        rec = out["reconcile"]
        print(
            f"reconcile   last pass {rec['last_pass']}: {rec['missing']} commit(s) without result, "
            f"{len(rec['requeued'])} re-queued, {len(rec['gave_up'])} given up"
        )
        for g in rec["gave_up"]:
            print(
                f"            gave up on {v(g['revision'][:12])} ({v(g['branch'])}) on {v(g['builder'])} "
                f"after {settings.max_attempts} attempts: force a build to retry"
            )
    if deferred.waiting or deferred.gave_up:
        print(
            f"deferred    {deferred.waiting} result(s) waiting to be stored"
            + (f" (the oldest deferred since {out['deferred']['oldest']})" if deferred.waiting else "")
            + f", {deferred.gave_up} given up"
            + (f" (in {settings.incoming_dir / 'gave-up'}, each with its reason)" if deferred.gave_up else "")
        )
    for ch in out.get("channels", []):
        print(
            f"channel     {v(ch.get('name'))}: {v(ch.get('status'))}, {ch.get('pending', 0)} pending"
            + (f", last error: {v(ch.get('last_error'))}" if ch.get("last_error") else "")
        )
    for b in out.get("bisections", []):
        what = f"culprit {b['culprit'][:12]}" if b["culprit"] else b["state"]
        print(
            f"bisection   {b['id']}: {v(b['workload'])} on {v(b['branch'])} {v(b['good'][:10])}..{v(b['bad'][:10])} "
            f"{v(what)} ({b['probes']} probes, {b['rounds']} runs)"
        )
    hidden = out.get("tag_rows_hidden", 0)
    if not out["latest"] and not hidden:
        print("results     none stored yet" + ("" if settings.results_db.exists() else f" ({settings.results_db})"))
    else:
        print("latest result per ref:" if getattr(args, "tags", False) else "latest result per branch:")
        for row in out["latest"]:
            subject = v((row.get("subject") or "")[:50])
            print(
                f"  {v(row['ref']):<22} {v(row['builder']):<24} {v(row['sha'][:12])} {v(row['status']):<13} "
                f"{_when(row['ingested_at'])}  {subject}"
            )
        if hidden:
            print(f"  ({hidden} row(s) of release tags not shown: `perffarm status --tags` lists them)")
    return code


# ------------------------------------------------------------------------------------------------- results


def cmd_results_list(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if not settings.results_db.exists():
        return cliargs.no_results_db("results list", settings.results_db)
    from master import store

    conn = store.connect_readonly(settings.results_db)
    try:
        rows = store.list_runs(conn, ref=args.ref, builder=args.builder, sha_prefix=args.commit, limit=args.limit)
    finally:
        conn.close()
    if args.format == "json":
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=1, sort_keys=True))
        return 0
    print(f"{'run':>5} {'commit':<12} {'ref':<18} {'builder':<24} {'status':<13} {'source':<8} stored")
    for r in rows:
        print(
            f"{r.id:>5} {v(r.sha[:12])} {v(r.ref[:18]):<18} {v(r.builder[:24]):<24} {v(r.status):<13} "
            f"{v(r.source):<8} {_when(r.ingested_at)}  {v((r.subject or '')[:40])}"
        )
    return 0


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(value: object) -> object:
    """A text cell a spreadsheet will not evaluate: one starting with =, +, -, @, tab or CR gets a leading '
    (OWASP's CSV injection advice). Numbers are not text and stay numbers: a sample of -1.5 is written -1.5."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


EXPORT_COLUMNS = [
    "run_id",
    "commit",
    "ref",
    "builder",
    "worker",
    "machine",
    "recipe",
    "recipe_version",
    "config_hash",
    "status",
    "source",
    "subject",
    "author",
    "workload",
    "metric",
    "unit",
    "direction",
    "sample",
    "value",
]


def cmd_results_export(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if not settings.results_db.exists():
        return cliargs.no_results_db("results export", settings.results_db)
    from master import store

    conn = store.connect_readonly(settings.results_db)
    try:
        runs = store.list_runs(conn, ref=args.ref, builder=args.builder, sha_prefix=args.commit, limit=None)
        by_id = {r.id: r for r in runs}
        measurements = store.measurements_for(conn, list(by_id))
    finally:
        conn.close()
    try:
        out = open(args.output, "w", newline="") if args.output else sys.stdout
    except OSError as e:
        print(f"perffarm results export: cannot write {v(args.output)}: {e.strerror}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.format == "json":
            docs = []
            for run_id, run in sorted(by_id.items()):
                doc = dataclasses.asdict(run)
                doc["measurements"] = [
                    {
                        "workload": m.workload,
                        "metric": m.metric,
                        "unit": m.unit,
                        "direction": m.direction,
                        "samples": json.loads(m.samples),
                    }
                    for m in measurements
                    if m.run_id == run_id
                ]
                docs.append(doc)
            json.dump(docs, out, indent=1, sort_keys=True)
            out.write("\n")
        else:
            writer = csv.writer(out)
            writer.writerow(EXPORT_COLUMNS)
            for m in measurements:
                r = by_id[m.run_id]
                head = [
                    csv_text(cell)
                    for cell in (
                        r.id,
                        r.sha,
                        r.ref,
                        r.builder,
                        r.worker,
                        r.machine_id,
                        r.recipe,
                        r.recipe_version,
                        r.config_hash,
                        r.status,
                        r.source,
                        r.subject or "",
                        r.author or "",
                        m.workload,
                        m.metric,
                        m.unit,
                        m.direction,
                    )
                ]
                for i, value in enumerate(json.loads(m.samples)):
                    writer.writerow([*head, i, value])  # the sample's index and value are numbers, written as such
    finally:
        if args.output:
            out.close()
    return 0


# ------------------------------------------------------------------------------------------------- settings


def cmd_settings(args: argparse.Namespace) -> int:
    settings = _settings(args)
    rows = describe(settings)
    if args.format == "json":  # typed values and where each came from, as the text form shows them
        print(json.dumps({k: {"value": val, "source": src} for k, val, src in rows}, indent=1, sort_keys=True))
        return 0
    for key, value, source in rows:
        print(f"{key:<28} {json.dumps(value):<60} ({source})")
    return 0


# ------------------------------------------------------------------------------------------------- parser


# Verbs whose code lives with the feature: (verb, module with add_arguments/run, help, description).
MOUNTED = [
    (
        "bisect",
        "master.bisection.cli",
        "find the commit that caused a change (on the farm, or --local)",
        "Bisect (good, bad] on a branch's first-parent history to the culprit commit. Submits to the running master "
        "(its probes are real builds), or runs here with --local. --status ID shows the state, culprit, rQPS with its "
        "CI, probes used and the search log.",
    ),
    (
        "detect",
        "master.verbs.detect",
        "find change points in a CSV of benchmark results",
        "Find change points in FILE.csv (columns commit,value; rows in commit order; consecutive rows of one commit "
        "are its samples).",
    ),
    (
        "alerts",
        "master.verbs.alerts",
        "list, show and triage alerts (ack, set-state); channel health",
        "Alerts: change points past a threshold, grouped by commit range. list|show|ack|set-state|channels|deliver.",
    ),
    (
        "compare",
        "master.compare",
        "measure 2-8 PostgreSQL commits (or a commit and a patch) side by side locally",
        "Build A, B (C, ...), interleave their samples in one job and print each one's median ratio to A with a "
        "bootstrap 95% confidence interval: an A/B test, or release archaeology with every version measured under "
        "the same conditions. No master needed.",
    ),
    (
        "releases",
        "master.verbs.jobs",
        "queue release archaeology on the farm: 2-8 release tags measured interleaved in one job",
        "Queue a job that builds every release tag matching --tags (oldest first: side A) on a farm worker and "
        "measures them interleaved in one build, Vondra's and Callaghan's method: each release's ratio to the first "
        "with a 95% confidence interval, never N runs at different times. The site's release pages show the paired "
        "numbers. Needs the running master (make run); follow with `perffarm jobs --status ID`.",
    ),
    (
        "try",
        "master.verbs.jobs",
        "try a patch on the farm: base vs base+patch measured interleaved on a worker (needs a login)",
        "Submit a try-job: the patch is checked against --base in the master's mirror (size, UTF-8 unified diff, "
        "git apply --check) and measured on a farm worker as an interleaved A/B (base vs base+patch) in one build. "
        "The result gets a page on the site (jobs/ID.html) and `perffarm try --status ID`; it never enters a "
        "branch's series and never alerts. Needs a login (master.web_users; --user, --password-file).",
    ),
    (
        "cfbot",
        "master.verbs.jobs",
        "a performance cfbot: a try-job for every patch branch whose head is new (cfbot's layout)",
        "Fetch a repository of patch branches (cfbot's layout: one branch per proposed patch, rebased on master) and "
        "queue a try-job for every branch whose head has none yet: its merge base with --base against the merge "
        "base plus the branch's diff, measured interleaved on a farm worker in the try-job sandbox. Run it again "
        "(a timer, cron) to measure every push. Needs a farm that has run here; each job's page is jobs/ID.html.",
    ),
    (
        "jobs",
        "master.verbs.jobs",
        "list the farm's jobs (release comparisons, try-jobs) or show one with its ratios",
        "List jobs newest first, or --status ID: the sides, the state (queued, running, done, failed and why) and "
        "each side's median ratio to side A with its 95% bootstrap CI.",
    ),
    (
        "publish",
        "master.publish.cli",
        "render the static history site now (all of it) into [site] out_dir or --out",
        "Render every page of the static history site from the results database into a new directory and swap it "
        "in atomically (readers never see a half-written site). The master also publishes incrementally after "
        "each ingest; use this after changing templates or to publish elsewhere. Open DIR/index.html from disk "
        "or serve DIR with any web server (--serve).",
    ),
]


class _Verb(argparse.ArgumentParser):
    """A verb's parser. A mounted verb's (MOUNTED) arguments are added by its module, imported when the verb is
    parsed or its help is shown, not when `perffarm` starts: the other verbs never load it."""

    def __init__(self, *args: Any, mount: str = "", **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._mount = mount  # "verb=module", or "" when the arguments are added as the parser is built

    def mount(self) -> None:
        if not self._mount:
            return
        name, _, module = self._mount.partition("=")
        self._mount = ""
        mod = importlib.import_module(module)
        # a module with several verbs names its functions after them (add_<verb>_arguments, run_<verb>)
        (getattr(mod, f"add_{name}_arguments", None) or mod.add_arguments)(self)
        self.set_defaults(func=getattr(mod, f"run_{name}", None) or mod.run)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.mount()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.mount()
        return super().format_help()

    def format_usage(self) -> str:
        self.mount()
        return super().format_usage()


class _Version(argparse.Action):
    """--version: computed only when asked (it runs git), unlike argparse's own version action."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=str(kw.get("help", "")))

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from master.version import version

        print(version())
        parser.exit()


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The whole command line. lazy: a mounted verb's module is imported only when that verb is parsed (what
    `perffarm` does); otherwise every verb's arguments are there at once (for the docs and their tests)."""
    p = argparse.ArgumentParser(
        prog="perffarm",
        description="perffarm: a continuous performance-regression farm for PostgreSQL, built on Buildbot. "
        "Settings come from perffarm.toml, PERFFARM_CONFIG and PERFFARM_* environment variables.",
    )
    p.add_argument("--config", help="settings file (default: $PERFFARM_CONFIG, else the checkout's perffarm.toml)")
    p.add_argument("--version", action=_Version, help="print the version (release and git commit) and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Verb)

    s = sub.add_parser(
        "run",
        help="start the master and the local worker in the foreground (Ctrl-C stops)",
        description="Start the Buildbot master and (unless workers.run_local is false) a local "
        "worker, print the URLs and run until Ctrl-C.",
    )
    s.add_argument("--no-repo-check", action="store_true", help="skip the check that the repository answers")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser(
        "migrate",
        help="bring the results database to this code's schema (refused while a master runs on the data dir)",
        description="Migrate <data_dir>/results.sqlite to this checkout's schema. Only this verb and the master's "
        "start (`perffarm run`, `make run`) migrate it; every other verb stops at a database of another schema "
        "with a message naming both versions. Refused while a master runs on the data directory (it answers on "
        "master.web_port, or <data_dir>/master/twistd.pid names a live process): that master is at the "
        "database's schema, older code, and a newer schema would stop it. Stop the master first, or start the new "
        "one with `perffarm run`, which migrates before it starts. A database already at this code's schema, or "
        "none yet, is left as it is.",
    )
    s.set_defaults(func=cmd_migrate)

    s = sub.add_parser(
        "status",
        help="workers, queue, re-queues and the latest result per branch",
        description="Show whether the master runs, its workers and queue (from the REST API), "
        "what the reconciler re-queued or gave up on, deferred results waiting to be stored or given up, and the "
        "newest stored result per branch and builder "
        "(--tags: also per release tag; a farm measuring tags on every builder has one row per tag and builder).",
    )
    s.add_argument("--format", choices=["text", "json"], default="text")
    s.add_argument(
        "--tags",
        action="store_true",
        help="also list the newest result at each release tag (hidden by default; the output says how many)",
    )
    s.set_defaults(func=cmd_status)

    s = sub.add_parser("results", help="list or export stored results", description="List or export stored runs.")
    rsub = s.add_subparsers(dest="results_command", required=True, metavar="ACTION")
    for name, func, help_text in (
        ("list", cmd_results_list, "list runs, newest first"),
        ("export", cmd_results_export, "export every raw sample as CSV (one row per sample) or JSON"),
    ):
        r = rsub.add_parser(name, help=help_text, description=help_text)
        r.add_argument("--ref", help="only this branch or tag")
        r.add_argument("--builder", help="only this builder (recipe@worker)")
        r.add_argument("--commit", help="only commits starting with this sha prefix")
        if name == "list":
            r.add_argument("--limit", type=cliargs.count, default=50, help="at most this many runs (default 50)")
            r.add_argument("--format", choices=["text", "json"], default="text")
        else:
            r.add_argument("--format", choices=["csv", "json"], default="csv")
            r.add_argument("--output", "-o", help="write to this file instead of standard output")
        r.set_defaults(func=func)

    s = sub.add_parser(
        "settings",
        help="print the effective settings and where each came from",
        description="Print every setting, its effective value and its source.",
    )
    s.add_argument("--format", choices=["text", "json"], default="text")
    s.set_defaults(func=cmd_settings)

    for name, module, help_text, description in MOUNTED:
        s = sub.add_parser(name, help=help_text, description=description, mount=f"{name}={module}")
        if not lazy:
            s.mount()
    return p


def _action(args: argparse.Namespace) -> str | None:
    """The sub-command of a verb that has them (`results list`, `alerts show`), for messages."""
    return next((getattr(args, k) for k in vars(args) if k.endswith("_command") and getattr(args, k)), None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(lazy=True)
    args = parser.parse_args(argv)
    verb = " ".join(x for x in (args.command, _action(args)) if x)
    from master import store

    try:
        with store.connection.verbs_do_not_migrate():  # only `run` and `migrate` do, by asking for it
            return int(args.func(args) or 0)
    except SettingsError as e:
        print(f"perffarm {verb}: invalid settings: {redact_text(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except store.StoreError as e:  # a database at another schema: the farm's state, not the command line, stops it
        print(f"perffarm {verb}: {v(e)}", file=sys.stderr)
        return EXIT_FOUND
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
