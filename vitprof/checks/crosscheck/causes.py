"""Named causes, with exact amounts, of the difference between a peer's count and vitprof's.

A cause is computed from vitprof's records (:class:`vitprof.Profile` ops, each with its module
path) and the peer's own breakdown (its unsupported ops, its per-layer rows, the kernels it ran
without a formula), never from the gap itself: whatever the named causes do not explain is the
residual, which is zero when both sides are understood exactly. Amounts are in MACs, signed as
"peer minus vitprof", and every function returns only causes with a non-zero amount.

Each peer's own rules, read from its installed sources, and the causes that follow from them live
in its file under :mod:`vitprof.checks.crosscheck.peers`; this module holds what several peers
share: pricing the work a peer ran uncounted, and the causes of the hook-and-patch peers
(calflops, DeepSpeed) that see ``F.*`` calls but no fused kernel.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

from vitprof.checks.crosscheck.harness import PatchRun, Uncounted
from vitprof.core.records import OpKind, OpRecord
from vitprof.count.formulas import LAYER_NORM_COST, kind_named
from vitprof.count.result import Profile

SDPA = "aten.scaled_dot_product_attention"
# Kernels that compute a whole module (vitprof counts that module's slow path on meta).
FUSED_MODULE_KERNELS = {
    "aten._native_multi_head_attention": "the nn.MultiheadAttention fast path",
    "aten._transformer_encoder_layer_fwd": "the nn.TransformerEncoderLayer fast path",
}


@dataclass(frozen=True)
class Cause:
    """One named reason for a difference, in MACs (and params), signed peer minus vitprof."""

    text: str
    macs: int = 0
    params: int = 0


def under(module: str, path: str) -> bool:
    """Whether ``module`` is ``path`` or inside it ("" is the whole model)."""
    return not path or module == path or module.startswith(path + ".")


def vitprof_macs_for(profile: Profile, op: str, module: str) -> int:
    """MACs vitprof counts for the work a peer ran as one ``op`` kernel inside ``module``."""
    if op in FUSED_MODULE_KERNELS:
        return sum(r.macs for r in profile.ops if under(r.module, module))
    if _attention_kernel(op):
        return sum(r.macs for r in profile.ops if r.module == module and r.op == SDPA)
    return sum(r.macs for r in profile.ops if r.module == module and r.op == op)


def _attention_kernel(op: str) -> bool:
    """A kernel (``aten.name``) that computes one scaled_dot_product_attention call, which
    vitprof records as :data:`SDPA`: a fused attention core by its registration."""
    return kind_named(op) is OpKind.ATTENTION


def uncounted_causes(
    profile: Profile, uncounted: Uncounted, verb: str, separator: str = "."
) -> list[Cause]:
    """One cause per op the peer ran but did not count: vitprof's MACs for that work, negated.

    ``verb`` says how the peer fails ("does not count", "has no formula for"); ``separator``
    spells op names the peer's way (``aten::name`` for fvcore).
    """
    macs: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for (op, module), n in uncounted.items():
        macs[op] += vitprof_macs_for(profile, op, module)
        calls[op] += n
    causes = []
    for op in sorted(macs, key=lambda o: (-macs[o], o)):
        if not macs[op]:
            continue
        if op in FUSED_MODULE_KERNELS:
            detail = f"{FUSED_MODULE_KERNELS[op]}: its projections and attention"
        elif _attention_kernel(op):
            detail = "QK^T and AV, L x S x (E + Ev) MACs per batch and head"
        else:
            detail = "vitprof's MACs for it"
        name = op.replace(".", separator, 1)
        causes.append(Cause(f"{verb} {name} ({detail}), {calls[op]} calls", -macs[op]))
    return causes


def free_uncounted(profile: Profile, uncounted: Uncounted) -> list[str]:
    """Ops the peer ran uncounted that cost no MACs in vitprof either ("aten.add x25")."""
    calls: Counter[str] = Counter()
    for (op, module), n in uncounted.items():
        if not vitprof_macs_for(profile, op, module):
            calls[op] += n
    return [f"{op} x{n}" for op, n in sorted(calls.items())]


def elements_normed(record: OpRecord, module: nn.Module) -> int:
    """Input elements of a norm record: its vector FLOPs over 5 + 1 per weight and bias."""
    weighted = getattr(module, "weight", None) is not None
    has_bias = getattr(module, "bias", None) is not None
    return record.vector_flops // (LAYER_NORM_COST + weighted + has_bias)


# ------------------------------------------------------- the hook-and-patch peers

# The product kernels each logged call (vitprof.checks.crosscheck.harness.LOGGED_CALLS) runs.
CALL_KERNELS = {"Tensor.__matmul__": frozenset({"aten.mm", "aten.bmm"}),
                "torch.bmm": frozenset({"aten.bmm"})}
FAST_PATH = "under torch.no_grad(), no hook or patched function sees"


def fast_path_macs(profile: Profile, model: nn.Module) -> int:
    """vitprof's MACs inside ``nn.MultiheadAttention`` modules: what its fast path hides from
    a hook-and-patch peer under ``torch.no_grad()`` (projections and attention)."""
    paths = [p for p, m in model.named_modules() if isinstance(m, nn.MultiheadAttention)]
    return sum(r.macs for r in profile.ops if any(under(r.module, p) for p in paths if p))


def fused_modules(kernels: Uncounted) -> list[str]:
    """Modules that ran a whole-module fused kernel (the ``nn.MultiheadAttention`` fast path)."""
    return sorted({module for op, module in kernels if op in FUSED_MODULE_KERNELS})


def _fused_kernels(kernels: Uncounted) -> Uncounted:
    return Counter({key: n for key, n in kernels.items() if key[0] in FUSED_MODULE_KERNELS})


def call_kernels(run: PatchRun, call: str) -> set[tuple[str, str]]:
    """(product kernel, module) pairs run in the modules that made the logged ``call``."""
    callers = {module for name, module in run.calls if name == call}
    return {(op, module) for op, module in run.kernels
            if op in CALL_KERNELS[call] and module in callers}


def unpatched_call_causes(
    profile: Profile, run: PatchRun, peer: str, calls: Sequence[str]
) -> list[Cause]:
    """Logged calls the peer does not patch: vitprof's MACs of the product kernels run in the
    modules that made them, negated."""
    causes = []
    for call in calls:
        amount = sum(vitprof_macs_for(profile, op, module)
                     for op, module in call_kernels(run, call))
        made = sum(n for (name, _), n in run.calls.items() if name == call)
        causes.append(Cause(f"{peer} does not patch {call}, {made} calls", -amount))
    return [c for c in causes if c.macs]


def patch_causes(
    profile: Profile, model: nn.Module, run: PatchRun, *, peer: str, patches_attention: bool
) -> list[Cause]:
    """calflops and DeepSpeed: fused kernels unseen, and (calflops) SDPA, ``@`` and
    ``torch.bmm`` unpatched."""
    causes = uncounted_causes(profile, _fused_kernels(run.kernels), FAST_PATH)
    if patches_attention:
        return causes
    causes += uncounted_causes(
        profile, sdpa_calls(run), f"{peer} does not patch F.scaled_dot_product_attention, so misses"
    )
    return causes + unpatched_call_causes(profile, run, peer, ["Tensor.__matmul__", "torch.bmm"])


def sdpa_calls(run: PatchRun) -> Uncounted:
    """The scaled-dot-product attentions that ran outside fused module kernels, as
    ``(SDPA, module) -> calls``: per module, the logged ``F.scaled_dot_product_attention`` calls
    or the SDPA kernels that ran, whichever are more. A call is seen whichever kernel computes it
    (with a mask that requires a gradient the CPU runs the math path: ``bmm`` kernels, no SDPA
    kernel, BEiT's relative position bias); a kernel is seen where the call is not (a reference
    to the function taken before the log began)."""
    fused = fused_modules(run.kernels)
    kernels = Counter({module: n for (op, module), n in run.kernels.items()
                       if _attention_kernel(op)})
    calls = Counter({module: n for (name, module), n in run.calls.items()
                     if name == "F.scaled_dot_product_attention"})
    ran = kernels | calls  # per module, the larger count
    return Counter({(SDPA, module): n for module, n in ran.items()
                    if not any(under(module, f) for f in fused)})
