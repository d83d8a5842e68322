"""``flopcounter-meta`` and ``flopcounter-cpu``: ``torch.utils.flop_counter.FlopCounterMode``,
FLOPs = 2 x MACs, on the meta copy and on the CPU copy.

It runs ``model(*args, **kwargs)`` in eval mode with grad enabled, as in its documentation
(``grad=False``: under ``torch.no_grad()``). Below it, a :class:`~vitprof.checks.crosscheck.
harness.KernelLog` notes every kernel that ran without a formula.

Rule (``torch/utils/flop_counter.py``): 2 FLOPs per MAC of ``mm``, ``addmm``, ``bmm``,
``baddbmm``, convolutions and the CUDA attention kernels, bias excluded; any other kernel that
does not decompose counts 0, such as the CPU attention kernel
``_scaled_dot_product_flash_attention_for_cpu``. On the meta device
``scaled_dot_product_attention`` decomposes into ``bmm``, so every product is counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from vitprof.checks.crosscheck import causes as why
from vitprof.checks.crosscheck.causes import Cause
from vitprof.checks.crosscheck.harness import KernelLog, Uncounted, evaluating, quiet
from vitprof.checks.crosscheck.subject import Peer, Subject, breakdown, grad_note
from vitprof.checks.crosscheck.table import PeerRow, missing_row, peer_row
from vitprof.core.vocab import Device
from vitprof.count.formulas import op_name
from vitprof.count.result import Profile
from vitprof.count.session import Inputs, call

RANK = 40
UNIT = "FLOPs (2 FLOPs per MAC)"


@dataclass(frozen=True)
class FlopCounterRun:
    """FlopCounterMode's total FLOPs, per-operator FLOPs and the kernels it ran uncounted."""

    device: str
    total_flops: int
    by_operator: dict[str, int]
    uncounted: Uncounted


def run_flop_counter(model: nn.Module, inputs: Inputs, grad: bool = True) -> FlopCounterRun:
    """``with FlopCounterMode(display=False): model(*args, **kwargs)`` on the inputs' device."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    log = KernelLog(model, counter.flop_registry)
    with quiet(), evaluating(model), torch.set_grad_enabled(grad), log, counter:
        call(model, inputs)
    flops = counter.get_flop_counts().get("Global", {})
    by_operator = {op_name(op): int(n) for op, n in flops.items()}
    device = next(v.device.type for v in [*inputs[0], *inputs[1].values()]
                  if isinstance(v, torch.Tensor))
    return FlopCounterRun(device, int(counter.get_total_flops()), by_operator, log.uncounted)


def flop_counter_causes(profile: Profile, uncounted: Uncounted) -> list[Cause]:
    """Kernels FlopCounterMode ran without a formula, priced by vitprof's records."""
    return why.uncounted_causes(profile, uncounted, "has no formula for")


def _row(subject: Subject, peer: Peer, device: str) -> PeerRow:
    model = subject.meta_model if device == Device.META else subject.cpu_model
    if model is None:
        return missing_row(peer.name, peer.unit, f"needs a model with weights on the cpu: "
                                                 f"{subject.no_cpu_model}")
    run = run_flop_counter(model, subject.example(device), subject.grad)
    causes = flop_counter_causes(subject.profile, run.uncounted)
    # the fast path runs on real devices only: on meta every op is seen in either grad mode
    grad = grad_note(subject, peer, model, fast_path_blind=True) if device != Device.META else ""
    return peer_row(peer.name, run.total_flops, peer.unit, run.total_flops // 2, None,
                    subject.profile.totals, causes,
                    "; ".join(filter(None, [
                        grad, f"2 FLOPs per MAC: {run.total_flops:,} FLOPs = "
                        f"{run.total_flops // 2:,} MACs; by operator: "
                        f"{breakdown(run.by_operator)}"])))


PEERS = (
    Peer("flopcounter-meta", UNIT, partial(_row, device="meta")),
    Peer("flopcounter-cpu", UNIT, partial(_row, device="cpu")),
)
