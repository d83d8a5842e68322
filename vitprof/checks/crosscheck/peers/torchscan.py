"""``torchscan``: torchscan's ``crawl_module(model, args=..., kwargs=...)`` (0.2.0), its
``macs`` total, MACs; params from its ``parameters`` total.

It runs one forward in eval mode under ``torch.no_grad()`` (its own) with hooks on every module.
Its ``macs`` total (``torchscan/crawler.py``) sums, over each call of a *metric leaf* (a module
without children, and ``nn.MultiheadAttention``), ``torchscan/modules/macs.py::module_macs``:
``nn.Linear`` ``in_features x out.numel()`` and a convolution ``out.numel() x in_channels /
groups x prod(kernel)``, the products, bias excluded, as vitprof counts them; BatchNorm and
pooling their element rules; every other type (LayerNorm, GELU, ``nn.MultiheadAttention``) 0,
with a warning ("Module type not supported") that makes its total "partial". Work done in the
forward of a module with children is never seen. Its other totals, ``module_flops`` and
``operator_flops`` (FlopCounterMode under ``no_grad``), are FLOPs, not this row.

Causes, from vitprof's records and torchscan's per-layer report: vitprof's MACs in modules no
Linear or convolution rule counted (attention products in a non-leaf forward; all of
``nn.MultiheadAttention``, a metric leaf it has no rule for), and the MACs its rules give other
module types (BatchNorm, pooling), which vitprof counts as vector FLOPs, not MACs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from torch import nn

from vitprof.checks.crosscheck.causes import Cause
from vitprof.checks.crosscheck.harness import evaluating, not_installed, quiet
from vitprof.checks.crosscheck.subject import Peer, Subject
from vitprof.checks.crosscheck.table import PeerRow, peer_row
from vitprof.count.result import Profile
from vitprof.count.session import Inputs

RANK = 75


@dataclass(frozen=True)
class TorchscanRun:
    """torchscan's totals and its metric leaves: path -> (type, MACs over all its calls)."""

    macs: int
    params: int
    leaves: dict[str, tuple[str, int]]
    unsupported: tuple[str, ...]  # the module types it warned it has no MAC rule for


def run_torchscan(model: nn.Module, inputs: Inputs) -> TorchscanRun:
    """torchscan ``crawl_module(model, args=args, kwargs=kwargs)``."""
    try:
        from torchscan import crawl_module
    except ImportError:
        raise not_installed("torchscan", "peers") from None
    args, kwargs = inputs
    with quiet(), evaluating(model):
        report = crawl_module(model, args=tuple(args), kwargs=dict(kwargs))
    macs: Counter[str] = Counter()
    types, unsupported = {}, set()
    for layer in report["layers"]:
        metric = layer["metrics"].get("macs")
        if metric is None:  # a module with children: no rule runs
            continue
        macs[layer["path"]] += metric["known_value"] or 0
        types[layer["path"]] = layer["type"]
        if metric["status"] != "complete":
            unsupported.add(layer["type"])
    totals = report["totals"]
    return TorchscanRun(int(totals["macs"]["known_value"] or 0),
                        int(totals["parameters"]["value"] or 0),
                        {path: (types[path], macs[path]) for path in types},
                        tuple(sorted(unsupported)))


def _products(model: nn.Module, run: TorchscanRun) -> set[str]:
    """The metric leaves whose rule counts products as vitprof does: Linear, convolution."""
    return {path for path in run.leaves
            if isinstance(model.get_submodule(path), nn.Linear | nn.modules.conv._ConvNd)}


def torchscan_causes(profile: Profile, model: nn.Module, run: TorchscanRun) -> list[Cause]:
    """What torchscan's module rules miss and what they add, against vitprof's records."""
    products = _products(model, run)
    missed: Counter[tuple[str, bool]] = Counter()
    ops: dict[tuple[str, bool], set[str]] = {}
    for record in profile.ops:
        if record.macs and record.module not in products:
            key = (type(model.get_submodule(record.module)).__name__, record.module in run.leaves)
            missed[key] += record.macs
            ops.setdefault(key, set()).add(record.op)
    causes = []
    for (kind, leaf), amount in sorted(missed.items(), key=lambda kv: -kv[1]):
        listed = ", ".join(sorted(ops[kind, leaf]))
        where = (f"inside {kind}, which it has no MAC rule for" if leaf else
                 f"in the forward of {kind}, a module with children, which no rule sees")
        causes.append(Cause(f"{listed} {where}", -amount))
    added: Counter[str] = Counter()
    for path, (kind, macs) in run.leaves.items():
        if path not in products:
            added[kind] += macs
    causes += [Cause(f"counts {kind} as MACs (its {kind} rule)", amount)
               for kind, amount in sorted(added.items())]
    return [c for c in causes if c.macs]


def _row(subject: Subject, peer: Peer) -> PeerRow:
    model, run = subject.run_real(run_torchscan)
    note = "run in eval mode under torch.no_grad() (its own)"
    if run.unsupported:
        note += f"; no MAC rule (0, total partial) for {', '.join(run.unsupported)}"
    return peer_row(peer.name, run.macs, peer.unit, run.macs, run.params, subject.profile.totals,
                    torchscan_causes(subject.profile, model, run), note)


PEERS = (Peer("torchscan", "MACs (torchscan macs)", _row, ("peers",)),)
