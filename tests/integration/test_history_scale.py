"""A real master watching ~160 refs: a poll with nothing new runs a fixed handful of git processes, not two per ref,
and a new commit or a new tag on an old commit still becomes a change (the farm's GitPoller, master/poller.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.benchmarks.synth_history import Shape, write_repo
from tests.harness import Farm, wait_until

WIDE = {"PERFFARM_REPOSITORY_BRANCHES": ".*", "PERFFARM_REPOSITORY_TAGS": ".*"}
SHIM = '#!/bin/bash\nprintf "%s\\n" "$1" >> {log}\nexec {git} "$@"\n'


def g(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_COMMITTER_NAME="T", GIT_COMMITTER_EMAIL="t@example.org")
    env.update(GIT_AUTHOR_NAME="T", GIT_AUTHOR_EMAIL="t@example.org")
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def test_steady_poll_cost_does_not_grow_with_refs(tmp_path: Path):
    repo = tmp_path / "pg.git"
    summary = write_repo(repo, Shape(commits=1500, branches=8, tags=150, merges=1))
    refs = 1 + len(summary.branch_commits) + len(summary.tags)
    log, shim_dir = tmp_path / "git-calls.log", tmp_path / "shim"
    shim_dir.mkdir()
    (shim_dir / "git").write_text(SHIM.format(log=log, git=shutil.which("git")))
    (shim_dir / "git").chmod(0o755)
    env = {**WIDE, "PATH": f"{shim_dir}:{os.environ['PATH']}"}
    farm = Farm(tmp_path / "data", str(repo), poll_interval=2, reconcile_interval=3600, env=env)
    farm.start_master()  # no worker: only the poller is measured
    try:
        farm.wait_first_poll()

        def calls() -> list[str]:
            return log.read_text().splitlines()

        def polls() -> list[int]:  # every poll starts with `git --version`
            return [i for i, c in enumerate(calls()) if c == "--version"]

        def after(n: int) -> list[int]:
            return wait_until(lambda: len(polls()) >= n and polls(), 60, f"{n} polls")

        first = len(polls())
        starts = after(first + 3)
        per_poll = [b - a for a, b in zip(starts[first - 1 :], starts[first:], strict=False)]
        assert per_poll and max(per_poll) <= 6, f"git processes per poll {per_poll} with {refs} refs watched"

        new = g(repo, "commit-tree", "-p", "master", "-m", "a new commit", "master^{tree}")
        g(repo, "update-ref", "refs/heads/master", new)
        g(repo, "tag", "-a", "-m", "late tag", "REL_99_1", "master~200")

        def change_for(branch: str) -> dict | None:
            data = farm.api("changes?order=-changeid&limit=20") or {"changes": []}
            return next((c for c in data["changes"] if c["branch"] == branch), None)

        change = wait_until(lambda: change_for("master"), 60, "the new commit as a change")
        assert change["revision"] == new
        assert wait_until(lambda: change_for("refs/tags/REL_99_1"), 60, "the new tag as a change")
        n = len(polls())  # and the polls that follow are again a handful of git processes
        starts = after(n + 2)
        assert starts[-1] - starts[-2] <= 6
    finally:
        farm.stop()
