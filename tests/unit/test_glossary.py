"""docs/glossary.md names code that exists (issue #30, one meaning per word): every file, directory, module
attribute, table and column in a term's "where it lives" cell is checked against the tree and against the schema the
migrations build, so a rename that forgets the glossary fails here."""

from __future__ import annotations

import ast
import re
import sqlite3
from functools import cache
from pathlib import Path

from master.store.connection import migrate

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "glossary.md"
PACKAGES = ("", "master/", "recipes/", "workers/")  # where a path the glossary abbreviates is looked for
_TICKED = re.compile(r"`([^`]+)`")
_NAMES = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


def rows() -> list[tuple[str, str]]:
    """(term, where it lives) of every row of the glossary's table."""
    out = []
    for line in GLOSSARY.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("**"):
            out.append((cells[0].strip("*"), cells[2]))
    return out


@cache
def schema() -> dict[str, set[str]]:
    """table -> its columns, as the migrations build them."""
    conn = sqlite3.connect(":memory:")
    migrate(conn)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables}


def find(path: str) -> Path | None:
    """A file or directory the glossary names, abbreviated or not (`publish/source.py` is master/publish/...)."""
    for prefix in PACKAGES:
        p = ROOT / prefix / path
        if p.exists():
            return p
    return None


@cache
def top_level(path: Path) -> set[str]:
    """The names a module defines at its top level, and the members of its classes as `Class.member`."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(f"{node.name}.{item.name}")
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(f"{node.name}.{item.target.id}")
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def module_of(dotted: str) -> tuple[Path, str] | None:
    """(module file, the rest) for `analysis.LoadedSeries` or `alerts/messages.AlertSnapshot`: the longest
    prefix that is a module file the glossary can abbreviate."""
    head, _, tail = dotted.rpartition("/")
    parts = tail.split(".")
    for i in range(len(parts) - 1, 0, -1):
        found = find(f"{head}/{'/'.join(parts[:i])}.py" if head else f"{'/'.join(parts[:i])}.py")
        if found is not None and found.is_file():
            return found, ".".join(parts[i:])
    return None


def problems(where: str) -> list[str]:
    """What in one "where it lives" cell names nothing: `name` after a file in parentheses must be defined there."""
    out = []
    current: Path | None = None  # the last file named: a bare `Name` in parentheses after it is looked up there
    for token in _TICKED.findall(where):
        token = token.strip()
        if token.endswith(".py") or token.endswith("/"):
            found = find(token)
            if found is None:
                out.append(f"{token}: no such file or directory")
            current = found if found is not None and found.is_file() else None
            continue
        table, _, column = token.partition(".")
        if "/" not in token and table in schema():
            if column and column not in schema()[table]:
                out.append(f"{token}: table {table} has no column {column}")
            continue
        if "/" in token or ("." in token and module_of(token) is not None):
            hit = module_of(token)
            if hit is None:
                out.append(f"{token}: no such module")
            elif hit[1] not in top_level(hit[0]):
                out.append(f"{token}: {hit[0].relative_to(ROOT)} does not define {hit[1]}")
            continue
        if current is not None and _NAMES.match(token):
            if token not in top_level(current):
                out.append(f"{token}: {current.relative_to(ROOT)} does not define it")
            continue
        out.append(f"{token}: neither a file, a module attribute, a table nor a column")
    return out


def test_every_glossary_entry_names_code_that_exists() -> None:
    found = rows()
    assert len(found) >= 20, f"the glossary's table was not read: {len(found)} rows"
    bad = {term: p for term, where in found if (p := problems(where))}
    assert not bad, bad


def test_the_checker_refuses_names_that_do_not_exist() -> None:
    assert problems("`master/nosuch.py`") == ["master/nosuch.py: no such file or directory"]
    assert problems("`master/analysis.py` (`NoSuchThing`)") == ["NoSuchThing: master/analysis.py does not define it"]
    assert problems("`runs.no_such_column`") == ["runs.no_such_column: table runs has no column no_such_column"]
    assert problems("`publish/source.NoSuchRef`") == [
        "publish/source.NoSuchRef: master/publish/source.py does not define NoSuchRef"
    ]
    assert problems("`runs.config_hash`; `publish/source.SeriesRef`; `commits`") == []
