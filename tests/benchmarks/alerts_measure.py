"""Measure alerts end to end: alerts sent vs expected, false alerts, and duplicates across forced restarts.

Usage: .venv/bin/python -m tests.benchmarks.alerts_measure [--seed 1] [--restarts 5] [--regressions 20]
       [--quiet-commits 200]

Part 1 (sent vs expected): a branch of 220 commits (20 regressions of 5-20 % touching 1-3 of 3 workloads, 200
commits with no change; 5 samples per commit, CV 2 %, lognormal) is fed commit by commit through the real
pipeline: store.insert_run -> master.analysis (the farm's change detection, re-run on the touched series after
every run as the master does; `--analyse-every N` batches it) -> alerts.sync ->
deliver_once to real HTTP receivers on 127.0.0.1 (a Slack-style webhook and the JSON webhook). An alert is a
true alert when its commit range contains a scripted regression commit; expected = 20 (one per regression
commit, however many workloads it touched). Part 2 (duplicates): the alerts of part 1 are delivered again from
a fresh outbox by the real `perffarm alerts deliver` process, killed with SIGKILL `--restarts` times while a
request is in flight (the receiver answers after 0.3 s) and restarted each time; it counts messages on the
wire per idempotency key (what a receiver that ignores the key would show twice) and after de-duplication.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from master import analysis, store
from master.alerts.config import AlertSettings, ChannelConfig
from master.alerts.delivery import deliver_once
from master.alerts.kinds import build_senders
from master.alerts.sync import sync
from master.detect.config import DetectionSettings
from tests.alerts_support import HttpReceiver, sha_of

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ("pgbench-ro", "pgbench-rw", "insert")


def script(seed: int, regressions: int, quiet: int) -> tuple[int, dict[int, dict[str, float]]]:
    """Branch length and {position: {workload: ratio}} of the scripted regressions (spaced >= 8 apart)."""
    rng = np.random.default_rng(seed)
    n = regressions + quiet
    gap, first, last = 8, 12, n - 5
    slack = last - first - gap * (regressions - 1)
    if slack < 0:
        raise SystemExit(f"{regressions} regressions {gap} commits apart do not fit in {n} commits")
    pos = first + gap * np.arange(regressions) + np.sort(rng.integers(0, slack + 1, size=regressions))
    out = {}
    for p in pos:
        k = int(rng.integers(1, 4))
        hit = rng.choice(WORKLOADS, size=k, replace=False)
        out[int(p)] = {str(w): float(1 - rng.uniform(0.05, 0.20)) for w in hit}
    return n, out


def run_doc(sha: str, samples: dict[str, list[float]]) -> dict:
    return {
        "machine": {"id": "m-bench", "fingerprint": {"cpu": "bench"}},
        "commit": {"sha": sha, "ref": "refs/heads/master"},
        "recipe": {"name": "bench", "version": 1, "config_hash": "c0"},
        "status": "ok",
        "workloads": [
            {"name": w, "metrics": [{"name": "tps", "unit": "tps", "direction": "higher", "samples": v}]}
            for w, v in samples.items()
        ],
    }


def part1(base: Path, seed: int, regressions: int, quiet: int, analyse_every: int) -> dict:
    n, changes = script(seed, regressions, quiet)
    rng = np.random.default_rng(seed + 1000)
    conn = store.connect(base / "results.sqlite")
    shas = [sha_of(i, f"bench{seed}") for i in range(n)]
    commits = [
        store.CommitInfo(s, f"commit {i}", "Bench <b@example.org>", i, i, (shas[i - 1],) if i else ())
        for i, s in enumerate(shas)
    ]
    with store.transaction(conn):
        store.append_branch(conn, "master", commits, 0)
    chat, hook = HttpReceiver().start(), HttpReceiver().start()
    settings = AlertSettings(
        settle_seconds=300,
        channels=(
            ChannelConfig("chat", "slack", url_secret="chat-url"),
            ChannelConfig("hook", "webhook", url_secret="hook-url", kinds=("regression", "improvement")),
        ),
    )
    secrets = {"chat-url": chat.url, "hook-url": hook.url}
    senders = build_senders(settings.channels, secrets, timeout=5)
    level = {w: 1000.0 for w in WORKLOADS}
    t0 = time.monotonic()
    try:
        for i, sha in enumerate(shas):
            for w, r in changes.get(i, {}).items():
                level[w] *= r
            samples = {w: list(level[w] * rng.lognormal(0, 0.02, 5)) for w in WORKLOADS}
            now = 1_000_000.0 + 600 * i  # one commit every 10 minutes, virtual clock
            with store.transaction(conn):
                run_id = store.insert_run(
                    conn, run_doc(sha, samples), store.RunContext(builder="bench@local", worker="local", source="poll")
                )
                series_ids = store.series.ensure_for_run(conn, run_id)
            if (i + 1) % analyse_every and i != n - 1:
                continue
            with store.transaction(conn):
                for sid in series_ids:
                    analysis.analyse_series(conn, sid, DetectionSettings(), now)
            sync(conn, settings, now)
            deliver_once(conn, settings, senders, now=lambda now=now: now)
            print(f"  commit {i + 1}/{n}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        end = 1_000_000.0 + 600 * n + 3600
        sync(conn, settings, end)
        deliver_once(conn, settings, senders, now=lambda: end)
    finally:
        chat.stop()
        hook.stop()
    elapsed = time.monotonic() - t0
    truth = sorted(changes)
    opened = [r.json["alert"] for r in hook.requests if r.json["event"] == "opened"]
    true_alerts, false_alerts, found = [], [], set()
    for a in opened:
        lo = a["range"]["prev_sha"]
        lo_pos = shas.index(lo) if lo else -1
        hi_pos = shas.index(a["range"]["sha"])
        hits = [p for p in truth if lo_pos < p <= hi_pos]
        (true_alerts if hits else false_alerts).append(
            (a["id"], lo_pos, hi_pos, [(x["workload"], x["ratio"], x["ci_low"], x["ci_high"]) for x in a["lines"]])
        )
        found.update(hits)
    near = {p for p in truth if p not in found and any(abs(p - f[2]) <= 2 for f in false_alerts)}
    cps = conn.execute("SELECT COUNT(*) FROM change_points").fetchone()[0]
    lines = conn.execute("SELECT COUNT(*) FROM alert_lines").fetchone()[0]
    conn.close()
    return {
        "commits": n,
        "regression_commits": len(truth),
        "no_change_commits": n - len(truth),
        "regression_lines": sum(len(v) for v in changes.values()),
        "change_points": cps,
        "alert_lines": lines,
        "alerts_expected": len(truth),
        "alerts_sent": len(opened),
        "true_alerts": len(true_alerts),
        "false_alerts": len(false_alerts),
        "missed": len(set(truth) - found),
        "missed_but_alerted_within_2_commits": len(near),
        "updates_sent": sum(1 for r in hook.requests if r.json["event"] == "updated"),
        "chat_messages": len(chat.requests),
        "webhook_messages": len(hook.requests),
        "duplicate_keys_on_the_wire": chat.duplicates() + hook.duplicates(),
        "false_alert_detail": false_alerts,
        "missed_positions": sorted(set(truth) - found),
        "seconds": round(elapsed, 1),
        "scripted": {p: {w: round(r, 3) for w, r in c.items()} for p, c in changes.items()},
    }


def part2(base: Path, restarts: int) -> dict:
    """Re-deliver part 1's alerts from a fresh outbox through a deliverer process killed `restarts` times."""
    db = base / "results.sqlite"
    conn = store.connect(db)
    with store.transaction(conn):
        conn.execute(
            "UPDATE alert_outbox SET state = 'pending', attempts = 0, sent_at = NULL, available_at = 0, "
            "lease_owner = NULL, lease_until = NULL"
        )
    expected = conn.execute("SELECT COUNT(*) FROM alert_outbox").fetchone()[0]
    conn.close()
    chat, hook = HttpReceiver(delay=0.3).start(), HttpReceiver(delay=0.3).start()
    secrets = base / "secrets"
    secrets.mkdir(mode=0o700, exist_ok=True)
    (secrets / "chat-url").write_text(chat.url)
    (secrets / "hook-url").write_text(hook.url)
    cfg = base / "alerts.toml"
    cfg.write_text(
        "[alerts]\nsettle_seconds = 300\nlease_seconds = 30\nsend_timeout = 5\nretry_base_delay = 0.2\n"
        'retry_max_delay = 1\n[[alerts.channels]]\nname = "chat"\nkind = "slack"\nurl_secret = "chat-url"\n'
        '[[alerts.channels]]\nname = "hook"\nkind = "webhook"\nurl_secret = "hook-url"\n'
        'kinds = ["regression", "improvement"]\n'
    )
    cmd = [
        sys.executable,
        "-m",
        "master.cli",
        "alerts",
        "deliver",
        "--db",
        str(db),
        "--alerts-config",
        str(cfg),
        "--secrets-dir",
        str(secrets),
        "--interval",
        "0.1",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = (base / "deliver.log").open("a")
    rng = np.random.default_rng(7)

    def pending() -> int:
        c = store.connect(db)
        try:
            return c.execute("SELECT COUNT(*) FROM alert_outbox WHERE state = 'pending'").fetchone()[0]
        finally:
            c.close()

    kills = 0
    deadline = time.monotonic() + 300
    try:
        while pending() and time.monotonic() < deadline:
            chat.got_request.clear()
            hook.got_request.clear()
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            if kills < restarts:
                # Let it deliver a few messages, then kill it while a request is in flight.
                time.sleep(float(rng.uniform(1.5, 3.0)))
                chat.got_request.clear()
                hook.got_request.clear()
                while not (chat.got_request.is_set() or hook.got_request.is_set()) and proc.poll() is None:
                    time.sleep(0.01)
                time.sleep(0.1)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
            while pending() and time.monotonic() < deadline:
                time.sleep(0.2)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        wire = len(chat.requests) + len(hook.requests)
        unique = len({r.key for r in chat.requests} | {r.key for r in hook.requests})
        return {
            "messages_expected": expected,
            "forced_restarts": kills,
            "still_pending": pending(),
            "unique_messages_delivered": unique,
            "requests_on_the_wire": wire,
            "duplicate_requests_same_key": chat.duplicates() + hook.duplicates(),
            "duplicates_after_key_dedup": len(chat.processed) + len(hook.processed) - unique,
            "lost": expected - unique,
        }
    finally:
        chat.stop()
        hook.stop()
        log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--regressions", type=int, default=20)
    ap.add_argument("--quiet-commits", type=int, default=200)
    ap.add_argument(
        "--analyse-every",
        type=int,
        default=1,
        help="re-detect after every N commits (default 1: after every run, as the master does; ~1-3 min)",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        one = part1(base, args.seed, args.regressions, args.quiet_commits, args.analyse_every)
        two = part2(base, args.restarts)
    if args.json:
        print(json.dumps({"sent_vs_expected": one, "restarts": two}, indent=1))
        return
    print(
        f"scripted branch: {one['commits']} commits, {one['regression_commits']} regression commits "
        f"({one['regression_lines']} workload changes of 5-20 %), {one['no_change_commits']} no-change commits"
    )
    print(
        f"change points stored {one['change_points']}, alert lines {one['alert_lines']} "
        f"(scripted workload changes {one['regression_lines']})"
    )
    print(
        f"alerts sent {one['alerts_sent']} vs expected {one['alerts_expected']}: true {one['true_alerts']}, "
        f"false {one['false_alerts']}, missed {one['missed']} "
        f"({one['missed_but_alerted_within_2_commits']} of them alerted within 2 commits)"
    )
    print(
        f"updates sent {one['updates_sent']}; messages chat {one['chat_messages']}, webhook "
        f"{one['webhook_messages']}; duplicate keys {one['duplicate_keys_on_the_wire']}; {one['seconds']} s"
    )
    if one["false_alert_detail"]:
        print(f"false alerts (id, prev_pos, pos, [(workload, ratio, ci)]): {one['false_alert_detail']}")
        print(f"scripted regressions: {one['scripted']}")
    if one["missed_positions"]:
        print(f"missed regression positions: {one['missed_positions']}")
    print(
        f"restarts: {two['forced_restarts']} kill -9 during delivery; {two['messages_expected']} messages "
        f"expected, {two['unique_messages_delivered']} delivered, {two['lost']} lost, {two['still_pending']} "
        f"pending; {two['requests_on_the_wire']} requests on the wire = {two['duplicate_requests_same_key']} "
        f"re-sent with the same key; duplicates after key de-duplication: {two['duplicates_after_key_dedup']}"
    )


if __name__ == "__main__":
    main()
