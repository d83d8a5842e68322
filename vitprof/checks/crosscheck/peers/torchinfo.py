"""``torchinfo``: torchinfo's ``summary`` (1.8.0), mult-adds = MACs.

It hooks every module and runs eval and ``no_grad`` itself: ``summary(model, input_data=args,
**kwargs)`` (keyword inputs alone go as ``input_data=kwargs``). Its total is the sum over the
leaf layers listed here; its global forward-pass cache is cleared after each run.

Rule (``torchinfo/layer_info.py::calculate_macs``), per leaf layer and call, with ``out`` the
layer's output shape: a convolution counts ``params x prod(out[:1] + out[2:])``; any other
layer counts ``out[0] x params`` for parameters named ``weight`` or ``bias``, and
``prod(out[:2]) x params`` for other names containing them. Only leaf layers add to the total,
so work done in a non-leaf module's own ``forward`` is never counted.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from vitprof.checks.crosscheck.causes import Cause
from vitprof.checks.crosscheck.harness import PeerUnavailable, quiet
from vitprof.checks.crosscheck.subject import Peer, Subject
from vitprof.checks.crosscheck.table import PeerRow, peer_row
from vitprof.count.result import Profile
from vitprof.count.session import Inputs

RANK = 30


@dataclass(frozen=True)
class LayerRow:
    """One leaf layer of a torchinfo summary, as torchinfo saw it."""

    path: str
    class_name: str
    output_size: tuple[int, ...]
    params: dict[str, int]  # the layer's own parameter names -> elements


@dataclass(frozen=True)
class TorchinfoRun:
    """torchinfo's totals and the leaf layers whose mult-adds make up its total."""

    total_mult_adds: int
    total_params: int
    layers: tuple[LayerRow, ...]


def run_torchinfo(model: nn.Module, inputs: Inputs) -> TorchinfoRun:
    """torchinfo ``summary(model, input_data=args, **kwargs)``; its global forward-pass cache
    is cleared."""
    try:
        import torchinfo
        from torchinfo.torchinfo import clear_cached_forward_pass
    except ImportError:
        raise PeerUnavailable("torchinfo is not installed (pip install torchinfo)") from None
    args, kwargs = inputs
    device = next(v.device for v in [*args, *kwargs.values()] if hasattr(v, "device"))
    data, rest = (list(args), kwargs) if args else (dict(kwargs), {})
    try:
        with quiet():
            stats = torchinfo.summary(model, input_data=data, device=device, verbose=0, **rest)
        layers = tuple(
            LayerRow(
                _layer_path(info), info.class_name, tuple(info.output_size),
                {name: p.numel() for name, p in info.module.named_parameters()},
            )
            for info in stats.summary_list
            if info.is_leaf_layer
        )
        return TorchinfoRun(int(stats.total_mult_adds), int(stats.total_params), layers)
    finally:
        clear_cached_forward_pass()


def _layer_path(info: Any) -> str:
    names = []
    while info.parent_info is not None:
        names.append(info.var_name)
        info = info.parent_info
    return ".".join(reversed(names))


def _tokens(out: tuple[int, ...]) -> int:
    return math.prod(out[:-1])


def torchinfo_causes(
    profile: Profile, layers: Sequence[LayerRow], model: nn.Module
) -> list[Cause]:
    """torchinfo 1.8.0's per-layer rule against vitprof's records, cause by cause."""
    linear_batch = linear_bias = conv_bias = 0
    by_class: Counter[str] = Counter()
    products: set[str] = set()  # Linear and convolution leaves: their weight term is their MACs
    for layer in layers:
        out = layer.output_size
        weight, bias = layer.params.get("weight", 0), layer.params.get("bias", 0)
        if "Conv" in layer.class_name:
            conv_bias += bias * math.prod(out[:1] + out[2:])
            products.add(layer.path)
            continue
        if isinstance(model.get_submodule(layer.path), nn.Linear):
            linear_batch += (out[0] - _tokens(out)) * weight
            linear_bias += out[0] * bias
            products.add(layer.path)
            continue
        rule = sum(
            n * (out[0] if name in ("weight", "bias") else math.prod(out[:2]))
            for name, n in layer.params.items()
            if "weight" in name or "bias" in name
        )
        by_class[layer.class_name] += rule
    causes = [
        Cause("Linear rule out[0] x params on a 3-D input: batch x weight, not tokens x weight",
              linear_batch),
        Cause("counts each Linear bias as out[0] x bias MACs", linear_bias),
        Cause("counts each convolution bias as batch x positions x bias MACs", conv_bias),
    ]
    causes += [
        Cause(f"counts the parameters of {name} as MACs (out[0] x params)", amount)
        for name, amount in sorted(by_class.items())
    ]
    causes += _unhooked_causes(profile, {layer.path for layer in layers}, products, model)
    return [c for c in causes if c.macs]


def _unhooked_causes(
    profile: Profile, leaf_paths: set[str], products: set[str], model: nn.Module
) -> list[Cause]:
    """vitprof's MACs that no torchinfo rule covers: ops run in a non-leaf module's own
    ``forward`` (attention products, ``nn.MultiheadAttention``'s functional projections) and
    ops inside a leaf layer that is neither Linear nor a convolution (its rule reads only its
    parameters)."""
    missed: Counter[tuple[str, bool]] = Counter()
    ops: dict[tuple[str, bool], set[str]] = {}
    for record in profile.ops:
        if not record.macs or record.module in products:
            continue
        leaf = record.module in leaf_paths
        key = (type(model.get_submodule(record.module)).__name__, leaf)
        missed[key] += record.macs
        ops.setdefault(key, set()).add(record.op)
    causes = []
    for (kind, leaf), amount in sorted(missed.items(), key=lambda kv: -kv[1]):
        listed = ", ".join(sorted(ops[kind, leaf]))
        if leaf:
            text = f"{listed} inside leaf layer {kind}, whose rule reads only its parameters"
        else:
            text = f"{listed} in the forward of {kind}, not a leaf layer, so no rule sees it"
        if kind == "MultiheadAttention":
            text = f"MultiheadAttention blindness: {text}"
        causes.append(Cause(text, -amount))
    return causes


def _row(subject: Subject, peer: Peer) -> PeerRow:
    model, run = subject.run_real(run_torchinfo)
    causes = torchinfo_causes(subject.profile, run.layers, model)
    return peer_row(peer.name, run.total_mult_adds, peer.unit, run.total_mult_adds,
                    run.total_params, subject.profile.totals, causes)


PEERS = (Peer("torchinfo", "mult-adds (MACs)", _row),)
