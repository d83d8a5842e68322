"""The peak an MFU divides by: a datasheet's dense figure, the user's, or one measured on the spot.

The table (``vitprof/data/gpu_peaks.csv``) has one row per GPU and dtype (fp32, tf32, bf16,
fp16, fp8): the DENSE peak in TFLOP/s, the sparse figure kept in its own column and never used,
the figure as the vendor's document writes it and that document's name and address. A cell the
document leaves empty stays empty: that GPU and dtype then need ``peak_tflops=``. The GPU is
found by its name (``torch.cuda.get_device_name``) against each row's pattern; on the CPU the
"peak" is a measured matmul rate (:func:`vitprof.measure.peak.matmul_flops`), not a theoretical
peak, and its source says so. Where a datasheet prints a tensor-core figure with sparsity only
(the H200's), the row's dense figure is that figure halved, the arithmetic in ``written``.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import torch

from vitprof.core.errors import UserError
from vitprof.core.vocab import Device
from vitprof.measure.peak import MATMUL_SIZES, matmul_flops

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
ASK = "pass peak_tflops= (--peak-tflops) with its dense peak"
_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
          torch.float8_e4m3fn: "fp8", torch.float8_e5m2: "fp8"}
# the dtype a peak named so is measured in off a GPU (TF32 is the tensor cores' float32; fp8
# has no matmul to measure)
_MEASURED_IN = {name: dtype for dtype, name in _NAMES.items() if name != "fp8"} | {
    "tf32": torch.float32}


@dataclass(frozen=True)
class PeakRow:
    """One row of the table: ``dense_tflops`` None where the source has no dense figure."""

    gpu: str
    pattern: str
    dtype: str
    dense_tflops: float | None
    sparse_tflops: float | None
    written: str
    source: str
    url: str


@dataclass(frozen=True)
class ChosenPeak:
    """The peak an MFU is computed against, in TFLOP/s, and where it comes from (in words);
    ``measured``: measured on the spot; ``raised_from``: the measured peak this one was raised
    from (:func:`raised_to`), None for a peak as chosen."""

    tflops: float
    source: str
    measured: bool = False
    raised_from: ChosenPeak | None = None


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


@cache
def peak_table() -> tuple[PeakRow, ...]:
    """Every row of ``gpu_peaks.csv`` (lines starting with ``#`` are comments)."""
    text = resources.files("vitprof").joinpath("data", "gpu_peaks.csv").read_text("utf-8")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return tuple(
        PeakRow(row["gpu"], row["pattern"], row["dtype"], _number(row["dense_tflops"]),
                _number(row["sparse_tflops"]), row["written"], row["source"], row["url"])
        for row in csv.DictReader(lines)
    )


def given_peak(tflops: float) -> ChosenPeak:
    """The user's peak; one that is not a positive finite number is a UserError."""
    if (isinstance(tflops, bool) or not isinstance(tflops, int | float)
            or not 0 < tflops < math.inf):
        raise UserError(f"peak_tflops must be a positive, finite number of TFLOP/s, got "
                        f"{tflops!r}")
    return ChosenPeak(float(tflops), f"given: {tflops:g} TFLOP/s")


def dtype_name(dtype: torch.dtype | str) -> str:
    """``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"`` or ``"fp8"`` for a torch dtype or one of
    these names; float32 is tf32 when float32 matmuls may use TF32 (PyTorch's matmul precision
    is not ``"highest"``), which is what the tensor cores then run."""
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise UserError(f"unknown dtype '{dtype}'; choose from {', '.join(DTYPES)}")
        return dtype
    if dtype not in _NAMES:
        raise UserError(f"no peak for dtype {dtype}; choose from {', '.join(DTYPES)}")
    name = _NAMES[dtype]
    if name == "fp32" and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return name


def table_peak(device_name: str, dtype: str) -> ChosenPeak:
    """The dense peak of the GPU called ``device_name`` in ``dtype`` from the table."""
    rows = [row for row in peak_table()
            if row.dtype == dtype and re.search(row.pattern, device_name, re.IGNORECASE)]
    if len({row.gpu for row in rows}) != 1:
        raise UserError(f"no peak in vitprof's table for GPU '{device_name}'; {ASK}")
    row = rows[0]
    if row.dense_tflops is None:
        raise UserError(f"{row.source} gives no dense {dtype} peak for {row.gpu} ({row.written})"
                        f"; sparse figures are never used; {ASK}")
    return ChosenPeak(row.dense_tflops, f"{row.gpu} {dtype} dense {row.dense_tflops:g} TFLOP/s "
                      f"from the {row.source}: \"{row.written}\"")


def measured_peak(device: str, dtype: torch.dtype) -> ChosenPeak:
    """The best FLOP/s of a square matmul in ``dtype`` on ``device``, measured now."""
    n = MATMUL_SIZES.get(device, 1024)
    tflops = matmul_flops(device, dtype, n) / 1e12
    return ChosenPeak(tflops, f"measured: a matmul rate, not a theoretical peak: best of 5 "
                      f"{n}x{n} {_NAMES.get(dtype, dtype)} matmuls on "
                      f"{device}, {tflops:.3g} TFLOP/s", measured=True)


def raised_to(peak: ChosenPeak, tflops: float, step: int) -> ChosenPeak:
    """The measured ``peak`` raised to ``tflops``, the rate training step ``step`` reached.

    A measured peak is the best of a few matmuls at one moment: if the machine was busier then
    than during a later step, that step runs above it. The device has reached the step's rate,
    so the peak is at least that (a step also does work slower than matmuls: the raised peak is
    still a lower bound of the device's, and an MFU against it an upper bound). The source
    names the measurement and the step, never a chain of raises."""
    first = peak.raised_from or peak
    return ChosenPeak(tflops, f"{first.source}; raised to {tflops:.4g} TFLOP/s at step {step}, "
                      f"the fastest step's rate (the machine was busier when the peak was "
                      f"measured; each step's MFU is against its entry's peak_tflops)",
                      measured=True, raised_from=first)


def choose_peak(peak_tflops: float | None, device: torch.device, dtype: torch.dtype | str,
                *, device_name: str | None = None) -> ChosenPeak:
    """The user's peak if given; else the table's for a CUDA device (``device_name``: the GPU's
    name, read from torch when None); else one measured on the spot."""
    if peak_tflops is not None:
        return given_peak(peak_tflops)
    if device.type == Device.CUDA:
        name = device_name if device_name is not None else torch.cuda.get_device_name(device)
        return table_peak(name, dtype_name(dtype))
    return measured_peak(device.type, measured_dtype(dtype))


def measured_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """The torch dtype to measure a peak in: ``dtype``, or the one its name (a framework's
    precision: ``"bf16"``) stands for; fp8 has no matmul to measure."""
    if not isinstance(dtype, str):
        return dtype
    name = dtype_name(dtype)
    if name not in _MEASURED_IN:
        raise UserError(f"a {name} peak cannot be measured off a GPU; {ASK}")
    return _MEASURED_IN[name]
