"""``fvcore``: fvcore's ``FlopCountAnalysis`` (0.1.5), one "flop" = one MAC.

It traces the model with ``torch.jit``, called the way its documentation calls it: eval mode,
grad mode left enabled (``grad=False``: under ``torch.no_grad()``); params from
``parameter_count``. Tracing takes positional tensors only: the forward's keyword inputs reach
the model through a wrapper that takes every input tensor positionally.

Rules (``fvcore/nn/jit_handles.py``): ``aten::linear``, ``matmul``, ``bmm``, ``einsum`` and
``_convolution`` count products only, as vitprof does; ``aten::layer_norm`` and ``group_norm``
count 5 per input element with a weight, 4 without (``norm_flop_counter``); any op with no
handle (``aten::scaled_dot_product_attention``, the fused ``_native_multi_head_attention``)
counts 0; ``aten::grid_sampler`` counts 4 per output element ("assume bilinear"), where
vitprof counts the taps as vector work, no MACs. Causes: every unsupported op that costs MACs in
vitprof, priced by vitprof's records, the norms' flops and the grid sampling's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_unflatten

from vitprof.checks.crosscheck import causes as why
from vitprof.checks.crosscheck.causes import FUSED_MODULE_KERNELS, Cause, elements_normed, under
from vitprof.checks.crosscheck.harness import PeerUnavailable, Uncounted, evaluating, quiet
from vitprof.checks.crosscheck.subject import Peer, Subject, breakdown, grad_note
from vitprof.checks.crosscheck.table import PeerRow, peer_row
from vitprof.core.records import OpRecord
from vitprof.count.result import Profile
from vitprof.count.session import Inputs

RANK = 20


@dataclass(frozen=True)
class FvcoreRun:
    """What fvcore reported: its total, its per-operator counts and its unsupported ops."""

    total: int
    params: int
    by_operator: dict[str, int]
    unsupported: Uncounted  # at the innermost module that ran them


class _TensorOutputs(nn.Module):
    """Calls ``model`` on ``inputs`` with their tensors taken positionally and returns its
    output as a tuple of tensors: ``torch.jit`` tracing requires both."""

    def __init__(self, model: nn.Module, inputs: Inputs) -> None:
        super().__init__()
        self.model = model
        self.leaves, self.structure = tree_flatten(inputs)
        self.positions = [i for i, v in enumerate(self.leaves) if isinstance(v, torch.Tensor)]

    def tensors(self) -> tuple[torch.Tensor, ...]:
        """The input tensors, in the order :meth:`forward` takes them."""
        return tuple(self.leaves[i] for i in self.positions)

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        leaves = list(self.leaves)
        for position, tensor in zip(self.positions, tensors, strict=True):
            leaves[position] = tensor
        args, kwargs = tree_unflatten(leaves, self.structure)
        out = self.model(*args, **kwargs)
        if hasattr(out, "to_tuple"):
            out = out.to_tuple()
        elif isinstance(out, dict):
            out = tuple(out.values())
        elif isinstance(out, torch.Tensor):
            out = (out,)
        return tuple(t for t in out if isinstance(t, torch.Tensor))


def _strip_wrapper(path: str) -> str:
    return path.removeprefix("model").removeprefix(".")


def run_fvcore(model: nn.Module, inputs: Inputs, grad: bool = True) -> FvcoreRun:
    """fvcore ``FlopCountAnalysis(model, inputs)`` and ``parameter_count(model)``."""
    with quiet():  # importing fvcore warns that torch.jit.script is deprecated
        try:
            from fvcore.nn import FlopCountAnalysis, parameter_count
        except ImportError:
            raise PeerUnavailable("fvcore is not installed (pip install fvcore)") from None
    wrapper = _TensorOutputs(model, inputs)
    with quiet(), evaluating(model), torch.set_grad_enabled(grad):
        analysis = FlopCountAnalysis(wrapper, wrapper.tensors())
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        analysis.tracer_warnings("none")
        total = int(analysis.total())
        by_operator = {op: int(n) for op, n in analysis.by_operator().items()}
        per_module = {name: analysis.unsupported_ops(name) for name in analysis.by_module()}
    unsupported: Uncounted = Counter()
    children = _direct_children(per_module)
    for name, ops in per_module.items():
        own = ops - sum((per_module[child] for child in children.get(name, ())), Counter())
        for op, calls in own.items():
            unsupported[(op.replace("::", "."), _strip_wrapper(name))] += calls
    return FvcoreRun(total, int(parameter_count(model)[""]), by_operator, unsupported)


def _direct_children(names: Any) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for name in names:
        if name:
            children.setdefault(name.rpartition(".")[0], []).append(name)
    return children


# fvcore's per-element rule for norms: op -> (cost with a weight, cost without).
FVCORE_NORM_COSTS = {"aten.native_layer_norm": (5, 4), "aten.native_group_norm": (5, 4)}


def fvcore_norm_causes(
    profile: Profile, model: nn.Module, unsupported: Uncounted
) -> list[Cause]:
    """fvcore counts LayerNorm / GroupNorm as 5 "flops" per input element (4 without weight).

    The elements come from vitprof's records: a norm with a weight costs ``5 + 1 + bias``
    vector FLOPs per element (:mod:`vitprof.count.formulas`), read with the running norm module.
    Norms inside a module that fvcore saw as one unsupported fused kernel are not counted.
    """
    fused = [module for op, module in unsupported if op in FUSED_MODULE_KERNELS]
    causes = []
    for op, (with_weight, without) in FVCORE_NORM_COSTS.items():
        calls = [
            r for r in profile.ops
            if r.op == op and not any(under(r.module, path) for path in fused)
        ]
        if not calls:
            continue
        elements = {True: 0, False: 0}
        for record in calls:
            count, weighted = _norm_elements(record, model)
            elements[weighted] += count
        amount = elements[True] * with_weight + elements[False] * without
        name = op.removeprefix("aten.native_")
        causes.append(Cause(
            f"counts {name} as {with_weight} flops per element ({without} without a weight), "
            f"{len(calls)} calls on {sum(elements.values()):,} elements", amount,
        ))
    return causes


def fvcore_sampling_cause(by_operator: dict[str, int]) -> list[Cause]:
    """fvcore counts ``grid_sampler`` as 4 "flops" (MACs) per output element, its bilinear
    taps; vitprof prices them as vector FLOPs (:mod:`vitprof.count.formulas`), no MACs. The
    amount is fvcore's own count for the operator."""
    counted = by_operator.get("grid_sampler", 0)
    if not counted:
        return []
    return [Cause("counts grid_sampler as 4 flops per output element (its bilinear taps; "
                  "vector work in vitprof, no MACs)", counted)]


def _norm_elements(record: OpRecord, model: nn.Module) -> tuple[int, bool]:
    module = model.get_submodule(record.module)
    weighted = getattr(module, "weight", None) is not None
    return elements_normed(record, module), weighted


def _row(subject: Subject, peer: Peer) -> PeerRow:
    model, run = subject.run_real(partial(run_fvcore, grad=subject.grad))
    profile = subject.profile
    causes = why.uncounted_causes(profile, run.unsupported, "does not count", "::")
    causes += fvcore_norm_causes(profile, model, run.unsupported)
    causes += fvcore_sampling_cause(run.by_operator)
    note = (f"{grad_note(subject, peer, model, fast_path_blind=True)}; "
            f"by operator: {breakdown(run.by_operator)}")
    free = why.free_uncounted(profile, run.unsupported)
    if free:
        note += f"; also unsupported, no MACs in vitprof either: {', '.join(free)}"
    return peer_row(peer.name, run.total, peer.unit, run.total, run.params,
                    profile.totals, causes, note)


PEERS = (Peer("fvcore", "flops (fvcore: 1 flop = 1 MAC)", _row),)
