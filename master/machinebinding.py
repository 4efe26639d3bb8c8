"""A machine's series take results only from the worker that first reported the machine, with its fingerprint.

Series are keyed by the machine id a result names, so whoever may name an id writes that machine's history. The
worker's word is checked, not trusted (the rest of the result is checked the same way in master/ingest.py):

1. the id must be the one the result's own fingerprint gives (`workers/hostinfo.py` `machine_id`): an id is
   derived, never chosen, so a result naming another id claims a machine it was not measured on;
2. a machine id stays bound to the worker that first reported it, and to the fingerprint it first had. Workers
   on one host measure one machine (two workers there compute the same id): they share it when `workers.hosts`
   puts them on one host, which they need anyway for the measurement lock that keeps their benchmarks apart.

A result that breaks a rule is rejected like a malformed one (kept in incoming/rejected/ with the reason, nothing
stored, never retried), with a message naming both workers and what differs, and is listed on the health page
and by `perffarm status`. Results measured by the master's own process (`perffarm bisect --local`, no Buildbot
build) are not a worker's word: they are checked against rule 1 only and bind nothing. Pure: no Buildbot.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from master.store.machines import Binding
from workers import hostinfo

SHOWN = 60  # characters of a fingerprint value a message quotes


@dataclass(frozen=True)
class Refused:
    """Why a result may not be stored under the machine it names, and who it would have been stored for."""

    machine_id: str  # as claimed
    worker: str
    bound_worker: str | None  # the machine's worker; None when the id is not its own fingerprint's
    message: str


def _shown(value: Any) -> str:
    text = str(value)
    return repr(text if len(text) <= SHOWN else text[: SHOWN - 3] + "...")


def _brief(fp: Mapping[str, Any]) -> str:
    """A fingerprint in a few words, for a message: what a reader tells two machines apart by."""
    parts = [_shown(fp.get("cpu_model", "?"))]
    if isinstance(fp.get("cores"), int):
        parts.append(f"{fp['cores']} cores")
    if isinstance(fp.get("memory_bytes"), int):
        parts.append(f"{fp['memory_bytes'] / 2**30:.0f} GiB")
    if fp.get("os"):
        parts.append(_shown(fp["os"]))
    return ", ".join(parts)


def _identity(fp: Mapping[str, Any]) -> dict[str, Any] | None:
    try:
        return hostinfo.identity(dict(fp))
    except (TypeError, ValueError):  # a stored fingerprint this code did not write
        return None


def _differences(first: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The facts that differ between two fingerprints, as `key: 'was' -> 'now'` (memory by the GiB, as ids are)."""
    a, b = _identity(first), _identity(now)
    if a is None or b is None:
        return ["the stored fingerprint is unreadable"]
    return [f"{k}: {_shown(a.get(k))} -> {_shown(b.get(k))}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def check(
    machine: Mapping[str, Any], worker: str, bound: Binding | None, host_of: Callable[[str], str], by_worker: bool
) -> Refused | None:
    """Whether `worker` may store a result naming `machine` ({"id", "fingerprint"}, validated by the schema), given
    the machine's stored binding (None: a machine nobody reported yet). `by_worker`: the result came from a
    Buildbot worker (else from the master's own process: rule 1 only). `host_of`: workers.hosts."""
    claimed, fp = machine["id"], machine["fingerprint"]
    derived = hostinfo.machine_id(fp) if _identity(fp) is not None else None
    if claimed != derived:
        owner = f"; machine {claimed!r} is worker {bound.worker!r}'s ({_brief(bound.fingerprint)})" if bound else ""
        return Refused(
            claimed,
            worker,
            None,
            f"$.machine.id: worker {worker!r} sent machine id {claimed!r}, but the result's own fingerprint "
            f"({_brief(fp)}) is machine {derived!r}{owner}. A machine id is derived from its fingerprint "
            "(workers/hostinfo.py), never chosen: this result names a machine it was not measured on; nothing stored",
        )
    if bound is None or not by_worker:
        return None
    if bound.worker is not None and bound.worker != worker and host_of(worker) != host_of(bound.worker):
        return Refused(
            claimed,
            worker,
            bound.worker,
            f"$.machine.id: machine {claimed!r} ({_brief(bound.fingerprint)}) is bound to worker {bound.worker!r}, "
            f"which first reported it ({_when(bound.first_seen)}); worker {worker!r} ({_brief(fp)}) is on another "
            f"host and may not write its series: nothing stored. Workers on one host share its machine: if "
            f"{worker!r} runs on {bound.worker!r}'s host, list both under that host in workers.hosts",
        )
    differences = _differences(bound.fingerprint, fp)
    if differences:
        first_by = f"worker {bound.worker!r}" if bound.worker else "the master's own process"
        return Refused(
            claimed,
            worker,
            bound.worker,
            f"$.machine.fingerprint: machine {claimed!r} was first reported by {first_by} "
            f"({_when(bound.first_seen)}) with another fingerprint than worker {worker!r} now sends under that id "
            f"({'; '.join(differences)}): a machine's fingerprint never changes, so nothing stored",
        )
    return None
