"""Named causes, with exact amounts, of the difference between a peer's count and vitprof's.

A cause is computed from vitprof's records (:class:`vitprof.Profile` ops, each with its module
path) and the peer's own breakdown (its unsupported ops, its per-layer rows, the kernels it ran
without a formula), never from the gap itself: whatever the named causes do not explain is the
residual, which is zero when both sides are understood exactly. Amounts are in MACs, signed as
"peer minus vitprof", and every function returns only causes with a non-zero amount.

Peer rules used here (read from the installed sources):

* fvcore (``fvcore/nn/jit_handles.py``): ``aten::linear``, ``matmul``, ``bmm``, ``einsum`` and
  ``_convolution`` count products only, as vitprof does; ``aten::layer_norm`` and
  ``group_norm`` count 5 per input element with a weight, 4 without (``norm_flop_counter``);
  any op with no handle (``aten::scaled_dot_product_attention``, the fused
  ``_native_multi_head_attention``) counts 0.
* torchinfo 1.8.0 (``torchinfo/layer_info.py::calculate_macs``), per leaf layer and call, with
  ``out`` the layer's output shape: a convolution counts ``params x prod(out[:1] + out[2:])``;
  any other layer counts ``out[0] x params`` for parameters named ``weight`` or ``bias``, and
  ``prod(out[:2]) x params`` for other names containing them. Only leaf layers add to the total,
  so work done in a non-leaf module's own ``forward`` is never counted.
* FlopCounterMode (``torch/utils/flop_counter.py``): 2 FLOPs per MAC of ``mm``, ``addmm``,
  ``bmm``, ``baddbmm``, convolutions and the CUDA attention kernels, bias excluded; any other
  kernel that does not decompose counts 0, such as the CPU attention kernel
  ``_scaled_dot_product_flash_attention_for_cpu``.
* ptflops 0.7.5 ``aten`` backend (``ptflops/aten_ops.py``): ``mm``, ``matmul``, ``bmm`` count
  products; ``addmm`` and ``convolution`` add their bias elements as MACs; any other kernel
  counts 0.
* ptflops 0.7.5 ``pytorch`` backend (``ptflops/pytorch_ops.py``, ``pytorch_engine.py``): forward
  hooks on modules whose exact type it maps; a hooked module's count replaces its children's
  (``accumulate_flops`` does not descend into it). Linear and convolution: products plus bias
  elements; LayerNorm / BatchNorm / GroupNorm: input elements (x2 with a true ``affine``
  attribute, which LayerNorm lacks); GELU: output elements; ``nn.MultiheadAttention``: products
  plus query scaling, in-projection bias, softmax (L x S per head) and out-projection bias;
  timm's ``Attention``: QK^T, AV, query scaling and softmax. Hook counts are divided by the
  batch size; the patched functions (``F.gelu``, ``F.softmax``, ``torch.bmm``, ...) add their
  counts undivided, and ``nn.GELU`` calls the patched ``F.gelu``.
* calflops 0.3.2 and DeepSpeed 0.19.8 (``profiler.py``): MACs of the patched ``F.linear``,
  ``F.conv*``, ``torch.matmul``, ``addmm``, ``einsum`` (products only, as vitprof); DeepSpeed
  also patches ``F.scaled_dot_product_attention``, ``Tensor.__matmul__``, ``mm`` and ``bmm``,
  calflops none of them. Neither sees inside a fused module kernel. Which of these calls ran,
  and in which module, comes from :class:`vitprof.checks.crosscheck.peers.CallLog`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from torch import nn

from vitprof.checks.crosscheck.peers import LayerRow, PatchRun, Uncounted
from vitprof.core.records import OpRecord
from vitprof.count.formulas import GELU_COST, LAYER_NORM_COST, SOFTMAX_COST
from vitprof.count.result import Profile
from vitprof.models.zoo import Published

SDPA = "aten.scaled_dot_product_attention"
# Kernels that compute one scaled_dot_product_attention call, which vitprof records as SDPA.
SDPA_KERNELS = frozenset({
    SDPA,
    "aten._scaled_dot_product_flash_attention_for_cpu",
    "aten._scaled_dot_product_flash_attention",
    "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_cudnn_attention",
    "aten._scaled_dot_product_fused_attention_overrideable",
})
# Kernels that compute a whole module (vitprof counts that module's slow path on meta).
FUSED_MODULE_KERNELS = {
    "aten._native_multi_head_attention": "the nn.MultiheadAttention fast path",
    "aten._transformer_encoder_layer_fwd": "the nn.TransformerEncoderLayer fast path",
}
# fvcore's per-element rule for norms: op -> (cost with a weight, cost without).
FVCORE_NORM_COSTS = {"aten.native_layer_norm": (5, 4), "aten.native_group_norm": (5, 4)}


@dataclass(frozen=True)
class Cause:
    """One named reason for a difference, in MACs (and params), signed peer minus vitprof."""

    text: str
    macs: int = 0
    params: int = 0


def _under(module: str, path: str) -> bool:
    return not path or module == path or module.startswith(path + ".")


def vitprof_macs_for(profile: Profile, op: str, module: str) -> int:
    """MACs vitprof counts for the work a peer ran as one ``op`` kernel inside ``module``."""
    if op in FUSED_MODULE_KERNELS:
        return sum(r.macs for r in profile.ops if _under(r.module, module))
    if op in SDPA_KERNELS:
        return sum(r.macs for r in profile.ops if r.module == module and r.op == SDPA)
    return sum(r.macs for r in profile.ops if r.module == module and r.op == op)


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
        elif op in SDPA_KERNELS:
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


# --------------------------------------------------------------------------------------- fvcore


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
            if r.op == op and not any(_under(r.module, path) for path in fused)
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


def _norm_elements(record: OpRecord, model: nn.Module) -> tuple[int, bool]:
    module = model.get_submodule(record.module)
    weighted = getattr(module, "weight", None) is not None
    return _elements_normed(record, module), weighted


def _elements_normed(record: OpRecord, module: nn.Module) -> int:
    """Input elements of a norm record: its vector FLOPs over 5 + 1 per weight and bias."""
    weighted = getattr(module, "weight", None) is not None
    has_bias = getattr(module, "bias", None) is not None
    return record.vector_flops // (LAYER_NORM_COST + weighted + has_bias)


# ------------------------------------------------------------------------------------ torchinfo


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


# ------------------------------------------------------------------------------ FlopCounterMode


def flop_counter_causes(profile: Profile, uncounted: Uncounted) -> list[Cause]:
    """Kernels FlopCounterMode ran without a formula, priced by vitprof's records."""
    return uncounted_causes(profile, uncounted, "has no formula for")


# ----------------------------------------------------------------------- calflops, DeepSpeed

# The product kernels each logged call (vitprof.checks.crosscheck.peers.LOGGED_CALLS) runs.
CALL_KERNELS = {"Tensor.__matmul__": frozenset({"aten.mm", "aten.bmm"}),
                "torch.bmm": frozenset({"aten.bmm"})}
FAST_PATH = "under torch.no_grad(), no hook or patched function sees"
SOFTMAX_OPS = frozenset({"aten._softmax", "aten._safe_softmax"})


def fast_path_macs(profile: Profile, model: nn.Module) -> int:
    """vitprof's MACs inside ``nn.MultiheadAttention`` modules: what its fast path hides from
    a hook-and-patch peer under ``torch.no_grad()`` (projections and attention)."""
    paths = [p for p, m in model.named_modules() if isinstance(m, nn.MultiheadAttention)]
    return sum(r.macs for r in profile.ops if any(_under(r.module, p) for p in paths if p))


def fused_modules(kernels: Uncounted) -> list[str]:
    """Modules that ran a whole-module fused kernel (the ``nn.MultiheadAttention`` fast path)."""
    return sorted({module for op, module in kernels if op in FUSED_MODULE_KERNELS})


def _fused_kernels(kernels: Uncounted) -> Uncounted:
    return Counter({key: n for key, n in kernels.items() if key[0] in FUSED_MODULE_KERNELS})


def _call_kernels(run: PatchRun, call: str) -> set[tuple[str, str]]:
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
                     for op, module in _call_kernels(run, call))
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
    fused = fused_modules(run.kernels)
    sdpa = Counter({(op, module): n for (op, module), n in run.kernels.items()
                    if op in SDPA_KERNELS and not any(_under(module, f) for f in fused)})
    causes += uncounted_causes(
        profile, sdpa, f"{peer} does not patch F.scaled_dot_product_attention, so misses"
    )
    return causes + unpatched_call_causes(profile, run, peer, ["Tensor.__matmul__", "torch.bmm"])


# ---------------------------------------------------------------------------------- ptflops


def ptflops_aten_causes(profile: Profile, model: nn.Module, run: PatchRun) -> list[Cause]:
    """ptflops's aten backend: kernels without a formula, and bias elements counted as MACs."""
    causes = uncounted_causes(profile, run.kernels, "has no formula for")
    fused = fused_modules(run.kernels)
    bias = sum(r.vector_flops for r in profile.ops
               if r.op in ("aten.addmm", "aten.convolution")
               and not any(_under(r.module, f) for f in fused))
    causes.append(Cause("counts the bias elements of addmm and convolution as MACs", bias))
    return [c for c in causes if c.macs]


def _roots(hooked: Sequence[str]) -> list[str]:
    """Hooked modules with no hooked ancestor: the ones whose counts ptflops adds up."""
    return [p for p in hooked if not any(q != p and _under(p, q) for q in hooked)]


def _own(profile: Profile, path: str) -> list[OpRecord]:
    return [r for r in profile.ops if r.module == path]


def _hook_extra(profile: Profile, module: nn.Module, path: str, calls: list) -> tuple[str, int]:
    """(kind, amount) a ptflops module hook adds beyond vitprof's MACs of that module.

    Only modules of a type ptflops maps reach here; the one mapped type with ``head_dim`` and
    ``num_heads`` is timm's ``Attention``. A mapped type with no rule here (ReLU, pooling)
    adds 0 and leaves its count in the residual.
    """
    own = _own(profile, path)
    if isinstance(module, nn.Linear):
        bias = sum(r.macs for r in own) // module.in_features if module.bias is not None else 0
        return "Linear bias elements (tokens x out_features)", bias
    if isinstance(module, nn.modules.conv._ConvNd):
        per_output = module.in_channels // module.groups * math.prod(module.kernel_size)
        bias = sum(r.macs for r in own) // per_output if module.bias is not None else 0
        return "convolution bias elements", bias
    if isinstance(module, nn.LayerNorm | nn.GroupNorm | nn.modules.batchnorm._BatchNorm):
        elements = sum(_elements_normed(r, module) for r in own if "norm" in r.op)
        factor = 2 if getattr(module, "affine", False) else 1
        return f"{type(module).__name__} input elements x{factor}", elements * factor
    if isinstance(module, nn.GELU):
        return "nn.GELU output elements", _gelu_elements(own)
    if isinstance(module, nn.MultiheadAttention):
        return ("nn.MultiheadAttention query scaling, in-projection bias, softmax and "
                "out-projection bias", sum(_mha_extra(module, shapes) for shapes in calls))
    if hasattr(module, "head_dim") and hasattr(module, "num_heads"):
        return (f"{type(module).__name__} (timm) query scaling and softmax",
                sum(_timm_attention_extra(module, shapes) for shapes in calls))
    return f"{type(module).__name__} (no rule here)", 0


def _gelu_elements(records: Sequence[OpRecord]) -> int:
    return sum(r.vector_flops for r in records if r.op == "aten.gelu") // GELU_COST


def _called_elements(
    profile: Profile, run: PatchRun, call: str, ops: frozenset[str], cost: int
) -> int:
    """Elements of vitprof's ``ops`` records (vector FLOPs over ``cost``) in the modules that
    made the logged ``call``: what a patched element-wise function counts."""
    callers = {module for name, module in run.calls if name == call}
    return sum(r.vector_flops for r in profile.ops if r.op in ops and r.module in callers) // cost


def _mha_extra(module: nn.MultiheadAttention, shapes: tuple[tuple[int, ...], ...]) -> int:
    q, k = shapes[0], shapes[1]
    batch_dim, length_dim = (0, 1) if module.batch_first else (1, 0)
    batch, embed, heads = q[batch_dim], module.embed_dim, module.num_heads
    queries, keys = q[length_dim], k[length_dim]
    bias = (queries + 2 * keys) * embed if module.in_proj_bias is not None else 0
    return batch * (queries * embed + bias + heads * queries * keys + queries * embed)


def _timm_attention_extra(module: Any, shapes: tuple[tuple[int, ...], ...]) -> int:
    batch, tokens, _ = shapes[0]
    heads = int(module.num_heads)
    return batch * (tokens * int(module.head_dim) * heads + heads * tokens * tokens)


def ptflops_pytorch_causes(profile: Profile, model: nn.Module, run: PatchRun) -> list[Cause]:
    """ptflops's pytorch backend, rule by rule, against vitprof's records."""
    roots = _roots(list(run.hooked))

    def hooked(module: str) -> bool:
        return any(_under(module, p) for p in roots)

    hidden = sum(r.macs for r in profile.ops
                 if any(_under(r.module, p) and r.module != p for p in roots))
    unhooked = sum(r.macs for r in profile.ops if not hooked(r.module))
    bmm = {True: 0, False: 0}  # vitprof's MACs of torch.bmm calls, inside and outside hooks
    for op, module in _call_kernels(run, "torch.bmm"):
        bmm[hooked(module)] += vitprof_macs_for(profile, op, module)
    softmax = _called_elements(profile, run, "F.softmax", SOFTMAX_OPS, SOFTMAX_COST)
    gelu = _called_elements(profile, run, "F.gelu", frozenset({"aten.gelu"}), GELU_COST)
    extras: Counter[str] = Counter()
    for path in roots:
        kind, amount = _hook_extra(profile, model.get_submodule(path), path, run.hooked[path])
        extras[kind] += amount
    counted = sum(r.macs for p in roots for r in _own(profile, p)) + sum(extras.values())
    batch = profile.input_shape[0]
    causes = [Cause(f"counts {kind} as MACs (module hook)", amount)
              for kind, amount in sorted(extras.items())]
    causes += [
        Cause("a hooked module's count replaces its children's: their MACs are lost "
              "(timm Attention's qkv and proj)", -hidden),
        Cause("MACs outside every hooked module, in functions it does not patch "
              "(F.linear, the @ operator, F.scaled_dot_product_attention)", bmm[False] - unhooked),
        Cause("the patched torch.bmm counts again products its module's hook already counts "
              "(nn.MultiheadAttention with need_weights)", bmm[True]),
        Cause("counts F.softmax's input elements as MACs (patched F.softmax)", softmax),
        Cause(f"divides module-hook counts by the batch size {batch} (per-image average); "
              f"patched functions stay per batch", counted // batch - counted),
        Cause("counts F.gelu's input elements as MACs (patched F.gelu; nn.GELU calls it, so its "
              "elements count twice)", gelu),
    ]
    return [c for c in causes if c.macs]


# ------------------------------------------------------------------------------------ published


def published_causes(profile: Profile, published: Published) -> list[Cause]:
    """A published GMAC figure is vitprof's count rounded to the decimals it is printed with."""
    decimals = max(0, -int(Decimal(str(published.gmacs)).as_tuple().exponent))
    step = 10 ** (9 - decimals)
    macs = profile.totals.macs
    quotient, remainder = divmod(macs, step)
    rounded = (quotient + (2 * remainder > step or (2 * remainder == step and quotient % 2))) * step
    return [c for c in [
        Cause(f"printed as GMACs with {decimals} decimals: rounding of {macs:,}", rounded - macs)
    ] if c.macs]
