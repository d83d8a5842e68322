"""benchmarks/mfu_anchors.py's comparison of peaks with Lightning's, as docs/mfu.md shows it,
read from the script's output (``--peaks``): the script runs as a script, its own process.

Lightning's ``get_available_flops`` is called as a training run calls it, with
``torch.cuda.get_device_name`` answering each GPU's real name: for ``"NVIDIA H200"`` it has no
figure (its table's H200 keys are ``"h200 sxm1"`` and ``"h200 nvl1"``, names no H200 reports),
so ``ThroughputMonitor`` logs no MFU on an H200 at all.
"""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

pytest.importorskip("lightning")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "mfu_anchors.py"
# | H100 SXM ("NVIDIA H100 80GB HBM3") | bf16 | 989.5 | 989.4 | 1.00 |
ROW = re.compile(r'^\| [^|]* \("(?P<name>[^"]+)"\) \| (?P<dtype>\w+) \| [^|]* \| '
                 r'(?P<theirs>[^|]+) \|')


@cache
def printed() -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), "--peaks"], capture_output=True,
                          text=True, check=True, cwd=ROOT, timeout=600)
    return done.stdout.strip()


def lightning_peak(name: str, dtype: str) -> str:
    """The Lightning column of the row of ``name`` (the GPU's real name) and ``dtype``."""
    for line in printed().splitlines():
        if (match := ROW.match(line)) and (match["name"], match["dtype"]) == (name, dtype):
            return match["theirs"].strip()
    raise AssertionError(f"no row for {name} {dtype}")


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "bf16", "fp16"])
def test_lightning_has_no_peak_for_an_h200_by_its_real_name(dtype: str) -> None:
    assert lightning_peak("NVIDIA H200", dtype) == "None (no MFU)"


@pytest.mark.parametrize(("name", "dtype", "tflops"), [
    ("NVIDIA H100 80GB HBM3", "bf16", 989.4),  # its table's "h100 sxm", dense
    ("NVIDIA A100-SXM4-80GB", "tf32", 156.0),
    ("NVIDIA A100-SXM4-80GB", "fp32", 19.5),  # matmul precision "highest"
    ("NVIDIA GeForce RTX 4090", "bf16", 82.6),  # the non-tensor figure, 165.2 / 2
])
def test_lightning_peaks_by_real_device_names(name: str, dtype: str, tflops: float) -> None:
    assert float(lightning_peak(name, dtype)) == pytest.approx(tflops)


def test_the_pages_comparison_is_the_generated_one() -> None:
    table = printed()
    assert '| H200 SXM ("NVIDIA H200") | bf16 | 989.5 | None (no MFU) |  |' in table
    assert table in (ROOT / "docs" / "mfu.md").read_text()
