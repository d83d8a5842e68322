"""``notebooks/vit_complexity.ipynb`` is committed with its outputs and still runs."""

from __future__ import annotations

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


def _run_in_process(notebook: nbformat.NotebookNode) -> None:
    """Fallback without a Jupyter kernel: every code cell in one namespace, in order."""
    namespace: dict[str, object] = {}
    for cell in notebook.cells:
        if cell.cell_type == "code":
            exec(compile(cell.source, f"<{cell.id}>", "exec"), namespace)


def test_notebook_is_committed_with_its_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(c.execution_count and c.outputs for c in code)
    assert not any(o.output_type == "error" for c in code for o in c.outputs)
    text = str([c.outputs for c in code])
    assert f"macs={VIT_B_16_MACS}" in text


@pytest.mark.slow
def test_notebook_runs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    if not _has_python3_kernel():
        _run_in_process(notebook)
        return
    from nbclient import NotebookClient

    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not any(o.output_type == "error" for o in outputs)
    assert f"macs={VIT_B_16_MACS}" in str(outputs)
