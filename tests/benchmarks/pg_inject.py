"""A test-only patch that adds tunable work to a per-query path of PostgreSQL (the executor's entry).

`busy_loop_patch(src, iterations)` returns a unified diff (for `git apply` / `perffarm compare --patch`) that
puts a volatile busy loop of `iterations` rounds at the start of standard_ExecutorRun(), which every query runs,
simple or prepared. The loop costs a fixed number of instructions per query, so the injected slowdown is
tunable: measure it in instructions (exact) and see whether wall-clock A/B separates it from A-vs-A.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
from pathlib import Path

FILE = "src/backend/executor/execMain.c"
ANCHOR = "\t/* sanity checks */\n\tAssert(queryDesc != NULL);\n"


def escape_attempt(reads: list[Path], writes: list[Path]) -> str:
    """C for the start of standard_ExecutorRun that tries, once per backend, to read `reads` (an ERROR that fails
    the query if one opens: a try-job's server must not see them) and to create `writes` (the test checks the
    host's files). For the sandbox test of a try-job on real PostgreSQL (tests/integration/test_postgres_recipes)."""
    lines = ["\t/* perffarm test-only: a try-job's server trying to leave its sandbox, once per backend */\n"]
    lines.append("\t{\n\t\tstatic bool pf_tried = false;\n\n\t\tif (!pf_tried)\n\t\t{\n\t\t\tFILE\t   *pf_f;\n\n")
    lines.append("\t\t\tpf_tried = true;\n")
    for path in writes:
        lines.append(f'\t\t\tif ((pf_f = fopen({json.dumps(str(path))}, "w")) != NULL)\n\t\t\t\tfclose(pf_f);\n')
    for path in reads:
        lines.append(
            f'\t\t\tif ((pf_f = fopen({json.dumps(str(path))}, "r")) != NULL)\n'
            f'\t\t\t\telog(ERROR, "perffarm test: the sandbox let the server read %s", {json.dumps(str(path))});\n'
        )
    lines.append("\t\t}\n\t}\n\n")
    return "".join(lines)


def original(src: Path, sha: str | None, rel: str | Path = FILE) -> str | None:
    """File `rel` as commit `sha` has it (from git's objects), or as `src`'s work tree has it when no sha is given;
    None when it has no such file. A test that shares a checkout with others passes its sha: `perffarm compare`
    checks other commits out there and applies their patches, so the work tree may hold another commit's file or a
    patched one at any moment."""
    if sha is None:
        return (src / rel).read_text() if (src / rel).exists() else None
    proc = subprocess.run(["git", "show", f"{sha}:{rel}"], cwd=src, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None  # not _git's: its strip() would drop the last newline


def _file(src: Path, sha: str | None, rel: str | Path = FILE) -> str:
    text = original(src, sha, rel)
    if text is None:
        raise ValueError(f"{rel}: not in {src}" + (f" at {sha[:12]}" if sha else ""))
    return text


def busy_loop_patch(src: Path, iterations: int, extra: str = "", sha: str | None = None) -> str:
    """The busy loop (and `extra` C code, e.g. escape_attempt's) at the start of standard_ExecutorRun, against
    commit `sha`'s file (see `original`)."""
    old = _file(src, sha)
    start = old.find("\nstandard_ExecutorRun(QueryDesc *queryDesc,")
    at = old.find(ANCHOR, start) if start >= 0 else -1
    if at < 0:
        raise ValueError(f"{FILE}: anchor not found; this tree's standard_ExecutorRun looks different")
    loop = (
        "\t/* perffarm test-only injected work */\n"
        "\t{\n\t\tvolatile int pf_i;\n\n"
        f"\t\tfor (pf_i = 0; pf_i < {int(iterations)}; pf_i++)\n\t\t\t;\n\t}}\n\n"
    )
    new = old[:at] + loop + extra + old[at:]
    diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{FILE}", f"b/{FILE}")
    return "".join(diff)


def open_close_patch(src: Path) -> str:
    """A unified diff that makes every executor run open and close one file (/dev/null): issue #28's kind of
    culprit. Two system calls per query cost a few microseconds, 10-15 % of a one-client prepared point select
    here, while the instructions valgrind counts in the backend barely move (a system call is one instruction of
    the process; the kernel's work is not counted), so only wall-clock throughput, paired, can see it."""
    return syscall_patch(src, 1)


_DEFINITION_ROOTS = ("src/backend", "src/common", "src/port")


def defining_file(src: Path, function: str, sha: str | None = None) -> Path:
    """The C file (relative to `src`) that defines `function` (at commit `sha`, when given: see `original`):
    PostgreSQL's style puts a definition's name at the start of its line. ValueError when no file or several do."""
    if not re.fullmatch(r"[A-Za-z_]\w*", function):
        raise ValueError(f"not a C function name: {function!r}")
    pattern = re.compile(rf"^{function}\(", re.M)
    if sha is not None:
        proc = subprocess.run(
            ["git", "grep", "-l", "-E", f"^{function}\\(", sha, "--", *(f"{r}/*.c" for r in _DEFINITION_ROOTS)],
            cwd=src,
            capture_output=True,
            text=True,
        )
        found = [Path(line.split(":", 1)[1]) for line in proc.stdout.splitlines()]
    else:
        found = [
            path.relative_to(src)
            for root in _DEFINITION_ROOTS
            for path in sorted((src / root).rglob("*.c"))
            if pattern.search(path.read_text(errors="replace"))
        ]
    if len(found) != 1:
        raise ValueError(f"{function}: defined in {len(found)} files of {src} ({', '.join(map(str, found[:4]))})")
    return found[0]


def entry_loop_patch(src: Path, function: str, iterations: int, sha: str | None = None) -> str:
    """A unified diff that puts a volatile busy loop of `iterations` rounds at the start of `function`'s body,
    wherever it is defined: a fixed slowdown per call (about 5.5 instructions a round at -O2), for measuring which
    functions' regressions a profile notices (tests/benchmarks/pg_recall.py)."""
    rel = defining_file(src, function, sha)
    old = _file(src, sha, rel)
    m = re.search(rf"^{re.escape(function)}\(.*?^\{{\n", old, re.M | re.S)
    if m is None:
        raise ValueError(f"{rel}: no body found for {function}")
    at = m.end()
    loop = (
        "\t/* perffarm test-only injected work */\n"
        "\t{\n\t\tvolatile int pf_i;\n\n"
        f"\t\tfor (pf_i = 0; pf_i < {int(iterations)}; pf_i++)\n\t\t\t;\n\t}}\n\n"
    )
    new = old[:at] + loop + old[at:]
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"))


def boot_value_patch(src: Path, variable: str, old: str, new: str, sha: str | None = None) -> str:
    """A unified diff that changes the boot value of a GUC, `&variable,` followed by `old,` in the GUC tables
    (guc.c up to 15, guc_tables.c since 16), to `new`: e.g. enable_hashjoin off, a planner that never picks a hash
    join (tests/integration/test_pg_operations.py: a plan change)."""
    for rel in ("src/backend/utils/misc/guc_tables.c", "src/backend/utils/misc/guc.c"):
        text = original(src, sha, rel)
        if text is None:
            continue
        pattern = re.compile(rf"(&{re.escape(variable)},\s*\n\s*){re.escape(old)},")
        if len(pattern.findall(text)) != 1:
            continue
        changed = pattern.sub(lambda m: f"{m.group(1)}{new},", text)
        return "".join(difflib.unified_diff(text.splitlines(True), changed.splitlines(True), f"a/{rel}", f"b/{rel}"))
    raise ValueError(f"{variable}: no boot value {old!r} found in the GUC tables of {src}")


def lock_hold_patch(src: Path, hold_us: int = 0, sha: str | None = None, application: str | None = None) -> str:
    """A unified diff that makes every query's executor run hold one LWLock exclusively: a real contention
        regression. Two clients serialise their executor phases (throughput at 2 clients falls) while one client pays
        only an uncontended acquire and release, a few dozen instructions against tens of thousands per query (within
        the detection floor of instruction counts). The lock is AutovacuumScheduleLock, which only the autovacuum
        launcher takes (the quick profile runs with autovacuum off). Only the outermost executor run takes it (a query
    that runs another inside, a SQL function or a trigger, would otherwise wait for itself); after an ERROR inside a
    run the lock is released by the abort like any LWLock and the depth stays off by one, so the injection ends
    there: the quick workloads raise none.

    With `hold_us`, the lock is also held across a sleep of that many microseconds, as a lock held across I/O
    would be: the clients then contend even when a loaded machine rarely runs their backends at the same moment
    (without it, the regression is ~7% at two clients on a quiet 2-core box and lost in the noise at load 8). The
    sleep is a system call: a handful of instructions per query, still far under the floor. Against commit
    `sha`'s file (see `original`).

    With `application`, only backends whose application_name is that (pgbench's own: "pgbench") take the lock: the
    wait sampler's psql then never holds it while it reads pg_stat_activity, so what it sees is not its own doing
    (docs/explain.md, "An observer effect to know"). Without it, the diff is the same as it always was."""
    old = _file(src, sha)
    start = old.find("\nstandard_ExecutorRun(QueryDesc *queryDesc,")
    end = old.find("\n}\n", start) if start >= 0 else -1
    take = "\toldcontext = MemoryContextSwitchTo(estate->es_query_cxt);\n"
    give = "\tMemoryContextSwitchTo(oldcontext);\n"
    at_take = old.find(take, start, end) if end >= 0 else -1
    at_give = old.rfind(give, start, end + 1) if end >= 0 else -1
    if at_take < 0 or at_give < at_take:
        raise ValueError(f"{FILE}: anchors not found; this tree's standard_ExecutorRun looks different")
    who, held = "", ""
    if application is not None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,63}", application):
            raise ValueError(f"not an application name to put in C: {application!r}")
        who = f' && application_name != NULL && strcmp(application_name, "{application}") == 0'
        held = " && LWLockHeldByMe(AutovacuumScheduleLock)"
    hold = (
        "\n\t/* perffarm test-only injected contention (outermost executor run only: LWLocks do not nest) */\n"
        f"\tif (pf_lock_depth++ == 0{who})\n\t\tLWLockAcquire(AutovacuumScheduleLock, LW_EXCLUSIVE);\n"
    )
    if hold_us > 0:
        hold += f"\tif (pf_lock_depth == 1{held})\n\t\tpg_usleep({int(hold_us)}L);\n"
    release = f"\tif (--pf_lock_depth == 0{held})\n\t\tLWLockRelease(AutovacuumScheduleLock);\n\n"
    static = (
        "\n/* perffarm test-only: executor nesting depth of the injected lock hold */\nstatic int pf_lock_depth = 0;\n"
    )
    decl = old.rfind("\nvoid", 0, start)  # the function's return type is on the line before its name
    new = (
        old[:decl]
        + static
        + old[decl : at_take + len(take)]
        + hold
        + old[at_take + len(take) : at_give]
        + release
        + old[at_give:]
    )
    if application is not None:  # application_name is declared there
        new = new.replace('#include "postgres.h"\n', '#include "postgres.h"\n\n#include "utils/guc.h"\n', 1)
    diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{FILE}", f"b/{FILE}")
    return "".join(diff)


# Files the filler commits touch in turn: docs (no rebuild) and comment-only changes in backend sources (an
# incremental rebuild of one file, as most real commits are), never the file the culprit patches.
FILLERS = (
    "README",
    "src/backend/tcop/postgres.c",
    "doc/src/sgml/config.sgml",
    "src/backend/utils/adt/float.c",
    "src/backend/utils/adt/int.c",
    "src/backend/optimizer/plan/planner.c",
)


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


def _comment(path: Path, i: int) -> None:
    """Append a harmless line in the file's own comment syntax."""
    text = path.read_text()
    if path.suffix in (".c", ".h", ".y"):
        text += f"\n/* perffarm test history: filler commit {i} */\n"
    elif path.suffix == ".sgml":
        text += f"\n<!-- perffarm test history: filler commit {i} -->\n"
    else:
        text += f"\nperffarm test history: filler commit {i}\n"
    path.write_text(text)


DOC_FILLERS = ("README", "doc/src/sgml/config.sgml", "doc/src/sgml/release.sgml")


def _commit_all(repo: Path, subject: str, stamp_offset: int) -> str:
    stamp = f"@{1_700_000_000 + 60 * stamp_offset} +0000"
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.org",
        "GIT_COMMITTER_NAME": "Test Author",
        "GIT_COMMITTER_EMAIL": "author@example.org",
    }
    _git(repo, "commit", "--quiet", "-am", subject, env=env)
    return _git(repo, "rev-parse", "HEAD")


def doc_commits(repo: Path, count: int, first: int = 1000) -> list[str]:
    """`count` documentation-only commits on top of HEAD (no compile, only an install): a cheap baseline history
    for change detection. Returns their shas, oldest first; numbered from `first` so they never collide with
    make_history's commits."""
    shas = []
    for i in range(first, first + count):
        name = DOC_FILLERS[i % len(DOC_FILLERS)]
        _comment(repo / name, i)
        shas.append(_commit_all(repo, f"docs: filler change {i}", i))
    return shas


def make_history(
    repo: Path, count: int, culprit: int, iterations: int = 0, lock: bool = False, open_close: bool = False
) -> list[str]:
    """Commit `count` commits on top of `repo`'s HEAD; commit number `culprit` (1-based) adds the busy loop of
    `iterations` rounds, or with `lock` the executor lock hold (`lock_hold_patch`: a contention regression), or
    with `open_close` a file opened and closed per executor run (`open_close_patch`: issue #28's culprit).

    Returns the shas, index 0 being the starting HEAD. Commit dates are fixed, so the same tree and arguments give
    the same shas. Untrusted-looking subjects are used on purpose for the history site and alerts.
    """
    if not 1 <= culprit <= count:
        raise ValueError(f"culprit must be within 1..{count}, not {culprit}")
    shas = [_git(repo, "rev-parse", "HEAD")]
    for i in range(1, count + 1):
        if i == culprit:
            if open_close:
                patch, subject = open_close_patch(repo), "executor: open and close a file per executor run"
            elif lock:
                patch, subject = lock_hold_patch(repo), "executor: serialise executor runs on one lock"
            else:
                patch = busy_loop_patch(repo, iterations)
                subject = f"executor: do a little more work per query ({iterations} iterations)"
            subprocess.run(["git", "apply", "-"], cwd=repo, input=patch, text=True, check=True)
        else:
            name = FILLERS[i % len(FILLERS)]
            _comment(repo / name, i)
            subject = f"{Path(name).name}: filler change {i} <b>not bold</b>"
        shas.append(_commit_all(repo, subject, i))
    return shas


if __name__ == "__main__":
    import sys

    print(busy_loop_patch(Path(sys.argv[1]), int(sys.argv[2])), end="")


def syscall_patch(src: Path, calls: int = 1, sha: str | None = None) -> str:
    """A unified diff that makes every executor run open and close /dev/null `calls` times at the start of
    standard_ExecutorRun(): kernel work per query that callgrind does not see (a few dozen user-space instructions
    per call, far under the instruction counts' detection floor), while the system-call counters
    (recipes/pg/counters.py) see exactly +`calls` openat and +`calls` close per query. Against commit `sha`'s file
    (see `original`)."""
    old = _file(src, sha)
    start = old.find("\nstandard_ExecutorRun(QueryDesc *queryDesc,")
    at = old.find(ANCHOR, start) if start >= 0 else -1
    head = '#include "postgres.h"\n'
    if at < 0 or head not in old:
        raise ValueError(f"{FILE}: anchor not found; this tree's standard_ExecutorRun looks different")
    work = (
        "\t/* perffarm test-only injected system calls */\n"
        "\t{\n\t\tint\t\t\tpf_i;\n\n"
        f"\t\tfor (pf_i = 0; pf_i < {int(calls)}; pf_i++)\n\t\t{{\n"
        '\t\t\tint\t\t\tpf_fd = open("/dev/null", O_RDONLY);\n\n'
        "\t\t\tif (pf_fd >= 0)\n\t\t\t\tclose(pf_fd);\n\t\t}\n\t}\n\n"
    )
    new = old[:at] + work + old[at:]
    new = new.replace(head, head + "\n#include <fcntl.h>\n#include <unistd.h>\n", 1)
    diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{FILE}", f"b/{FILE}")
    return "".join(diff)


def _insert_in(old: str, rel: str, function: str, anchor: str, text: str) -> str:
    """`old` with `text` inserted before the first `anchor` inside the body of `function` (a definition at the
    start of a line, PostgreSQL's style); ValueError naming the file when either is not there."""
    start = old.find(f"\n{function}(")
    end = old.find("\n}\n", start) if start >= 0 else -1
    at = old.find(anchor, start, end) if end >= 0 else -1
    if at < 0:
        raise ValueError(f"{rel}: anchor not found in {function}; this tree's {function} looks different")
    return old[:at] + text + old[at:]


def _diff(rel: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"))


XACT = "src/backend/access/transam/xact.c"


def wal_record_patch(src: Path, records: int = 1, sha: str | None = None) -> str:
    """A unified diff that makes every transaction that commits a transaction id write `records` more WAL records
    (XLOG_NOOP, carrying the 4-byte xid: 30 bytes each) just before its commit record, in RecordTransactionCommit():
    WAL per transaction that the WAL counters (recipes/pg/counters.py, pg_waldump between two LSNs) see exactly,
    +`records` records per transaction; a read-only query writes none. XLOG_NOOP and the anchor exist on 13, 15
    and 18 alike. Against commit `sha`'s file (see `original`)."""
    old = _file(src, sha, XACT)
    head = '#include "access/xloginsert.h"\n'
    if head not in old:
        raise ValueError(f"{XACT}: no {head.strip()}; this tree's xact.c looks different")
    work = (
        "\t\t/* perffarm test-only injected WAL: more records per committed transaction */\n"
        "\t\t{\n\t\t\tint\t\t\tpf_i;\n\n"
        f"\t\t\tfor (pf_i = 0; pf_i < {int(records)}; pf_i++)\n\t\t\t{{\n"
        "\t\t\t\tXLogBeginInsert();\n"
        "\t\t\t\tXLogRegisterData((char *) &xid, sizeof(xid));\n"
        "\t\t\t\t(void) XLogInsert(RM_XLOG_ID, XLOG_NOOP);\n"
        "\t\t\t}\n\t\t}\n\n"
    )
    new = _insert_in(old, XACT, "RecordTransactionCommit", "\t\tXactLogCommitRecord(", work)
    new = new.replace(head, head + '#include "catalog/pg_control.h"\n', 1)  # XLOG_NOOP; guarded if already in
    return _diff(XACT, old, new)


HEAPAM = "src/backend/access/heap/heapam.c"
HEAPAM_HANDLER = "src/backend/access/heap/heapam_handler.c"


def buffer_access_patch(src: Path, sha: str | None = None) -> str:
    """A unified diff that reads the block of every heap tuple a scan returns once more (ReadBuffer, then
    ReleaseBuffer at once) in the two paths that return heap rows to the executor: heapam_index_fetch_tuple() (an
    index scan's row) and heap_getnextslot() (a sequential scan's). The block is already pinned, so each is one
    shared buffer hit more per returned row: the buffer counters (EXPLAIN BUFFERS, recipes/pg/counters.py) see
    +1 `buffers_hit` per row, and no read, WAL or system call. The anchors exist on 13, 15 and 18. Against
    commit `sha`'s files (see `original`)."""
    index = _file(src, sha, HEAPAM_HANDLER)
    fetch = (
        "\t\t/* perffarm test-only injected buffer access: the row's block once more */\n"
        "\t\t{\n\t\t\tBuffer\t\tpf_buf = ReadBuffer(hscan->xs_base.rel, ItemPointerGetBlockNumber(tid));\n\n"
        "\t\t\tReleaseBuffer(pf_buf);\n\t\t}\n"
    )
    index_new = _insert_in(
        index,
        HEAPAM_HANDLER,
        "heapam_index_fetch_tuple",
        "\t\tExecStoreBufferHeapTuple(&bslot->base.tupdata, slot, hscan->xs_cbuf);",
        fetch,
    )
    seq = _file(src, sha, HEAPAM)
    next_ = (
        "\t/* perffarm test-only injected buffer access: the row's block once more */\n"
        "\t{\n\t\tBuffer\t\tpf_buf = ReadBuffer(sscan->rs_rd, BufferGetBlockNumber(scan->rs_cbuf));\n\n"
        "\t\tReleaseBuffer(pf_buf);\n\t}\n\n"
    )
    seq_new = _insert_in(seq, HEAPAM, "heap_getnextslot", "\tpgstat_count_heap_getnext(scan->rs_base.rs_rd);", next_)
    return _diff(HEAPAM_HANDLER, index, index_new) + _diff(HEAPAM, seq, seq_new)
