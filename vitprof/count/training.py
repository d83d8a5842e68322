"""Training counts: what a training step is, and its counts by phase.

A training step (:func:`vitprof.count.session.training_step`) is counted as the forward in
train mode with gradients enabled, then the gradient of the output (a ones gradient on the
logits, so no loss function is charged) back to every parameter that requires one, by
``torch.autograd.grad`` so that no ``.grad`` of the user's model is written. Backward operations
carry no module stack: each is attributed to the forward operation whose autograd node runs it
(see :mod:`vitprof.count.counter`). The ratio of backward to forward is measured, not assumed: a
matmul whose two operands both need a gradient costs two matmuls backward, one whose input
needs none (the patch embedding's image) costs one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from vitprof.core.errors import UserError
from vitprof.core.records import COMPONENTS, Component, Counts, OpRecord, Phase


def first_output(out: Any) -> torch.Tensor:
    """The tensor a classifier returns: itself, ``.logits``, or the first tensor it holds."""
    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    values = out.values() if isinstance(out, dict) else out
    if isinstance(values, Iterable):
        for value in values:
            if isinstance(value, torch.Tensor):
                return value
    raise UserError(f"the model returned {type(out).__name__}, which holds no tensor")


@dataclass(frozen=True)
class PhaseCounts:
    """Forward and backward counts of one component (params stay with the forward)."""

    forward: Counts
    backward: Counts

    @property
    def total(self) -> Counts:
        return self.forward + self.backward

    @property
    def macs_ratio(self) -> float | None:
        """Backward MACs / forward MACs, None without forward MACs."""
        return self.backward.macs / self.forward.macs if self.forward.macs else None

    @property
    def vector_ratio(self) -> float | None:
        """Backward vector FLOPs / forward vector FLOPs, None without forward vector FLOPs."""
        if not self.forward.vector_flops:
            return None
        return self.backward.vector_flops / self.forward.vector_flops


def _counts(ops: Iterable[OpRecord]) -> Counts:
    ops = list(ops)
    return Counts(macs=sum(op.macs for op in ops), vector_flops=sum(op.vector_flops for op in ops))


def phase_components(ops: Iterable[OpRecord]) -> dict[Component, PhaseCounts]:
    """Forward and backward MACs and vector FLOPs of every component (zeros included)."""
    ops = list(ops)
    return {
        component: PhaseCounts(
            _counts(op for op in ops if op.component is component and op.phase == Phase.FORWARD),
            _counts(op for op in ops if op.component is component and op.phase == Phase.BACKWARD),
        )
        for component in COMPONENTS
    }


def phase_totals(ops: Iterable[OpRecord]) -> PhaseCounts:
    """Forward and backward counts of the whole model."""
    ops = list(ops)
    return PhaseCounts(
        _counts(op for op in ops if op.phase == Phase.FORWARD),
        _counts(op for op in ops if op.phase == Phase.BACKWARD),
    )


TRAINING_CONVENTION = ("a training step: forward in train mode, then the gradient of the output "
                       "(a ones gradient, no loss) to every trainable parameter")


def training_dict(ops: Iterable[OpRecord]) -> dict[str, object]:
    """The forward / backward split of a training step's records, for the JSON output."""
    ops = tuple(ops)

    def entry(counts: PhaseCounts) -> dict[str, object]:
        return {"forward": counts.forward.as_dict(), "backward": counts.backward.as_dict(),
                "macs_ratio": counts.macs_ratio, "vector_flops_ratio": counts.vector_ratio}

    return {
        "convention": TRAINING_CONVENTION,
        "total": entry(phase_totals(ops)),
        "components": {str(c): entry(v) for c, v in phase_components(ops).items()},
    }
