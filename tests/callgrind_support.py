"""Real callgrind runs for the profile tests: small C programs built with gcc and run under valgrind in a temp dir.

The programs are main -> work() -> leaf() with a loop; ``extra`` adds loop iterations to every call of leaf, so
two builds differ by a known number of instructions per call of work (one "query").
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

requires_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not on PATH (apt-get install valgrind)"
)

QUERIES = 20  # calls of work() per run
CALLS = 10  # calls of leaf() per call of work()

PROGRAM = """\
#include <stdio.h>

#ifndef EXTRA
#define EXTRA 0
#endif

volatile unsigned sink;

__attribute__((noipa)) unsigned leaf(unsigned n)
{
    unsigned s = 0;
    for (unsigned i = 0; i < n + EXTRA; i++)
        s += i ^ sink;
    return s;
}

__attribute__((noipa)) unsigned work(unsigned n)
{
    unsigned s = 0;
    for (unsigned j = 0; j < CALLS; j++)
        s += leaf(n);
    return s;
}

int main(void)
{
    unsigned t = 0;
    for (unsigned q = 0; q < QUERIES; q++)
        t += work(100);
    printf("%u\\n", t);
    return 0;
}
"""

RECURSIVE = """\
#include <stdio.h>

volatile unsigned sink;

__attribute__((noipa)) unsigned leaf(unsigned n)
{
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++)
        s += i ^ sink;
    return s;
}

__attribute__((noipa)) unsigned rec(unsigned depth)
{
    if (depth == 0)
        return leaf(100);
    return leaf(10) + rec(depth - 1);
}

__attribute__((noipa)) unsigned work(void)
{
    return rec(5);
}

int main(void)
{
    unsigned t = 0;
    for (int q = 0; q < 3; q++)
        t += work();
    printf("%u\\n", t);
    return 0;
}
"""

FORKING = """\
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

volatile unsigned sink;

__attribute__((noipa)) unsigned leaf(unsigned n)
{
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++)
        s += i ^ sink;
    return s;
}

__attribute__((noipa)) unsigned work(unsigned n)
{
    return leaf(n) + leaf(n);
}

int main(void)
{
    pid_t child = fork();
    if (child == 0)
        _exit(work(300) == 1);
    unsigned t = work(100);
    waitpid(child, NULL, 0);
    printf("%u\\n", t);
    return 0;
}
"""

_COLLECTED = re.compile(r"^==\d+== Collected : (\d+)\s*$", re.M)
_SUMMARY = re.compile(r"^summary:\s+(\d+)", re.M)
_TOTALS = re.compile(r"^totals:\s+(\d+)", re.M)
# callgrind_annotate's function lines: "3,099 ( 2.40%)  prog.c:work [/tmp/x/prog]" (percent format varies)
_ANNOTATED = re.compile(r"^\s*([\d,]+)\s+\([^)]*%\)\s+(\S.*?)(?:\s+\[[^\]]*\])?\s*$")


@dataclass(frozen=True)
class Run:
    """One program run under callgrind: its output file and the count valgrind printed on stderr."""

    out: Path
    collected: int  # "Collected : N" on valgrind's stderr, measured apart from the output file

    @property
    def summary(self) -> int:
        return int(_match(_SUMMARY, self.out.read_text()))

    @property
    def totals(self) -> int:
        return int(_match(_TOTALS, self.out.read_text()))


def build(workdir: Path, name: str, source: str = PROGRAM, extra: int = 0) -> Path:
    """Compile `source` with gcc -O1 -g into workdir/name (the C file beside it, named name.c); EXTRA, CALLS and
    QUERIES are defined on the command line."""
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / f"{name}.c"
    src.write_text(source)
    binary = workdir / name
    subprocess.run(
        [
            "gcc",
            "-O1",
            "-g",
            f"-DEXTRA={extra}",
            f"-DCALLS={CALLS}",
            f"-DQUERIES={QUERIES}",
            "-o",
            str(binary),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    return binary


def callgrind(binary: Path, out: Path, *options: str) -> Run:
    """Run `binary` under callgrind writing `out` (which may hold %p)."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *options, "--", str(binary)],
        check=True,
        capture_output=True,
        text=True,
        cwd=binary.parent,
    )
    return Run(out, int(_match(_COLLECTED, proc.stderr)))


def annotate(out: Path, inclusive: bool) -> dict[str, set[int]]:
    """What callgrind_annotate prints per function name (a set: it may list one name under several files)."""
    proc = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100", "--auto=no", str(out)],
        check=True,
        capture_output=True,
        text=True,
        cwd=out.parent,
    )
    found: dict[str, set[int]] = {}
    for line in proc.stdout.splitlines():
        m = _ANNOTATED.match(line)
        if m and "PROGRAM TOTALS" not in line:
            _, _, function = m.group(2).partition(":")
            found.setdefault(function, set()).add(int(m.group(1).replace(",", "")))
    if not found:
        raise AssertionError(f"no function lines in callgrind_annotate's output:\n{proc.stdout[:2000]}")
    return found


def line_range(source: str, signature: str) -> range:
    """The 1-based lines of the C function whose definition line contains `signature`, through its closing brace."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if signature in line)
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return range(start + 1, end + 2)


def _match(pattern: re.Pattern[str], text: str) -> str:
    m = pattern.search(text)
    if m is None:
        raise AssertionError(f"{pattern.pattern!r} not found in:\n{text[-2000:]}")
    return m.group(1)
