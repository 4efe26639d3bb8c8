"""Pack recipes/ and workers/hostinfo.py into the zipapp the master ships to workers with every build.

Workers install nothing but buildbot-worker, python3 and compilers: the recipes travel with the build. The
archive is deterministic (sorted entries, fixed timestamps) and named by its content hash, so a worker's log
says exactly which recipe code ran.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

from master.atomicfile import write_atomic
from master.settings import REPO_ROOT
from recipes.api import SOURCE_DIR, WORK_DIR

ON_WORKER = "perffarm-recipes.pyz"  # the name every build downloads the zipapp to, in its builder directory
_MAIN = b"import sys\nfrom recipes.runner import main\nsys.exit(main())\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _members(root: Path) -> list[tuple[str, bytes]]:
    files: list[tuple[str, bytes]] = [("__main__.py", _MAIN)]
    for path in sorted((root / "recipes").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith((".pyc", ".tmp")):
            files.append((path.relative_to(root).as_posix(), path.read_bytes()))
    for name in ("workers/__init__.py", "workers/hostinfo.py"):
        files.append((name, (root / name).read_bytes()))
    return files


def build_zipapp(out_dir: Path, root: Path = REPO_ROOT) -> Path:
    """Write perffarm-recipes-<hash>.pyz into out_dir (if not there already) and return its path."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in _members(root):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    blob = buf.getvalue()
    digest = hashlib.sha256(blob).hexdigest()[:12]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"perffarm-recipes-{digest}.pyz"
    if not path.exists():  # named by content: a truncated file would be shipped forever, so write it atomically
        write_atomic(path, blob)
    return path


def worker_command(
    phase: str,
    recipe: str,
    sha: str,
    *,
    state: str,
    result: str,
    where: tuple[str, ...] = (),
    options: tuple[str, ...] | list[str] = (),
) -> list[str]:
    """The runner's command line on a worker, for a commit's build (`where`: `--ref`) and a job's (`--job`,
    `--side`s, `--patch`): the shipped zipapp, its phase and recipe, the checkout and work directories, the
    build's own state directory and result file, then the options (a later KEY wins)."""
    return [
        "python3",
        ON_WORKER,
        phase,
        "--recipe",
        recipe,
        "--src",
        SOURCE_DIR,
        "--work",
        WORK_DIR,
        "--state",
        state,
        "--sha",
        sha,
        *where,
        "--result",
        result,
        *[f"--option={o}" for o in options],
    ]
