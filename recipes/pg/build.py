"""Build any PostgreSQL commit fast: persistent build dir per branch, ccache, and a small cache of installs by sha.

Why this shape: consecutive commits on one branch differ in a few files, so a build directory kept per
(worker, branch) with dependency tracking rebuilds in seconds; ccache makes a fresh build directory cheap; and
bisection or A/B runs come back to the same few commits, so the last few installs are kept, keyed by sha and
build settings, and reused without compiling at all. PostgreSQL is relocatable, so everything is configured
for one fixed prefix (identical command lines keep ccache hits across directories) and installed with
DESTDIR, then moved into its cache slot.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes.api import BuildFailed, CommandFailed, Context
from recipes.pg import deps
from recipes.sandbox import Sandbox, remove_tree
from recipes.sides import untrusted_dir

FIXED_PREFIX = "/opt/perffarm-pg"
INSTALL_MARKER = ".perffarm-install.json"
STATE_FILE = "pg-install.json"
BUILD_STAMP = ".perffarm-build-stamp.json"


@dataclass(frozen=True)
class BuildSpec:
    """Compiler flags and configure options: part of the recipe's data (and of its config hash)."""

    cflags: tuple[str, ...] = ("-O2", "-fno-omit-frame-pointer")
    configure_args: tuple[str, ...] = ("--enable-depend", "--disable-rpath", "--without-icu")
    meson_args: tuple[str, ...] = (
        "--buildtype=plain",
        "-Dcassert=false",
        "-Drpath=false",
        "-Dauto_features=disabled",
        "-Dreadline=enabled",
        "-Dzlib=enabled",
    )
    keep_installs: int = 6

    @staticmethod
    def from_config(cfg: Mapping[str, Any]) -> BuildSpec:
        return BuildSpec(
            cflags=tuple(cfg.get("cflags", BuildSpec.cflags)),
            configure_args=tuple(cfg.get("configure_args", BuildSpec.configure_args)),
            meson_args=tuple(cfg.get("meson_args", BuildSpec.meson_args)),
            keep_installs=int(cfg.get("keep_installs", BuildSpec.keep_installs)),
        )

    def key(self) -> str:
        """Hash of everything that changes the binaries: an install is reused only under the same key."""
        blob = json.dumps([self.cflags, self.configure_args, self.meson_args], separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Install:
    """A usable PostgreSQL installation: where it is, its major version, and how it was obtained."""

    prefix: Path
    sha: str
    major: int
    version: str
    how: str  # "built" or "reused"
    # its programs run only inside the job's sandbox (recipes/sandbox.py): a try-job's sides, patched or not
    jailed: bool = False

    @property
    def bindir(self) -> Path:
        return self.prefix / "bin"

    def env(self) -> dict[str, str]:
        """Environment for running this install's binaries (its own libpq, not the system's)."""
        lib = str(self.prefix / "lib")
        old = os.environ.get("LD_LIBRARY_PATH")
        return {"LD_LIBRARY_PATH": f"{lib}:{old}" if old else lib}

    def to_json(self) -> dict[str, Any]:
        return {
            "prefix": str(self.prefix),
            "sha": self.sha,
            "major": self.major,
            "version": self.version,
            "how": self.how,
            "jailed": self.jailed,
        }

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> Install:
        return Install(
            Path(doc["prefix"]), doc["sha"], int(doc["major"]), doc["version"], doc["how"], bool(doc.get("jailed"))
        )


def safe_name(text: str, limit: int = 60) -> str:
    """A ref name made safe as one path component (refs are untrusted input)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", text).strip("._") or "ref"
    return cleaned[:limit] + "-" + hashlib.sha256(text.encode()).hexdigest()[:8]


def ccache_dir(options: Mapping[str, str]) -> Path:
    """Persistent ccache directory shared by every builder on this worker (so CI reruns start warm)."""
    explicit = options.get("ccache_dir") or os.environ.get("PF_CCACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perffarm" / "ccache"


def install_cache(ctx: Context) -> Path:
    """Installs by sha: per builder by default; PF_PG_INSTALL_CACHE shares one between builders."""
    return Path(ctx.options.get("install_cache") or os.environ.get("PF_PG_INSTALL_CACHE") or ctx.work_dir / "installs")


_SHA = re.compile(r"^[0-9a-f]{40}$")


def install_slot(ctx: Context, spec: BuildSpec, key: str) -> Path:
    """The cache directory of the install of `key` (a commit's sha, or a sha plus a patch's id: `<sha>-p<id>`).

    Every slot's path has the same length: a key that is not a plain sha is named by a 40-hex digest of it. The
    backend keeps strings made from its install's path (its own, its libraries', its share directory), so the
    path's length shifts where later allocations land, and glibc's vectorised memcmp and strncmp count different
    instructions for differently aligned buffers: an install under `<sha>-p<id>` counted 0.87% fewer instructions
    in the operation suite's full-text match than the same binary under a path as long as a sha's
    (docs/recipes-postgres.md, the operation suite). A and B of one comparison must differ in their code only."""
    name = key if _SHA.match(key) else hashlib.sha256(key.encode()).hexdigest()[:40]
    return install_cache(ctx) / f"{name}-{spec.key()}"


def postgres_version(ctx: Context, prefix: Path, sandbox: Sandbox | None = None) -> tuple[int, str]:
    """(major, full version) from `postgres --version`, e.g. (15, '15.18') or (18, '18devel')."""
    env = Install(prefix, "", 0, "", "").env()
    box = sandbox.seeing(ro=[prefix]) if sandbox is not None else None
    out = ctx.run([prefix / "bin/postgres", "--version"], env=env, capture=True, timeout=30, sandbox=box).stdout
    m = re.search(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?(\S*)", out)
    if not m:
        raise BuildFailed(f"cannot parse the version from `postgres --version`: {out.strip()!r}")
    major = int(m.group(1))
    if major < 10 and m.group(2):  # 9.6 -> 96: old majors have two parts
        major = major * 10 + int(m.group(2))
    return major, out.split(")")[-1].strip()


def _prune(cache: Path, keep: int, current: Path) -> None:
    slots = [p for p in cache.iterdir() if (p / INSTALL_MARKER).exists() and p != current]
    slots.sort(key=lambda p: (p / INSTALL_MARKER).stat().st_mtime, reverse=True)
    for old in slots[max(keep - 1, 0) :]:
        shutil.rmtree(old, ignore_errors=True)
    for tmp in cache.glob("*.tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)


def _env(ctx: Context, src: Path, build_dir: Path) -> dict[str, str]:
    cdir = ccache_dir(ctx.options)
    cdir.mkdir(parents=True, exist_ok=True)
    base = os.path.commonpath([str(src), str(build_dir)])
    env = {
        "CCACHE_DIR": str(cdir),
        "CCACHE_BASEDIR": base if base != "/" else str(build_dir.parent),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_MAXSIZE": ctx.options.get("ccache_size", "5G"),
        "LC_ALL": "C",
    }
    return env


def _stamp(build_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((build_dir / BUILD_STAMP).read_text())
    except (OSError, ValueError):
        return None


def _configure_hash(src: Path, use_meson: bool) -> str:
    name = "meson.build" if use_meson else "configure"
    return hashlib.sha256((src / name).read_bytes()).hexdigest()[:16]


def _meson_flags(cflags: tuple[str, ...]) -> list[str]:
    """The same CFLAGS for meson: -O<n> becomes -Doptimization, the rest goes to -Dc_args."""
    opt = [f[2:] for f in cflags if f.startswith("-O")]
    rest = [f for f in cflags if not f.startswith("-O")]
    return ([f"-Doptimization={opt[-1]}"] if opt else []) + ([f"-Dc_args={' '.join(rest)}"] if rest else [])


def _compile(
    ctx: Context,
    spec: BuildSpec,
    src: Path,
    build_dir: Path,
    dest: Path,
    use_meson: bool,
    sandbox: Sandbox | None = None,
) -> None:
    """Configure (only when needed), compile and install into DESTDIR `dest`. With `sandbox` (a patched side:
    `build_untrusted`), every command runs inside it, in a fresh build directory, reading ccache but never writing
    it: a patch's build cannot plant an object file that a later commit's build would take from the cache."""
    env = _env(ctx, src, build_dir)
    if sandbox is not None:
        env.update(CCACHE_READONLY="1", CCACHE_TEMPDIR="/tmp/ccache-tmp", CCACHE_NOSTATS="1")
    jobs = str(int(ctx.options.get("jobs", os.cpu_count() or 2)))
    wanted = {"src": str(src), "system": "meson" if use_meson else "autoconf", "spec": spec.key()}
    stamp = _stamp(build_dir) if sandbox is None else None
    if stamp is not None and {k: stamp.get(k) for k in wanted} != wanted:
        ctx.log(f"build directory {build_dir} was configured differently; starting it afresh")
        shutil.rmtree(build_dir)
        stamp = None
    if sandbox is None:  # a sandbox's build directory is a mount inside it (build_untrusted)
        build_dir.mkdir(parents=True, exist_ok=True)
    chash = _configure_hash(src, use_meson) if sandbox is None else ""
    t0 = time.monotonic()
    if use_meson:
        if stamp is None:
            ctx.run(
                [
                    "meson",
                    "setup",
                    build_dir,
                    src,
                    f"--prefix={FIXED_PREFIX}",
                    *spec.meson_args,
                    *_meson_flags(spec.cflags),
                ],
                env=env,
                timeout=1800,
                sandbox=sandbox,
            )
        t1 = time.monotonic()
        ctx.run(["ninja", "-C", build_dir, "-j", jobs], env=env, timeout=4 * 3600, sandbox=sandbox)
        t2 = time.monotonic()
        ctx.run(
            ["meson", "install", "-C", build_dir, "--quiet", "--no-rebuild", "--destdir", dest],
            env=env,
            timeout=1800,
            sandbox=sandbox,
        )
    else:
        if stamp is None or stamp.get("configure") != chash:
            ctx.run(
                [
                    src / "configure",
                    f"--prefix={FIXED_PREFIX}",
                    *spec.configure_args,
                    "CC=ccache gcc",
                    "CFLAGS=" + " ".join(spec.cflags),
                ],
                cwd=build_dir,
                env=env,
                timeout=1800,
                sandbox=sandbox,
            )
        t1 = time.monotonic()
        ctx.run(["make", "-s", "-j", jobs], cwd=build_dir, env=env, timeout=4 * 3600, sandbox=sandbox)
        t2 = time.monotonic()
        ctx.run(["make", "-s", "install", f"DESTDIR={dest}"], cwd=build_dir, env=env, timeout=1800, sandbox=sandbox)
    t3 = time.monotonic()
    if sandbox is None:
        (build_dir / BUILD_STAMP).write_text(json.dumps({**wanted, "configure": chash}))
    ctx.log(f"configure {t1 - t0:.1f} s, compile {t2 - t1:.1f} s, install {t3 - t2:.1f} s")
    if sandbox is not None:
        return  # a read-only ccache keeps no statistics of this build: the totals would mislead
    proc = ctx.run(["ccache", "--print-stats"], env=env, capture=True, check=False, timeout=30)
    stats = dict(line.split("\t", 1) for line in proc.stdout.splitlines() if "\t" in line)
    if stats:
        ctx.log(
            "ccache: "
            + ", ".join(
                f"{k}={stats.get(k, '?')}" for k in ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss")
            )
        )


def cached_install(ctx: Context, spec: BuildSpec, sha: str) -> Install | None:
    """The cached install of `sha` built with `spec`, marked as just used (so pruning keeps it), or None."""
    slot = install_slot(ctx, spec, sha)
    if not (slot / INSTALL_MARKER).exists():
        return None
    os.utime(slot / INSTALL_MARKER)
    major, version = postgres_version(ctx, slot)
    return Install(slot, sha, major, version, "reused")


def build_install(
    ctx: Context,
    spec: BuildSpec,
    src: Path | None = None,
    sha: str | None = None,
    ref: str | None = None,
    work: Path | None = None,
) -> Install:
    """Return an install of `src` at `sha`: reused from the cache, or built incrementally and cached. The build
    directory is `<work>/build/<ref>` (default: the context's work directory): with `src` and `work` laid out as a
    commit build's (recipes.api.checkout_layout), the compile command lines are a commit build's and hit ccache."""
    src = (src or ctx.src_dir).resolve()
    sha = sha or ctx.sha
    ref = ref or ctx.ref
    cached = cached_install(ctx, spec, sha)
    if cached is not None:
        ctx.log(f"reusing the cached install of {sha[:12]} in {cached.prefix}")
        return cached
    cache = install_cache(ctx)
    cache.mkdir(parents=True, exist_ok=True)
    slot = install_slot(ctx, spec, sha)
    use_meson = (src / "meson.build").exists()
    if not use_meson and not (src / "configure").exists():
        raise BuildFailed(f"{src} has neither meson.build nor configure: is this a PostgreSQL tree?")
    deps.check_build(src, use_meson)
    build_dir = (work or ctx.work_dir) / "build" / safe_name(ref)
    dest = cache / f"{slot.name}.tmp-{os.getpid()}"
    shutil.rmtree(dest, ignore_errors=True)
    reused_dir = _stamp(build_dir) is not None
    try:
        _compile(ctx, spec, src, build_dir, dest, use_meson)
    except CommandFailed as e:
        if not reused_dir or ctx.options.get("retry_fresh", "1") == "0":
            raise BuildFailed(e.message, e.log_excerpt) from None
        # A stale build directory can break a build that works from scratch; a commit is only blamed for a
        # failure it also has in a fresh directory.
        ctx.log(f"incremental build failed ({e.message}); retrying once in a fresh build directory")
        shutil.rmtree(build_dir, ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
        try:
            _compile(ctx, spec, src, build_dir, dest, use_meson)
        except CommandFailed as e2:
            raise BuildFailed(e2.message, e2.log_excerpt) from None
    installed = dest / FIXED_PREFIX.lstrip("/")
    if not (installed / "bin/postgres").exists() or not (installed / "bin/pgbench").exists():
        raise BuildFailed(f"the install has no bin/postgres or bin/pgbench under {installed}")
    shutil.rmtree(slot, ignore_errors=True)
    os.replace(installed, slot)
    shutil.rmtree(dest, ignore_errors=True)
    major, version = postgres_version(ctx, slot)
    (slot / INSTALL_MARKER).write_text(json.dumps({"sha": sha, "spec": spec.key(), "version": version}))
    _prune(cache, spec.keep_installs, slot)
    ctx.log(f"installed PostgreSQL {version} ({sha[:12]}) into {slot}")
    return Install(slot, sha, major, version, "built")


def _real_dir(path: Path) -> bool:
    """A directory that is no symlink (what a sandboxed build left is checked before the farm moves or binds it:
    bwrap resolves a bind's source, so a planted link would show the sandbox a host directory)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def build_untrusted(ctx: Context, spec: BuildSpec, src: Path, sha: str, label: str) -> Install:
    """A patched side's install, built inside the job's sandbox (ctx.sandbox) from its own tree, in a fresh build
    directory, into its own directory under the job's untrusted area: never cached, never seen by another build.

    The sandbox sees the tree, the build and install directories (writable) and ccache (read-only). Inside it, the
    tree and the build directory are mounted where a commit build of this builder has them (the clone and a
    directory under work/build): the compiler sees the same command lines, so every file the patch leaves alone is
    a ccache hit on the commit builds of the base (a fresh build of 15.18 here: 5.4 min cold)."""
    if ctx.sandbox is None:
        raise BuildFailed("a patched side is built only inside the job's sandbox, and this job has none")
    root = untrusted_dir(ctx, label)
    build_dir, dest, prefix = root / "build", root / "dest", root / "install"
    for d in (build_dir, dest, prefix):
        remove_tree(d)
    for d in (build_dir, dest):
        d.mkdir(parents=True)
    use_meson = os.path.lexists(src / "meson.build")
    if not use_meson and not os.path.lexists(src / "configure"):
        raise BuildFailed(f"side {label}: the patched tree has neither meson.build nor configure")
    deps.check_build(src, use_meson)
    cache = ccache_dir(ctx.options)
    cache.mkdir(parents=True, exist_ok=True)
    src_inside = ctx.src_dir
    build_inside = ctx.work_dir / "build" / safe_name(f"try-{label}")
    box = ctx.sandbox.seeing(ro=[cache], rw=[dest]).mounting(src, src_inside).mounting(build_dir, build_inside)
    ctx.log(f"side {label}: building the patched tree inside the sandbox (ccache read-only, nothing cached)")
    try:
        _compile(ctx, spec, src_inside, build_inside, dest, use_meson, sandbox=box)
    except CommandFailed as e:
        raise BuildFailed(e.message, e.log_excerpt) from None
    installed = dest
    for part in Path(FIXED_PREFIX.lstrip("/")).parts:
        installed = installed / part
        if not _real_dir(installed):
            raise BuildFailed(f"side {label}: the patched build installed nothing usable under {installed}")
    os.replace(installed, prefix)
    programs = [prefix / "bin" / "postgres", prefix / "bin" / "pgbench"]
    if not all(os.path.lexists(f) and stat.S_ISREG(os.lstat(f).st_mode) for f in programs):
        raise BuildFailed(f"side {label}: the patched install has no bin/postgres or bin/pgbench")
    major, version = postgres_version(ctx, prefix, ctx.sandbox)
    ctx.log(f"side {label}: PostgreSQL {version} ({sha[:12]} + patch) installed into {prefix}")
    return Install(prefix, sha, major, version, "built", jailed=True)


def save_install(ctx: Context, install: Install, name: str = STATE_FILE) -> None:
    (ctx.state_dir / name).write_text(json.dumps(install.to_json(), sort_keys=True))


def load_install(ctx: Context, name: str = STATE_FILE) -> Install:
    path = ctx.state_dir / name
    try:
        inst = Install.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError) as e:
        raise BuildFailed(f"no PostgreSQL install recorded in {path} ({e}); run the build phase first") from None
    if not (inst.bindir / "postgres").exists():
        raise BuildFailed(f"the install {inst.prefix} has disappeared (pruned from the cache?); rebuild")
    return inst
