"""Time and peak memory of the master ingesting the largest result the schema allows (1,000,000 samples).

Usage: .venv/bin/python -m tests.benchmarks.ingest_largest [--samples 1000000] [--compact] [--repeat 3]
Writes a result with `--samples` samples (100,000 per metric, as the runner writes them: indented, sorted keys,
realistic doubles; `--compact`: the integer 1, no spaces, the most samples per byte) into a fresh data directory
and ingests it with master.ingest.ingest_file (real git mirror, real SQLite) in a child process, which reports
the wall time of ingest_file and its peak RSS (VmHWM) next to the peak before it. A result beyond the limit
is rejected; the figures then say how long the rejection took and what it cost.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from recipes.result import MAX_SAMPLES
from tests.harness import make_repo
from tests.unit.test_result_schema import good

ROOT = Path(__file__).resolve().parents[2]

# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork and exec, so it would report this (large) parent.
CHILD = r"""
import json, re, sys, time
from pathlib import Path
from master import ingest, store
from master.settings import load_settings
def hwm_kb():
    return int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))
data, repo, sha = sys.argv[1:4]
settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": data, "PERFFARM_REPOSITORY_URL": repo})
before = hwm_kb()
ctx = store.RunContext(builder="fixture@local", worker="local", source="poll", build_id=1, got_revision=sha)
t0 = time.perf_counter()
try:
    out = ingest.ingest_file(settings, settings.incoming_dir / "b-1.json", ctx, "fixture")
    what = f"stored {out.samples} samples"
except ingest.IngestRejected as e:
    what = f"rejected: {str(e)[:120]}"
seconds = time.perf_counter() - t0
peak = hwm_kb()
print(json.dumps({"seconds": seconds, "before_kb": before, "peak_kb": peak, "what": what}))
"""


def write_result(path: Path, sha: str, samples: int, compact: bool) -> int:
    """A result of `samples` samples in metrics of at most MAX_SAMPLES each; returns the file's size in bytes."""
    rng = random.Random(1)
    doc = good()
    doc["commit"] = {"sha": sha, "ref": "master"}
    metrics, left, j = [], samples, 0
    while left > 0:
        n = min(left, MAX_SAMPLES)
        values = [1] * n if compact else [round(6000 * (1 + rng.gauss(0, 0.01)), 6) for _ in range(n)]
        metrics.append({"name": f"m{j}", "unit": "ops/s", "direction": "higher", "samples": values})
        left, j = left - n, j + 1
    doc["workloads"] = [{"name": f"w{k}", "metrics": metrics[k : k + 10]} for k in range(0, len(metrics), 10)]
    text = json.dumps(doc, separators=(",", ":")) if compact else json.dumps(doc, sort_keys=True, indent=1)
    path.write_text(text + "\n")
    return path.stat().st_size


def measure(samples: int, compact: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = make_repo(base / "repo")
        incoming = base / "data" / "incoming"
        incoming.mkdir(parents=True)
        size = write_result(incoming / "b-1.json", repo.head(), samples, compact)
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(base / "data"), str(repo.path), repo.head()],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return {"bytes": size, **json.loads(proc.stdout.strip().splitlines()[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--compact", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = [measure(args.samples, args.compact) for _ in range(args.repeat)]
    for r in runs:
        print(
            f"  {r['seconds']:.2f} s, peak RSS {r['peak_kb'] / 1024:.0f} MiB "
            f"(before ingest {r['before_kb'] / 1024:.0f} MiB): {r['what']}"
        )
    print(
        f"{args.samples} samples, {runs[0]['bytes'] / 1e6:.1f} MB of JSON: ingest_file median "
        f"{statistics.median(r['seconds'] for r in runs):.2f} s over {len(runs)} runs, peak RSS "
        f"{max(r['peak_kb'] for r in runs) / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    main()
