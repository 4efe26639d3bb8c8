"""Deferred results and a full disk, on real file systems: no truncated state file ever stops the reconciler."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from master import ingest, store
from master.atomicfile import write_atomic
from master.reconcile import PassReport, Reconciler
from master.settings import load_settings
from tests.harness import make_repo
from tests.unit.test_store_ingest import put, result_for, run_ctx

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path):
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    return repo, settings


def defer(settings, repo, tmp_path, sha, name, build_id):
    """Ingest a result while the repository is unreachable: it is deferred with its context."""
    moved = tmp_path / "moved"
    repo.path.rename(moved)
    try:
        with pytest.raises(ingest.IngestDeferred):
            ingest.ingest_file(settings, put(settings, result_for(sha), name), run_ctx(build_id, sha), "fixture")
    finally:
        moved.rename(repo.path)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"   \n",
        b'{"run": {"builder": ',
        b"[]",
        b'{"run": {"bogus": 1}}',
        b'{"run": {}, "recipe": 5}',
        b"\xff\xfe\x00garbage",
        b"[" * 100_000,
    ],
)
def test_a_bad_context_file_is_quarantined_and_the_pass_goes_on(env, tmp_path, content):
    repo, settings = env
    a, b = repo.head(), repo.bench_commit("b", 2000)
    defer(settings, repo, tmp_path, a, "a-1.json", 1)
    defer(settings, repo, tmp_path, b, "b-2.json", 2)
    bad = settings.incoming_dir / "a-1.json.context"  # sorted first: it used to stop the whole pass
    bad.write_bytes(content)
    messages = ingest.retry_deferred(settings)
    assert len(messages) == 2 and "stored run" in messages[1], messages
    assert "a-1.json" in messages[0] and "quarantine" in messages[0] and "build context" in messages[0]
    quarantine = settings.incoming_dir / "quarantine"
    assert (quarantine / "a-1.json").exists() and (quarantine / "a-1.json.context").read_bytes() == content
    assert "build context a-1.json.context" in (quarantine / "a-1.json.error").read_text()
    assert sorted(p.name for p in settings.incoming_dir.iterdir()) == ["quarantine"]
    assert ingest.retry_deferred(settings) == []  # handled once, not at every pass
    conn = store.connect(settings.results_db)
    # no rejection row for the quarantined one: the reconciler re-queues its commit
    assert store.results_for(conn, [a, b], "fixture@local") == {b}


def test_an_unexpected_error_on_one_result_does_not_stop_the_others(env, tmp_path):
    repo, settings = env
    a, b = repo.head(), repo.bench_commit("b", 2000)
    defer(settings, repo, tmp_path, a, "a-1.json", 1)
    defer(settings, repo, tmp_path, b, "b-2.json", 2)
    (settings.incoming_dir / "a-1.json").unlink()
    (settings.incoming_dir / "a-1.json").mkdir()  # reading it raises IsADirectoryError, outside ingest's guards
    messages = ingest.retry_deferred(settings)
    assert "stored run" in messages[-1], messages


def test_write_atomic_replaces_whole_files_and_leaves_no_temporaries(tmp_path):
    target = tmp_path / "state.json"
    write_atomic(target, "first")
    write_atomic(target, b"second")
    assert target.read_text() == "second" and [p.name for p in tmp_path.iterdir()] == ["state.json"]
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "missing-dir" / "x", "y")


def test_perffarm_status_survives_an_unreadable_reconcile_report(env):
    _, settings = env
    (settings.data_dir / "reconcile.json").write_bytes(b"")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    environ.update(
        PERFFARM_MASTER_DATA_DIR=str(settings.data_dir),
        PERFFARM_REPOSITORY_URL=settings.repository_url,
        PERFFARM_MASTER_WEB_PORT="9",
    )  # nothing listens there: "master not running"
    proc = subprocess.run(
        [sys.executable, "-m", "master.cli", "status"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr  # 1: the master is down
    assert "reconcile.json" in proc.stdout and "unreadable" in proc.stdout


def test_a_deferred_result_is_given_up_after_its_time_with_the_reason_and_counted_by_status(
    env, tmp_path, monkeypatch, capsys
):
    # issue #26, item 11: a result deferred for good (here: the repository gone for good) was retried at every
    # reconcile pass for ever
    repo, settings = env
    sha = repo.head()
    repo.path.rename(tmp_path / "gone")
    path = put(settings, result_for(sha), "b-7.json")
    with pytest.raises(ingest.IngestDeferred):
        ingest.ingest_file(settings, path, run_ctx(7, sha), "fixture")
    since = json.loads((settings.incoming_dir / "b-7.json.context").read_text())["deferred"]["since"]
    limit = settings.deferred_give_up_after
    assert limit == 86400  # the documented default

    (still,) = ingest.retry_deferred(settings, now=since + limit - 60)
    assert "still deferred (try 2)" in still and path.exists()
    (gave_up,) = ingest.retry_deferred(settings, now=since + limit)
    assert "gave up after 3 tries over 24.0 h" in gave_up and "master.deferred_give_up_after" in gave_up
    aside = settings.incoming_dir / "gave-up"
    reason = (aside / "b-7.json.error").read_text()
    assert "gave up after 3 tries" in reason and "could not update the master's mirror" in reason
    assert "re-queues the commit" in reason
    assert json.loads((aside / "b-7.json").read_text())["commit"]["sha"] == sha  # the result itself, kept
    assert (aside / "b-7.json.context").exists() and not path.exists()
    assert ingest.retry_deferred(settings, now=since + 2 * limit) == []  # never tried again
    conn = store.connect(settings.results_db)
    try:  # nothing stored and no rejection: the reconciler re-queues the commit
        assert store.results_for(conn, [sha], "fixture@local") == set()
    finally:
        conn.close()

    # another one waits; `perffarm status` counts both
    other = put(settings, result_for(sha), "b-8.json")
    with pytest.raises(ingest.IngestDeferred):
        ingest.ingest_file(settings, other, run_ctx(8, sha), "fixture")
    from master import cli

    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", settings.repository_url)
    monkeypatch.setenv("PERFFARM_MASTER_WEB_PORT", "9")  # nothing listens there: "master not running"
    assert cli.main(["status", "--format", "json"]) == 1  # the master is not running: status exits 1 (a gate)
    deferred = json.loads(capsys.readouterr().out)["deferred"]
    assert (deferred["waiting"], deferred["gave_up"]) == (1, 1) and deferred["oldest"] != "-"
    assert cli.main(["status"]) == 1  # the master is not running: status exits 1 (a gate)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("deferred"))
    assert "1 result(s) waiting to be stored" in line and "1 given up" in line and str(aside) in line


# ------------------------------------------------------------------------------------------- a real full disk


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs at tmp_path/data (skipped where mounting is not permitted)."""
    where = tmp_path / "data"
    where.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(directory: Path) -> Path:
    """Write a file until the file system is full; returns it (delete it to free the space)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC
    return filler


def test_a_full_disk_while_deferring_leaves_no_empty_context(small_fs, tmp_path):
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(small_fs), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    first = repo.head()
    ingest.ingest_file(settings, put(settings, result_for(first), "a-1.json"), run_ctx(1, first), "fixture")
    report = Reconciler.__new__(Reconciler)  # only its report writer, on the same disk
    report.settings = settings
    report._write_report(PassReport(at=1.0, changes=3))
    second = repo.bench_commit("second", 2000)
    path = put(settings, result_for(second), "b-2.json")
    filler = fill(small_fs)
    # the store fails (SQLite or git: disk full); the context file cannot be written either
    with pytest.raises(ingest.IngestDeferred, match="context could not be saved.*re-queues"):
        ingest.ingest_file(settings, path, run_ctx(2, second), "fixture")
    assert path.exists(), "the result is kept"
    leftovers = [p.name for p in settings.incoming_dir.iterdir() if p.name != "b-2.json"]
    assert leftovers == [], f"no empty .context or temporary file may remain: {leftovers}"
    with pytest.raises(OSError):
        report._write_report(PassReport(at=2.0))
    assert json.loads((small_fs / "reconcile.json").read_text())["changes"] == 3  # the old report, whole
    assert not [p for p in small_fs.iterdir() if p.name.startswith(".reconcile.json")]
    assert ingest.retry_deferred(settings) == []  # and the next reconcile pass is not stopped
    filler.unlink()
    assert ingest.retry_deferred(settings) == []


def test_create_once_never_leaves_an_empty_file_and_one_racer_wins(tmp_path):
    # a secret or instance id created "open first, write after" is empty after a crash in between: request keys
    # would lose their instance, a worker its password. create_once links a complete file into place.
    from concurrent.futures import ThreadPoolExecutor

    from master.atomicfile import create_once

    path = tmp_path / "instance"
    path.write_text("")  # what the old code left behind after a crash
    values = iter(range(1000))
    with ThreadPoolExecutor(8) as pool:
        got = set(pool.map(lambda _: create_once(path, lambda: f"v{next(values)}"), range(32)))
    assert len(got) == 1 and path.read_text().strip() in got and path.read_text().strip()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temporary file left
    assert (path.stat().st_mode & 0o777) == 0o600
