"""The MFU tracker used as a stranger would: precisions named as the frameworks name them,
peaks that are not numbers a device can reach, loops the authors did not write the tracker
around (gradient accumulation in Lightning, a batch that is a dict, a forward the training step
does not call). The framework cases are ``slow``: they start Lightning's Trainer."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from vitprof.core.errors import UserError
from vitprof.measure.mfu.peaks import choose_peak, given_peak
from vitprof.measure.peak import best_seconds, matmul_flops


@pytest.mark.parametrize(("name", "dtype"), [("bf16", torch.bfloat16), ("fp16", torch.float16),
                                             ("fp32", torch.float32)])
def test_the_cpu_peak_is_measured_in_a_dtype_given_by_name(
        monkeypatch: pytest.MonkeyPatch, name: str, dtype: torch.dtype) -> None:
    """Lightning's ``precision="bf16-mixed"`` reaches the tracker as the name "bf16": on the CPU
    the peak is measured in bfloat16, not dropped with the MFU."""
    measured: list[torch.dtype] = []

    def matmul_flops(device: str, dtype: torch.dtype, n: int) -> float:
        measured.append(dtype)
        return 5e10

    monkeypatch.setattr("vitprof.measure.mfu.peaks.matmul_flops", matmul_flops)
    peak = choose_peak(None, torch.device("cpu"), name)
    assert measured == [dtype]
    assert peak.measured and peak.tflops == 0.05 and f" {name} matmuls" in peak.source  # 5e10/1e12


def test_fp8_cannot_be_measured_on_the_cpu_in_one_line() -> None:
    with pytest.raises(UserError, match="fp8") as raised:
        choose_peak(None, torch.device("cpu"), "fp8")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("peak", [float("inf"), 1e400])
def test_an_infinite_peak_is_refused(peak: Any) -> None:
    """An infinite peak would make every MFU 0.0, a value that looks measured."""
    with pytest.raises(UserError, match="peak_tflops must be a positive number"):
        given_peak(peak)


def test_the_measured_peak_is_not_below_a_linear_layer_in_the_same_dtype() -> None:
    """Without native bf16 (an AVX2 CPU), ``torch.mm`` in bfloat16 runs a reference loop some
    20 x slower than ``F.linear`` (oneDNN), which ``nn.Linear`` under autocast runs: a peak
    measured with ``mm`` was below what a bf16-mixed training step achieved, and the MFU above
    100% stopped the training. Timings: the best of a few calls of each; a factor 2 of margin."""
    n = 256
    a, b = torch.randn(n, n, dtype=torch.bfloat16), torch.randn(n, n, dtype=torch.bfloat16)
    with torch.inference_mode():
        linear = 2 * n**3 / best_seconds(lambda: torch.nn.functional.linear(a, b), "cpu", 3)
    assert matmul_flops("cpu", torch.bfloat16, size=n, repeats=3) > linear / 2
