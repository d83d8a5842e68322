"""Training-step FLOPs for a tracker: counted once per input shape, on meta, and cached.

A step's count is :func:`vitprof.analyze` with ``mode="train"`` on the batch the model was fed:
the forward in train mode and the backward to every parameter that requires a gradient
(:mod:`vitprof.count.training`), so that a frozen parameter's weight gradient, which autograd
does not compute, is not counted either. ``flops`` is 2 x (forward + backward MACs), the
convention of ``torch.utils.flop_counter.FlopCounterMode``; element-wise work is kept apart as
vector FLOPs. A new batch size or resolution is counted again, never scaled: the cache is keyed
by the shapes and dtypes of the inputs (and the values of the non-tensor ones).

A step a ``forward`` on meta does not stand for (a LightningModule without ``forward``, a
Trainer's own ``compute_loss``) is counted by a callback as it runs instead
(:mod:`vitprof.measure.mfu.live_count`), once per input signature: the callback keeps that count
here (:meth:`StepCounts.keep`) and hands the tracker a :class:`RanStep` for each such
micro-batch, which reads it back.

Inside DistributedDataParallel or FSDP2 (``fully_shard``) the count is the rank's own step, the
unsharded matmuls it runs on its batch, with no collective
(:func:`vitprof.measure.mfu.ranks.local_computation`).

A model the meta device cannot run is counted by ``analyze``'s fallback, a real training step
on the model's device under the memory guard (:func:`vitprof.count.running.ensure_fits`), and
the count says so; one that cannot be counted at all gives None and one warning, so that the
user's training goes on.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from vitprof.analysis import analyze
from vitprof.core.errors import UserError
from vitprof.count.running import one_line
from vitprof.count.training import phase_components, phase_totals
from vitprof.measure.mfu.ranks import local_computation


@dataclass(frozen=True)
class StepFlops:
    """The counts of one training step: MACs by phase, vector FLOPs, FLOPs per component
    (2 x MACs, forward + backward) and the note of a count made with real tensors."""

    forward_macs: int
    backward_macs: int
    vector_flops: int
    components: dict[str, int]
    note: str | None = None

    @property
    def flops(self) -> int:
        """Forward + backward FLOPs, 2 x MACs."""
        return 2 * (self.forward_macs + self.backward_macs)

    def __add__(self, other: StepFlops) -> StepFlops:
        components = {k: v + other.components.get(k, 0) for k, v in self.components.items()}
        return StepFlops(self.forward_macs + other.forward_macs,
                         self.backward_macs + other.backward_macs,
                         self.vector_flops + other.vector_flops, components,
                         self.note or other.note)


def signature(inputs: Any) -> Hashable:
    """What a count depends on: each tensor's shape and dtype, each other leaf's value (its type
    where it cannot be hashed), and the structure holding them."""
    leaves, spec = tree_flatten(inputs)

    def key(leaf: Any) -> Hashable:
        if isinstance(leaf, torch.Tensor):
            return ("tensor", tuple(leaf.shape), leaf.dtype)
        return leaf if isinstance(leaf, Hashable) else type(leaf).__name__

    return (str(spec), tuple(key(leaf) for leaf in leaves))


def count_step(model: nn.Module, inputs: Any) -> StepFlops:
    """Count one training step of ``model`` fed ``inputs`` (as ``analyze(inputs=...)`` takes
    them: a tensor, a tuple of positional arguments, a dict of keyword arguments or
    ``(args, kwargs)``). None is refused: to ``analyze`` it means the model's own input (batch
    1, its default size), not a batch it was fed."""
    if inputs is None:
        raise UserError("the batch is None, not the inputs the model was fed (a tensor, a tuple "
                        "of positional arguments, a dict of keyword arguments or (args, kwargs))")
    with local_computation(model) as local:
        profile = analyze(local, mode="train", inputs=inputs)
    totals = phase_totals(profile.ops)
    components = {str(c): 2 * v.total.macs for c, v in phase_components(profile.ops).items()}
    return StepFlops(totals.forward.macs, totals.backward.macs,
                     totals.forward.vector_flops + totals.backward.vector_flops, components,
                     profile.fallback)


@dataclass(frozen=True)
class RanStep:
    """A micro-batch whose count was made as a step ran, kept in :class:`StepCounts` under
    ``key``; ``here``: this micro-batch is the one that was counted, so its time holds the
    count."""

    key: Hashable
    here: bool = False


class StepCounts:
    """The counted steps of one model, by input signature. ``counts`` is the number of counts
    made (one per new signature); a failed count is remembered as None and warned of once."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.cache: dict[Hashable, StepFlops | None] = {}
        self.counts = 0

    def of(self, inputs: Any) -> StepFlops | None:
        """The counts of a step on ``inputs``, counted now if their signature is new; of a
        :class:`RanStep`, the count kept for it."""
        if isinstance(inputs, RanStep):
            return self.cache.get(inputs.key)
        key = signature(inputs)
        if key not in self.cache:
            self.counts += 1
            self.cache[key] = self._count(inputs)
        return self.cache[key]

    def known(self, key: Hashable) -> bool:
        """Whether a count is kept under ``key`` (None, a count that failed, is one)."""
        return key in self.cache

    def keep(self, key: Hashable, counted: StepFlops | None) -> None:
        """Keep ``counted``, a count made as a step ran, under ``key``."""
        self.counts += 1
        self.cache[key] = counted

    def _count(self, inputs: Any) -> StepFlops | None:
        try:
            counted = count_step(self.model, inputs)
        except Exception as error:  # a UserError, or vitprof's own failure: training goes on
            reason = str(error) if isinstance(error, UserError) else one_line(error)
            warnings.warn(f"vitprof: this step cannot be counted, no MFU for it: {reason}",
                          stacklevel=3)
            return None
        if counted.note is not None:
            warnings.warn(f"vitprof: {counted.note}", stacklevel=3)
        return counted
