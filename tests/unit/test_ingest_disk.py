"""Deferred results and a full disk, on real file systems: no truncated state file ever stops the reconciler."""

from __future__ import annotations

import errno
import json
import subprocess
from pathlib import Path

import pytest

from master import ingest
from master.atomicfile import write_atomic
from master.reconcile import PassReport, Reconciler
from master.settings import load_settings
from tests.harness import make_repo
from tests.unit.test_store_ingest import put, result_for, run_ctx


def test_write_atomic_replaces_whole_files_and_leaves_no_temporaries(tmp_path):
    target = tmp_path / "state.json"
    write_atomic(target, "first")
    write_atomic(target, b"second")
    assert target.read_text() == "second" and [p.name for p in tmp_path.iterdir()] == ["state.json"]
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "missing-dir" / "x", "y")


# ------------------------------------------------------------------------------------------- a real full disk


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs at tmp_path/data (skipped where mounting is not permitted)."""
    where = tmp_path / "data"
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True,
                          text=True)
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
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(small_fs),
                                      "PERFFARM_REPOSITORY_URL": str(repo.path)})
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
