"""scripts/run-tests.sh, what `make test` and CI run: a run that collects no test fails, it never passes empty."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run_tests(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LINT": "0", "PF_TEST_WORKERS": "0"}  # no lint tier, pytest in one process: seconds
    return subprocess.run(
        [str(ROOT / "scripts" / "run-tests.sh"), f"--junitxml={tmp_path / 'j.xml'}", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_run_that_collects_no_test_fails_and_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "test_empty.py"
    empty.write_text('"""No tests here."""\n')
    done = _run_tests(tmp_path, str(empty))
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "make test: FAILED: no tests were collected" in done.stderr


def test_a_filter_that_selects_nothing_fails_too(tmp_path: Path) -> None:
    # a typo in -k or -m deselects everything: pytest's exit code is 5 here as well
    done = _run_tests(tmp_path, "tests/unit/test_glossary.py", "-k", "no_test_is_named_like_this")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "no tests were collected" in done.stderr
