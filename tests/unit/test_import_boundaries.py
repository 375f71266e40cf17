"""The rooms' import rules, as docs/architecture.md's "Rooms" table states them, read from the source with ``ast``.

Imports are resolved to the module really imported: ``from txnwatch import store`` is ``txnwatch.store`` and
``from txnwatch.store import models`` is ``txnwatch.store.models`` (a from-import checked as its bare package
would let ``from txnwatch import kafka`` through anywhere). Imports inside functions count too, and relative
imports are resolved against their package. ``importlib.import_module("x")`` and ``__import__("x")`` with a
literal name are imports of ``x`` like any other; with a name computed at run time the test cannot know what is
imported, so it fails unless :data:`DYNAMIC_ALLOWED` says why that one may. The table is parsed, not copied, so
the doc and the test cannot drift; the probes at the end write violating modules and show that every rule fails
on them.

Each row is true both ways: it lists nothing its room does not import.  Besides the table: no cycle between rooms, none between the modules of a room either (every import counts, those
in functions and under ``TYPE_CHECKING`` too: a cycle a reader must follow is one whether or not Python runs it),
and the modules of :data:`STDLIB_ONLY` import the standard library alone.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "service" / "txnwatch"
DOC = ROOT / "docs" / "architecture.md"

#: Standard-library modules that do I/O: never in detect/, which is pure.
IO_STDLIB = ("socket", "ssl", "subprocess", "urllib", "http", "asyncio", "threading", "multiprocessing",
             "concurrent", "selectors", "shutil")
#: ``compression`` is the standard library's zstd from Python 3.14 (the backport serves 3.11-3.13).
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
#: Modules that import the standard library and nothing else (not even txnwatch), and why.
STDLIB_ONLY = {
    "txnwatch.serve.metrics_port": "run by path as `python -I -S` (supervise/metrics_process.py): no site-packages, "
                                   "no txnwatch on its path, ~11 MB of RSS",
}
#: Modules allowed an import whose name is computed at run time, and why (none today: write the import out).
DYNAMIC_ALLOWED: dict[str, str] = {}


@dataclass(frozen=True)
class Rule:
    rooms: frozenset[str]
    libraries: frozenset[str]


@dataclass(frozen=True)
class Import:
    path: str  # relative to the package's parent, for messages
    line: int
    importer: str  # dotted module doing the import
    module: str  # dotted module imported


def rules_from_doc(text: str) -> dict[str, Rule]:
    """The "Rooms" table of docs/architecture.md: room -> the rooms and libraries it may import."""
    section = text.split("## Rooms", 1)[1].split("\n## ", 1)[0]
    rules: dict[str, Rule] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        room = cells[0].strip("`/")
        rooms = frozenset(r.strip("/") for r in re.findall(r"`([a-z_]+/)`", cells[2]))
        libraries = frozenset(re.findall(r"`([a-z_][a-z0-9_]*)`", cells[3]))
        rules[room] = Rule(rooms, libraries)
    return rules


def module_name(path: Path, root: Path) -> str:
    name = ".".join(path.relative_to(root).with_suffix("").parts)
    return name.removesuffix(".__init__")


def is_module(dotted: str, root: Path) -> bool:
    """A module of the tree: its source, its package, or the stub of a compiled one (kafka/_txnlog_walk.pyi)."""
    target = root.joinpath(*dotted.split("."))
    return (target.with_suffix(".py").is_file() or target.with_suffix(".pyi").is_file()
            or (target / "__init__.py").is_file())


#: What a dynamic import's name comes from when it is not a literal: the marker of :func:`imports`.
DYNAMIC = "<computed at run time>"


def _dynamic_import_callers(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names ``import_module`` is called by in this module (``from importlib import import_module as x``),
    and those ``importlib`` itself is bound to (``import importlib as il``)."""
    functions, modules = {"__import__"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "importlib" and not node.level:
            functions |= {a.asname or a.name for a in node.names if a.name in ("import_module", "__import__")}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "importlib"}
    return functions, modules


def _dynamic_name(node: ast.Call, functions: set[str], modules: set[str]) -> str | None:
    """The module a call of import_module/__import__ imports (:data:`DYNAMIC` when computed); None if not one."""
    func = node.func
    called = (isinstance(func, ast.Name) and func.id in functions) or (
        isinstance(func, ast.Attribute) and func.attr in ("import_module", "__import__")
        and isinstance(func.value, ast.Name) and func.value.id in modules)
    if not called:
        return None
    first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
        return first.value
    return DYNAMIC


def imports(path: Path, root: Path) -> Iterator[Import]:
    """Every module ``path`` imports, resolved to the name really imported (:data:`DYNAMIC` for a name computed at
    run time)."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    where = str(path.relative_to(root))
    tree = ast.parse(path.read_text(), str(path))
    functions, modules = _dynamic_import_callers(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := _dynamic_name(node, functions, modules)) is not None:
            yield Import(where, node.lineno, me, name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(where, node.lineno, me, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                # `from txnwatch import store` imports the module txnwatch.store, not the package txnwatch.
                candidate = f"{base}.{alias.name}"
                yield Import(where, node.lineno, me, candidate if is_module(candidate, root) else base)


def room_of(module: str) -> str | None:
    """``txnwatch.store.models`` -> ``store``; the package itself and its top-level modules have none."""
    parts = module.split(".")
    return parts[1] if parts[0] == "txnwatch" and len(parts) > 1 else None


def all_imports(root: Path) -> list[Import]:
    return [imp for path in sorted((root / "txnwatch").rglob("*.py")) for imp in imports(path, root)]


def violations(found: list[Import], rules: Mapping[str, Rule], root: Path) -> list[str]:
    """Imports that break a room's row: another room not listed, or a library not listed."""
    bad = []
    for imp in found:
        room = room_of(imp.importer)
        if room is None or not (root / "txnwatch" / room).is_dir():
            continue  # the package's own __init__/__main__: test_nothing_outside_a_room
        rule = rules.get(room)
        if rule is None:
            bad.append(f"{imp.path}: room {room}/ has no row in the Rooms table")
            continue
        if imp.module == DYNAMIC:
            if imp.importer not in DYNAMIC_ALLOWED:
                bad.append(f"{imp.path}:{imp.line} imports a module named at run time (write the import out, or "
                           "say why in DYNAMIC_ALLOWED)")
            continue
        top = imp.module.split(".")[0]
        if top == "txnwatch":
            target = room_of(imp.module)
            if target is not None and target not in (room, "core", *rule.rooms):  # None: txnwatch.__version__
                bad.append(f"{imp.path}:{imp.line} imports {imp.module} ({room}/ may not import {target}/)")
        elif top not in STDLIB and top not in rule.libraries:
            bad.append(f"{imp.path}:{imp.line} imports {imp.module} (library {top} not listed for {room}/)")
    return bad


def unused_in_rows(found: list[Import], rules: Mapping[str, Rule]) -> dict[str, list[str]]:
    """Per room, the rooms and libraries its row lists that none of its modules imports."""
    used: dict[str, set[str]] = {}
    for imp in found:
        room = room_of(imp.importer)
        top = imp.module.split(".")[0]
        if room is not None and imp.module != DYNAMIC:
            used.setdefault(room, set()).add((room_of(imp.module) or top) if top == "txnwatch" else top)
    return {room: sorted(f"{r}/" for r in rule.rooms - used.get(room, set()))
            + sorted(rule.libraries - used.get(room, set())) for room, rule in rules.items()}


def room_graph(found: list[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for imp in found:
        source, target = room_of(imp.importer), room_of(imp.module) if imp.module.startswith("txnwatch.") else None
        if source and target and source != target:
            graph.setdefault(source, set()).add(target)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every cycle between rooms, each once, as the path that closes it (depth-first, white/grey/black)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def module_graph(found: list[Import], root: Path) -> dict[str, set[str]]:
    """Module -> the modules of txnwatch it imports (itself and what is not a module of the tree left out)."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        if imp.module.startswith("txnwatch.") and imp.module != imp.importer and is_module(imp.module, root):
            graph.setdefault(imp.importer, set()).add(imp.module)
    return graph


def stdlib_only_violations(found: list[Import], only: Mapping[str, str]) -> list[str]:
    """Imports of a module of ``only`` that are not of the standard library (txnwatch's own included)."""
    return [f"{imp.path}:{imp.line} imports {imp.module} ({imp.importer}: the standard library only, "
            f"{only[imp.importer]})" for imp in found
            if imp.importer in only and imp.module.split(".")[0] not in STDLIB]


def inner_violations(found: list[Import], source: str, forbidden: str) -> list[str]:
    return [f"{imp.path}:{imp.line} imports {imp.module}" for imp in found
            if (imp.importer == source or imp.importer.startswith(source + "."))
            and (imp.module == forbidden or imp.module.startswith(forbidden + "."))]


RULES = rules_from_doc(DOC.read_text())
IMPORTS = all_imports(PACKAGE.parent)


def test_every_room_has_one_row_and_every_row_is_a_room() -> None:
    rooms = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert set(RULES) == rooms
    listed = {r for rule in RULES.values() for r in rule.rooms}
    assert listed <= rooms, listed - rooms


def test_nothing_outside_a_room() -> None:
    """A new module goes into the room of its job; only the package marker and ``python -m txnwatch`` sit on top."""
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]


@pytest.mark.parametrize("room", sorted(RULES))
def test_room_imports_only_what_its_row_allows(room: str) -> None:
    assert [v for v in violations(IMPORTS, RULES, PACKAGE.parent) if v.startswith(f"txnwatch/{room}/")] == []


@pytest.mark.parametrize("room", sorted(RULES))
def test_room_row_lists_nothing_the_room_does_not_import(room: str) -> None:
    """True both ways: a room or library left in a row after its last import went would let the next one in
    unseen."""
    assert unused_in_rows(IMPORTS, RULES)[room] == []


def test_no_cycle_between_rooms() -> None:
    assert cycles(room_graph(IMPORTS)) == []


def test_no_cycle_between_modules() -> None:
    """Inside a room too (between rooms it would be a cycle of rooms as well): each module can be read after the
    ones it imports."""
    assert cycles(module_graph(IMPORTS, PACKAGE.parent)) == []


def test_the_standard_library_only_modules_import_nothing_else() -> None:
    assert set(STDLIB_ONLY) <= {imp.importer for imp in IMPORTS}, "a module named in STDLIB_ONLY is gone"
    assert stdlib_only_violations(IMPORTS, STDLIB_ONLY) == []


def test_the_api_never_imports_the_console() -> None:
    assert inner_violations(IMPORTS, "txnwatch.serve.api", "txnwatch.serve.console") == []


def test_detect_does_no_io() -> None:
    found = [imp for imp in IMPORTS if room_of(imp.importer) == "detect"]
    assert [f"{i.path}:{i.line} {i.module}" for i in found if i.module.split(".")[0] in IO_STDLIB] == []


# ---- probes: every rule above fails on a module that breaks it ----


def _tree(tmp_path: Path, rooms: list[str]) -> Path:
    """A package with the given (empty) rooms; ``store`` gets a ``models`` module to import by name."""
    for room in [*rooms, "store"]:
        (tmp_path / "txnwatch" / room).mkdir(parents=True, exist_ok=True)
        (tmp_path / "txnwatch" / room / "__init__.py").write_text("")
    (tmp_path / "txnwatch" / "__init__.py").write_text("")
    (tmp_path / "txnwatch" / "store" / "models.py").write_text("")
    return tmp_path


@pytest.mark.parametrize("room", sorted(RULES))
def test_probe_each_room_rule_fails_on_a_room_it_may_not_import(tmp_path: Path, room: str) -> None:
    """``from txnwatch import X`` (the form the old check let through) of a room not in the row is refused."""
    forbidden = sorted(set(RULES) - RULES[room].rooms - {room, "core"})
    assert forbidden, f"{room}/ may import every room: no probe possible, the row is no rule"
    root = _tree(tmp_path, sorted(RULES))
    (root / "txnwatch" / room / "probe.py").write_text(f"from txnwatch import {forbidden[0]}\n")
    assert violations(all_imports(root), RULES, root) == [
        f"txnwatch/{room}/probe.py:1 imports txnwatch.{forbidden[0]} ({room}/ may not import {forbidden[0]}/)"]


@pytest.mark.parametrize("room", sorted(RULES))
def test_probe_each_room_rule_fails_on_an_unlisted_library(tmp_path: Path, room: str) -> None:
    root = _tree(tmp_path, sorted(RULES))
    (root / "txnwatch" / room / "probe.py").write_text("def f():\n    import requests\n")
    assert violations(all_imports(root), RULES, root) == [
        f"txnwatch/{room}/probe.py:2 imports requests (library requests not listed for {room}/)"]


@pytest.mark.parametrize("source", [
    pytest.param("from txnwatch import store\n", id="from-package-import-room"),
    pytest.param("from txnwatch.store import models\n", id="from-room-import-module"),
    pytest.param("import txnwatch.store.models as m\n", id="import-dotted"),
    pytest.param("from ..store import models\n", id="relative"),
    pytest.param("def f():\n    from txnwatch.store.models import X\n", id="lazy"),
])
def test_probe_every_import_form_is_resolved(tmp_path: Path, source: str) -> None:
    root = _tree(tmp_path, ["core", "detect", "store"])
    (root / "txnwatch" / "detect" / "probe.py").write_text(source)
    found = violations(all_imports(root), RULES, root)
    assert len(found) == 1 and "txnwatch.store" in found[0] and "(detect/ may not import store/)" in found[0]


def test_probe_a_row_listing_what_is_not_imported_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, ["core", "detect", "store"])
    (root / "txnwatch" / "store" / "probe.py").write_text("import sqlalchemy\n")
    rules = {"store": Rule(frozenset({"detect"}), frozenset({"sqlalchemy", "alembic"}))}
    assert unused_in_rows(all_imports(root), rules) == {"store": ["detect/", "alembic"]}


def test_probe_a_room_without_a_row_fails(tmp_path: Path) -> None:
    root = _tree(tmp_path, ["core", "detect", "store", "newroom"])
    (root / "txnwatch" / "newroom" / "probe.py").write_text("import json\n")
    assert violations(all_imports(root), RULES, root) == ["txnwatch/newroom/probe.py: room newroom/ has no row in the Rooms table"]


def test_probe_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_probe_a_cycle_between_rooms_in_source_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, ["core", "detect", "store"])
    (root / "txnwatch" / "detect" / "probe.py").write_text("from txnwatch import store\n")
    (root / "txnwatch" / "store" / "probe.py").write_text("from txnwatch.detect import probe\n")
    assert cycles(room_graph(all_imports(root))) == [["detect", "store", "detect"]]


@pytest.mark.parametrize(("source", "module"), [
    pytest.param("import importlib\ndef f():\n    importlib.import_module('txnwatch.store.models')\n",
                 "txnwatch.store.models", id="importlib-import-module"),
    pytest.param("from importlib import import_module as load\nload('txnwatch.store')\n", "txnwatch.store",
                 id="import-module-renamed"),
    pytest.param("__import__('txnwatch.store.models')\n", "txnwatch.store.models", id="dunder-import"),
    pytest.param("import importlib as il\nil.__import__(name='txnwatch.store')\n", "txnwatch.store",
                 id="importlib-dunder-import-keyword"),
])
def test_probe_a_literal_dynamic_import_is_an_import(tmp_path: Path, source: str, module: str) -> None:
    root = _tree(tmp_path, ["core", "detect", "store"])
    (root / "txnwatch" / "detect" / "probe.py").write_text(source)
    assert [v.partition(" imports ")[2] for v in violations(all_imports(root), RULES, root)] == [
        f"{module} (detect/ may not import store/)"]


@pytest.mark.parametrize("source", [
    pytest.param("import importlib\nNAME = 'txnwatch.store'\nimportlib.import_module(NAME)\n", id="a-variable"),
    pytest.param("from importlib import import_module\nimport_module('.models', 'txnwatch.store')\n",
                 id="relative"),
    pytest.param("__import__(f'txnwatch.{\"store\"}')\n", id="f-string"),
])
def test_probe_a_computed_dynamic_import_fails_unless_allowed(tmp_path: Path, source: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path, ["core", "detect", "store"])
    (root / "txnwatch" / "detect" / "probe.py").write_text(source)
    (found,) = violations(all_imports(root), RULES, root)
    assert found.startswith("txnwatch/detect/probe.py:") and "imports a module named at run time" in found
    monkeypatch.setitem(DYNAMIC_ALLOWED, "txnwatch.detect.probe", "a probe")
    assert violations(all_imports(root), RULES, root) == []


def test_probe_a_cycle_inside_a_room_is_found(tmp_path: Path) -> None:
    """Both imports in functions, one under TYPE_CHECKING: the cycle serve/ had between its server and its
    workers."""
    root = _tree(tmp_path, ["core", "serve"])
    (root / "txnwatch" / "serve" / "server.py").write_text("def serve():\n    from txnwatch.serve.workers import run\n")
    (root / "txnwatch" / "serve" / "workers.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from txnwatch.serve import server\n")
    found = all_imports(root)
    assert cycles(room_graph(found)) == []  # one room: the rooms' check cannot see it
    assert cycles(module_graph(found, root)) == [["txnwatch.serve.server", "txnwatch.serve.workers",
                                                  "txnwatch.serve.server"]]


def test_probe_a_stdlib_only_module_importing_anything_else_is_found(tmp_path: Path) -> None:
    """``from txnwatch.core import ...`` is allowed to every room, so only this rule refuses it here."""
    root = _tree(tmp_path, ["core", "serve"])
    (root / "txnwatch" / "serve" / "metrics_port.py").write_text(
        "import os\nimport zlib\nfrom _operator import _compare_digest\nfrom txnwatch.core import exitcodes\n"
        "def f():\n    import yaml\n")
    found = all_imports(root)
    assert [v for v in violations(found, RULES, root) if "core" in v] == []
    assert [v.partition(" (")[0] for v in stdlib_only_violations(found, STDLIB_ONLY)] == [
        "txnwatch/serve/metrics_port.py:4 imports txnwatch.core",
        "txnwatch/serve/metrics_port.py:6 imports yaml"]


def test_probe_api_importing_the_console_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, ["core", "serve", "serve/api", "serve/console"])
    (root / "txnwatch" / "serve" / "api" / "probe.py").write_text("from txnwatch.serve import console\n")
    assert inner_violations(all_imports(root), "txnwatch.serve.api", "txnwatch.serve.console") == [
        "txnwatch/serve/api/probe.py:1 imports txnwatch.serve.console"]


def test_probe_the_table_parser_reads_rooms_and_libraries() -> None:
    text = ("## Rooms\n\n| room | job | rooms | libraries |\n|---|---|---|---|\n"
            "| `a/` | x | `b/` `c/` | `sqlalchemy` `lz4` |\n| `b/` | y | — | — |\n\n## Next\n| `z/` | q | — | — |\n")
    assert rules_from_doc(text) == {"a": Rule(frozenset({"b", "c"}), frozenset({"sqlalchemy", "lz4"})),
                                    "b": Rule(frozenset(), frozenset())}
