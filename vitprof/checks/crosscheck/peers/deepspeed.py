"""``deepspeed``: DeepSpeed's flops profiler ``get_model_profile(model, args=..., kwargs=...)``
(0.19.8) without an engine and without a warm-up run (which changes timings only), its MACs and
params, in eval mode with the grad mode it is given. It runs on a CPU-only machine, no compiled
ops needed.

Rule (``deepspeed/profiling/flops_profiler/profiler.py``): MACs of the patched ``F.linear``,
``F.conv*``, ``torch.matmul``, ``addmm``, ``einsum``, ``F.scaled_dot_product_attention``,
``Tensor.__matmul__``, ``mm`` and ``bmm``, products only, as vitprof; it sees nothing inside a
fused module kernel (:func:`vitprof.checks.crosscheck.causes.patch_causes`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from torch import nn

from vitprof.checks.crosscheck.causes import patch_causes
from vitprof.checks.crosscheck.harness import PatchRun, not_installed, patch_run, quiet
from vitprof.checks.crosscheck.subject import Peer, patch_peer
from vitprof.count.session import Inputs

RANK = 70


def run_deepspeed(model: nn.Module, inputs: Inputs, grad: bool = True) -> PatchRun:
    """DeepSpeed ``get_model_profile(model, args=args, kwargs=kwargs)`` without an engine, no
    warm-up run."""
    try:
        with quiet():  # importing DeepSpeed logs the accelerator it picked
            from deepspeed.profiling.flops_profiler import get_model_profile
    except ImportError:
        raise not_installed("deepspeed", "peers") from None
    args, kwargs = inputs

    def count() -> tuple[Any, Any]:
        _, macs, params = get_model_profile(
            model, args=list(args), kwargs=dict(kwargs), print_profile=False, warm_up=0,
            as_string=False,
        )
        return macs, params

    return patch_run(model, grad, count)


PEERS = (
    Peer("deepspeed", "MACs (DeepSpeed macs)",
         patch_peer(run_deepspeed, partial(patch_causes, peer="DeepSpeed",
                                           patches_attention=True)), ("peers",)),
)
