"""Machines as people read them: a name, an owner and a description per worker (`workers.about`), like the
buildfarm's animals, instead of a 12-hex fingerprint id. Pure: the caller passes the stored binding (which
worker reported the machine, its fingerprint) and the settings' table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

About = tuple[str, str, str, str]  # (worker, name, owner, description), as AlertSettings.machine_about holds it


@dataclass(frozen=True)
class MachineView:
    """One machine as shown: `name` is the operator's name for its worker, else the machine id."""

    id: str
    name: str
    owner: str
    description: str
    worker: str | None
    generation: int = 0  # the k-th machine its named worker has reported (a fingerprint change), 0 if the only one

    @property
    def named(self) -> bool:
        return self.name != self.id

    def label(self) -> str:
        """`name (id)` when named, else the id: the id stays visible, since series and files are keyed by it."""
        return f"{self.name} ({self.id})" if self.named else self.id


def from_fingerprint(fp: Mapping[str, Any]) -> str:
    """A description from what the worker reported (workers/hostinfo.py): CPU, cores, memory, OS, compiler."""
    parts = []
    if fp.get("cpu_model"):
        parts.append(str(fp["cpu_model"]))
    if isinstance(fp.get("cores"), int) and fp["cores"] > 0:
        parts.append(f"{fp['cores']} cores")
    if isinstance(fp.get("memory_bytes"), int) and fp["memory_bytes"] > 0:
        parts.append(f"{round(fp['memory_bytes'] / 2**30)} GiB")
    for key in ("os", "compiler"):
        if fp.get(key):
            parts.append(str(fp[key]))
    return ", ".join(parts)


def view(
    machine_id: str,
    worker: str | None,
    fingerprint: Mapping[str, Any],
    about: Iterable[About],
    generation: int = 0,
) -> MachineView:
    """The machine as people read it: the operator's name, owner and description for the worker it is bound
    to; the description from its fingerprint when the operator gave none. A named worker that has reported more
    than one machine (its fingerprint changed: new hardware, another OS or compiler) names each by its
    ``generation`` (``generations``), so the charts tell the old machine's series from the new one's."""
    found = next((a for a in about if worker is not None and a[0] == worker), None)
    name, owner, description = (found[1], found[2], found[3]) if found else (machine_id, "", "")
    generation = generation if found else 0
    if generation:
        name = f"{name} (generation {generation})"
    return MachineView(machine_id, name, owner, description or from_fingerprint(fingerprint), worker, generation)


def generations(machines: Iterable[tuple[str, str | None, float]]) -> dict[str, int]:
    """(machine id, worker, first seen) of the stored machines -> the generation of each machine whose worker has
    reported more than one: 1 for the first seen, 2 for the next, ... (ties by id)."""
    by_worker: dict[str, list[tuple[float, str]]] = {}
    for machine_id, worker, first_seen in machines:
        if worker is not None:
            by_worker.setdefault(worker, []).append((first_seen, machine_id))
    out: dict[str, int] = {}
    for seen in by_worker.values():
        if len(seen) > 1:
            out.update({machine_id: k for k, (_, machine_id) in enumerate(sorted(seen), 1)})
    return out
