"""Closed vocabularies that command-line parsers offer as choices, importable without torch.

``vitprof --help``, ``vitprof X --help`` and usage errors build every command's parser; the
choices they list live here (or in another module that imports nothing heavy, such as the format
registry :mod:`vitprof.render.formats`) so that building a parser imports neither torch nor
pandas nor matplotlib. The modules that act on these values
import them from here; each list is written once.
"""

from __future__ import annotations

import math

from vitprof.core.records import Recognizer

PROFILE_DTYPES = ("float32", "bfloat16", "float16")  # torch dtype names `profile` measures in
# how a breakdown is recognized (:class:`vitprof.core.records.Recognizer`), as plain strings:
# argparse shows repr()
RECOGNIZERS: tuple[str, ...] = tuple(r.value for r in Recognizer)
VIEWS = ("component", "block", "module", "op")  # the breakdowns `analyze --by` offers
# the peaks `profile --peak-tflops` takes, in TFLOP/s: from 1 GFLOP/s (less than one CPU core
# does) to 100 PFLOP/s (ten times the densest single accelerator). The share of peak is the
# measured FLOP/s over this number: a peak outside the range only makes that share absurd
# (1e-300 gave a 300-digit percentage), so it is refused before anything runs
PEAK_TFLOPS = (1e-3, 1e5)
SWEEP_AXES: dict[str, str] = {  # the dimension `sweep` varies -> its label in tables and figures
    "image_size": "image size (px)",
    "depth": "depth (blocks)",
    "width": "width D",
}


def peak_tflops_error(value: float) -> str | None:
    """Why ``value`` is no device peak in TFLOP/s (a finite number in :data:`PEAK_TFLOPS`), or
    None when it is one."""
    if not (math.isfinite(value) and value > 0):
        return f"expected a finite positive number, got {value}"
    low, high = PEAK_TFLOPS
    if not low <= value <= high:
        return f"expected a peak from {low:g} to {high:g} TFLOP/s, got {value:g}"
    return None
# `vitprof memory`: the optimizers whose state it models, the autocast dtypes, whose kernels and
# allocator it models (target), the attention kernels and what a step is (mode)
OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")
AMP_DTYPES = ("bfloat16", "float16")
MEMORY_TARGETS = ("cuda", "cpu")
ATTENTION_PATHS = ("auto", "math", "efficient", "flash")  # auto: what torch dispatches to
MEMORY_MODES = ("train", "inference")
# the training loop a memory step models (:mod:`vitprof.measure.memory_loop`): the loss taken of
# the output, where zero_grad() stands in the loop, and what of the model is frozen
LOSSES = ("ones", "sum", "cross-entropy")
ZERO_GRAD_PLACES = ("start", "before-backward", "end")
FREEZES = ("none", "backbone")
# the data-parallel strategy of each rank's step (:mod:`vitprof.measure.distributed`): none (one
# process), DDP, DDP with ZeroRedundancyOptimizer, FSDP2 without and with resharding after the
# forward
STRATEGIES = ("none", "ddp", "zero1", "zero2", "fsdp")
