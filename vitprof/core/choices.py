"""The range of ``profile --peak-tflops``, importable without torch.

Building a parser imports neither torch nor pandas nor matplotlib: the closed vocabularies the
parsers offer as choices are the enums of :mod:`vitprof.core.vocab`; the one open-ended choice,
a device peak, is bounded here.
"""

from __future__ import annotations

import math

# the peaks `profile --peak-tflops` takes, in TFLOP/s: from 1 GFLOP/s (less than one CPU core
# does) to 100 PFLOP/s (ten times the densest single accelerator). The share of peak is the
# measured FLOP/s over this number: a peak outside the range only makes that share absurd
# (1e-300 gave a 300-digit percentage), so it is refused before anything runs
PEAK_TFLOPS = (1e-3, 1e5)


def peak_tflops_error(value: float) -> str | None:
    """Why ``value`` is no device peak in TFLOP/s (a finite number in :data:`PEAK_TFLOPS`), or
    None when it is one."""
    if not (math.isfinite(value) and value > 0):
        return f"expected a finite positive number, got {value}"
    low, high = PEAK_TFLOPS
    if not low <= value <= high:
        return f"expected a peak from {low:g} to {high:g} TFLOP/s, got {value:g}"
    return None
