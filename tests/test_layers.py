"""The package layout is the architecture: imports run down the layers only, and no module
imports itself back through others (no import cycle).

Layers, lowest first: ``core`` (vocabulary, errors, JSON schemas) < ``count`` and ``models``
(counting and the models it counts) < ``recognize`` (what the counted records and parameters
are: components, blocks, the rules that place them, the self-checks of that meaning) <
``workload``, ``analysis`` and ``sweep`` (a model and its input, then one analysis of it, or a
series of them along one axis) < ``measure`` < ``checks``
and ``integrations`` (the training frameworks' callbacks) < ``render`` < ``study`` (the notes'
corrections, the model pages: a user of the public API) < ``cli``. A module may import from
its own layer and those below it. Every import is read, lazy ones (inside a function, for
start-up time) included; only ``if TYPE_CHECKING:`` blocks are left out, as they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "vitprof"
LAYERS = {"core": 0, "count": 1, "models": 1, "recognize": 2, "workload": 3, "analysis": 3,
          "sweep": 3, "measure": 4, "checks": 5, "integrations": 5, "render": 6, "study": 7,
          "cli": 8}
TOP = 9  # the package's own __init__ and its public entry points (testing, pytest_plugin)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    """The ids of every node under an ``if TYPE_CHECKING:`` (its ``else`` runs)."""
    return {id(inner) for node in ast.walk(tree)
            if isinstance(node, ast.If) and _is_type_checking(node)
            for statement in node.body for inner in ast.walk(statement)}


def imports(path: Path) -> set[str]:
    """The vitprof modules ``path`` imports, at import time or later, inside a function."""
    tree = ast.parse(path.read_text())
    skipped = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("vitprof"):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("vitprof"))
    return found


GRAPH = {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def test_the_graph_is_read() -> None:
    # a broken reader would pass every check below on an empty graph
    assert "vitprof.count.records" not in GRAPH and "vitprof.core.records" in GRAPH
    assert "vitprof.core.errors" in GRAPH["vitprof.analysis"]


def test_lazy_imports_are_read(tmp_path: Path) -> None:
    # an import inside a function runs when it is called: it is read; one that never runs
    # (under ``if TYPE_CHECKING:``) is not
    source = tmp_path / "lazy.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from vitprof.render import tables\n"
                      "def show():\n    from vitprof.render.formats import render\n"
                      "    import vitprof.cli.main\n")
    assert imports(source) == {"vitprof.render.formats", "vitprof.cli.main"}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_run_down_the_layers(module: str) -> None:
    upward = sorted(m for m in GRAPH[module] if layer(m) > layer(module))
    assert not upward, f"{module} imports a higher layer: {upward}"


# The modules that build, analyse, count or measure: a renderer takes their finished results and
# never calls them (it may name their types under ``if TYPE_CHECKING:``).
COUNTING = ("vitprof.analysis", "vitprof.workload", "vitprof.count.session",
            "vitprof.measure.profile", "vitprof.study.page_inputs")
RENDERERS = sorted(m for m in GRAPH if m == "vitprof.render" or m.startswith("vitprof.render.")
                   or m.startswith("vitprof.study.pages."))


def test_the_counting_modules_exist() -> None:
    # a renamed module would leave the check below with nothing to find
    assert set(COUNTING) <= set(GRAPH)
    assert "vitprof.study.pages.zoo_table" in RENDERERS


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


def test_the_sweep_is_an_analysis_not_a_check() -> None:
    # a sweep runs analyze() along one axis: it sits beside analysis, and vitprof.checks.sweep,
    # its former home, re-exports it for the public API (docs/api.md)
    import vitprof.checks.sweep as former
    import vitprof.sweep as sweeps

    assert layer(sweeps.__name__) == LAYERS["analysis"]
    assert GRAPH["vitprof.checks.sweep"] == {"vitprof.sweep"}
    assert all(getattr(former, name) is getattr(sweeps, name) for name in former.__all__)


# ---- the benchmarks are scripts above the package: a test runs one as a command ---------------

TESTS = Path(__file__).resolve().parent
BENCHMARKS = PACKAGE.parent / "benchmarks"
# what a module is imported as, where benchmarks/ is on sys.path or the repository root is
SCRIPTS = {path.stem for path in BENCHMARKS.glob("*.py")} | {BENCHMARKS.name}
FILE_LOADERS = {"spec_from_file_location", "exec_module", "run_path"}  # importlib, runpy
PATH_CHANGES = {"sys.path.insert", "sys.path.append", "sys.path.extend", "syspath_prepend"}
NAME_LOADERS = {"import_module", "__import__"}


def _called(call: ast.Call) -> str:
    """The name a call calls (``f`` of ``f(...)`` and of ``x.f(...)``)."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else ast.unparse(call.func)


def _changes_sys_path(call: ast.Call) -> bool:
    """``sys.path.insert(...)``, ``.append``, ``.extend``, or pytest's ``syspath_prepend``."""
    return _called(call) == "syspath_prepend" or ast.unparse(call.func) in PATH_CHANGES


def loads_a_benchmark_script(source: str) -> bool:
    """Whether a test's ``source`` imports a script of benchmarks/ as a module: an import
    statement, or ``import_module``/``__import__`` of a constant, naming one (or the folder);
    ``import_module`` of a name computed at run time beside a change of ``sys.path``; or, where
    the source names the folder, a file loaded by importlib or runpy, or a change of
    ``sys.path``."""
    tree = ast.parse(source)
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names]
    imported += [node.module for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level]
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    by_name = [call.args[0] for call in calls if _called(call) in NAME_LOADERS and call.args]
    imported += [arg.value for arg in by_name
                 if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    if any(name.split(".")[0] in SCRIPTS for name in imported):
        return True
    changes_path = any(_changes_sys_path(call) for call in calls) or any(
        isinstance(target, ast.Attribute | ast.Subscript) and "sys.path" in ast.unparse(target)
        for node in ast.walk(tree) if isinstance(node, ast.Assign | ast.AugAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]))
    computed = any(not isinstance(arg, ast.Constant) for arg in by_name)
    loads_files = any(_called(call) in FILE_LOADERS for call in calls)
    return (computed and changes_path) or (BENCHMARKS.name in source and (
        loads_files or changes_path))


@pytest.mark.parametrize(("source", "loads"), [
    ("sys.path.insert(0, str(ROOT / 'benchmarks'))\nimport memory_rows", True),
    ("sys.path.append(BENCH)\nrows = importlib.import_module(name)", True),  # a helper's name
    ("monkeypatch.syspath_prepend(BENCH)\nmodule = import_module(name)", True),
    ("sys.path[:0] = [str(BENCH)]\nmodule = __import__(name)", True),
    ("rows = importlib.import_module('memory_rows')", True),
    ("from benchmarks.memory_rows import Row", True),
    ("from mesa_memory import MesaRow", True),
    ("spec = importlib.util.spec_from_file_location('x', ROOT / 'benchmarks' / 'x.py')", True),
    ("runpy.run_path(str(ROOT / 'benchmarks' / 'x.py'))", True),
    ("subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'memory_rows.py'), '--list'])",
     False),
    ("module = importlib.import_module(f'{registry.__name__}.{name}')", False),
    ("breakdown = import_module('vitprof.recognize.breakdown')", False),
    ("sys.path.insert(0, str(ROOT / 'tools'))\nimport published", False),
])
def test_the_guard_sees_each_way_of_loading_a_script(source: str, loads: bool) -> None:
    assert loads_a_benchmark_script(source) is loads


def test_no_test_loads_a_benchmark_script_as_a_module() -> None:
    # a test runs a script as a command (subprocess), or imports the package feature it uses
    loading = sorted(path.name for path in TESTS.glob("test_*.py")
                     if path.name != Path(__file__).name
                     and loads_a_benchmark_script(path.read_text()))
    assert loading == []


def test_every_folder_of_code_is_a_package() -> None:
    # setuptools' packages.find (pyproject.toml) ships a folder only when it has an __init__.py:
    # a folder of modules without one is importable from a checkout but absent from a wheel
    folders = {path.parent for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts}
    assert sorted(str(f.relative_to(PACKAGE)) for f in folders
                  if not (f / "__init__.py").is_file()) == []
