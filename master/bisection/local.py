"""`perffarm bisect --local`: drive a bisection on this machine, without a master.

Each probe checks the commit out of the master's mirror into a scratch directory, runs the recipe's build and
bench phases exactly as a worker would (`python -m recipes`), and ingests the result (source `bisect`) into
the results database, so the probes are stored runs like any other. Measure locally only on the machine the
series comes from: results from another machine have another fingerprint and do not count.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from master import gitauth, gitmirror, ingest, store
from master.bisection import state
from master.bisection.core import Decision, Measure, Policy
from master.settings import REPO_ROOT, Settings
from recipes.api import checkout_layout

LOCAL_WORKER = "local-cli"


def measure(settings: Settings, b: state.Bisection, sha: str) -> str:
    """One probe of a bisection: measure `sha` with its recipe and store it as a bisect run."""
    return measure_commit(
        settings, b.recipe, sha, b.branch, b.builder, "bisect", b.id, options=(f"workloads={b.workload}",)
    )


def measure_commit(
    settings: Settings,
    recipe: str,
    sha: str,
    ref: str,
    builder: str,
    source: str,
    bisection_id: int | None = None,
    options: tuple[str, ...] = (),
) -> str:
    """Build and bench one commit here, exactly as a worker would, and store the result; returns the message."""
    mirror = gitmirror.Mirror(settings.repository_url, settings.mirror_dir, gitauth.read_credentials(settings))
    if not mirror.has_commit(sha):
        mirror.fetch()
    # one persistent checkout and build directory per recipe, laid out like a worker's builder directory: a probe
    # rebuilds only what differs from the previous probe, and ccache hits are shared with the farm and compare
    src, work = checkout_layout(settings.data_dir / "bisect-work" / recipe)
    work.mkdir(parents=True, exist_ok=True)
    if not (src / ".git").exists():  # --shared: the mirror's objects are the clone's, no fetch ever needed
        gitmirror.git(["clone", "--quiet", "--shared", "--no-checkout", str(settings.mirror_dir), str(src)])
    gitmirror.git(["checkout", "--quiet", "--force", "--detach", sha], cwd=src)
    gitmirror.git(["clean", "-fdxq"], cwd=src)
    with tempfile.TemporaryDirectory(prefix="perffarm-probe-") as tmp:
        state_dir, result = Path(tmp) / "state", Path(tmp) / "result.json"
        common = [
            "--recipe",
            recipe,
            "--src",
            str(src),
            "--work",
            str(work),
            "--state",
            str(state_dir),
            "--sha",
            sha,
            "--ref",
            ref,
            "--result",
            str(result),
            *[f"--option={o}" for o in options],
        ]
        for phase in ("build", "bench"):
            proc = subprocess.run(
                [sys.executable, "-m", "recipes", phase, *common], cwd=REPO_ROOT, capture_output=True, text=True
            )
            if proc.returncode == 3:
                break  # build-failed / bench-failed: a result; the commit is skipped, never blamed
            if proc.returncode != 0:
                raise RuntimeError(f"the recipe runner crashed in {phase} of {sha[:12]}:\n{proc.stderr[-2000:]}")
        run = store.RunContext(
            builder=builder,
            worker=LOCAL_WORKER,
            source=source,
            got_revision=sha,
            revision=sha,
            bisection_id=bisection_id,
            reference=ingest.requested_reference(list(options)),
        )
        settings.incoming_dir.mkdir(parents=True, exist_ok=True)
        incoming = Path(tempfile.mkstemp(prefix=f"{source}-{sha[:12]}-", suffix=".json", dir=settings.incoming_dir)[1])
        result.replace(incoming)
        return ingest.ingest_file(settings, incoming, run, recipe).message


def run(
    settings: Settings, bisection_id: int, policy: Policy | None = None, say: Callable[[str], None] = print
) -> Decision:
    """Advance the bisection until it ends, measuring each requested probe locally (default policy: the
    settings' ``[detection]`` section, as on the master)."""
    policy = policy or Policy.configured(settings.detection)
    while True:
        conn = store.connect(settings.results_db)
        try:
            decision = state.advance(conn, bisection_id, policy)
            b = state.get(conn, bisection_id)
        finally:
            conn.close()
        if not isinstance(decision, Measure):  # never ConfirmPair: no job builder is given here
            conn = store.connect(settings.results_db)
            try:
                state.report_to_alert(conn, bisection_id, settings.alerts)
            finally:
                conn.close()
            return decision
        i = b.commits.index(decision.commit)
        say(f"probe {decision.commit[:12]} (commit {i} of {len(b.commits) - 1}): {decision.reason}")
        say("  " + measure(settings, b, decision.commit))
