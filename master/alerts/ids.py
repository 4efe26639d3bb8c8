"""An alert by the id a person types: the full id, or an unambiguous short one (`perffarm alerts show 3f2a`).

Apart from `sync` so that the verbs that only read alerts (`perffarm alerts list`, `show`) load no statistics.
"""

from __future__ import annotations

import sqlite3

from master import store


class AlertNotFound(LookupError):
    """No alert (or more than one) matches the id given."""


def resolve(conn: sqlite3.Connection, alert_id: str) -> str:
    """A full alert id from a full or unambiguous short one."""
    found = store.alerts.find_alerts(conn, alert_id.strip())
    exact = [r for r in found if r.id == alert_id.strip().lower()]
    if exact:
        return exact[0].id
    if len(found) != 1:
        raise AlertNotFound(
            f"no alert matches {alert_id!r}"
            if not found
            else f"{alert_id!r} is ambiguous: {', '.join(r.id for r in found[:5])}"
        )
    return found[0].id
