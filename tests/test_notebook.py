"""``notebooks/vit_complexity.ipynb`` is committed with its outputs and still runs."""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "vit_complexity.ipynb"
# torchvision vit_b_16, batch 1: 196 x 768 x 768 patch MACs + 12 blocks of 1,453,954,560 MACs
# + 768 x 1000 head MACs = 17,563,828,224
VIT_B_16_MACS = 196 * 768 * 768 + 12 * 1_453_954_560 + 768 * 1000


def _has_python3_kernel() -> bool:
    from jupyter_client.kernelspec import KernelSpecManager

    return "python3" in KernelSpecManager().find_kernel_specs()


def _run_in_process(notebook: nbformat.NotebookNode) -> str:
    """Fallback without a Jupyter kernel: every code cell in one namespace, in order; what the
    cells print and the repr of each cell's last expression (what Jupyter would show), as text.
    A failing cell raises."""
    namespace: dict[str, object] = {}
    shown = io.StringIO()
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        with contextlib.redirect_stdout(shown):
            exec(compile(tree, f"<{cell.id}>", "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), f"<{cell.id}>", "eval"),
                             namespace)
                print(repr(value))
    return shown.getvalue()


def _run_in_kernel(notebook: nbformat.NotebookNode) -> str:
    """Every cell in a fresh python3 kernel; the outputs as text. A failing cell raises."""
    from nbclient import NotebookClient

    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not any(o.output_type == "error" for o in outputs)
    return str(outputs)


def test_notebook_is_committed_with_its_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(c.execution_count and c.outputs for c in code)
    assert not any(o.output_type == "error" for c in code for o in c.outputs)
    text = str([c.outputs for c in code])
    assert f"macs={VIT_B_16_MACS}" in text
    # the training-memory cell: vitprof.memory's markdown section (its peak line), then the
    # timeline drawn from it
    assert "## Training memory: " in text and "- peak: " in text
    memory_cell = next(i for i, c in enumerate(code) if "timeline_figure" in c.source)
    assert "image/png" in code[memory_cell + 1].outputs[0]["data"]


@pytest.mark.slow
def test_notebook_runs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    run = _run_in_kernel if _has_python3_kernel() else _run_in_process
    shown = run(notebook)
    # the first cell's last expression, profile.totals, and the crossover the sweep prints
    assert f"macs={VIT_B_16_MACS}" in shown
    assert "N* = 3,072.0 tokens" in shown  # core 2 N^2 D = MLP 2 N D M at N = M = 3072


def test_in_process_fallback_shows_prints_and_last_expressions() -> None:
    cells = [nbformat.v4.new_code_cell("x = 6\nprint('six')\nx * 7"),
             nbformat.v4.new_code_cell("y = x + 1  # no expression last: nothing shown")]
    assert _run_in_process(nbformat.v4.new_notebook(cells=cells)) == "six\n42\n"
    failing = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")])
    with pytest.raises(ZeroDivisionError):
        _run_in_process(failing)


def test_the_committed_cells_are_the_builders() -> None:
    # the notebook is built by notebooks/build_notebook.py: a cell edited there and not rebuilt
    # (or edited in the .ipynb alone) would show code the builder no longer writes
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_notebook",
                                                  REPO / "notebooks" / "build_notebook.py")
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    kept = nbformat.read(NOTEBOOK, as_version=4).cells
    assert [(c.cell_type, c.source) for c in builder.build().cells] == [
        (c.cell_type, c.source) for c in kept]
