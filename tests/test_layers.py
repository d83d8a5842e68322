"""The package layout is the architecture: imports run down the layers only, and no module
imports itself back through others (no import cycle).

Layers, lowest first: ``core`` (vocabulary, errors, JSON schemas) < ``count`` and ``models``
(counting and the models it counts) < ``workload`` and ``analysis`` (a model and its input, then
one analysis of it) < ``measure`` < ``checks`` and ``integrations`` (the training frameworks'
callbacks) < ``render`` < ``cli``. A module may import from
its own layer and those below it. Only module-level imports are read (an import inside a function is
a lazy one, for start-up time), ``if TYPE_CHECKING:`` blocks excluded.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "vitprof"
LAYERS = {"core": 0, "count": 1, "models": 1, "workload": 2, "analysis": 2, "measure": 3,
          "checks": 4, "integrations": 4, "render": 5, "cli": 6}
TOP = 7  # the package's own __init__ and its public entry points (testing, pytest_plugin)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def module_level_imports(path: Path) -> set[str]:
    """The vitprof modules ``path`` imports when it is imported."""
    found: set[str] = set()
    body = list(ast.parse(path.read_text()).body)
    while body:
        node = body.pop(0)
        if isinstance(node, ast.If) and not _is_type_checking(node):
            body.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            body.extend(node.body)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("vitprof"):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("vitprof"))
    return found


GRAPH = {module_name(p): module_level_imports(p) for p in PACKAGE.rglob("*.py")}


def test_the_graph_is_read() -> None:
    # a broken reader would pass every check below on an empty graph
    assert "vitprof.count.records" not in GRAPH and "vitprof.core.records" in GRAPH
    assert "vitprof.core.errors" in GRAPH["vitprof.analysis"]


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_run_down_the_layers(module: str) -> None:
    upward = sorted(m for m in GRAPH[module] if layer(m) > layer(module))
    assert not upward, f"{module} imports a higher layer: {upward}"


# The modules that build, analyse, count or measure: a renderer takes their finished results and
# never calls them (it may name their types under ``if TYPE_CHECKING:``).
COUNTING = ("vitprof.analysis", "vitprof.workload", "vitprof.count.session",
            "vitprof.measure.measure", "vitprof.checks.page_inputs")
RENDERERS = sorted(m for m in GRAPH if m == "vitprof.render" or m.startswith("vitprof.render."))


def test_the_counting_modules_exist() -> None:
    # a renamed module would leave the check below with nothing to find
    assert set(COUNTING) <= set(GRAPH)
    assert "vitprof.render.pages.zoo_table" in RENDERERS


@pytest.mark.parametrize("module", RENDERERS)
def test_renderers_never_count(module: str) -> None:
    counting = sorted(GRAPH[module] & set(COUNTING))
    assert not counting, f"{module} imports what counts: {counting}"


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every back edge of a depth-first walk, as the cycle it closes."""
    state: dict[str, int] = {}  # 1 on the walk's path, 2 done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(edges) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle() -> None:
    def with_parents(name: str) -> set[str]:  # importing a.b.c runs a.b's __init__ first
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(2, len(parts) + 1)}

    # a module's own packages are initialised before it runs: those edges are not cycles
    edges = {m: {t for i in imports for t in with_parents(i)
                 if t in GRAPH and t not in with_parents(m)}
             for m, imports in GRAPH.items()}
    assert not find_cycles(edges)
