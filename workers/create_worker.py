"""Create and register a perffarm worker: `buildbot-worker create-worker` here, the password secret for the master.

    python3 workers/create_worker.py NAME --master HOST:PORT --basedir DIR [--secrets-dir DIR] [--keepalive S] [--check]

Why one helper: a worker only works when three things agree (its name in the master's `workers.names`, the
password given to create-worker, and the master's secret file `worker-NAME`), and a benchmark worker should be
checked for noise before anyone trusts its numbers. This writes the secret (mode 0600, never printed) when the
master's secrets directory is reachable from here, or prints where to copy it; it prints the host checks and
machine fingerprint the results will carry; and it says which settings to add. Standard library only, so it
runs on a fresh worker host before anything else is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workers import hostinfo  # noqa: E402

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
DEFAULT_SECRETS = Path("var") / "secrets"
# Seconds between the worker's keepalives to the master (buildbot-worker's default is 600). After a host lost its
# link, the master drops the connection (workers.lost_after) but the worker only learns it when it next sends
# something: with nothing in flight, that is its next keepalive. 30 s brings it back soon after the link is.
KEEPALIVE = 30


def write_secret(secrets_dir: Path, name: str, password: str | None = None) -> tuple[Path, str]:
    """Create (or reuse) the master's secret file worker-NAME; returns its path and the password."""
    secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = secrets_dir / f"worker-{name}"
    if path.exists():
        return path, path.read_text().strip()
    password = password or secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password)
    return path, password


def create_worker(
    basedir: Path, master: str, name: str, password: str, buildbot_worker: str, keepalive: int = KEEPALIVE
) -> None:
    """Run `buildbot-worker create-worker` (argv list; the password never goes through a shell)."""
    subprocess.run(
        [
            buildbot_worker,
            "create-worker",
            "--quiet",
            "--force",
            "--umask=0o22",
            f"--keepalive={keepalive}",
            str(basedir),
            master,
            name,
            password,
        ],
        check=True,
    )
    info = basedir / "info"
    info.mkdir(exist_ok=True)
    fp = hostinfo.fingerprint()
    (info / "host").write_text(
        f"perffarm machine {hostinfo.machine_id(fp)}: {fp['cpu_model']}, "
        f"{fp['cores']} cores, {fp['os']}, kernel {fp['kernel']}\n"
    )


def _find_buildbot_worker() -> str | None:
    here = Path(sys.executable).parent / "buildbot-worker"
    return str(here) if here.exists() else shutil.which("buildbot-worker")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="create_worker.py", description=__doc__.splitlines()[0])
    p.add_argument("name", help="worker name (must also be listed in the master's workers.names)")
    p.add_argument("--master", required=True, help="HOST:PORT of the master's worker port (master.worker_port)")
    p.add_argument("--basedir", required=True, type=Path, help="directory for the new worker")
    p.add_argument(
        "--secrets-dir",
        type=Path,
        default=None,
        help="the master's secrets directory (<data_dir>/secrets) when it is on this machine; "
        "otherwise the secret is written next to the worker for you to copy",
    )
    p.add_argument(
        "--keepalive",
        type=int,
        default=KEEPALIVE,
        help=f"seconds between the worker's keepalives (default {KEEPALIVE}): how soon it reconnects after its host's "
        "link comes back",
    )
    p.add_argument("--check", action="store_true", help="only print the host checks and fingerprint")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    fp = hostinfo.fingerprint()
    checks = hostinfo.host_checks()
    print(
        json.dumps(
            {"machine_id": hostinfo.machine_id(fp), "fingerprint": fp, "host_checks": checks}, indent=1, sort_keys=True
        )
    )
    if checks.get("noisy"):
        print("\nwarning: this host looks noisy for wall-clock benchmarks; every result will say so:", file=sys.stderr)
        for reason in checks.get("noisy_reasons", []):
            print(f"  - {reason}", file=sys.stderr)
        print(
            "Instruction-count workloads (pg-quick) stay trustworthy here; prefer them for detection.", file=sys.stderr
        )
    if args.check:
        return 0
    if not NAME_RE.match(args.name):
        print(f"error: worker name {args.name!r} must match {NAME_RE.pattern}", file=sys.stderr)
        return 2
    if not re.match(r"^[^:\s]+:\d+$", args.master):
        print(f"error: --master {args.master!r}: expected HOST:PORT", file=sys.stderr)
        return 2
    bw = _find_buildbot_worker()
    if bw is None:
        print("error: buildbot-worker is not installed (pip install buildbot-worker==4.3.*)", file=sys.stderr)
        return 2
    local_secret = args.secrets_dir is None
    secrets_dir = args.secrets_dir or (args.basedir.parent / f"{args.basedir.name}-master-secret")
    path, password = write_secret(secrets_dir, args.name)
    if args.keepalive < 1:
        print(f"error: --keepalive {args.keepalive}: expected a number of seconds >= 1", file=sys.stderr)
        return 2
    create_worker(args.basedir.resolve(), args.master, args.name, password, bw, args.keepalive)
    print(f"\nworker {args.name!r} created in {args.basedir}")
    if local_secret:
        print(
            f"Copy {path} (mode 0600) into the master's secrets directory (<data_dir>/secrets/) as worker-{args.name}."
        )
    else:
        print(f"The master's secret is in {path}.")
    print(
        f'On the master: add {args.name!r} to workers.names (and `workers.hosts = ["{args.name}=HOST"]` '
        "when it shares a physical host with another worker), then restart or reconfig the master."
    )
    print(f"Start the worker with: buildbot-worker start {args.basedir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
