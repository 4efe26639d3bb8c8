"""The results store is the only code that speaks SQL to results.sqlite, and it hands out records, not rows
(docs/results-db.md; issue #13 item 2: the boundary used to be a sentence in a docstring)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

MASTER = Path(__file__).resolve().parents[2] / "master"

# Modules outside master/store/ that may run SQL or open an SQLite database, each with the reason.
ALLOWED = {
    "publish/ratios.py": "owns the publish cache, publish-cache.sqlite (rQPS per point pair), not results.sqlite",
    "publish/cache.py": "the site's summaries and publish state, kept in the publish cache's database",
    "buildbotdb.py": "Buildbot's own database (master.buildbot_db_url), not results.sqlite: a SELECT 1 at start",
}
SQL = re.compile(r"\.(execute|executemany|executescript)\(|\bsqlite3\.connect\(")


def outside_the_store() -> list[tuple[str, Path]]:
    return [
        (p.relative_to(MASTER).as_posix(), p)
        for p in sorted(MASTER.rglob("*.py"))
        if not p.relative_to(MASTER).as_posix().startswith("store/")
    ]


def test_only_the_store_runs_sql() -> None:
    found = [
        f"master/{rel}:{n}: {line.strip()}"
        for rel, path in outside_the_store()
        if rel not in ALLOWED
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SQL.search(line)
    ]
    assert not found, (
        "SQL outside master/store/: move it into the store as a function that returns records "
        "(or, for another database than results.sqlite, add the module to ALLOWED with the "
        "reason):\n" + "\n".join(found)
    )


def test_every_allowed_module_still_needs_it() -> None:
    for rel in ALLOWED:
        assert SQL.search((MASTER / rel).read_text()), f"master/{rel} runs no SQL any more: drop it from ALLOWED"


def test_the_store_returns_records_not_rows() -> None:
    found = []
    for path in sorted((MASTER / "store").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.FunctionDef)
                and not node.name.startswith("_")
                and node.returns is not None
                and "sqlite3.Row" in ast.unparse(node.returns)
            ):
                found.append(f"master/store/{path.name}:{node.lineno}: {node.name} -> {ast.unparse(node.returns)}")
    assert not found, "public store functions return sqlite3.Row; give them a record type:\n" + "\n".join(found)
