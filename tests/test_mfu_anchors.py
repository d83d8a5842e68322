"""benchmarks/mfu_anchors.py's comparison of peaks with Lightning's, as docs/mfu.md shows it.

Lightning's ``get_available_flops`` is called as a training run calls it, with
``torch.cuda.get_device_name`` answering each GPU's real name: for ``"NVIDIA H200"`` it has no
figure (its table's H200 keys are ``"h200 sxm1"`` and ``"h200 nvl1"``, names no H200 reports),
so ``ThroughputMonitor`` logs no MFU on an H200 at all.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
spec = importlib.util.spec_from_file_location("mfu_anchors", ROOT / "benchmarks" / "mfu_anchors.py")
assert spec is not None and spec.loader is not None
anchors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(anchors)


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "bf16", "fp16"])
def test_lightning_has_no_peak_for_an_h200_by_its_real_name(dtype: str) -> None:
    assert anchors.lightning_peak("NVIDIA H200", (9, 0), dtype) is None


@pytest.mark.parametrize(("name", "capability", "dtype", "tflops"), [
    ("NVIDIA H100 80GB HBM3", (9, 0), "bf16", 989.4),  # its table's "h100 sxm", dense
    ("NVIDIA A100-SXM4-80GB", (8, 0), "tf32", 156.0),
    ("NVIDIA A100-SXM4-80GB", (8, 0), "fp32", 19.5),  # matmul precision "highest"
    ("NVIDIA GeForce RTX 4090", (8, 9), "bf16", 82.6),  # the non-tensor figure, 165.2 / 2
])
def test_lightning_peaks_by_real_device_names(name: str, capability: tuple[int, int],
                                              dtype: str, tflops: float) -> None:
    assert anchors.lightning_peak(name, capability, dtype) == pytest.approx(tflops)


def test_the_pages_comparison_is_the_generated_one() -> None:
    table = "\n".join(anchors.peaks())
    assert '| H200 SXM ("NVIDIA H200") | bf16 | 989.5 | None (no MFU) |  |' in table
    assert table in (ROOT / "docs" / "mfu.md").read_text()
