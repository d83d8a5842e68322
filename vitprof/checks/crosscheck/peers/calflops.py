"""``calflops``: calflops's ``calculate_flops(model, args=..., kwargs=...)`` (0.3.2), its MACs
and params, in eval mode with the grad mode it is given.

Rule (``calflops/pytorch_ops.py``): MACs of the patched ``F.linear``, ``F.conv*``,
``torch.matmul``, ``addmm``, ``einsum``, products only, as vitprof; it does not patch
``F.scaled_dot_product_attention``, ``Tensor.__matmul__``, ``mm`` nor ``bmm``, and sees
nothing inside a fused module kernel (:func:`vitprof.checks.crosscheck.causes.patch_causes`).
It moves every input with ``.to(device)``: it cannot take an input that is no tensor.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import nn

from vitprof.checks.crosscheck.causes import patch_causes
from vitprof.checks.crosscheck.harness import CannotTake, PatchRun, not_installed, patch_run
from vitprof.checks.crosscheck.subject import Peer, patch_peer
from vitprof.count.session import Inputs

RANK = 60


def run_calflops(model: nn.Module, inputs: Inputs, grad: bool = True) -> PatchRun:
    """calflops ``calculate_flops(model, args=args, kwargs=kwargs)``: its MACs and params."""
    try:
        from calflops import calculate_flops
    except ImportError:
        raise not_installed("calflops", "peers") from None
    args, kwargs = inputs
    others = [type(v).__name__ for v in [*args, *kwargs.values()]
              if not isinstance(v, torch.Tensor)]
    if others:
        raise CannotTake(f"calflops moves every input with .to(device), and this forward "
                         f"takes a {others[0]}")

    def count() -> tuple[Any, Any]:
        _, macs, params = calculate_flops(
            model, args=list(args), kwargs=dict(kwargs), print_results=False,
            print_detailed=False, output_as_string=False,
        )
        return macs, params

    return patch_run(model, grad, count)


PEERS = (
    Peer("calflops", "MACs (calflops macs)",
         patch_peer(run_calflops, partial(patch_causes, peer="calflops",
                                          patches_attention=False)), ("peers", "test")),
)
