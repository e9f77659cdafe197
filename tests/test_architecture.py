"""The import graph is a ladder: no two modules of ingest/ or dashboard/ need each other.

Every import counts, wherever it stands (module level, inside a function, under TYPE_CHECKING):
an import tucked into a function to dodge a circle is still a circle a reader has to hold in
mind. docs/architecture.md draws the ladder this test keeps true."""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ingest", "dashboard")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def imported_names(path: Path, module: str, modules: Collection[str] = ()) -> Iterator[str]:
    """Every dotted name the module imports; `from a import b` yields `a.b`, and `a` unless every
    name it imports is a module of `modules` (then what it needs is those modules, as with
    `from a.b import c`)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
            yield from names
            if not all(name in modules for name in names):
                yield base


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (a `from a import b` names the module `a.b`
    when it exists, else the module `a`)."""
    modules = project_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target in imported_names(path, name, modules):
            if target in modules and target != name:
                graph[name].add(target)
            elif (
                (parent := target.rpartition(".")[0])
                and parent in modules
                and parent != name
                and f"{parent}." + target.rpartition(".")[2] not in modules
            ):
                graph[name].add(parent)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.mark.pure
def test_no_two_modules_of_ingest_or_dashboard_import_each_other():
    graph = import_graph()
    assert len(graph) > 100  # the walk really saw both packages
    assert circles(graph) == []


@pytest.mark.pure
def test_the_circle_finder_finds_a_circle_of_three():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.pure
def test_a_relative_import_resolves_to_the_module_it_names(tmp_path: Path):
    source = tmp_path / "views.py"
    source.write_text("from .forms import Form\nfrom ..engine import api\n")
    assert set(imported_names(source, "dashboard.views.runs")) >= {
        "dashboard.views.forms.Form",
        "dashboard.views.forms",
        "dashboard.engine.api",
    }


@pytest.mark.pure
def test_production_code_never_imports_the_demo_or_the_tests():
    graph = import_graph()
    offenders = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        if ".demo" not in name and "management" not in name
        for target in targets
        if ".demo" in f".{target}" or target.startswith("tests")
    )
    assert offenders == []


LADDER_DOC = ROOT / "docs" / "architecture.md"


def ladder() -> list[list[str]]:
    """The rungs of docs/architecture.md, top first; each a list of packages."""
    text = LADDER_DOC.read_text()
    block = text.split("<!-- ladder:start -->", 1)[1].split("<!-- ladder:end -->", 1)[0]
    rungs = []
    for line in block.strip().splitlines():
        names = []
        for word in line.split():
            if not word.replace(".", "").replace("_", "").isalnum() or not word.startswith(PACKAGES):
                break
            names.append(word)
        rungs.append(names)
    return rungs


def rung_of(module: str, rungs: list[list[str]]) -> int | None:
    """The rung of the longest package on the ladder that holds the module."""
    best: tuple[int, int] | None = None
    for rank, names in enumerate(rungs):
        for name in names:
            holds = module == name or module.startswith(name + ".")
            if holds and (best is None or len(name) > best[1]):
                best = (rank, len(name))
    return None if best is None else best[0]


@pytest.mark.pure
def test_every_module_stands_on_a_rung_of_the_documented_ladder():
    rungs = ladder()
    assert len(rungs) >= 8 and all(rungs)
    homeless = sorted(m for m in project_modules() if rung_of(m, rungs) is None)
    assert homeless == []


@pytest.mark.pure
def test_no_import_climbs_the_documented_ladder():
    rungs = ladder()
    climbs = sorted(
        f"{name} imports {target}"
        for name, targets in import_graph().items()
        for target in targets
        if (rung_of(target, rungs) or 0) < (rung_of(name, rungs) or 0)
    )
    assert climbs == []


@pytest.mark.pure
def test_the_ladder_check_catches_an_import_that_climbs():
    rungs = [["dashboard"], ["ingest.workflows"], ["ingest.engine"]]
    assert rung_of("ingest.engine.sql.claim", rungs) == 2
    assert rung_of("dashboard.views.runs", rungs) == 0
    assert rung_of("ingest.sources.gong", rungs) is None


# The engine's surface: what code outside `ingest/engine/` may import of it. `ingest.engine` is
# the facade, `ingest.engine.models` the ledger's tables, `ingest.engine.services.<thing>` the
# operator services (one module per thing an operator acts on; `services.base` is their own
# plumbing). Everything else is the engine's inside, free to change.
ENGINE_SURFACE = ("ingest.engine", "ingest.engine.models", "ingest.engine.services")
ENGINE_PRIVATE = ("ingest.engine.services.base",)
# Imports of the engine's inside that stay, each with why (module: reason). None is needed: what
# the dashboard reads of the engine (selectors, tracing's switches as functions that read them
# live, the secrets' masks) the facade exports.
ENGINE_ALLOWANCES: dict[str, str] = {}


def is_engine_surface(target: str) -> bool:
    if target in ENGINE_PRIVATE:
        return False
    return target in ENGINE_SURFACE or target.startswith("ingest.engine.services.")


def engine_internals_imported(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        if not (name == "ingest.engine" or name.startswith("ingest.engine."))
        for target in targets
        if target.startswith("ingest.engine.") and not is_engine_surface(target) and target not in ENGINE_ALLOWANCES
    )


@pytest.mark.pure
def test_code_outside_the_engine_imports_only_its_surface():
    graph = import_graph()
    assert engine_internals_imported(graph) == []
    # Each allowance is still needed, so the list cannot outlive its reason.
    used = {t for name, targets in graph.items() if not name.startswith("ingest.engine") for t in targets}
    assert sorted(set(ENGINE_ALLOWANCES) - used) == []


@pytest.mark.pure
def test_the_surface_check_catches_a_reach_into_the_engine(tmp_path: Path):
    source = tmp_path / "gong.py"
    source.write_text(
        "from ingest.engine.sql.create import instance_insert\nfrom ingest.engine import clock\n"
        "from ingest.engine.services import instances\nfrom ingest.engine.models import Instance\n"
    )
    modules = project_modules()
    targets = {t for t in imported_names(source, "ingest.workflows.gong", modules) if t in modules}
    found = engine_internals_imported({"ingest.workflows.gong": targets})
    assert found == [
        "ingest.workflows.gong imports ingest.engine.clock",
        "ingest.workflows.gong imports ingest.engine.sql.create",
    ]
    assert engine_internals_imported({"ingest.engine.api": {"ingest.engine.sql.create"}}) == []
    assert engine_internals_imported({"dashboard.x": {"ingest.engine.services.base"}}) == [
        "dashboard.x imports ingest.engine.services.base"
    ]


def orm_lock_modules_documented() -> list[str]:
    text = LADDER_DOC.read_text()
    block = text.split("<!-- orm-locks:start -->", 1)[1].split("<!-- orm-locks:end -->", 1)[0]
    return sorted(line.split()[0] for line in block.strip().splitlines())


def calls_select_for_update(path: Path) -> bool:
    return any(
        isinstance(node, ast.Attribute) and node.attr == "select_for_update"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
    )


@pytest.mark.pure
def test_the_engine_modules_that_lock_rows_through_the_orm_are_the_ones_the_doc_lists():
    locking = sorted(
        name
        for name, path in project_modules().items()
        if name.startswith("ingest.engine.")
        and not name.startswith("ingest.engine.sql.")
        and calls_select_for_update(path)
    )
    assert len(locking) >= 3  # the walk really found them
    assert locking == orm_lock_modules_documented()


# The engine's instance services that act on one instance (or start one): the console, the REST
# API, the command line and the live feed reach them only through `dashboard.actions`, which holds
# each action's rules (who may act, arguments, reason, audit entry) once.
INSTANCE_ACTION_SERVICES = (
    "ingest.engine.services.control",
    "ingest.engine.services.forks",
    "ingest.engine.services.instances",
)
INTERFACES = (
    "dashboard.views",
    "dashboard.api",
    "dashboard.management",
    "dashboard.cli",
    "dashboard.live",
    "dashboard.consumers",
)


def bypasses(modules: dict[str, Path]) -> list[str]:
    found = []
    for name, path in modules.items():
        if not name.startswith(INTERFACES):
            continue
        for target in imported_names(path, name):
            if target.startswith(INSTANCE_ACTION_SERVICES) or target in {
                f"ingest.engine.{n}" for n in ("create", "create_batch", "api")
            }:
                found.append(f"{name} imports {target}")
    return sorted(set(found))


@pytest.mark.pure
def test_the_console_api_and_cli_act_on_instances_only_through_the_action_service():
    assert bypasses(project_modules()) == []


@pytest.mark.pure
def test_the_action_path_check_catches_a_view_that_calls_the_engine_directly(tmp_path):
    rogue = tmp_path / "dashboard" / "views" / "rogue.py"
    rogue.parent.mkdir(parents=True)
    rogue.write_text(
        "from ingest.engine.services import control\nfrom ingest.engine.services.forks import instance_fork\n"
    )
    found = bypasses({"dashboard.views.rogue": rogue})
    assert found == [
        "dashboard.views.rogue imports ingest.engine.services.control",
        "dashboard.views.rogue imports ingest.engine.services.forks",
        "dashboard.views.rogue imports ingest.engine.services.forks.instance_fork",
    ]


# The differences between PostgreSQL and SQLite stand behind one adapter per concern: a class (or
# function) per vendor chosen once by `ByVendor` (ingest/engine/sql/base.py), so the code that
# calls it has one path. `is_postgres()` is defined there, and there ByVendor reads the default
# connection's vendor; a call of `is_postgres()` elsewhere, or a comparison of any connection's
# `.vendor`, is a branch on the database that no adapter holds. Those left (docs/architecture.md,
# "Where PostgreSQL and SQLite differ") decide what a caller may ask, or ask it of a connection
# handed in rather than the default one; this bound keeps new ones from creeping back in.
MAX_VENDOR_BRANCHES = 10
VENDOR_MODULE = "ingest.engine.sql.base"


def _is_vendor_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and not node.args
        and not node.keywords
        and (
            (isinstance(node.func, ast.Name) and node.func.id in ("is_postgres", "_is_postgres"))
            or (isinstance(node.func, ast.Attribute) and node.func.attr in ("is_postgres", "_is_postgres"))
        )
    )


def _is_vendor_comparison(node: ast.AST) -> bool:
    """`<any connection>.vendor` on either side of a comparison (==, !=, in, is…)."""
    return isinstance(node, ast.Compare) and any(
        isinstance(side, ast.Attribute) and side.attr == "vendor" for side in (node.left, *node.comparators)
    )


def vendor_branches(modules: dict[str, Path]) -> list[str]:
    """`module:line` of every call of `is_postgres()` and every comparison of a connection's
    `.vendor` outside the module that holds the adapter."""
    found = []
    for name, path in modules.items():
        if name == VENDOR_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if _is_vendor_call(node) or _is_vendor_comparison(node):
                found.append(f"{name}:{node.lineno}")
    return sorted(found)


@pytest.mark.pure
def test_the_branches_on_the_database_outside_its_adapters_are_few():
    modules = project_modules()
    assert VENDOR_MODULE in modules
    branches = vendor_branches(modules)
    assert len(branches) <= MAX_VENDOR_BRANCHES, branches


@pytest.mark.pure
def test_the_vendor_branch_count_sees_every_spelling_of_the_call(tmp_path: Path):
    source = tmp_path / "m.py"
    source.write_text(
        "from ingest.engine import is_postgres\nfrom ingest import engine\n"
        "def f():\n    if is_postgres():\n        return engine.is_postgres()\n"
        "    return _is_postgres() or is_postgres\n"
    )
    assert vendor_branches({"ingest.m": source}) == ["ingest.m:4", "ingest.m:5", "ingest.m:6"]
    assert vendor_branches({VENDOR_MODULE: source}) == []


@pytest.mark.pure
def test_the_vendor_branch_count_sees_every_comparison_of_a_connection_vendor(tmp_path: Path):
    source = tmp_path / "m.py"
    source.write_text(
        "from django.db import connection, connections\n"
        'def f(conn):\n    if connection.vendor == "postgresql":\n        return 1\n'
        '    hint = "M" if conn.vendor != "postgresql" else ""\n'
        '    return "sqlite" == connections["default"].vendor or conn.vendor in ("sqlite",), hint\n'
        "def g(conn):\n    return conn.vendor, vendor == 'sqlite'\n"
    )
    assert vendor_branches({"dashboard.m": source}) == [
        "dashboard.m:3",
        "dashboard.m:5",
        "dashboard.m:6",
        "dashboard.m:6",
    ]
    assert vendor_branches({VENDOR_MODULE: source}) == []
