"""A URL that carries a token is redacted wherever the farm shows it: git errors, ingest, rejections, perffarm run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from master import gitmirror, ingest, store
from master.settings import load_settings
from tests.alerts_support import HttpReceiver
from tests.harness import free_port
from tests.unit.test_store_ingest import result_for, run_ctx

pytestmark = pytest.mark.integration
TOKEN = "glpat-S3CRET-t0ken-4242"
USER = "perffarm-bot"
PERFFARM = str(Path(sys.executable).parent / "perffarm")


def test_a_token_in_a_url_is_redacted_from_git_errors_and_rejections(tmp_path: Path) -> None:
    """Belt and braces behind the settings check: git prints a query string as it is; the farm never shows it."""
    server = HttpReceiver(status=404).start()  # "fatal: repository '<the URL>/' not found"
    try:
        _check_redacted(tmp_path, f"http://127.0.0.1:{server.port}/missing.git?private_token={TOKEN}")
    finally:
        server.stop()


def _check_redacted(tmp_path: Path, leaky: str) -> None:
    reason = gitmirror.check_reachable(leaky)
    assert reason is not None and "private_token=***" in reason and TOKEN not in reason

    env = {"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": "http://127.0.0.1:9/x"}
    settings = dataclasses.replace(load_settings(environ=env), repository_url=leaky)
    settings.incoming_dir.mkdir(parents=True)
    result = settings.incoming_dir / "fixture_local-1.json"
    result.write_text(json.dumps(result_for("f" * 40)))
    run = run_ctx(sha="f" * 40, revision="f" * 40)
    with pytest.raises(ingest.IngestDeferred) as deferred:
        ingest.ingest_file(settings, result, run, "fixture")
    assert TOKEN not in str(deferred.value) and "private_token=***" in str(deferred.value)

    ingest._reject(settings, result, run, f"$.commit.sha: not a commit of {leaky}")
    conn = store.connect(settings.results_db)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert "private_token=***" in dump and TOKEN not in dump
    kept = settings.incoming_dir / "rejected" / (result.name + ".error")
    assert TOKEN not in kept.read_text()


def test_perffarm_run_never_shows_a_token_from_the_url(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    env.update(PERFFARM_MASTER_DATA_DIR=str(tmp_path / "data"),
               PERFFARM_REPOSITORY_URL=f"http://{USER}:{TOKEN}@127.0.0.1:9/postgresql.git",
               PERFFARM_MASTER_WEB_PORT=str(free_port()), PERFFARM_MASTER_WORKER_PORT=str(free_port()))
    proc = subprocess.run([PERFFARM, "run"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and TOKEN not in proc.stdout + proc.stderr
    assert f"http://{USER}:***@127.0.0.1:9/postgresql.git" in proc.stderr
    assert not (tmp_path / "data" / "master").exists(), "nothing should be started"
