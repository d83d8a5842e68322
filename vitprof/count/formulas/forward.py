"""Formulas of forward operations that the element-wise table cannot express: products (MACs),
attention, and element-wise work whose cost depends on an argument (norms, pools, ``max``).

Every formula reads its arguments by schema name (:func:`.registry.arguments`); its
registration gives its kind and its row of the cost table, written with the same constants.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from vitprof.core.records import Component, Cost, OpKind
from vitprof.count.formulas.elementwise import (
    GELU_COST,
    LAYER_NORM_COST,
    SDPA_SCALE_COST,
    SOFTMAX_COST,
)
from vitprof.count.formulas.registry import Arguments, CostRow, aten, register
from vitprof.count.formulas.shapes import first_tensor, numel, shape

RMS_NORM_COST = 3  # square, accumulate, scale
BATCH_NORM_EVAL_COST = 2  # subtract the running mean, scale by the running 1/std
ADDCMUL_COST = 2  # multiply (or divide), add
AA_TAP_COST = 2  # an antialiased resampling tap: multiply by its weight, accumulate
TAP_COST = 2  # an interpolation tap: multiply by its weight, accumulate
GRID_COORDINATE_COST = 2  # a sampling grid's coordinate unnormalised: multiply, add
# grid_sampler_2d's interpolation_mode -> the taps per output element
GRID_SAMPLER_TAPS = {0: 4, 1: 0, 2: 16}  # bilinear, nearest (a select, free), bicubic

SDPA_KERNELS: tuple[str, ...] = (
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable",
)

PRODUCT_ROW = CostRow("1 MAC per multiply-accumulate", "(b, m, k) @ (b, k, n) is b m k n MACs")
ADDED_PRODUCT_ROW = CostRow(
    "MACs + 1 per output", "the product in MACs; the add (beta != 0) 1 per output element, and a "
    "scaling alpha != 1 another (baddbmm)")
NORM_ROW = CostRow(f"{LAYER_NORM_COST} per input, +1 weight, +1 bias",
                   "mean, subtract, square, accumulate, scale by 1/std; the affine weight and bias")
POOL_ROW = CostRow("prod(kernel) per output", "one comparison or add per window element")
AA_ROW = CostRow(
    f"{AA_TAP_COST} per tap of each resampled axis",
    "antialiased resampling as PyTorch runs it: one pass per axis whose size changes (W first), "
    "each output of a pass reads the input taps within support = 1 (bilinear) or 2 (bicubic) x "
    "max(scale, 1) of its centre, clipped to the input; a tap is a multiply and an accumulate")


# ---------------------------------------------------------------------------------------------
# matrix products


@register(aten.mm, kind=OpKind.PRODUCT, row=PRODUCT_ROW)
def mm_cost(inputs: Arguments, out: Any) -> Cost:
    """(m, k) @ (k, n)."""
    (m, k), (_, n) = shape(inputs["self"]), shape(inputs["mat2"])
    return Cost(macs=m * k * n)


@register(aten.addmm, kind=OpKind.PRODUCT, row=ADDED_PRODUCT_ROW)
def addmm_cost(inputs: Arguments, out: Any) -> Cost:
    """bias + (m, k) @ (k, n): the product in MACs, the bias add in vector FLOPs."""
    (m, k), (_, n) = shape(inputs["mat1"]), shape(inputs["mat2"])
    return Cost(macs=m * k * n, vector_flops=m * n if inputs["beta"] != 0 else 0)


@register(aten._addmm_activation, kind=OpKind.PRODUCT,
          row=CostRow(f"addmm + 1 or {GELU_COST} per output",
                      "addmm followed by relu, or gelu with use_gelu"))
def addmm_activation_cost(inputs: Arguments, out: Any) -> Cost:
    """addmm followed by relu (1 per element) or gelu (``use_gelu``, 5 per element)."""
    activation = GELU_COST if inputs["use_gelu"] else 1
    return addmm_cost(inputs, out) + Cost(vector_flops=numel(out) * activation)


@register(aten.bmm, kind=OpKind.PRODUCT, row=PRODUCT_ROW)
def bmm_cost(inputs: Arguments, out: Any) -> Cost:
    """(b, m, k) @ (b, k, n)."""
    (b, m, k), (_, _, n) = shape(inputs["self"]), shape(inputs["mat2"])
    return Cost(macs=b * m * k * n)


@register(aten.baddbmm, kind=OpKind.PRODUCT, row=ADDED_PRODUCT_ROW)
def baddbmm_cost(inputs: Arguments, out: Any) -> Cost:
    """beta * c + alpha * (b, m, k) @ (b, k, n): scaling and the add are vector FLOPs."""
    (b, m, k), (_, _, n) = shape(inputs["batch1"]), shape(inputs["batch2"])
    elements = b * m * n
    vector = (elements if inputs["beta"] != 0 else 0) + (elements if inputs["alpha"] != 1 else 0)
    return Cost(macs=b * m * k * n, vector_flops=vector)


@register(aten.mv, kind=OpKind.PRODUCT, row=PRODUCT_ROW)
def mv_cost(inputs: Arguments, out: Any) -> Cost:
    """(m, k) @ (k,)."""
    m, k = shape(inputs["self"])
    return Cost(macs=m * k)


@register(aten.dot, aten.vdot, kind=OpKind.PRODUCT, row=PRODUCT_ROW)
def dot_cost(inputs: Arguments, out: Any) -> Cost:
    """(k,) . (k,)."""
    return Cost(macs=numel(inputs["self"]))


def convolution_macs(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor,
                     transposed: bool) -> int:
    """C_in / groups x prod(kernel) MACs per output element, or per input element when
    ``transposed`` (each input element is scattered through the kernel)."""
    w = shape(weight)
    return (numel(x) if transposed else numel(out)) * w[1] * math.prod(w[2:])


@register(aten.convolution, aten._convolution, kind=OpKind.CONV,
          row=CostRow("C_in / groups x prod(kernel) MACs per output",
                      "per input element when transposed; the bias add 1 per output element"))
def convolution_cost(inputs: Arguments, out: Any) -> Cost:
    """A (grouped, possibly transposed) convolution; the bias add is one vector FLOP per output
    element."""
    macs = convolution_macs(inputs["input"], inputs["weight"], out, bool(inputs["transposed"]))
    return Cost(macs=macs, vector_flops=numel(out) if inputs["bias"] is not None else 0)


# ---------------------------------------------------------------------------------------------
# attention


def attention_cost(
    q_shape: tuple[int, ...],
    k_shape: tuple[int, ...],
    v_shape: tuple[int, ...],
    *,
    masked: bool = False,
    dropout: bool = False,
) -> Cost:
    """softmax(Q K^T * scale) V with Q (..., L, E), K (..., S, E), V (..., S, Ev).

    QK^T costs L x S x E MACs and AV costs L x S x Ev per batch-head; each of the L x S scores
    is scaled once (1) and soft-maxed (5), plus 1 for a mask and 1 for dropout.
    """
    *batch, length, e = q_shape
    source, ev = k_shape[-2], v_shape[-1]
    heads = math.prod(batch)
    scores = heads * length * source
    per_score = SDPA_SCALE_COST + SOFTMAX_COST + int(masked) + int(dropout)
    return Cost(macs=scores * e + scores * ev, vector_flops=scores * per_score)


def sdpa_cost(inputs: Arguments, out: Any) -> Cost:
    """``scaled_dot_product_attention`` and each of its kernels: ``query``, ``key``, ``value``,
    a mask (``attn_mask`` or ``attn_bias``), ``dropout_p`` and ``is_causal``, by name."""
    mask = inputs.get("attn_mask", inputs.get("attn_bias"))
    return attention_cost(
        shape(inputs["query"]), shape(inputs["key"]), shape(inputs["value"]),
        masked=mask is not None or bool(inputs.get("is_causal", False)),
        dropout=bool(inputs.get("dropout_p", 0.0)),
    )


register(*(getattr(aten, kernel) for kernel in SDPA_KERNELS if hasattr(aten, kernel)), sdpa_cost,
         kind=OpKind.ATTENTION,
         row=CostRow(f"{SDPA_SCALE_COST + SOFTMAX_COST} per score + L S (E + Ev) MACs",
                     f"QK^T is L S E MACs, AV L S Ev; per score scale {SDPA_SCALE_COST} + softmax "
                     f"{SOFTMAX_COST}, +1 with a mask or causal, +1 with dropout; every kernel "
                     "costs what scaled_dot_product_attention costs"))


@register(aten._native_multi_head_attention, kind=OpKind.MULTI_HEAD_ATTENTION,
          row=CostRow("as F.multi_head_attention_forward",
                      "projections in MACs (bias 1 per element); the core as scaled-dot-product "
                      f"attention, or with need_weights: q scaling 1 per q element, softmax "
                      f"{SOFTMAX_COST} (+1 with a mask) and the mean over heads 1 per score"))
def native_mha_cost(inputs: Arguments, out: Any) -> dict[Component, Cost]:
    """Fast path of ``nn.MultiheadAttention``, split into projection, core and output projection.

    Batch-first (B, L, D) inputs. Charged exactly like ``F.multi_head_attention_forward``: with
    ``need_weights`` it scales q (1 per q element), multiplies, soft-maxes and averages the
    weights over heads; without, it calls scaled-dot-product attention.
    """
    embed_dim, heads = int(inputs["embed_dim"]), int(inputs["num_head"])
    masked = inputs["mask"] is not None
    batch, length = shape(inputs["query"])[:2]
    source = shape(inputs["key"])[1]
    tokens_in = batch * (length + 2 * source)
    qkv = Cost(
        macs=tokens_in * embed_dim * embed_dim,
        vector_flops=tokens_in * embed_dim if inputs["qkv_bias"] is not None else 0,
    )
    head_dim = embed_dim // heads
    per_head = (batch, heads, length, head_dim)
    kv_shape = (batch, heads, source, head_dim)
    if inputs["need_weights"]:
        scores = batch * heads * length * source
        average = bool(inputs["average_attn_weights"])
        core = Cost(
            macs=2 * scores * head_dim,
            vector_flops=batch * length * embed_dim
            + scores * (SOFTMAX_COST + int(masked) + int(average)),
        )
    else:
        core = attention_cost(per_head, kv_shape, kv_shape, masked=masked)
    proj = Cost(
        macs=batch * length * embed_dim * embed_dim,
        vector_flops=batch * length * embed_dim if inputs["proj_bias"] is not None else 0,
    )
    return {Component.ATTN_QKV: qkv, Component.ATTN_CORE: core, Component.ATTN_PROJ: proj}


# ---------------------------------------------------------------------------------------------
# element-wise work that depends on an argument


@register(aten.max, aten.min, kind=OpKind.ELEMENTWISE,
          row=CostRow("1 per input, or 1 per output with a tensor other",
                      "a reduction, or an element-wise comparison"))
def max_min_cost(inputs: Arguments, out: Any) -> Cost:
    """``max(input[, dim])`` is a reduction, 1 per input element; ``max(input, other)`` is
    element-wise, 1 per output element."""
    if isinstance(inputs.get("other"), torch.Tensor):
        return Cost(vector_flops=numel(first_tensor(out)))
    return Cost(vector_flops=numel(inputs["self"]))


@register(aten.addcmul, aten.addcmul_, aten.addcdiv, aten.addcdiv_, kind=OpKind.ELEMENTWISE,
          row=CostRow(f"{ADDCMUL_COST} per output, +1 when value != 1",
                      "multiply (or divide), add; the scaling by value"))
def addcmul_cost(inputs: Arguments, out: Any) -> Cost:
    """``self + value * t1 * t2`` (or ``t1 / t2``): 2 per output element, +1 when ``value`` is
    not 1 (ResMLP's affine ``addcmul(beta, alpha, x)`` costs 2)."""
    per_element = ADDCMUL_COST + int(inputs["value"] != 1)
    return Cost(vector_flops=per_element * numel(first_tensor(out)))


@register(aten.scatter_add, aten.scatter_add_, aten.index_add, aten.index_add_,
          kind=OpKind.ELEMENTWISE,
          row=CostRow("1 per source element", "each source element added into its destination "
                      "(ToMe's token merge, a scatter-sum)"))
def scatter_add_cost(inputs: Arguments, out: Any) -> Cost:
    """``self.scatter_add(dim, index, src)`` and ``self.index_add(dim, index, source)``: one
    add per element of the source, whatever the destination's size."""
    source = inputs["src"] if "src" in inputs else inputs["source"]
    return Cost(vector_flops=numel(source))


def _affine(inputs: Arguments, base: int) -> Cost:
    """``base`` per element of ``input``, +1 with a ``weight``, +1 with a ``bias``."""
    per_element = (base + int(inputs["weight"] is not None)
                   + int(inputs.get("bias") is not None))
    return Cost(vector_flops=per_element * numel(inputs["input"]))


@register(aten.native_layer_norm, aten.native_group_norm, aten.native_batch_norm,
          aten._native_batch_norm_legit, kind=OpKind.NORM, row=NORM_ROW)
def layer_norm_cost(inputs: Arguments, out: Any) -> Cost:
    """Normalisation from the data's own statistics: 5 per element, +1 each for weight, bias."""
    return _affine(inputs, LAYER_NORM_COST)


if hasattr(aten, "_fused_rms_norm"):

    @register(aten._fused_rms_norm, kind=OpKind.NORM,
              row=CostRow(f"{RMS_NORM_COST} per input, +1 weight", "square, accumulate, scale"))
    def rms_norm_cost(inputs: Arguments, out: Any) -> Cost:
        """3 per element, +1 with a weight (the schema has no bias)."""
        return _affine(inputs, RMS_NORM_COST)


@register(aten._native_batch_norm_legit_no_training, kind=OpKind.NORM,
          row=CostRow(f"{BATCH_NORM_EVAL_COST} per input, +1 weight, +1 bias",
                      "batch norm in eval: subtract the running mean, scale"))
def batch_norm_eval_cost(inputs: Arguments, out: Any) -> Cost:
    """Batch norm from running statistics: 2 per element (+1/+1 affine)."""
    return _affine(inputs, BATCH_NORM_EVAL_COST)


@register(aten.max_pool2d_with_indices, aten.avg_pool2d, kind=OpKind.POOL, row=POOL_ROW)
def pool2d_cost(inputs: Arguments, out: Any) -> Cost:
    """One comparison or add per window element, per output element."""
    return _pool_cost(inputs, out, 2)


@register(aten.max_pool3d_with_indices, aten.avg_pool3d, kind=OpKind.POOL, row=POOL_ROW)
def pool3d_cost(inputs: Arguments, out: Any) -> Cost:
    """One comparison or add per window element (a 3-D window), per output element."""
    return _pool_cost(inputs, out, 3)


def _pool_cost(inputs: Arguments, out: Any, dims: int) -> Cost:
    """prod(kernel) per output element; a kernel of one size is that size on ``dims`` axes."""
    kernel = inputs["kernel_size"]
    kernel = kernel if isinstance(kernel, list | tuple) else [kernel]
    window = math.prod(kernel) if len(kernel) > 1 else int(kernel[0]) ** dims
    return Cost(vector_flops=window * numel(first_tensor(out)))


@register(aten.grid_sampler_2d, kind=OpKind.ELEMENTWISE, row=CostRow(
    f"{TAP_COST} per tap per output + {GRID_COORDINATE_COST} per grid element",
    "vector work, as upsample_bilinear2d (no MACs: torch's FlopCounterMode counts none either): "
    "per output element (each channel) weight and accumulate each of 4 taps (bilinear) or 16 "
    "(bicubic), nearest a select (0); each grid coordinate unnormalised once, a multiply and an "
    "add"))
def grid_sampler_cost(inputs: Arguments, out: Any) -> Cost:
    """Sampling a (N, C, H, W) map at a (N, H_out, W_out, 2) grid: per output element (each
    channel) 2 per tap, 4 taps bilinear, 16 bicubic, 0 nearest (a select); 2 per grid
    coordinate (unnormalised: a multiply and an add). Vector FLOPs, as an interpolation's,
    not MACs: no weight is read."""
    taps = GRID_SAMPLER_TAPS[int(inputs["interpolation_mode"])]
    return Cost(vector_flops=TAP_COST * taps * numel(first_tensor(out))
                + GRID_COORDINATE_COST * numel(inputs["grid"]))


# ---------------------------------------------------------------------------------------------
# antialiased resampling (timm's and SigLIP's position-embedding resizes)


def _axis_scale(size_in: int, size_out: int, align_corners: bool, factor: float | None) -> float:
    """Input pixels per output pixel, as ATen's ``area_pixel_compute_scale``."""
    if align_corners:
        return (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    return 1.0 / factor if factor else size_in / size_out


def antialiased_taps(size_in: int, size_out: int, half_width: int, align_corners: bool = False,
                     factor: float | None = None) -> int:
    """The input taps all ``size_out`` outputs of one axis read: output ``i`` reads the inputs
    from ``int(centre - support + 0.5)`` (at least 0) to ``int(centre + support + 0.5)`` (at
    most ``size_in``), ``centre = scale (i + 0.5)``, ``support = half_width x max(scale, 1)``."""
    scale = _axis_scale(size_in, size_out, align_corners, factor)
    support = half_width * max(scale, 1.0)
    taps = 0
    for i in range(size_out):
        centre = scale * (i + 0.5)
        low = max(int(centre - support + 0.5), 0)
        taps += min(int(centre + support + 0.5), size_in) - low
    return taps


def _antialiased(half_width: int) -> Any:
    def formula(inputs: Arguments, out: Any) -> Cost:
        *outer, height_in, width_in = shape(inputs["self"])
        height_out, width_out = (int(v) for v in inputs["output_size"])
        align = bool(inputs["align_corners"])
        rows = math.prod(outer)
        taps = 0
        if width_out != width_in:  # the horizontal pass: every input row, each output column
            taps += rows * height_in * antialiased_taps(width_in, width_out, half_width, align,
                                                        inputs.get("scales_w"))
        if height_out != height_in:  # the vertical pass: over the (resampled) columns
            taps += rows * width_out * antialiased_taps(height_in, height_out, half_width,
                                                        align, inputs.get("scales_h"))
        return Cost(vector_flops=AA_TAP_COST * taps)

    formula.__doc__ = f"Antialiased resampling, support {half_width} x max(scale, 1) per side."
    return formula


register(aten._upsample_bilinear2d_aa, _antialiased(1), kind=OpKind.ELEMENTWISE, row=AA_ROW)
register(aten._upsample_bicubic2d_aa, _antialiased(2), kind=OpKind.ELEMENTWISE, row=AA_ROW)
