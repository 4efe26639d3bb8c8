"""`perffarm alerts list|show|ack|set-state|channels|deliver`: see and triage alerts, check the channels.

Mounted by master/cli.py like `detect`: `add_arguments(parser)` then `run(args)`. `list` and `channels` read the
store only; the actions that show a message, change a state or deliver import the alerts core (statistics,
senders) when they run. Exit codes: 0 ok, 1 no such
alert or database, 2 bad input. `deliver` runs the same drain loop the master runs, outside Buildbot, with
secrets read from a directory of files (the layout of Buildbot's SecretInAFile) — for trying a channel by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import getpass
import json
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from master import cliargs, store
from master.alerts import lifecycle
from master.alerts.config import AlertConfigError, AlertSettings
from master.alerts.health import channel_health
from master.alerts.ids import AlertNotFound, resolve
from master.alerts.links import LinkError
from master.textsafe import visible as v

EXIT_OK, EXIT_USAGE = cliargs.EXIT_OK, cliargs.EXIT_USAGE  # an unknown id or no database is an input error


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ") if ts else "-"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The alerts sub-commands (the caller sets `func=run` on `p`)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", help="results database (default: <data_dir>/results.sqlite from the settings)")
    sub = p.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")

    def add(name: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kw)

    s = add("list", help="alerts, newest first", description="List alerts, newest first.")
    s.add_argument("--state", help="only this state (new, bisecting, culprit-found, acknowledged, ...)")
    s.add_argument("--all", action="store_true", help="include triaged alerts (default: open ones only)")
    s.add_argument("--limit", type=cliargs.count, default=50, help="at most this many alerts (default 50)")
    s.add_argument("--format", choices=["text", "json"], default="text")
    s = add(
        "show",
        help="one alert: lines, state history, deliveries",
        description="Show one alert (a unique id prefix is enough).",
    )
    s.add_argument("alert_id")
    s.add_argument(
        "--alerts-config",
        help="TOML file with an [alerts] table (default: the farm settings): its rQPS bands colour the lines",
    )
    s.add_argument("--format", choices=["text", "json"], default="text")
    for name, help_text in (
        ("ack", "acknowledge an alert (no further messages)"),
        ("set-state", "set the triage state: " + ", ".join(lifecycle.TRIAGE) + " (or new)"),
    ):
        s = add(name, help=help_text, description=help_text)
        s.add_argument("alert_id")
        if name == "set-state":
            s.add_argument("state")
        s.add_argument("--note", help="why (kept in the alert's history)")
        s.add_argument(
            "--link",
            action="append",
            default=[],
            metavar="URL",
            help="where the alert is tracked (a thread, a bug: an http(s) URL), shown on its page and in the feed; "
            "repeat for several",
        )
        s.add_argument("--by", default=None, help="who (default: the current user)")
    s = add(
        "channels",
        help="health of every alert channel (failing ones need attention)",
        description="Per channel: ok, retrying or failing; pending messages and the last error.",
    )
    s.add_argument("--alerts-config", help="TOML file with an [alerts] table (default: the farm settings)")
    s.add_argument("--format", choices=["text", "json"], default="text")
    s = add(
        "deliver",
        help="derive alerts and send due messages (what the master does)",
        description="Run alerts.sync and drain the outbox, like the master's delivery service; "
        "secrets come from --secrets-dir (one file per secret, as Buildbot's SecretInAFile).",
    )
    s.add_argument("--alerts-config", help="TOML file with an [alerts] table (default: the farm settings)")
    s.add_argument("--secrets-dir", help="directory of secret files (default: <data_dir>/secrets)")
    s.add_argument("--once", action="store_true", help="one pass, then exit")
    s.add_argument("--interval", type=cliargs.seconds, help="seconds between passes (default: alerts.poll_interval)")


def _db_path(args: argparse.Namespace) -> Path:
    if args.db:
        return Path(args.db)
    from master.settings import load_settings

    return load_settings(getattr(args, "config", None)).results_db


def load_alert_settings(args: argparse.Namespace) -> AlertSettings:
    """The `[alerts]` table of --alerts-config, else the farm settings' (perffarm.toml, PERFFARM_CONFIG)."""
    path = getattr(args, "alerts_config", None)
    if path is None:
        from master.settings import load_settings

        return load_settings(getattr(args, "config", None)).alerts
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise AlertConfigError(f"cannot read alert settings from {path}: {e}") from None
    return AlertSettings.from_mapping(data.get("alerts", {}))


def read_secret_dir(path: Path, names: tuple[str, ...]) -> dict[str, str]:
    """The named secrets from a directory of files (trailing newline stripped), as SecretInAFile reads them."""
    out = {}
    for name in names:
        f = path / name
        if f.is_file():
            out[name] = f.read_text(encoding="utf-8").rstrip("\r\n")
    return out


def _connect(args: argparse.Namespace, read_only: bool):
    """The results database, never migrated: a verb that only reads it opens it read-only (store.connect_readonly),
    one that writes with store.connect, which inside a `perffarm` verb does not migrate either."""
    path = _db_path(args)
    if not path.exists():
        raise FileNotFoundError(
            f"no results database at {path}: nothing stored yet; start the farm (make run) or point master.data_dir "
            "(PERFFARM_MASTER_DATA_DIR, or --db) at a farm's data directory"
        )
    return store.connect_readonly(path) if read_only else store.connect(path)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (AlertNotFound, FileNotFoundError) as e:
        print(f"perffarm alerts: {v(e)}", file=sys.stderr)
        return EXIT_USAGE
    except (lifecycle.LifecycleError, AlertConfigError, LinkError) as e:
        print(f"perffarm alerts: {v(e)}", file=sys.stderr)
        return EXIT_USAGE


def _run(args: argparse.Namespace) -> int:
    cmd = args.alerts_command
    if cmd == "deliver":
        return _deliver(args)
    conn = _connect(args, read_only=cmd in ("list", "show", "channels"))
    try:
        if cmd == "list":
            return _list(conn, args)
        if cmd == "show":
            return _show(conn, args)
        if cmd == "channels":
            health = channel_health(conn, load_alert_settings(args))
            if args.format == "json":
                print(json.dumps([h.__dict__ for h in health], indent=1, sort_keys=True))
            for h in health if args.format == "text" else []:
                print(
                    f"{v(h.name):<16} {v(h.kind) or '(not configured)':<8} {v(h.status):<9} {h.pending} pending, "
                    f"{h.sent} sent, last sent {_when(h.last_sent_at)}"
                    + (f", error: {v(h.last_error)}" if h.last_error else "")
                )
            return EXIT_OK
        by = args.by or getpass.getuser()
        state = "acknowledged" if cmd == "ack" else args.state
        from master.alerts.sync import set_state  # it loads the statistics: only the verbs that change alerts

        old, new = set_state(conn, args.alert_id, state, by=by, note=args.note, links=args.link)
        print(f"{v(resolve(conn, args.alert_id))}: {v(old)} -> {v(new)}" + "".join(f"; link {v(u)}" for u in args.link))
        return EXIT_OK
    finally:
        conn.close()


def _list(conn, args: argparse.Namespace) -> int:
    rows = store.alerts.list_alerts(
        conn,
        state=lifecycle.parse_state(args.state) if args.state else None,
        open_states=None if args.all else lifecycle.AUTOMATIC,
        limit=args.limit,
    )
    if args.format == "json":
        print(json.dumps([{**dataclasses.asdict(r), "n_lines": n} for r, n in rows], indent=1, sort_keys=True))
        return EXIT_OK
    if not rows:
        print("no alerts" + ("" if args.all or args.state else " open (--all shows triaged ones)"))
    for r, n in rows:
        where_ = r.culprit_sha or r.sha
        print(
            f"{r.id}  {v(r.state):<14} {v(r.severity):<8} {v(r.kind):<11} {v(r.branch):<16} "
            f"{v(where_[:12])}  {n} workload(s)  {_when(r.created_at)}"
        )
    return EXIT_OK


# what `alerts show --format json` lists per delivery (never the payload)
DELIVERY_FIELDS = (
    "id",
    "channel",
    "event",
    "message_version",
    "state",
    "attempts",
    "last_error",
    "created_at",
    "sent_at",
    "available_at",
)


def _show(conn, args: argparse.Namespace) -> int:
    from master.alerts.sync import alert_view

    aid = resolve(conn, args.alert_id)
    view = alert_view(conn, load_alert_settings(args), aid)
    hist = store.alerts.history(conn, aid)
    out = store.alerts.outbox_for_alert(conn, aid)
    a = store.alerts.alert(conn, aid)
    assert a is not None  # resolved above
    links = store.alerts.links(conn, aid).get(aid, [])
    if args.format == "json":
        doc: dict[str, Any] = {
            "alert": dataclasses.asdict(a),
            "lines": [x.__dict__ for x in view.lines],
            "history": [dataclasses.asdict(h) for h in hist],
            "links": [dataclasses.asdict(k) for k in links],
            "deliveries": [{k: getattr(o, k) for k in DELIVERY_FIELDS} for o in out],
        }
        print(json.dumps(doc, indent=1, sort_keys=True, default=str))
        return EXIT_OK
    print(f"alert     {v(aid)} (message version {a.message_version})")
    print(f"state     {v(a.state)}" + ("" if a.active else " (retracted: the change points no longer hold)"))
    print(f"kind      {v(a.severity)} {v(a.kind)} on {v(a.branch)}")
    print(f"range     {v(a.prev_sha or '(start)')}..{v(a.sha)} ({view.commits or '?'} commit(s))")
    print(
        f"bisection {v(a.bisection_state or 'not started')}"
        + (f", culprit {v(a.culprit_sha)}" if a.culprit_sha else "")
    )
    who = view.culprit or view.commit
    if who:
        print(f"commit    {v(who.sha)} {json.dumps(who.subject)} by {json.dumps(who.author)}")
    for k in links:
        print(f"link      {v(k.url)} (by {v(k.added_by)}, {_when(k.added_at)})")
    for x in view.lines:
        ci = f" [{x.ci_low:.3f}, {x.ci_high:.3f}]" if x.ci_low is not None and x.ci_high is not None else ""
        print(
            f"  {v(x.workload)} {v(x.metric)} on {v(x.machine_id)}: rQPS {x.ratio:.3f}{ci} {v(x.colour)} "
            f"{v(x.severity)}"
        )
    for h in hist:
        print(
            f"  {_when(h.at)} {v(h.old_state or '-')} -> {v(h.new_state)} by {v(h.by)}"
            + (f": {v(h.note)}" if h.note else "")
        )
    for o in out:
        print(
            f"  {v(o.channel):<12} {v(o.event):<8} r{o.message_version} {v(o.state):<9} attempts {o.attempts}"
            + (f" sent {_when(o.sent_at)}" if o.sent_at else "")
            + (f" error: {v(o.last_error)}" if o.last_error and o.state == "pending" else "")
        )
    return EXIT_OK


def _deliver(args: argparse.Namespace) -> int:
    from master.alerts import delivery
    from master.alerts.kinds import build_senders
    from master.alerts.sync import sync

    settings = load_alert_settings(args)
    path = _db_path(args)
    secrets_dir = Path(args.secrets_dir) if args.secrets_dir else path.parent / "secrets"
    interval = args.interval or settings.poll_interval
    conn = store.connect(path)
    try:
        delivery.release_dead_leases(conn)
        while True:
            secrets = read_secret_dir(secrets_dir, settings.secret_names())
            senders = build_senders(settings.channels, secrets, timeout=settings.retry.timeout)
            sync(conn, settings)
            report = delivery.deliver_once(conn, settings, senders, secrets=secrets)
            for key in report.sent:
                print(f"sent {v(key)}", flush=True)
            for key, reason in report.failed:
                print(f"failed {v(key)}: {v(reason)}", flush=True)
            if args.once:
                return EXIT_OK
            time.sleep(interval)
    finally:
        conn.close()
