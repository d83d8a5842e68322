"""The training loop a memory step models: its loss, where ``zero_grad()`` stands, gradient
accumulation, and a frozen backbone.

A :class:`Loop` is what ``vitprof.memory``'s ``loss``, ``zero_grad``, ``set_to_none``,
``gradient_accumulation`` and ``freeze`` say; :meth:`Loop.code` writes it as the loop a torch
user writes. The step modelled is the last forward and backward of an optimizer step, then the
step (with accumulation, ``batch_size`` is the micro-batch's), and what it holds follows:

* ``loss``: ``ones`` (``out.backward(torch.ones_like(out))``, no loss function: the default),
  ``sum`` (``model(x).sum().backward()``), ``cross-entropy`` (``F.cross_entropy(logits, y)``
  on the model's ``(batch, classes)`` output, ``y`` int64 labels: an input), taken outside
  autocast.
* **Gradients alive through the forward** (:attr:`Loop.grads_through_forward`): those of the
  previous backward, when ``set_to_none`` is False (kept as zeros), with accumulation (the
  earlier micro-batches' backward wrote them), or when ``zero_grad()`` stands between the
  forward and the backward (``before-backward``, the tutorials' loop: with ``set_to_none`` it
  frees them there). ``start`` and ``end`` model the same step: either way the gradients are
  freed before the next forward.
* **The backward accumulates in place** (:attr:`Loop.grads_at_backward`) where gradients exist
  when it runs: each new gradient is added to ``.grad`` and freed, as torch's
  ``AccumulateGrad`` does; otherwise the new gradients are the ``.grad`` tensors.
* ``freeze="backbone"``: every parameter but the head's (the breakdown's ``head``
  component) has ``requires_grad`` False: no gradient and no optimizer state for them, and the
  forward saves only what the head's backward needs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from vitprof.core.records import Component
from vitprof.core.vocab import Freeze, Loss, ZeroGrad
from vitprof.count.session import Backward, ones_backward
from vitprof.count.training import first_output
from vitprof.measure.memory.spelling import SettingError
from vitprof.recognize.tables import ComponentMap

DEFAULT_LOSS = Loss.ONES


@dataclass(frozen=True)
class Loop:
    """The training loop of a memory step (see the module); the defaults are the step vitprof
    modelled before these settings existed."""

    loss: Loss = DEFAULT_LOSS
    zero_grad: ZeroGrad = ZeroGrad.START
    set_to_none: bool = True
    accumulation: int = 1
    freeze: Freeze = Freeze.NONE

    @property
    def grads_through_forward(self) -> bool:
        """Whether the previous backward's gradients are alive through the forward."""
        return self.grads_at_backward or self.zero_grad is ZeroGrad.BEFORE_BACKWARD

    @property
    def grads_at_backward(self) -> bool:
        """Whether gradients exist when the backward runs (it accumulates into them)."""
        return self.accumulation > 1 or not self.set_to_none

    def code(self) -> str:
        """The loop as its user writes it, on one line."""
        zero = "opt.zero_grad()" if self.set_to_none else "opt.zero_grad(set_to_none=False)"
        forward, backward = {
            Loss.ONES: ("out = model(x)", "out.backward(torch.ones_like(out))"),
            Loss.SUM: ("loss = model(x).sum()", "loss.backward()"),
            Loss.CROSS_ENTROPY: ("loss = F.cross_entropy(model(x), y)", "loss.backward()"),
        }[self.loss]
        n = self.accumulation
        passes = f"{forward}; {backward}" if n == 1 else f"{n} x ({forward}; {backward})"
        if self.zero_grad is ZeroGrad.START:
            body = f"{zero}; {passes}; opt.step()"
        elif self.zero_grad is ZeroGrad.END:
            body = f"{passes}; opt.step(); {zero}"
        else:
            more = f"; {n - 1} more x ({forward}; {backward})" if n > 1 else ""
            body = f"{forward}; {zero}; {backward}{more}; opt.step()"
        frozen = "the backbone frozen (requires_grad False but the head); " \
            if self.freeze is Freeze.BACKBONE else ""
        return f"{frozen}for each step: {body}"


def trainable(module: nn.Module, mapping: ComponentMap, loop: Loop) -> set[str]:
    """The names of the parameters the loop trains: those that require a gradient, and of
    those only the head's when the backbone is frozen."""
    names = {name for name, p in module.named_parameters() if p.requires_grad}
    if loop.freeze is Freeze.NONE:
        return names
    head = {name for name, component in mapping.params.items() if component == Component.HEAD}
    if not head & names:
        raise SettingError(lambda s: f"{s.setting('freeze', 'backbone')} trains the head "
                           "alone, and the breakdown found no trainable head parameter in this "
                           "model")
    return head & names


@contextmanager
def loss_of_output(module: nn.Module, loss: str, labels: torch.Tensor | None
                   ) -> Iterator[None]:
    """``module``'s output replaced by the ``loss`` of it (a forward hook on the root, after
    any autocast hook left: the loss is taken outside autocast); nothing for ``ones``."""
    if loss == DEFAULT_LOSS:
        yield
        return

    def taken(_module: nn.Module, _args: Any, out: Any) -> torch.Tensor:
        logits = first_output(out)
        if loss == Loss.SUM:
            return logits.sum()
        if logits.dim() != 2 or labels is None:
            shape = "x".join(map(str, logits.shape))
            raise SettingError(lambda s: f"{s.setting('loss', 'cross-entropy')} takes logits "
                               f"of shape (batch, classes); this model returns {shape}")
        return torch.nn.functional.cross_entropy(logits, labels)

    handle = module.register_forward_hook(taken)
    try:
        yield
    finally:
        handle.remove()


def labels_of(loss: Loss, batch: int) -> torch.Tensor | None:
    """The int64 labels ``cross-entropy`` takes, one per image (zeros: their values move no
    byte), made in the mode that is on (fake tensors in a step); None for another loss."""
    return torch.zeros(batch, dtype=torch.int64) if loss == Loss.CROSS_ENTROPY else None


def backward_of(loop: Loop) -> Backward | None:
    """How the loop's backward runs: accumulating into the gradients that exist, after freeing
    them (``zero_grad()`` before the backward), or (None) the counter's own backward."""
    if loop.grads_at_backward:
        return backward_into_grads
    if loop.grads_through_forward:
        return backward_freeing_grads
    return None


def backward_freeing_grads(out: torch.Tensor, leaves: Sequence[torch.Tensor]
                           ) -> dict[int, torch.Tensor]:
    """``opt.zero_grad()`` (to None) just before the backward: each leaf's ``.grad`` freed, then
    :func:`~vitprof.count.session.ones_backward`."""
    for leaf in leaves:
        leaf.grad = None
    return ones_backward(out, leaves)


def backward_into_grads(out: torch.Tensor, leaves: Sequence[torch.Tensor]
                        ) -> dict[int, torch.Tensor]:
    """``out.backward()`` of a ones gradient, accumulating into each leaf's ``.grad`` as
    torch's ``AccumulateGrad`` does (in place where it exists); the ``.grad`` of each leaf, by
    its ``id``."""
    out.backward(torch.ones_like(out))
    return {id(leaf): leaf.grad for leaf in leaves if leaf.grad is not None}
