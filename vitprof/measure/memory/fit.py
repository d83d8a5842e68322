"""The largest batch whose predicted peak fits a memory size, from a few predictions.

For a fixed graph the peak is affine in the batch (every activation is a batch of per-sample
tensors; parameters, gradients and optimizer state do not depend on it), up to the allocator's
rounding and the moment of the peak, which can move (an optimizer-step peak at small batches, a
backward one at large). So: predict at the batch asked for and at twice it, solve the line for
the memory size, then check the answer ``b`` and ``b + 1`` by predicting them, narrowing the
interval between a batch that fits and one that does not by the line through its ends when the
line was off. Each prediction runs on fake tensors, so a batch of thousands costs what a batch
of one does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from vitprof.core.errors import UserError
from vitprof.core.validate import check_int
from vitprof.measure.memory.spelling import SettingError

MAX_PREDICTIONS = 24
# the largest memory size searched: 1 PiB, past any device; a size far above it puts the line's
# batch past what a tensor's sizes hold (int64), and each prediction would fail
MAX_FIT = 2**50


class Predicted(Protocol):
    """The estimate the search starts from."""

    @property
    def batch_size(self) -> int: ...
    @property
    def peak_bytes(self) -> int: ...


def check_fit(fit: object) -> int:
    """``fit`` if it is a memory size the search can answer: an int from 1 to :data:`MAX_FIT`
    bytes; else a UserError."""
    size = check_int("memory size", fit, 1)
    if size > MAX_FIT:
        raise UserError(f"memory size must be at most {_gib(MAX_FIT)}, 1 PiB, got {size:,} "
                        f"bytes")
    return size


def _gib(n: int) -> str:
    return f"{n:,} bytes ({n / 2**30:,.2f} GiB)"


def largest_batch(peak: Callable[[int], int], fit: int, start: Predicted, fixed: int) -> int:
    """The largest batch ``b`` with ``peak(b) <= fit`` (0 when batch 1 does not fit);
    ``start`` is the prediction at the batch asked for, ``fixed`` the bytes that do not depend
    on the batch (a ``fit`` below them is a UserError: no batch can fit)."""
    if fit < fixed:
        raise SettingError(lambda s: f"{s.name('fit')} {_gib(fit)} is smaller than the "
                           "parameters, gradients and optimizer state alone (with buffers and "
                           f"any workspace), {_gib(fixed)}")
    known = {start.batch_size: start.peak_bytes}

    def at(batch: int) -> int:
        if batch not in known:
            if len(known) >= MAX_PREDICTIONS:
                raise SettingError(lambda s: f"{s.name('fit')}: no answer after "
                                   f"{MAX_PREDICTIONS} predictions")
            known[batch] = peak(batch)
        return known[batch]

    low, high = 0, None  # the largest batch known to fit (0: none), the smallest known not to
    at(2 * start.batch_size)
    while high is None or high - low > 1:
        guess = _next(known, low, high, fit)
        if at(guess) > fit:
            high = guess
        elif at(guess + 1) > fit:
            return guess
        else:
            low = guess + 1
    return low


def _next(known: dict[int, int], low: int, high: int | None, fit: int) -> int:
    """The next batch to try, strictly between ``low`` and ``high``: where the line through
    the two known points nearest the answer reaches ``fit``."""
    fits = sorted(b for b, p in known.items() if p <= fit)
    over = sorted(b for b, p in known.items() if p > fit)
    if fits and over:
        b1, b2 = fits[-1], over[0]
    else:
        b1, b2 = sorted((fits or over)[-2:] if fits else over[:2])
    guess = _solve(b1, known[b1], b2, known[b2], fit)
    guess = max(guess, low + 1)
    return guess if high is None else min(guess, high - 1)


def _solve(b1: int, p1: int, b2: int, p2: int, fit: int) -> int:
    """The batch where the line through ``(b1, p1)`` and ``(b2, p2)`` reaches ``fit``, floored
    (at least 1)."""
    slope = (p2 - p1) / (b2 - b1) if b2 != b1 else 0
    if slope <= 0:
        return b2 + 1
    return max(1, int(b1 + (fit - p1) // slope))
