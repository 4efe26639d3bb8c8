"""Release archaeology through the farm on real PostgreSQL releases (issue #15).

    .venv/bin/python -m tests.benchmarks.releases_farm --repo /tmp/pgrel [--tags 'REL_1*']
        [--recipe pg-sweeps --recipe pg-quick] [--samples 3] [--workloads a,b,...] [--shots DIR] [--keep DIR]
        [--json out.json]

R is the repository scripts/pg-releases-repo.sh makes (one commit per Debian source release, tagged as postgres.git
tags them: REL_13_16, REL_15_18, REL_18_6). The script starts a real master and local worker (tests/harness.py) on
a clone of R and queues `perffarm releases --tags PATTERN --recipe RECIPE`, one job per recipe, as a user would.
The worker builds every release and measures them interleaved in one build per job (docs/jobs.md). Then it prints
each release's ratio to the oldest per workload with its 95% CI (`perffarm jobs --status`), checks that the site's
archaeology page now links each job, and with `--shots` saves Chromium screenshots of archaeology/<machine>.html,
releases.html and releases/<machine>/index.html (Debian's chromium through playwright, as
tests/integration/test_site_browser.py does).

Cost: pg-sweeps is about 2.7 min per release per sample on 2 cores, plus a build per release (ccache helps).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.harness import BIN, Farm, wait_until  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def say(t0: float, message: str) -> None:
    print(f"[{time.monotonic() - t0:7.0f} s] {message}", flush=True)


def perffarm(farm: Farm, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "perffarm"), *args], env=farm.env, capture_output=True, text=True, timeout=300)


def screenshots(site: Path, out: Path) -> list[Path]:
    """Full-page PNGs of each machine's archaeology page and the release tables, opened from disk in headless
    Chromium."""
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    saved = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            # archaeology.html and releases.html list the machines; charts and tables are on each machine's pages
            machines = sorted(p.stem for p in (site / "archaeology").glob("*.html"))
            tables = sorted(f"releases/{d.name}/index" for d in (site / "releases").glob("*/"))
            for name in (*(f"archaeology/{m}" for m in machines), "releases", *tables):
                page.goto((site / f"{name}.html").resolve().as_uri(), wait_until="load")
                path = out / f"{name.replace('/', '-')}.png"
                page.screenshot(path=str(path), full_page=True)
                saved.append(path)
            if errors:
                raise RuntimeError(f"script errors on the site: {errors}")
        finally:
            browser.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", type=Path, required=True, help="a repository made by scripts/pg-releases-repo.sh")
    p.add_argument("--tags", default="REL_1*", help="tag pattern for `perffarm releases` (default 'REL_1*')")
    p.add_argument(
        "--recipe", action="append", help="a recipe to measure the releases with, one job each (default pg-sweeps)"
    )
    p.add_argument("--samples", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--workloads", help="only these workloads (comma-separated; default the recipe's profile)")
    p.add_argument("--shots", type=Path, help="save the archaeology and release pages (PNG) here")
    p.add_argument("--keep", type=Path, help="work directory to keep (default: a temporary one, removed)")
    p.add_argument("--timeout", type=float, default=4 * 3600, help="seconds to wait for the job (default 4 h)")
    p.add_argument("--json", type=Path, help="also write the job's figures as JSON")
    args = p.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="releases-farm-"))
    work.mkdir(parents=True, exist_ok=True)
    repo, data = work / "repo", work / "data"
    for d in (repo, data):
        if d.exists():
            shutil.rmtree(d)
    subprocess.run(["git", "clone", "--quiet", "--mirror", "--", str(args.repo), str(repo)], check=True)
    recipes = args.recipe or ["pg-sweeps"]
    farm = Farm(data, str(repo), recipes=tuple(recipes), reconcile_interval=5)
    t0 = time.monotonic()
    figures: dict[str, object] = {"tags": args.tags, "samples": args.samples, "jobs": {}}
    farm.start()
    try:
        say(t0, "farm up")
        options = ["--option", f"samples={args.samples}"]
        if args.workloads:
            options += ["--option", f"workloads={args.workloads}"]
        jobs: dict[int, str] = {}
        for recipe in recipes:
            queued = perffarm(farm, "releases", "--tags", args.tags, "--recipe", recipe, *options)
            if queued.returncode != 0:
                print(queued.stderr, file=sys.stderr)
                return 1
            say(t0, queued.stdout.strip())
            jobs[int(queued.stdout.split("job ", 1)[1].split()[0])] = recipe
        states: dict[int, str] = {}

        def ended() -> bool:
            for job_id in jobs:
                state = farm.query("SELECT state FROM jobs WHERE id = ?", (job_id,))[0][0]
                if states.get(job_id) != state:
                    say(t0, f"job {job_id} ({jobs[job_id]}): {state}")
                    states[job_id] = state
            return all(s in ("done", "failed") for s in states.values())

        wait_until(ended, args.timeout, "the jobs to end", interval=10)
        figures["seconds"] = round(time.monotonic() - t0)
        site = farm.settings.site_dir
        for job_id, recipe in jobs.items():
            state, error, queued_at, finished = farm.query(
                "SELECT state, error, created_at, finished_at FROM jobs WHERE id = ?", (job_id,)
            )[0]
            shown = perffarm(farm, "jobs", "--status", str(job_id))
            print(shown.stdout or shown.stderr)
            as_json = perffarm(farm, "jobs", "--status", str(job_id), "--format", "json")
            figures["jobs"][str(job_id)] = {  # type: ignore[index]
                "recipe": recipe,
                "state": state,
                "error": error,
                "queued_to_done_s": round(finished - queued_at) if finished and queued_at else None,
                "status": json.loads(as_json.stdout) if as_json.returncode == 0 else as_json.stderr,
            }
            if state == "done":
                wait_until(
                    lambda j=job_id: (a := site / "archaeology.html").exists() and f"jobs/{j}.html" in a.read_text(),
                    120,
                    f"the archaeology page to link job {job_id}",
                )
        if args.shots:
            figures["screenshots"] = [str(s) for s in screenshots(site, args.shots)]
            say(t0, f"screenshots: {figures['screenshots']}")
    finally:
        farm.stop()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    failed = [j for j, f in figures["jobs"].items() if f["state"] != "done"]  # type: ignore[attr-defined]
    say(t0, f"{len(jobs) - len(failed)} of {len(jobs)} jobs done in {figures['seconds']} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
