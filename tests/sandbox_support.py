"""A hostile try-job for the sandbox tests: a fixture benchmark program that tries, when it runs, every escape a
patch's code could try on a worker (read the farm's secrets, write the results database, plant a git hook in the
worker's shared clone, reach the master over the network, see the worker's processes and environment).

It prints the fixture's `ops VALUE` when every read, connection and process probe was refused and `ops 666666` when
any succeeded, plus one line per attempt (`escape attempt ...: refused|SUCCEEDED`, ignored by the fixture's parser).
A write can land in the sandbox's own /tmp (a path under /tmp has its parents there), so the program cannot tell
a write to the host from one to itself: the tests check the host's files instead.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

ESCAPED_VALUE = 666666
FORGED_VALUE = 777777  # what the planted post-checkout hook makes every later commit's program print

# The hook the hostile program plants: after every checkout, the commit's program is replaced by one that prints
# FORGED_VALUE (issue #26: "the next honest commit ... was stored as [777777, 777777, 777777]").
FORGED_MAIN = f'int main(void){{puts("ops {FORGED_VALUE}");return 0;}}'
HOOK = f"#!/bin/sh\nprintf '#include <stdio.h>\\n{FORGED_MAIN}\\n' > perffarm_bench.c\n"


def _c(text: str) -> str:
    """A C string literal (JSON's escapes are C's for ASCII text)."""
    return json.dumps(text)


def hostile_program(
    value: int,
    reads: Sequence[Path] = (),
    writes: Sequence[Path] = (),
    database: Path | None = None,
    port: int | None = None,
    pid: int | None = None,
    env_var: str | None = None,
) -> str:
    """The C source of the hostile fixture program (see the module docstring)."""
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <string.h>",
        "#include <unistd.h>",
        "#include <signal.h>",
        "#include <sys/stat.h>",
        "#include <sys/socket.h>",
        "#include <netinet/in.h>",
        "#include <arpa/inet.h>",
        "static int escaped = 0;",
        "static void note(const char *what, int ok) {",
        '    printf("escape attempt %s: %s\\n", what, ok ? "SUCCEEDED" : "refused");',
        "    if (ok) escaped = 1;",
        "}",
        "static void wrote(const char *what, int ok) {",
        '    printf("escape attempt %s: %s\\n", what, ok ? "opened (host or its own /tmp?)" : "refused");',
        "}",
        "int main(void) {",
    ]
    for path in reads:
        lines += [
            "    {",
            f'        FILE *f = fopen({_c(str(path))}, "r");',
            f"        note({_c('read ' + str(path))}, f != NULL);",
            "        if (f) fclose(f);",
            "    }",
        ]
    for path in writes:
        lines += [
            "    {",
            f'        FILE *f = fopen({_c(str(path))}, "w");',
            f"        if (f) {{ fputs({_c(HOOK)}, f); fclose(f); chmod({_c(str(path))}, 0755); }}",
            f"        wrote({_c('write ' + str(path))}, f != NULL);",
            "    }",
        ]
    if database is not None:
        sql = f"sqlite3 {database} \"UPDATE runs SET status = 'forged'\" 2>/dev/null"
        lines += [f"    note({_c('UPDATE ' + str(database))}, system({_c(sql)}) == 0);"]
    if port is not None:
        lines += [
            "    {",
            "        struct sockaddr_in a; memset(&a, 0, sizeof a);",
            f"        a.sin_family = AF_INET; a.sin_port = htons({int(port)}); a.sin_addr.s_addr = htonl(0x7f000001);",
            "        int s = socket(AF_INET, SOCK_STREAM, 0);",
            "        int up = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0;",
            f"        note({_c(f'connect to 127.0.0.1:{port}')}, up);",
            "        if (s >= 0) close(s);",
            "    }",
        ]
    if pid is not None:
        lines += [f"    note({_c(f'see process {pid}')}, kill({int(pid)}, 0) == 0);"]
    if env_var is not None:
        lines += [f"    note({_c('read $' + env_var)}, getenv({_c(env_var)}) != NULL);"]
    lines += [
        f'    printf("ops %d\\n", escaped ? {ESCAPED_VALUE} : {int(value)});',
        "    return 0;",
        "}",
        "",
    ]
    return "\n".join(lines)
