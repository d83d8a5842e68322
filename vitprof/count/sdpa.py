"""The one override of ``torch.nn.functional.scaled_dot_product_attention``: every call runs a
stand-in, at any depth.

Two ways in, both needed: the module attribute is swapped, for the calls made where the
torch-function modes are popped (``F.multi_head_attention_forward`` runs its body so) and the
recomputation of a checkpointed block in the backward; and :class:`AttentionKernel`, a
torch-function mode, catches direct calls of the builtin bound under other names (``from
torch.nn.functional import scaled_dot_product_attention as sdpa``). The counter routes every call
to its pricing (:mod:`vitprof.count.counter`), which runs the kernel a memory step chose; a step
that runs outside the counter (the per-rank step) routes its calls to that kernel
(:func:`attention_routed`), both ways too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

SDPA = F.scaled_dot_product_attention  # torch's own, whatever is swapped in meanwhile


class AttentionKernel(TorchFunctionMode):
    """Direct calls of the builtin ``scaled_dot_product_attention`` run ``kernel`` instead."""

    def __init__(self, kernel: Callable[..., Any]) -> None:
        super().__init__()
        self.kernel = kernel

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is SDPA:
            return self.kernel(*args, **kwargs)
        return func(*args, **kwargs)


@contextmanager
def attention_routed(kernel: Callable[..., Any]) -> Iterator[None]:
    """Every ``scaled_dot_product_attention`` call runs ``kernel``: the module attribute points at
    it and :class:`AttentionKernel` catches the builtin; both restored on exit, even after an
    error."""
    F.scaled_dot_product_attention = kernel
    try:
        with AttentionKernel(kernel):
            yield
    finally:
        F.scaled_dot_product_attention = SDPA
