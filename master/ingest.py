"""Validate an uploaded result and store it in one transaction, with the commit's place on its branches.

Pure (no Buildbot/Twisted): the master's ingest step calls `ingest_file` in a thread. A malformed result is
rejected with a message saying what is wrong and nothing is stored; the file is kept under
incoming/rejected/ with the reason beside it. A result that cannot be stored *yet* (the repository is
unreachable) stays in incoming/ and is retried, so nothing is lost; after `master.deferred_give_up_after`
seconds it is set aside in incoming/gave-up/ with the reason, and its commit is re-queued like a lost build.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from master import gitauth, gitmirror, machinebinding, store
from master.atomicfile import move_durably, write_atomic
from master.deferred import GAVE_UP, deferral
from master.redact import redact_text, redact_url
from master.settings import Settings
from recipes.paired import OPTION as REFERENCE_OPTION
from recipes.record import paired_metric, run_record
from recipes.result import ResultError, parse_json

MAX_RESULT_BYTES = 64 * 2**20
_mirror_lock = threading.Lock()  # one git fetch into the mirror at a time
log = logging.getLogger("perffarm.ingest")


class IngestRejected(ValueError):
    """The result is malformed or does not belong to this build: nothing was stored."""


class MachineRefused(IngestRejected):
    """The result names a machine this worker may not write (master/machinebinding.py): nothing was stored."""

    def __init__(self, refused: machinebinding.Refused) -> None:
        super().__init__(refused.message)
        self.refused = refused


class NoResult(RuntimeError):
    """The build produced no result file at all (runner crashed, build cancelled): the commit is re-queued."""


class IngestDeferred(RuntimeError):
    """The result looks fine but cannot be stored now (e.g. repository unreachable); it will be retried."""


@dataclass(frozen=True)
class IngestOutcome:
    run_id: int
    sha: str
    status: str
    workloads: int
    samples: int
    commits_added: int
    message: str


def load_result(path: Path) -> dict[str, Any]:
    """Read and validate a run's result file, and return the record the run is stored as (recipes/record.py: a
    paired run's ratios computed here from its sides' raw samples); IngestRejected says what is wrong with it."""
    return read_result(path, run_record, "result does not follow schema perffarm-result")


def read_result(path: Path, check: Callable[[Any], dict[str, Any]], what: str) -> dict[str, Any]:
    """A worker's result file (a run's or a job's: one schema, recipes/result.py) read within its size limit,
    parsed and passed to `check`; IngestRejected says what is wrong with it, NoResult that there is none."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise NoResult(
            f"no result file at {path}: the recipe runner produced no result (see the build and bench logs); "
            "the commit will be re-queued"
        ) from None
    if size > MAX_RESULT_BYTES:
        raise IngestRejected(f"result file is {size} bytes, more than the {MAX_RESULT_BYTES} allowed")
    try:
        doc = parse_json(path.read_bytes())
    except ResultError as e:
        raise IngestRejected(str(e)) from None
    try:
        return check(doc)
    except ResultError as e:
        raise IngestRejected(f"{what}: {e}") from None
    except (RecursionError, OverflowError, ValueError, TypeError) as e:
        # the validator's own guards should catch every such value first; if one slips through, it is still the file's
        raise IngestRejected(f"{what}: it could not be validated ({type(e).__name__}: {str(e)[:200]})") from None


def _check_belongs(doc: dict[str, Any], run: store.RunContext, recipe: str | None) -> None:
    sha = doc["commit"]["sha"]
    if sha != run.got_revision:
        raise IngestRejected(
            f"$.commit.sha: result is for {sha[:12]} but the build checked out {run.got_revision[:12]}"
        )
    if recipe and doc["recipe"]["name"] != recipe:
        raise IngestRejected(f"$.recipe.name: result is from recipe {doc['recipe']['name']!r}, builder runs {recipe!r}")
    _check_reference(doc, run)


def requested_reference(options: list) -> str | None:
    """The reference the master asked the worker to pair with (the last `reference=` option), or None."""
    value = None
    for option in options:
        if isinstance(option, str) and option.startswith(f"{REFERENCE_OPTION}="):
            value = option.removeprefix(f"{REFERENCE_OPTION}=").strip() or None
    return value


def _check_reference(doc: dict[str, Any], run: store.RunContext) -> None:
    """A paired result must be paired with the reference the master asked for, and an unpaired one must not
    carry paired metrics: `.rqps` and `.ratio` samples are ratios to the reference, so a result that names another
    reference (or none) would store one commit's ratios under another reference's series."""
    claimed = doc["recipe"].get("options", {}).get("reference") or None
    if claimed != run.reference:
        asked = run.reference[:12] if run.reference else "none (an unpaired run)"
        got = claimed[:12] if claimed else "none"
        raise IngestRejected(
            f"$.recipe.options.reference: the result was measured against reference {got} but the master asked "
            f"for {asked}; nothing stored (check throughput.references and the forced build's options)"
        )
    found = paired_metric(doc["workloads"]) if run.reference is None else None
    if found is not None:
        raise IngestRejected(
            f"$.{found}: a paired metric in a run the master did not pair with a reference; nothing stored"
        )


def _fetch(settings: Settings, mirror: gitmirror.Mirror) -> None:
    """Fetch the mirror with the repository's credentials, read now (a rotated token needs no restart); a
    missing or unusable password secret is a GitError like an unreachable repository."""
    try:
        mirror.credentials = gitauth.read_credentials(settings)
    except gitauth.CredentialsError as e:
        raise gitmirror.GitError(str(e)) from None
    mirror.fetch()


def fresh_mirror(settings: Settings) -> gitmirror.Mirror:
    """The master's mirror, fetched now (its refs: the watched repository's branches and tags); GitError says
    why not. Used by commands that name releases by tag (perffarm releases)."""
    with _mirror_lock:
        mirror = gitmirror.Mirror(settings.repository_url, settings.mirror_dir)
        mirror.ensure()
        _fetch(settings, mirror)
    return mirror


def _update_mirror(settings: Settings, sha: str) -> gitmirror.Mirror:
    """Fetch the master's mirror (new branches and tags); if the repository is unreachable but the commit is
    already mirrored, carry on with the refs we have. Runs outside any database transaction."""
    url = redact_url(settings.repository_url)  # messages reach build logs and the rejections table
    mirror = gitmirror.Mirror(settings.repository_url, settings.mirror_dir)
    try:
        _fetch(settings, mirror)
    except gitmirror.GitError as e:
        if not mirror.has_commit(sha):
            raise IngestDeferred(f"could not update the master's mirror of {url}: {e}") from None
    if not mirror.has_commit(sha):
        raise IngestRejected(f"$.commit.sha: {sha} is not a commit of {url}")
    return mirror


MAINLINE = ("master", "main")  # ordered first among new branches: stable branches fork from it
# Rows of branch order written per transaction. Ordering a new branch of postgres.git's size writes ~60,000 (seven
# branches: ~400,000): in one transaction that held every other ingest out for a minute (docs/scale.md).
BATCH_ROWS = 5_000
# Pause between two such transactions. A writer that waits for SQLite's write lock retries every 100 ms once it has
# waited a second (SQLite's busy handler): without a gap at least that long, back-to-back batches could keep another
# ingest out for as long as one big transaction did.
BATCH_PAUSE = 0.1
# Branches a thread of this master is ordering now -> set when it is done (read and changed under _mirror_lock).
_ordering: dict[str, threading.Event] = {}


class _Plan:
    """What `gitmirror.sync_branch` decided to write for one branch, recorded instead of written: the writes are
    then made in transactions of at most BATCH_ROWS rows."""

    def __init__(self, stored_rows: int) -> None:
        self.stored_rows = stored_rows  # rows of the branch in the store now (a reset deletes them)
        self.steps: list[tuple[str, Any, int]] = []

    def reset(self) -> None:
        self.steps.append(("reset", None, self.stored_rows))

    def copy(self, source: str, last: int) -> None:
        self.steps.append(("copy", source, last))

    def append(self, commits: list[store.CommitInfo], start: int) -> None:
        self.steps.append(("append", commits, start))

    def rows(self) -> int:
        return sum(n + 1 if kind == "copy" else len(arg) if kind == "append" else n for kind, arg, n in self.steps)

    def pieces(self, conn, branch: str) -> list[Callable[[], None]]:
        """The writes, in order, as pieces of at most BATCH_ROWS rows each. Rows are deleted from the top and
        written from position 0 up, so whatever prefix of the pieces is committed, the stored rows are positions
        0..k of one first-parent chain: an ingest after a crash resumes from there."""
        out: list[Callable[[], None]] = []
        for kind, arg, n in self.steps:
            if kind == "reset":  # from the top down
                for top in range(n, 0, -BATCH_ROWS):
                    out.append(partial(store.reset_branch, conn, branch, max(top - BATCH_ROWS, 0)))
            elif kind == "copy":
                for first in range(0, n + 1, BATCH_ROWS):
                    out.append(partial(_copy, conn, arg, branch, first, min(first + BATCH_ROWS - 1, n)))
            else:
                for i in range(0, len(arg), BATCH_ROWS):
                    out.append(partial(store.append_branch, conn, branch, arg[i : i + BATCH_ROWS], n + i))
        return out


def _copy(conn, source: str, branch: str, first: int, last: int) -> None:
    """Copy positions first..last of `source`; if the source no longer holds them all (another thread reset it
    since the plan was made), fail the transaction: the branch stays marked and the next ingest resumes it."""
    if store.copy_branch_prefix(conn, source, branch, last, first) != last - first + 1:
        raise RuntimeError(f"branch {source} changed while {branch} was copying its positions {first}..{last}")


def _reserve(branch: str, wait: bool) -> threading.Event | None:
    """Take the branch for this thread (None when another thread of this master orders it and `wait` is false;
    with `wait`, until that thread is done)."""
    while True:
        with _mirror_lock:
            busy = _ordering.get(branch)
            if busy is None:
                mine = _ordering[branch] = threading.Event()
                return mine
        if not wait:
            return None
        busy.wait()


def _release(branch: str, mine: threading.Event) -> None:
    with _mirror_lock:
        del _ordering[branch]
    mine.set()


def _sync_branch(conn, mirror: gitmirror.Mirror, branch: str, head: str, known: list[str]) -> int:
    """Bring one branch's stored order up to `head` (the caller holds the branch: `_reserve`); returns how many
    commits were added. A few rows are one transaction; more are written BATCH_ROWS at a time, the branch marked
    (`store.commits.begin_indexing`) from the first to the last so that readers leave it out, and the store free for
    other ingests in between. A branch left marked (a master stopped midway) is resumed from its stored rows.
    Another process ordering the same branch at once (`perffarm bisect --local`) collides on branch_commits'
    primary key: its transaction fails and its result is retried; the rows are one chain's either way.
    `known`: the heads of branches whose stored order is complete (a new branch copies the prefix it shares)."""
    stored = store.branch_head(conn, branch)
    marked = store.commits.indexing(conn).get(branch)
    plan = _Plan(0 if stored is None else stored[0] + 1)
    orders = gitmirror.StoredOrders(
        heads=known,
        locate=lambda at: min(store.commits.positions_of(conn, at).items(), default=None),
        copy=plan.copy,
    )
    added = gitmirror.sync_branch(mirror, head, stored, plan.append, plan.reset, orders=orders)
    pieces = plan.pieces(conn, branch)
    if marked is None and plan.rows() <= BATCH_ROWS:
        if pieces:
            with store.transaction(conn):
                for piece in pieces:
                    piece()
        return added
    if not pieces:
        pieces = [lambda: None]
    for i, piece in enumerate(pieces):
        if i:
            time.sleep(BATCH_PAUSE)
        with store.transaction(conn):
            if i == 0:
                store.commits.begin_indexing(conn, branch, head)
            piece()
            if i == len(pieces) - 1:
                store.commits.end_indexing(conn, branch)
    return added


def _sync_history(conn, settings: Settings, mirror: gitmirror.Mirror, branches: dict[str, str], ref: str) -> int:
    """Bring every watched branch's first-parent order up to date (each branch in its own transactions); returns
    how many commits were added to branch histories. A branch another thread of this master is ordering is left
    to it, unless it is the result's own branch: then this ingest waits for it."""
    names = [b for b in branches if settings.ref_matches("refs/heads/" + b) or b == ref]
    stored = {b: store.branch_head(conn, b) for b in names}
    marked = store.commits.indexing(conn)
    # Branches the store orders already first (a few new commits each), then new ones, the mainline first, so that
    # a new branch finds the history it shares with one ordered before it (gitmirror.StoredOrders).
    order = sorted(names, key=lambda b: (stored[b] is None or b in marked, b not in MAINLINE, b))
    known = {b: h[1] for b, h in stored.items() if h is not None and b not in marked}
    added = 0
    for branch in order:
        mine = _reserve(branch, wait=branch == ref)
        if mine is None:
            known.pop(branch, None)
            continue
        try:
            heads = sorted({s for b, s in known.items() if b != branch})
            added += _sync_branch(conn, mirror, branch, branches[branch], heads)
            known[branch] = branches[branch]
        finally:
            _release(branch, mine)
    return added


def resolve_commit(settings: Settings, revision: str) -> str:
    """The commit `revision` (a sha, a tag object or a ref name) names in the master's mirror, fetching once when
    the mirror does not have it yet; GitError says why not (unknown revision, repository unreachable)."""
    with _mirror_lock:
        mirror = gitmirror.Mirror(settings.repository_url, settings.mirror_dir)
        mirror.ensure()
        sha = mirror.resolve(revision)
        if sha is None:
            _fetch(settings, mirror)
            sha = mirror.resolve(revision)
    if sha is None:
        raise gitmirror.GitError(f"revision {revision!r} is not a commit of the watched repository")
    return sha


def reference_for(settings: Settings, branch: str | None, sha: str) -> tuple[str | None, str]:
    """The reference commit a build of `branch` at `sha` is measured against (`throughput.references`), with a
    line for the build log; (None, why) when the build runs unpaired. A reference that does not resolve, or is
    not an ancestor of the commit (the worker clones only its branch), is reported and the build measured
    unpaired: a misconfigured reference never costs a measurement."""
    name = (branch or "").removeprefix("refs/heads/")
    revision = settings.throughput_references.get(name)
    if revision is None:
        return None, ""
    where = f"throughput.references: {name}={revision}"
    try:
        ref_sha = resolve_commit(settings, revision)
    except gitmirror.GitError as e:
        return None, f"{where}: {e}; this build is measured unpaired"
    with _mirror_lock:
        if not gitmirror.Mirror(settings.repository_url, settings.mirror_dir).is_ancestor(ref_sha, sha):
            return None, (
                f"{where}: {ref_sha[:12]} is not an ancestor of {sha[:12]} (a reference must be on the "
                "branch, at or before the commit); this build is measured unpaired"
            )
    return ref_sha, f"paired with the reference {revision} ({ref_sha[:12]})"


def _not_this_build(run: store.RunContext) -> str | None:
    """Why a result file cannot be this build's own (the checkout did not give the commit asked for), or None."""
    if not run.got_revision:
        return (
            "the build's checkout reported no revision (the git step failed or did not run), so a result file "
            "in its directory can only be an older build's"
        )
    if run.expected_sha and run.got_revision != run.expected_sha:
        return (
            f"the worker checked out {run.got_revision[:12]} but the master resolved the requested revision to "
            f"{run.expected_sha[:12]}"
        )
    return None


def ingest_file(settings: Settings, path: Path, run: store.RunContext, recipe: str | None = None) -> IngestOutcome:
    """Validate the result at `path` and store it; raises IngestRejected, NoResult or IngestDeferred.

    Only the result this build produced is ever stored: without a checked-out revision matching the requested
    commit there is no result (NoResult: the commit is re-queued), and the result must name that commit.
    """
    reason = _not_this_build(run)
    if reason is not None:
        _set_aside(path, reason)
        raise NoResult(f"{reason}: nothing stored; the commit will be re-queued")
    try:
        doc = load_result(path)
        _check_belongs(doc, run, recipe)
    except IngestRejected as e:
        _reject(settings, path, run, str(e))
        raise
    sha = doc["commit"]["sha"]
    ref = store.short_ref(doc["commit"]["ref"])
    try:
        with _mirror_lock:
            mirror = _update_mirror(settings, sha)
            branches, tags = mirror.refs()
        commit = mirror.commit(sha)  # git reads by sha need no lock: a fetch only adds objects and moves refs
        message = mirror.message(sha)
        conn = store.connect(settings.results_db)
        try:
            added = _sync_history(conn, settings, mirror, branches, ref)
            with store.transaction(conn):  # the run, its commit and the tags: all of it or nothing
                _bind_machine(conn, settings, doc, run)
                store.set_tags(
                    conn, {t: s for t, s in tags.items() if settings.ref_matches("refs/tags/" + t) or t == ref}
                )
                store.upsert_commits(conn, [commit])
                store.set_message(conn, sha, message)
                run_id = store.insert_run(conn, doc, run)
        finally:
            conn.close()
    except IngestRejected as e:
        _reject(settings, path, run, str(e), e.refused if isinstance(e, MachineRefused) else None)
        raise
    except store.AlreadyStored:
        path.unlink(missing_ok=True)
        _context_path(path).unlink(missing_ok=True)
        raise
    except Exception as e:
        # Not the result's fault (repository unreachable, disk full, a bug): keep it and retry later.
        unsaved = _save_context(path, run, recipe)
        if isinstance(e, IngestDeferred) and not unsaved:
            raise
        raise IngestDeferred(f"could not store the result: {type(e).__name__}: {e}{unsaved}") from e
    path.unlink(missing_ok=True)
    _context_path(path).unlink(missing_ok=True)
    n_samples = sum(len(m["samples"]) for w in doc["workloads"] for m in w["metrics"])
    message = (
        f"stored run {run_id}: {sha[:12]} ({ref}) status {doc['status']}, "
        f"{len(doc['workloads'])} workloads, {n_samples} samples"
        + (f"; {added} commits added to branch history" if added else "")
    )
    return IngestOutcome(run_id, sha, doc["status"], len(doc["workloads"]), n_samples, added, message)


def machine_refusal(
    conn, settings: Settings, doc: dict[str, Any], worker: str, by_worker: bool
) -> machinebinding.Refused | None:
    """Why the machine a result names may not be written by `worker` (master/machinebinding.py), or None: the one
    rule for a run's result and a job's."""
    bound = store.machines.binding(conn, doc["machine"]["id"])
    return machinebinding.check(doc["machine"], worker, bound, settings.host_of, by_worker)


def _bind_machine(conn, settings: Settings, doc: dict[str, Any], run: store.RunContext) -> None:
    """Check the machine the result names against the worker that sent it (master/machinebinding.py) and bind an
    unbound machine to it; MachineRefused says why not. Inside the ingest's transaction: two first results of one
    machine are serialised, and a refused result leaves nothing behind. A run without a Buildbot build was measured
    by the master's own process (`perffarm bisect --local`), not uploaded by a worker."""
    machine, by_worker = doc["machine"], run.build_id is not None
    refused = machine_refusal(conn, settings, doc, run.worker, by_worker)
    if refused is not None:
        raise MachineRefused(refused)
    if by_worker:
        store.machines.bind(conn, machine["id"], machine["fingerprint"], run.worker, time.time())


def _reject(
    settings: Settings,
    path: Path,
    run: store.RunContext,
    reason: str,
    refused: machinebinding.Refused | None = None,
) -> None:
    """Keep a rejected result for inspection (incoming/rejected/, reason beside it) and record the rejection,
    so the reconciler does not re-queue a commit whose recipe would write the same bad result again; a result
    refused for the machine it names is also counted for the health page and `perffarm status`."""
    reason = redact_text(reason)  # shown by the site and perffarm status; may quote a URL
    rejected = path.parent / "rejected"
    kept = rejected / path.name
    if path.exists():
        rejected.mkdir(parents=True, exist_ok=True)
        move_durably(path, kept)
        write_atomic(rejected / (path.name + ".error"), reason + "\n")
    _context_path(path).unlink(missing_ok=True)
    revision = run.revision or run.got_revision
    if revision or refused:
        conn = store.connect(settings.results_db)
        try:
            with store.transaction(conn):
                if revision:
                    store.record_rejection(conn, run, revision, reason, str(kept) if kept.exists() else "")
                if refused:
                    store.machines.record_refusal(
                        conn, refused.machine_id, refused.worker, refused.bound_worker, reason, time.time()
                    )
        finally:
            conn.close()


def _set_aside(path: Path, reason: str) -> None:
    """Move a result file that is not this build's to incoming/stale/ (kept for inspection, never ingested)."""
    if not path.exists():
        return
    stale = path.parent / "stale"
    stale.mkdir(parents=True, exist_ok=True)
    move_durably(path, stale / path.name)
    write_atomic(stale / (path.name + ".error"), reason + "\n")
    _context_path(path).unlink(missing_ok=True)


def _context_path(path: Path) -> Path:
    return path.with_name(path.name + ".context")


def _save_context(path: Path, run: store.RunContext, recipe: str | None) -> str:
    """Keep a deferred result's build context beside it, atomically (a full disk leaves no empty file), with when
    it was first deferred and how many times; returns "" or, when it could not be written, a note for the
    message: the commit is then re-queued instead."""
    since, tries = deferral(_context_path(path), time.time())
    saved = {"run": dataclasses.asdict(run), "recipe": recipe, "deferred": {"since": since, "tries": tries + 1}}
    try:
        write_atomic(_context_path(path), json.dumps(saved))
    except OSError as e:
        log.warning(
            "could not save the build context of %s (%s): it will not be retried; the reconciler re-queues its commit",
            path.name,
            e,
        )
        return (
            f"; its build context could not be saved ({e.strerror or e}), so it will not be retried: the "
            "reconciler re-queues the commit"
        )
    return ""


def _quarantine(settings: Settings, ctx_file: Path, reason: str, folder: str = "quarantine") -> str:
    """Move a deferred result (and its context) to incoming/<folder>/ with the reason, so it is not tried again;
    without a rejection row the reconciler re-queues its commit. quarantine/: its context cannot be read."""
    result = ctx_file.with_name(ctx_file.name[: -len(".context")])
    where = settings.incoming_dir / folder
    try:
        where.mkdir(parents=True, exist_ok=True)
        write_atomic(where / (result.name + ".error"), reason + "\n")
        for f in (result, ctx_file):
            if f.exists():
                move_durably(f, where / f.name)
    except OSError as e:
        log.error("could not set %s aside (%s): %s", result.name, e, reason)
        return f"{result.name}: {reason}; could not move it to {where} ({e}): it will be tried again"
    log.warning("%s: %s; moved to %s", result.name, reason, where)
    return f"{result.name}: {reason}; moved to {where}"


def _read_context(ctx_file: Path) -> tuple[store.RunContext, str | None]:
    """The build context saved beside a deferred result; ValueError says why it cannot be used."""
    try:
        text = ctx_file.read_bytes()
    except OSError as e:
        raise ValueError(f"its build context {ctx_file.name} cannot be read ({e.strerror or e})") from None
    if not text.strip():
        raise ValueError(f"its build context {ctx_file.name} is empty")
    try:
        saved = json.loads(text)
        recipe = saved.get("recipe")
        if recipe is not None and not isinstance(recipe, str):
            raise TypeError(f"recipe is {type(recipe).__name__}")
        return store.RunContext(**saved["run"]), recipe
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        raise ValueError(
            f"its build context {ctx_file.name} is not one this master writes ({type(e).__name__}: {str(e)[:200]})"
        ) from None


def _give_up(settings: Settings, ctx_file: Path, since: float, tries: int, now: float, last: str) -> str:
    """Set a deferred result (and its context) aside in incoming/gave-up/ with the reason: no longer retried, and
    with no result and no rejection row its commit is re-queued by the reconciler like a lost build."""
    hours = (now - since) / 3600
    reason = (
        f"gave up after {tries} tries over {hours:.1f} h (master.deferred_give_up_after = "
        f"{settings.deferred_give_up_after} s); the last: {redact_text(last)}. Nothing was stored: the reconciler "
        "re-queues the commit (up to master.max_attempts builds), or force a build of it"
    )
    return _quarantine(settings, ctx_file, reason, GAVE_UP)


def retry_deferred(settings: Settings, now: float | None = None) -> list[str]:
    """Try again to store results that were deferred (kept in incoming/ with their build context); give up on one
    deferred for `master.deferred_give_up_after` seconds.

    One bad file never stops the pass: a context that cannot be read is quarantined with the reason, and an
    unexpected error on one result is reported and the others are still tried.
    """
    messages = []
    for ctx_file in sorted(settings.incoming_dir.glob("*.json.context")):
        path = ctx_file.with_name(ctx_file.name[: -len(".context")])
        try:
            run, recipe = _read_context(ctx_file)
        except ValueError as e:
            messages.append(_quarantine(settings, ctx_file, str(e)))
            continue
        try:
            outcome = ingest_file(settings, path, run, recipe)
        except IngestDeferred as e:
            at = time.time() if now is None else now
            since, tries = deferral(ctx_file, at)
            if at - since >= settings.deferred_give_up_after:
                messages.append(_give_up(settings, ctx_file, since, tries, at, str(e)))
            else:
                messages.append(f"{path.name}: still deferred (try {tries}): {e}")
            continue
        except (IngestRejected, NoResult, store.AlreadyStored) as e:
            ctx_file.unlink(missing_ok=True)
            messages.append(f"{path.name}: {e}")
            continue
        except Exception as e:  # noqa: BLE001 - reported; the next pass tries again, the other results go on now
            log.exception("retrying %s failed", path.name)
            messages.append(f"{path.name}: retry failed ({type(e).__name__}: {str(e)[:200]}); tried again next pass")
            continue
        messages.append(f"{path.name}: {outcome.message}")
    return messages
