"""An alert's life: new → bisecting → culprit-found, then a human triage state; triaged alerts stay quiet."""

from __future__ import annotations

AUTOMATIC = ("new", "bisecting", "culprit-found")
TRIAGE = ("acknowledged", "investigating", "fixed", "invalid", "wontfix", "backed-out")
STATES = AUTOMATIC + TRIAGE
# The vocabulary of master/bisection (bisections.state) plus pending/failed.
BISECTION_STATES = ("pending", "running", "culprit", "ambiguous", "not-reproducible", "failed")


class LifecycleError(ValueError):
    """A state change that the lifecycle does not allow; the message says which and why."""


def is_triaged(state: str) -> bool:
    """A human has looked at it: never notify again."""
    return state in TRIAGE


def parse_state(text: str) -> str:
    """Accept a state name as typed ('won't fix', 'backed out', 'Ack'), return its canonical form."""
    t = text.strip().lower().replace("'", "").replace("’", "").replace(" ", "-").replace("_", "-")
    aliases = {
        "ack": "acknowledged",
        "won-t-fix": "wontfix",
        "wont-fix": "wontfix",
        "backout": "backed-out",
        "backedout": "backed-out",
        "culprit": "culprit-found",
    }
    t = aliases.get(t, t)
    if t not in STATES:
        raise LifecycleError(f"unknown alert state {text!r}; one of: {', '.join(STATES)}")
    return t


def after_triage(current: str, wanted: str) -> str:
    """The state a human sets with `perffarm alerts ack|set-state` (only triage states, or back to new)."""
    if wanted not in TRIAGE and wanted != "new":
        raise LifecycleError(
            f"{wanted!r} is set by bisection, not by hand; set one of: {', '.join(TRIAGE)} (or 'new' to reopen)"
        )
    return wanted


def after_bisection(current: str, bisection_state: str, culprit_sha: str | None) -> str:
    """The automatic state once bisection reports progress; a triage state is never overwritten."""
    if bisection_state not in BISECTION_STATES:
        raise LifecycleError(f"unknown bisection state {bisection_state!r}; one of: {', '.join(BISECTION_STATES)}")
    if bisection_state == "culprit" and not culprit_sha:
        raise LifecycleError("bisection state 'culprit' needs the culprit commit")
    if is_triaged(current):
        return current
    if culprit_sha:
        return "culprit-found"
    if bisection_state in ("pending", "running"):
        return "bisecting"
    return current if current != "bisecting" else "new"  # ambiguous/not-reproducible/failed: an open range again
