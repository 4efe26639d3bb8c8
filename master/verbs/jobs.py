"""`perffarm releases` (queue release archaeology on the farm) and `perffarm jobs` (list jobs, show one)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

from master import cliargs, gitmirror, ingest, refnames, store
from master.job_service import job_builder_name
from master.jobs import core
from master.redact import redact_text, redact_url
from master.settings import Settings, load_settings
from master.store.jobs import Job
from master.textsafe import visible as v
from recipes import registry

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def job_builders(settings: Settings) -> list[str]:
    """The builders that run jobs on this farm: each enabled recipe, on each worker."""
    known = registry.discover()
    return [job_builder_name(r, w) for r in settings.recipes if r in known for w in settings.worker_names]


def add_releases_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tags",
        action="append",
        required=True,
        metavar="GLOB",
        help="release tags to measure, as shell patterns (repeatable), e.g. 'REL_1[3-8]_*' or REL_13_16 --tags "
        "REL_18_6; 2 to 8 tags, oldest release first (side A: every other release's ratio is to it)",
    )
    p.add_argument("--recipe", help="the recipe (default: the first enabled one that measures jobs, e.g. pg-quick)")
    p.add_argument("--worker", help="the worker to measure on (default: the first one)")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="recipe options for this job, e.g. samples=7 or workloads=pgbench-ro-prepared-c1,pgbench-ro-prepared-c2",
    )
    p.add_argument("--wait", action="store_true", help="wait until the job ends and print its table")
    p.add_argument("--format", choices=["text", "json"], default="text")


def run_releases(args: argparse.Namespace) -> int:
    settings = load_settings(getattr(args, "config", None))
    builders = job_builders(settings)
    if not builders:
        print(
            "perffarm releases: no enabled recipe measures jobs (enable pg-quick in recipes.enabled)", file=sys.stderr
        )
        return EXIT_USAGE
    recipe = args.recipe or builders[0].removeprefix("jobs-").split("@")[0]
    worker = args.worker or settings.worker_names[0]
    from master import launcher

    if not settings.mirror_dir.exists() and launcher.running_master(settings) is None:
        # no farm has run on this data directory: reading the tags would clone the whole repository (from the
        # network) first, for a job nothing would run. A farm that has run here may queue while its master is down.
        print(
            f"perffarm releases: no farm has run on {settings.data_dir} and no master ({settings.web_url}) is "
            "running; start the farm (make run), then queue the job; nothing was fetched or queued",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        mirror = ingest.fresh_mirror(settings)
    except gitmirror.GitError as e:
        print(f"perffarm releases: cannot read the tags of {redact_url(settings.repository_url)}: {e}", file=sys.stderr)
        return EXIT_FAILED
    _branches, tags = mirror.refs()
    conn = store.connect(settings.results_db)
    try:
        try:
            job_id = core.create_releases(
                conn, tags, args.tags, job_builder_name(recipe, worker), builders, args.option, "cli"
            )
        except core.JobError as e:
            print(f"perffarm releases: {e}", file=sys.stderr)
            return EXIT_USAGE
        job = core.get(conn, job_id)
    finally:
        conn.close()
    sides = ", ".join(f"{s.label}={s.revision}" for s in job.sides)
    print(f"job {job_id} queued on {job.builder}: {sides}")
    print(f"the master starts it within seconds; follow it with: perffarm jobs --status {job_id}")
    if args.wait:
        return _wait(settings, job_id, args.format)
    return EXIT_OK


def add_jobs_arguments(p: argparse.ArgumentParser) -> None:
    """`jobs list` (also plain `jobs`) and `jobs show ID` (also `jobs --status ID`, the old spelling)."""
    p.add_argument("--status", type=cliargs.row_id, metavar="ID", help="show one job (old spelling of `jobs show ID`)")
    p.add_argument("--kind", choices=core.store.jobs.KINDS, help="list only jobs of this kind")
    p.add_argument("--all-metrics", action="store_true", help="with show: latency and CPU metrics too")
    p.add_argument("--format", choices=["text", "json"], default="text")
    sub = cliargs.actions(p, "jobs_command")
    s = cliargs.action(sub, "list", "the farm's jobs, newest first (the default)")
    s.add_argument("--kind", choices=core.store.jobs.KINDS, help="list only jobs of this kind")
    s.add_argument("--format", choices=["text", "json"])
    s = cliargs.action(sub, "show", "one job: its sides, state (and why) and each side's ratio to A")
    s.add_argument("status", type=cliargs.row_id, metavar="ID")
    s.add_argument("--all-metrics", action="store_true", help="latency and CPU metrics too")
    s.add_argument("--format", choices=["text", "json"])


def run_jobs(args: argparse.Namespace) -> int:
    settings = load_settings(getattr(args, "config", None))
    if not settings.results_db.exists():
        return cliargs.no_results_db("jobs", settings.results_db, "nothing queued yet")
    if args.status is not None:
        return _status(settings, args.status, args.format, args.all_metrics)
    conn = store.connect_readonly(settings.results_db)
    try:
        jobs = store.jobs.newest_first(conn, args.kind)
    finally:
        conn.close()
    if args.format == "json":
        print(json.dumps([_summary(j) for j in jobs], indent=1, sort_keys=True))
        return EXIT_OK
    if not jobs:
        print("no jobs")
    for j in jobs:
        sides = ", ".join(f"{s.label}={v(s.revision)}" + ("+patch" if s.patched else "") for s in j.sides)
        print(f"job {j.id:>4}  {j.kind:<8} {j.state:<7} {v(j.builder):<28} {sides}")
        for line in _why(j):
            print(f"          {line}")
    return EXIT_OK


def _why(j: Job) -> list[str]:
    """Why a job failed, and what the farm did to it by itself (queued it again after its build was lost)."""
    return [*([f"failed: {v(j.error)}"] if j.error else []), *([f"note: {v(j.note)}"] if j.note else [])]


def _summary(j: Job) -> dict:
    return {
        "id": j.id,
        "kind": j.kind,
        "state": j.state,
        "builder": j.builder,
        "sides": [s.to_json() for s in j.sides],
        "options": list(j.options),
        "requested_by": j.requested_by,
        "error": j.error,
        "note": j.note,
        "attempts": j.attempts,
        "build_request": j.build_request,
        "build_url": j.build_url,
        "machine_id": j.machine_id,
        "created_at": j.created_at,
        "finished_at": j.finished_at,
    }


def _status(settings: Settings, job_id: int, fmt: str, all_metrics: bool = False) -> int:
    conn = store.connect_readonly(settings.results_db)
    try:
        try:
            job = core.get(conn, job_id)
        except core.JobError as e:
            print(f"perffarm jobs: {e}", file=sys.stderr)
            return EXIT_USAGE
    finally:
        conn.close()
    keep = None if all_metrics else (lambda m: m in ("tps", "instructions", "throughput"))
    per_side = core.comparisons(job, keep) if job.state == "done" else []
    if fmt == "json":
        doc = _summary(job)
        doc["vs_first"] = {sc.side.label: [c.to_json() for c in sc.comparisons] for sc in per_side}
        print(json.dumps(doc, indent=1, sort_keys=True))
        return EXIT_OK if job.state != "failed" else EXIT_FAILED
    print(f"job {job.id}: {job.kind}, {job.state} on {v(job.builder)} (requested by {v(job.requested_by)})")
    for s in job.sides:
        print(f"  {s.label} = {v(s.revision)} ({s.sha[:12]})" + (" + patch" if s.patched else ""))
    for line in _why(job):
        print(line)
    for sc in per_side:
        print()
        print(f"{sc.side.label} / A, measured interleaved in one build; 95% bootstrap CI of the median ratio:")
        from recipes import ab

        print(ab.format_table(list(sc.comparisons)))
    return EXIT_OK if job.state != "failed" else EXIT_FAILED


def _wait(settings: Settings, job_id: int, fmt: str) -> int:
    while True:
        conn = store.connect_readonly(settings.results_db)
        try:
            job = core.get(conn, job_id)
        finally:
            conn.close()
        if job.state in ("done", "failed"):
            return _status(settings, job_id, fmt)
        time.sleep(5)


# ----------------------------------------------------------------------------------------------------- try


def add_try_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--patch", metavar="FILE", help="a unified diff (git diff / git format-patch) to try on --base")
    p.add_argument("--base", default="master", help="the branch, tag or commit the patch applies to (default master)")
    p.add_argument("--recipe", help="the recipe (default: the first enabled one that measures jobs, e.g. pg-quick)")
    p.add_argument("--worker", help="the worker to measure on (default: the first one)")
    p.add_argument("--profile", choices=["quick", "full"], help="shorthand for --recipe pg-quick / pg-full")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="recipe options, e.g. samples=9")
    p.add_argument("--url", help="the master's web UI (default: master.web_url)")
    p.add_argument("--user", help="your login (default: $PERFFARM_TRY_USER); one of master.web_users")
    p.add_argument(
        "--password-file",
        help="a file holding your password (default: $PERFFARM_TRY_PASSWORD_FILE; the master keeps it as the secret "
        "web-user-<user>)",
    )
    p.add_argument("--list", action="store_true", help="list try-jobs, newest first (reads the results database)")
    p.add_argument(
        "--status", type=cliargs.row_id, metavar="ID", help="show a try-job: state, and B/A per workload with its CI"
    )
    p.add_argument("--format", choices=["text", "json"], default="text")


def run_try(args: argparse.Namespace) -> int:
    import os

    settings = load_settings(getattr(args, "config", None))
    if args.status is not None or args.list:
        if not settings.results_db.exists():
            print(f"perffarm try: no results database at {settings.results_db}", file=sys.stderr)
            return EXIT_USAGE
        if args.status is not None:
            return _status(settings, args.status, args.format)
        return run_jobs(
            argparse.Namespace(
                config=getattr(args, "config", None), status=None, kind="try", all_metrics=False, format=args.format
            )
        )
    if not args.patch:
        print("perffarm try: --patch FILE is required (or --list / --status ID)", file=sys.stderr)
        return EXIT_USAGE
    try:
        patch = open(args.patch, "rb").read()
        core.check_patch(patch)
    except OSError as e:
        print(f"perffarm try: cannot read the patch: {e.strerror}: {args.patch}", file=sys.stderr)
        return EXIT_USAGE
    except core.JobError as e:
        print(f"perffarm try: {e}; nothing was submitted", file=sys.stderr)
        return EXIT_USAGE
    user = args.user or os.environ.get("PERFFARM_TRY_USER", "")
    password_file = args.password_file or os.environ.get("PERFFARM_TRY_PASSWORD_FILE", "")
    if not user or not password_file:
        print(
            "perffarm try: a try-job runs your C code on a farm worker, so it needs a login: give --user (or "
            "PERFFARM_TRY_USER) and --password-file (or PERFFARM_TRY_PASSWORD_FILE); nothing was submitted",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        password = open(password_file, encoding="utf-8").read().strip()
    except OSError as e:
        print(f"perffarm try: cannot read the password file: {e.strerror}; nothing was submitted", file=sys.stderr)
        return EXIT_USAGE
    recipe = args.recipe or (f"pg-{args.profile}" if args.profile else None)
    builders = job_builders(settings)
    if recipe is None:
        recipe = builders[0].removeprefix("jobs-").split("@")[0] if builders else "pg-quick"
    builder = job_builder_name(recipe, args.worker or settings.worker_names[0])
    url = (args.url or settings.web_url).rstrip("/")
    try:
        outcome = _submit(url, user, password, args.base, patch.decode("utf-8"), builder, args.option)
    except TryRefused as e:
        print(f"perffarm try: {e}", file=sys.stderr)
        return EXIT_FAILED
    print(outcome)
    return EXIT_OK


class TryRefused(Exception):
    """The master refused the request or could not be reached; the message says why, in one line."""


def _submit(url: str, user: str, password: str, base: str, patch: str, builder: str, options: list[str]) -> str:
    """Log in, post the try form, wait for its one step, and return what it said (TryRefused: why not)."""
    import requests

    s = requests.Session()
    try:
        login = s.get(f"{url}/auth/login", auth=(user, password), timeout=30)
        if login.status_code == 401:
            raise TryRefused(f"login refused for {user!r}: check the user and password; nothing was submitted")
        login.raise_for_status()
        found = s.get(f"{url}/api/v2/builders/try-request", timeout=30)
        if found.status_code == 404 or not found.json().get("builders"):
            raise TryRefused(
                "this farm takes no try-jobs: it needs master.web_users (logins) and a recipe that measures jobs; "
                "nothing was submitted"
            )
        builderid = found.json()["builders"][0]["builderid"]
        r = s.post(
            f"{url}/api/v2/forceschedulers/try",
            json={
                "jsonrpc": "2.0",
                "method": "force",
                "id": 1,
                "params": {
                    "builderid": str(builderid),
                    "base": base,
                    "patch": patch,
                    "measure_on": builder,
                    "options": " ".join(options),
                    "reason": f"perffarm try by {user}",
                },
            },
            timeout=60,
        )
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        if "error" in body:
            raise TryRefused(f"the master refused the request: {body['error'].get('message', body['error'])}")
        r.raise_for_status()
        brid = list(body["result"][1].values())[0]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            builds = s.get(f"{url}/api/v2/buildrequests/{brid}/builds", timeout=30).json().get("builds", [])
            if builds and builds[0].get("complete"):
                steps = s.get(f"{url}/api/v2/builds/{builds[0]['buildid']}/steps", timeout=30).json().get("steps", [])
                said = next((st.get("state_string", "") for st in steps if st.get("name") == "start-try"), "")
                said = said.removesuffix(" (failure)").strip()
                if builds[0].get("results") != 0:
                    raise TryRefused(said or "the try request failed")
                return said
            time.sleep(1)
        raise TryRefused("the master did not answer the try request within 5 minutes (is it running?)")
    except requests.RequestException as e:
        raise TryRefused(f"cannot reach the master at {url}: {type(e).__name__}; nothing was submitted") from None


def add_cfbot_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repo",
        required=True,
        help="the repository of patch branches (cfbot's layout: one branch per proposed patch, rebased on master): "
        "a path or URL",
    )
    p.add_argument(
        "--branches", default="cf/.*", metavar="REGEX", help="which branches are patches (full match; default cf/.*)"
    )
    p.add_argument("--base", default="master", help="the branch the patches are rebased on (default master)")
    p.add_argument("--recipe", help="the recipe (default: the first enabled one that measures jobs, e.g. pg-quick)")
    p.add_argument("--worker", help="the worker to measure on (default: the first one)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="recipe options for the jobs")
    p.add_argument("--format", choices=["text", "json"], default="text")


def run_cfbot(args: argparse.Namespace) -> int:
    """One pass: a try-job for every patch branch whose head has none yet (run it from cron or a timer)."""
    import re

    from master import launcher
    from master.jobs import cfbot

    settings = load_settings(getattr(args, "config", None))
    try:
        re.compile(args.branches)
    except re.error as e:
        print(f"perffarm cfbot: --branches {args.branches!r} is not a regular expression: {e}", file=sys.stderr)
        return EXIT_USAGE
    if (problem := refnames.ref_problem(args.base)) is not None:
        print(f"perffarm cfbot: --base {v(args.base)!r}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    builders = job_builders(settings)
    if not builders:
        print("perffarm cfbot: no enabled recipe measures jobs (enable pg-quick in recipes.enabled)", file=sys.stderr)
        return EXIT_USAGE
    if not settings.mirror_dir.exists() and launcher.running_master(settings) is None:
        print(
            f"perffarm cfbot: no farm has run on {settings.data_dir} and no master ({settings.web_url}) is running; "
            "start the farm (make run) first; nothing was fetched or queued",
            file=sys.stderr,
        )
        return EXIT_FAILED
    recipe = args.recipe or builders[0].removeprefix("jobs-").split("@")[0]
    worker = args.worker or settings.worker_names[0]
    try:
        outcomes = cfbot.one_pass(
            settings, args.repo, args.branches, args.base, job_builder_name(recipe, worker), builders, args.option
        )
    except gitmirror.GitError as e:
        print(f"perffarm cfbot: {v(redact_text(str(e)))}", file=sys.stderr)
        return EXIT_FAILED
    if args.format == "json":
        print(json.dumps([dataclasses.asdict(o) for o in outcomes], indent=1, sort_keys=True))
        return EXIT_OK
    for o in outcomes:
        what = f"job {o.job_id} queued" if o.job_id else f"skipped: {v(o.reason)}"
        print(f"{v(o.branch):<24} {o.head[:12]}  {what}")
    if not outcomes:
        print(f"no branch of {v(redact_url(args.repo))} matches {v(args.branches)}")
    return EXIT_OK
