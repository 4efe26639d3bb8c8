"""A test-only patch that adds tunable work to a per-query path of PostgreSQL (the executor's entry).

`busy_loop_patch(src, iterations)` returns a unified diff (for `git apply` / `perffarm compare --patch`) that
puts a volatile busy loop of `iterations` rounds at the start of standard_ExecutorRun(), which every query runs,
simple or prepared. The loop costs a fixed number of instructions per query, so the injected slowdown is
tunable: measure it in instructions (exact) and see whether wall-clock A/B separates it from A-vs-A.
"""

from __future__ import annotations

import difflib
from pathlib import Path

FILE = "src/backend/executor/execMain.c"
ANCHOR = "\t/* sanity checks */\n\tAssert(queryDesc != NULL);\n"


def busy_loop_patch(src: Path, iterations: int) -> str:
    old = (src / FILE).read_text()
    start = old.find("\nstandard_ExecutorRun(QueryDesc *queryDesc,")
    at = old.find(ANCHOR, start) if start >= 0 else -1
    if at < 0:
        raise ValueError(f"{FILE}: anchor not found; this tree's standard_ExecutorRun looks different")
    loop = (
        "\t/* perffarm test-only injected work */\n"
        "\t{\n\t\tvolatile int pf_i;\n\n"
        f"\t\tfor (pf_i = 0; pf_i < {int(iterations)}; pf_i++)\n\t\t\t;\n\t}}\n\n"
    )
    new = old[:at] + loop + old[at:]
    diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{FILE}", f"b/{FILE}")
    return "".join(diff)


if __name__ == "__main__":
    import sys

    print(busy_loop_patch(Path(sys.argv[1]), int(sys.argv[2])), end="")
