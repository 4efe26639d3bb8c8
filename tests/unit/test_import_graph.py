"""No import circles among the farm's modules or packages, and a command line that loads only what it uses (issue
#30 items 2 and 3: `settings` -> `buildbotdb`/`config_values`/`alerts.config` -> `alerts.kinds` -> `alerts.channels` ->
`settings` was a circle hidden by TYPE_CHECKING and function-level imports, and `import master.cli` loaded
numpy, scipy and requests, so every verb, `--help` included, paid for them)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("master", "recipes")


def modules() -> dict[str, Path]:
    """Every module of master/ and recipes/ by its dotted name (a package by its __init__.py)."""
    out = {}
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _known(name: str, mods: dict[str, Path]) -> str | None:
    """The farm's module that `name` (a module, or a module's attribute) resolves to, or None (stdlib, third party)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> dict[str, int]:
    """The farm's modules `name` imports, each with the first line: every import statement counts, at module
    level, in a function, or under `if TYPE_CHECKING:` (a circle hidden there is still a circle)."""
    out: dict[str, int] = {}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [_known(a.name, mods) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else _known(base, mods) for a in node.names]
        for target in targets:
            if target and target != name:
                out.setdefault(target, node.lineno)
    return out


def import_graph() -> dict[str, dict[str, int]]:
    mods = modules()
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, in name order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    members = set(component)
    ties = [f"  {a} -> {b} (line {line})" for a in component for b, line in sorted(graph[a].items()) if b in members]
    return " <-> ".join(component) + "\n" + "\n".join(ties)


def test_the_finder_sees_a_circle_through_a_function_level_import() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 3}, "c": {"a": 7}, "d": {"a": 2}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b": 1}, "b": {}}) == []


def test_imports_are_read_at_every_level(tmp_path: Path) -> None:
    mods = {"pkg": tmp_path / "pkg/__init__.py", "pkg.x": tmp_path / "pkg/x.py", "pkg.y": tmp_path / "pkg/y.py"}
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.y import Y\n"
        "def f():\n    from . import y\n    import json\n"
    )
    (tmp_path / "pkg").mkdir()
    mods["pkg.x"].write_text(source)
    assert imports_of("pkg.x", mods["pkg.x"], mods) == {"pkg.y": 3}


def test_no_import_circles_in_master_and_recipes() -> None:
    graph = import_graph()
    found = circles(graph)
    assert not found, (
        "modules that import each other (module-level, function-level or TYPE_CHECKING imports alike): move the "
        "shared code down into a module both can import, instead of hiding an import in a function:\n"
        + "\n".join(describe(c, graph) for c in found)
    )


# What a command line that only parses arguments, reads settings and prints must not load. The statistics stack,
# the HTTP client, the templates and the results store's modules are for the verbs that use them.
HEAVY = ("numpy", "scipy", "requests", "jinja2", "sqlalchemy", "twisted", "buildbot", "master.store.series")


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def _heavy(loaded: set[str]) -> list[str]:
    """The heavy packages loaded (by their top-level name), and the results store's modules."""
    return sorted({m.split(".")[0] for m in loaded if m.split(".")[0] in HEAVY} | {m for m in loaded if m in HEAVY})


def test_importing_the_command_line_loads_nothing_heavy() -> None:
    heavy = _heavy(_loaded_after("import master.cli"))
    assert not heavy, f"`import master.cli` loads {heavy}: import them inside the verb that needs them"


def _loaded_after_help(argv: list[str], then: str = "") -> set[str]:
    """What `perffarm ARGV --help` (its output thrown away), then the code `then`, leave loaded."""
    return _loaded_after(
        "import contextlib, io\nfrom master import cli, settings\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    cli.main({[*argv, '--help']!r})\n{then}"
    )


def test_the_parser_and_settings_load_nothing_heavy() -> None:
    heavy = _heavy(_loaded_after_help([], "settings.load_settings()"))
    assert not heavy, f"`perffarm --help` and loading the settings load {heavy}"


def test_detect_help_loads_no_statistics() -> None:
    # `perffarm detect FILE.csv` needs numpy and scipy; its --help only the parser and the directions it offers
    heavy = _heavy(_loaded_after_help(["detect"]))
    assert not heavy, f"`perffarm detect --help` loads {heavy}"


def test_listing_alerts_loads_no_statistics_and_no_http_client() -> None:
    # `perffarm alerts list` and `channels` read the store; only show, ack, set-state and deliver need the core
    code = "from master import cli\ncli.build_parser(lazy=True).parse_args(['alerts', 'list'])"
    heavy = [m for m in _heavy(_loaded_after(code)) if not m.startswith("master.store")]
    assert not heavy, f"mounting `perffarm alerts` loads {heavy}"


def package_graph(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The module graph with each package below master/ and recipes/ (master.alerts, recipes.pg) as one node: the
    recipes' contract (recipes.api, recipes.paired, recipes.stats) must not import a recipe that implements it."""

    def node(name: str) -> str:
        parts = name.split(".")
        return ".".join(parts[:2]) if len(parts) > 2 or (ROOT / parts[0] / parts[-1]).is_dir() else name

    out: dict[str, dict[str, int]] = {}
    for a, targets in graph.items():
        for b, line in targets.items():
            if node(a) != node(b):
                out.setdefault(node(a), {}).setdefault(node(b), line)
            out.setdefault(node(b), {})
    return out


def test_no_feature_package_imports_what_imports_it() -> None:
    # A package's CLI or Buildbot adapter importing the settings, the pipeline or the launcher, which import the
    # package's core, is a climb back up: verbs live in master/verbs/, adapters beside master/farm.py. Likewise
    # recipes/paired.py (the contract every recipe follows) taking its statistics from recipes/pg/, which imports it.
    graph = import_graph()
    packages = package_graph(graph)
    found = circles(packages)
    detail = [
        f"  {a} -> {b} (line {line})"
        for c in found
        for a, targets in sorted(graph.items())
        for b, line in sorted(targets.items())
        if {_node_of(a, packages), _node_of(b, packages)} <= set(c) and _node_of(a, packages) != _node_of(b, packages)
    ]
    assert not found, "packages that import each other:\n" + "\n".join(detail)


def _node_of(name: str, packages: dict[str, dict[str, int]]) -> str:
    return next((p for p in (name, ".".join(name.split(".")[:2]), name.split(".")[0]) if p in packages), name)
