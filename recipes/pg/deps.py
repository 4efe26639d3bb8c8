"""Build-dependency check for PostgreSQL: name the missing Debian packages before a 5-minute build fails."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from recipes.api import BuildFailed


@dataclass(frozen=True)
class Requirement:
    """One thing the build needs, how to detect it, and the Debian package that provides it."""

    what: str
    package: str
    program: str = ""  # found on PATH
    header: str = ""  # found under /usr/include (or a multiarch dir)

    def present(self, include_dirs: tuple[Path, ...]) -> bool:
        if self.program:
            return shutil.which(self.program) is not None
        return any((d / self.header).exists() for d in include_dirs)


COMMON = (
    Requirement("C compiler", "gcc", program="gcc"),
    Requirement("perl", "perl", program="perl"),
    Requirement("pkg-config", "pkg-config", program="pkg-config"),
    Requirement("readline headers", "libreadline-dev", header="readline/readline.h"),
    Requirement("zlib headers", "zlib1g-dev", header="zlib.h"),
    Requirement("ccache", "ccache", program="ccache"),
)
# A git checkout has no generated parser/scanner; a release tarball does (then bison/flex are optional).
PARSER = (
    Requirement("bison", "bison", program="bison"),
    Requirement("flex", "flex", program="flex"),
)
MESON = (
    Requirement("meson", "meson", program="meson"),
    Requirement("ninja", "ninja-build", program="ninja"),
)
AUTOCONF = (Requirement("make", "make", program="make"),)
# valgrind counts instructions; strace counts the same workloads' system calls (recipes/pg/counters.py)
BENCH = (Requirement("valgrind", "valgrind", program="valgrind"), Requirement("strace", "strace", program="strace"))


def _include_dirs() -> tuple[Path, ...]:
    base = Path("/usr/include")
    return (base, *sorted(base.glob("*-linux-gnu*")), Path("/usr/local/include"))


def needs_parser_tools(src: Path) -> bool:
    """True when the tree lacks pre-generated gram.c (a git checkout rather than a release tarball)."""
    return not (src / "src/backend/parser/gram.c").exists()


def missing(requirements: tuple[Requirement, ...]) -> list[Requirement]:
    dirs = _include_dirs()
    return [r for r in requirements if not r.present(dirs)]


def check_build(src: Path, use_meson: bool) -> None:
    """Raise BuildFailed naming every missing Debian package (one apt-get line to fix them all)."""
    reqs = COMMON + (MESON if use_meson else AUTOCONF)
    if needs_parser_tools(src):
        reqs += PARSER
    gone = missing(reqs)
    if gone:
        raise BuildFailed(
            "missing build dependencies: "
            + ", ".join(f"{r.what} ({r.package})" for r in gone)
            + "\nInstall them with: apt-get install "
            + " ".join(sorted({r.package for r in gone}))
        )


def check_bench(need_valgrind: bool) -> None:
    """Raise BuildFailed before the build when a workload needs valgrind (or strace) and it is not installed."""
    gone = missing(BENCH) if need_valgrind else []
    if gone:
        names = " and ".join(r.program for r in gone)
        raise BuildFailed(
            f"the instruction-count workloads need {names}: apt-get install {' '.join(r.package for r in gone)}"
        )
