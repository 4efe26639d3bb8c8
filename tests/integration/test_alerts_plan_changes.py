"""A plan change reaches real receivers once (issue #27 item 2): the real `perffarm alerts deliver` process, run,
stopped and run again, over a real SQLite store fed through the farm's ingest path, posting to real HTTP servers
on 127.0.0.1 (a JSON webhook and a Slack-style one).

Two measured commits of `tpch-q17` ran different plans (a hash join, then a nested loop) with the same counts, so
no alert fires: the plan change is a message of its own, naming both shapes' summary. Results carry `plans` as a
worker's pg-quick run writes them (docs/result-schema.md); real PostgreSQL is not needed to say what the channels
do with them (tests/integration/test_pg_operations.py captures real plans).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from master import ingest
from tests.alerts_support import HttpReceiver
from tests.harness import GitRepo
from tests.unit.test_alerts_plan_changes import HASH, NESTLOOP, SUMMARY, ingest_plans, result
from tests.unit.test_store_ingest import put, run_ctx

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
[alerts]
settle_seconds = 0
send_timeout = 5
[[alerts.channels]]
name = "hook"
kind = "webhook"
url_secret = "alerts-hook-url"
kinds = ["regression", "plan-change"]
[[alerts.channels]]
name = "chat"
kind = "slack"
url_secret = "alerts-chat-url"
kinds = ["plan-change"]
[[alerts.channels]]
name = "regressions-only"
kind = "webhook"
url_secret = "alerts-other-url"
"""


def deliver_once(db: Path, cfg: Path, secrets: Path) -> str:
    """One pass of the real deliverer (sync, then send), as a process of its own: each call is a restart."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "master.cli",
            "alerts",
            "deliver",
            "--once",
            "--db",
            str(db),
            "--alerts-config",
            str(cfg),
            "--secrets-dir",
            str(secrets),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_two_commits_with_different_plans_send_one_plan_change_message_once(tmp_path: Path) -> None:
    hook, chat, other = HttpReceiver().start(), HttpReceiver().start(), HttpReceiver().start()
    try:
        settings, shas = ingest_plans(tmp_path, [HASH, NESTLOOP])
        cfg = tmp_path / "alerts.toml"
        cfg.write_text(CONFIG)
        secrets = tmp_path / "secrets"
        secrets.mkdir(mode=0o700)
        for name, receiver in (("alerts-hook-url", hook), ("alerts-chat-url", chat), ("alerts-other-url", other)):
            (secrets / name).write_text(receiver.url)
            (secrets / name).chmod(0o600)

        out = deliver_once(settings.results_db, cfg, secrets)
        [message] = hook.requests
        doc = message.json
        assert doc["event"] == "plan-change" and doc["delivery_id"] == message.key
        p = doc["plan_change"]
        assert (p["workload"], p["prev_sha"], p["sha"], p["summary"]) == ("tpch-q17", shas[0], shas[1], SUMMARY)
        assert "Hash Join" in p["before"] and "Nested Loop" in p["after"] and "Hash Join" not in p["after"]
        assert p["headline"] == f"tpch-q17: {SUMMARY} at {shas[1][:12]}"
        [posted] = chat.requests
        assert f"tpch-q17: {SUMMARY} at {shas[1][:12]}" in posted.json["text"]
        assert "Nested Loop" in posted.json["attachments"][0]["text"]
        assert other.requests == []  # it lists regressions only
        assert f"sent {message.key}" in out

        # a restarted deliverer syncs again: nothing new to say
        deliver_once(settings.results_db, cfg, secrets)
        # a third commit that keeps the new plan is no plan change
        sha = ingest_plans_more(settings, tmp_path)
        deliver_once(settings.results_db, cfg, secrets)
        assert len(hook.requests) == 1 and len(chat.requests) == 1 and other.requests == [], sha
        assert hook.duplicates() == 0 and chat.duplicates() == 0
    finally:
        hook.stop(), chat.stop(), other.stop()


def ingest_plans_more(settings, tmp_path: Path) -> str:
    """Measure one more commit of the same repository, with the nested loop plan."""
    repo = GitRepo(tmp_path / "repo")
    sha = repo.bench_commit("c2", 2)
    ingest.ingest_file(settings, put(settings, result(sha, NESTLOOP), "b-2.json"), run_ctx(3, sha), "pg-quick")
    return sha
