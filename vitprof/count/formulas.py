"""Shape-only cost formulas for aten operations, and the operations known to cost nothing.

Conventions (see :mod:`vitprof.core.records`): a formula returns MACs (one multiply-accumulate of a
matmul, linear, convolution or attention product) and vector FLOPs (element-wise work). A bias
addition is never a MAC: it is one vector FLOP per output element.

Per-element vector costs (``VECTOR_COSTS``), charged on the output elements unless said otherwise:

=====================================  ====  ==============================================
operation                              cost  why
=====================================  ====  ==============================================
add, sub, mul, div, neg, bias add       1    one arithmetic operation
relu, clamp, abs, comparisons           1    one operation
exp, log, sqrt, rsqrt, tanh, erf, ...   1    one transcendental counted as one operation
sigmoid                                 1    treated as one transcendental
silu                                    2    sigmoid, multiply
hardsigmoid                             3    add 3, clamp, scale by 1/6
hardswish                               4    hardsigmoid, multiply
addcmul, addcdiv                        2    multiply (or divide), add; +1 when ``value``
                                             is not 1 (its scaling)
lerp                                    3    subtract, multiply by the weight, add
gelu (erf or tanh form)                 5    scale, erf, add one, two multiplies
softmax, log_softmax                    5    max, subtract, exp, sum, divide
layer norm                              5    mean, subtract, square, accumulate, scale by 1/std
  + affine weight / bias               +1/+1 per element each
rms norm                                3    square, accumulate, scale (+1 with a weight)
batch norm (eval, running statistics)   2    subtract mean, scale (+1/+1 affine)
sum, mean, amax, amin, max, min         1    per *input* element
fold (``col2im``)                       1    per *input* element: added into its pixel
interpolation, per output element     2/tap  weight and accumulate each tap: linear 1d 4,
                                             bilinear 8, trilinear 16, bicubic 32;
                                             nearest is free; antialiased resampling,
                                             whose taps vary with the scale, unsupported
vector norm (``linalg_vector_norm``)    2    per *input* element: power, accumulate;
                                        +1   per output element: the root
dropout while training                  2    mask and multiply
scaled-dot-product attention            6    per attention score: scale 1 + softmax 5
                                             (+1 with a mask or causal, +1 with dropout)
*backward (training counts)*
convolution backward                   MACs  the forward MACs once per gradient asked for
                                             (input, weight); bias gradient 1 per element
layer norm backward                     8    input gradient: recompute x-hat 2, two row
                                             sums 3, combine 3 (+1 with a weight: g * w);
  + weight / bias gradient             +2/+1 multiply by x-hat and accumulate / accumulate
gelu backward                          10    cdf 4 (scale, erf, add one, halve), pdf 3
                                             (square, exp, scale), x * pdf + cdf 2, x grad 1
softmax / log_softmax backward          4    multiply, row sum, subtract, multiply
relu (threshold) backward               1    compare and select
dropout backward                        2    mask and scale
sigmoid / tanh backward                 3    (1 - y) or (1 - y^2), two multiplies
silu backward                           6    sigmoid 1, x * (1 - s) + 1 3, two multiplies
embedding backward                      1    one scatter-add per gradient element
scaled-dot-product attention backward  MACs  4 products, 2 x the forward MACs (no
                                             recomputation of the scores is charged)
                                        4    per score: softmax backward, as the math path
                                       +1/+1 per q / k element: gradient of the scaling
                                       +2    per score with dropout
=====================================  ====  ==============================================

Fused kernels are charged what their unfused reference computation costs, so that a count does
not depend on which kernel PyTorch picked: ``aten._native_multi_head_attention`` (the fast path of
``nn.MultiheadAttention``) costs exactly what ``F.multi_head_attention_forward`` costs, and every
``_scaled_dot_product_*_attention`` kernel costs what ``scaled_dot_product_attention`` costs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from vitprof.core.records import Component, Cost

aten = torch.ops.aten

OpCost = Cost | Mapping[Component, Cost]
Formula = Callable[[tuple[Any, ...], dict[str, Any], Any], OpCost]

FORMULAS: dict[Any, Formula] = {}

SOFTMAX_COST = 5
GELU_COST = 5
LAYER_NORM_COST = 5
SDPA_SCALE_COST = 1

VECTOR_COSTS: dict[str, int] = {
    "add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "neg": 1, "reciprocal": 1,
    "relu": 1, "clamp": 1, "clamp_min": 1, "clamp_max": 1, "abs": 1, "hardtanh": 1,
    "leaky_relu": 1, "maximum": 1, "minimum": 1,
    "eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1,
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "erf": 1, "sin": 1, "cos": 1,
    "pow": 1, "sigmoid": 1,
    "silu": 2, "hardsigmoid": 3, "hardswish": 4,
    "upsample_linear1d": 2 * 2, "upsample_bilinear2d": 2 * 4, "upsample_trilinear3d": 2 * 8,
    "upsample_bicubic2d": 2 * 16,
    "gelu": GELU_COST,
    "_softmax": SOFTMAX_COST, "_safe_softmax": SOFTMAX_COST, "_log_softmax": SOFTMAX_COST,
    "native_dropout": 2,
}
REDUCTION_COSTS: dict[str, int] = {
    "sum": 1, "mean": 1, "amax": 1, "amin": 1, "col2im": 1,
}

# Operations that move, reshape, select or allocate data and do no arithmetic.
FREE_OPS: frozenset[Any] = frozenset(
    getattr(aten, name)
    for name in (
        "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze",
        "squeeze", "flatten", "clone", "copy_", "_to_copy", "slice", "select", "index",
        "index_select", "gather", "cat", "stack", "split", "split_with_sizes", "chunk",
        "unbind", "narrow", "as_strided", "alias", "detach", "lift_fresh", "lift_fresh_copy",
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "new_zeros",
        "new_ones", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "fill",
        "fill_", "zero_", "arange", "scalar_tensor", "masked_fill", "where", "topk", "sort",
        "argmax", "argmin", "im2col", "repeat", "roll", "flip", "constant_pad_nd", "embedding",
        "dropout", "_unsafe_index", "_assert_tensor_metadata", "_local_scalar_dense",
        "linspace", "unfold", "movedim", "contiguous", "_reshape_alias", "unsafe_split",
        "bernoulli_", "uniform_", "normal_", "erfinv_",
        "as_strided_", "squeeze_", "unsqueeze_", "transpose_", "t_",
        "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
        "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
        "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
    )
    if hasattr(aten, name)
)


def register(*ops: Any) -> Callable[[Formula], Formula]:
    """Register ``formula`` for each overload packet in ``ops``; a second registration fails."""

    def decorate(formula: Formula) -> Formula:
        for op in ops:
            if op in FORMULAS:
                raise ValueError(f"a formula for {op} is already registered")
            FORMULAS[op] = formula
        return formula

    return decorate


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def _numel(t: Any) -> int:
    return math.prod(_shape(t))


def _first_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    return next(v for v in value if isinstance(v, torch.Tensor))


# ---------------------------------------------------------------------------------------------
# matrix products


@register(aten.mm)
def mm_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """(m, k) @ (k, n)."""
    (m, k), (_, n) = _shape(args[0]), _shape(args[1])
    return Cost(macs=m * k * n)


@register(aten.addmm)
def addmm_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """bias + (m, k) @ (k, n): the product in MACs, the bias add in vector FLOPs."""
    (m, k), (_, n) = _shape(args[1]), _shape(args[2])
    beta = kwargs.get("beta", args[3] if len(args) > 3 else 1)
    return Cost(macs=m * k * n, vector_flops=m * n if beta != 0 else 0)


@register(aten._addmm_activation)
def addmm_activation_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """addmm followed by relu (1 per element) or gelu (``use_gelu``, 5 per element)."""
    base = addmm_cost(args[:3], {}, out)
    use_gelu = kwargs.get("use_gelu", args[5] if len(args) > 5 else False)
    return base + Cost(vector_flops=_numel(out) * (GELU_COST if use_gelu else 1))


@register(aten.bmm)
def bmm_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """(b, m, k) @ (b, k, n)."""
    (b, m, k), (_, _, n) = _shape(args[0]), _shape(args[1])
    return Cost(macs=b * m * k * n)


@register(aten.baddbmm)
def baddbmm_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """beta * c + alpha * (b, m, k) @ (b, k, n): scaling and the add are vector FLOPs."""
    (b, m, k), (_, _, n) = _shape(args[1]), _shape(args[2])
    beta = kwargs.get("beta", args[3] if len(args) > 3 else 1)
    alpha = kwargs.get("alpha", args[4] if len(args) > 4 else 1)
    elements = b * m * n
    vector = (elements if beta != 0 else 0) + (elements if alpha != 1 else 0)
    return Cost(macs=b * m * k * n, vector_flops=vector)


@register(aten.mv)
def mv_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """(m, k) @ (k,)."""
    m, k = _shape(args[0])
    return Cost(macs=m * k)


@register(aten.dot, aten.vdot)
def dot_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """(k,) . (k,)."""
    return Cost(macs=_numel(args[0]))


@register(aten.convolution, aten._convolution)
def convolution_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """Each output element of a (grouped) convolution costs C_in / groups x prod(kernel) MACs.

    For a transposed convolution each *input* element is scattered through the kernel instead.
    The bias add is one vector FLOP per output element.
    """
    x, weight, bias = args[0], args[1], args[2]
    transposed = bool(args[6])
    w = _shape(weight)
    kernel = math.prod(w[2:])
    macs = _numel(x) * w[1] * kernel if transposed else _numel(out) * w[1] * kernel
    return Cost(macs=macs, vector_flops=_numel(out) if bias is not None else 0)


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


def _sdpa(args: tuple, kwargs: dict, mask_pos: int | None, dropout_pos: int, causal_pos: int):
    q, k, v = args[:3]
    mask = kwargs.get("attn_mask", kwargs.get("attn_bias"))
    if mask is None and mask_pos is not None and len(args) > mask_pos:
        mask = args[mask_pos]
    dropout_p = kwargs.get("dropout_p", args[dropout_pos] if len(args) > dropout_pos else 0.0)
    causal = kwargs.get("is_causal", args[causal_pos] if len(args) > causal_pos else False)
    return attention_cost(
        _shape(q), _shape(k), _shape(v), masked=mask is not None or bool(causal),
        dropout=bool(dropout_p),
    )


@register(aten.scaled_dot_product_attention)
def sdpa_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale)``."""
    return _sdpa(args, kwargs, mask_pos=3, dropout_pos=4, causal_pos=5)


@register(aten._scaled_dot_product_flash_attention_for_cpu)
def sdpa_flash_cpu_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """CPU flash kernel ``(q, k, v, dropout_p, is_causal, *, attn_mask, scale)``."""
    return _sdpa(args, kwargs, mask_pos=None, dropout_pos=3, causal_pos=4)


@register(aten._scaled_dot_product_flash_attention)
def sdpa_flash_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """CUDA flash kernel ``(q, k, v, dropout_p, is_causal, return_debug_mask, scale)``."""
    return _sdpa(args, kwargs, mask_pos=None, dropout_pos=3, causal_pos=4)


@register(aten._scaled_dot_product_efficient_attention)
def sdpa_efficient_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """Memory-efficient kernel ``(q, k, v, attn_bias, compute_log_sumexp, dropout_p, causal)``."""
    return _sdpa(args, kwargs, mask_pos=3, dropout_pos=5, causal_pos=6)


@register(aten._scaled_dot_product_cudnn_attention)
def sdpa_cudnn_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """cuDNN kernel ``(q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal, ...)``."""
    return _sdpa(args, kwargs, mask_pos=3, dropout_pos=5, causal_pos=6)


if hasattr(aten, "_scaled_dot_product_fused_attention_overrideable"):

    @register(aten._scaled_dot_product_fused_attention_overrideable)
    def sdpa_overrideable_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
        """Back-end overridable kernel ``(q, k, v, attn_bias, dropout_p, is_causal, ...)``."""
        return _sdpa(args, kwargs, mask_pos=3, dropout_pos=4, causal_pos=5)


@register(aten._native_multi_head_attention)
def native_mha_cost(args: tuple, kwargs: dict, out: Any) -> dict[Component, Cost]:
    """Fast path of ``nn.MultiheadAttention``, split into projection, core and output projection.

    ``(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias,
    mask, need_weights, average_attn_weights, mask_type)`` with batch-first (B, L, D) inputs.
    Charged exactly like ``F.multi_head_attention_forward``: with ``need_weights`` it scales q
    (1 per q element), multiplies, soft-maxes and averages the weights over heads; without, it
    calls scaled-dot-product attention.
    """
    query, key = args[:2]
    embed_dim, heads = int(args[3]), int(args[4])
    qkv_bias, proj_bias = args[6], args[8]
    mask = args[9] if len(args) > 9 else kwargs.get("mask")
    need_weights = args[10] if len(args) > 10 else kwargs.get("need_weights", True)
    average = args[11] if len(args) > 11 else kwargs.get("average_attn_weights", True)
    batch, length = _shape(query)[:2]
    source = _shape(key)[1]
    tokens_in = batch * (length + 2 * source)
    qkv = Cost(
        macs=tokens_in * embed_dim * embed_dim,
        vector_flops=tokens_in * embed_dim if qkv_bias is not None else 0,
    )
    head_dim = embed_dim // heads
    per_head = (batch, heads, length, head_dim)
    kv_shape = (batch, heads, source, head_dim)
    if need_weights:
        scores = batch * heads * length * source
        core = Cost(
            macs=2 * scores * head_dim,
            vector_flops=batch * length * embed_dim
            + scores * (SOFTMAX_COST + int(mask is not None) + int(bool(average))),
        )
    else:
        core = attention_cost(per_head, kv_shape, kv_shape, masked=mask is not None)
    proj = Cost(
        macs=batch * length * embed_dim * embed_dim,
        vector_flops=batch * length * embed_dim if proj_bias is not None else 0,
    )
    return {Component.ATTN_QKV: qkv, Component.ATTN_CORE: core, Component.ATTN_PROJ: proj}


# ---------------------------------------------------------------------------------------------
# element-wise work


def _elementwise(cost: int) -> Formula:
    def formula(args: tuple, kwargs: dict, out: Any) -> Cost:
        return Cost(vector_flops=cost * _numel(_first_tensor(out)))

    formula.__doc__ = f"{cost} vector FLOP(s) per output element."
    return formula


def _reduction(cost: int) -> Formula:
    def formula(args: tuple, kwargs: dict, out: Any) -> Cost:
        return Cost(vector_flops=cost * _numel(args[0]))

    formula.__doc__ = f"{cost} vector FLOP(s) per input element."
    return formula


def _register_table(table: Mapping[str, int], make: Callable[[int], Formula]) -> None:
    """Register each op of ``table`` and its in-place twin (``add`` and ``add_``)."""
    for name, cost in table.items():
        for variant in (name, f"{name}_"):
            if hasattr(aten, variant):
                register(getattr(aten, variant))(make(cost))


_register_table(VECTOR_COSTS, _elementwise)
_register_table(REDUCTION_COSTS, _reduction)


@register(aten.max, aten.min)
def max_min_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``max(input[, dim])`` is a reduction, 1 per input element; ``max(input, other)`` is
    element-wise, 1 per output element."""
    if len(args) > 1 and isinstance(args[1], torch.Tensor):
        return Cost(vector_flops=_numel(_first_tensor(out)))
    return Cost(vector_flops=_numel(args[0]))


@register(aten.addcmul, aten.addcmul_, aten.addcdiv, aten.addcdiv_)
def addcmul_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``self + value * t1 * t2`` (or ``t1 / t2``): 2 per output element, +1 when ``value`` is
    not 1 (ResMLP's affine ``addcmul(beta, alpha, x)`` costs 2)."""
    value = kwargs.get("value", args[3] if len(args) > 3 else 1)
    return Cost(vector_flops=(2 + (value != 1)) * _numel(_first_tensor(out)))


@register(aten.lerp, aten.lerp_)
def lerp_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``start + weight * (end - start)``: 3 per output element."""
    return Cost(vector_flops=3 * _numel(_first_tensor(out)))


@register(aten.linalg_vector_norm)
def vector_norm_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``(input, ord, dim, keepdim)``: 2 per input element (power, accumulate), 1 per output
    element (the root), whatever the order."""
    return Cost(vector_flops=2 * _numel(args[0]) + _numel(_first_tensor(out)))


@register(aten.native_layer_norm)
def layer_norm_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``(input, normalized_shape, weight, bias, eps)``: 5 per element, +1 each for weight, bias."""
    weight = args[2] if len(args) > 2 else None
    bias = args[3] if len(args) > 3 else None
    per_element = LAYER_NORM_COST + int(weight is not None) + int(bias is not None)
    return Cost(vector_flops=per_element * _numel(args[0]))


@register(aten.native_group_norm)
def group_norm_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``(input, weight, bias, N, C, HxW, group, eps)``: as layer norm."""
    per_element = LAYER_NORM_COST + int(args[1] is not None) + int(args[2] is not None)
    return Cost(vector_flops=per_element * _numel(args[0]))


if hasattr(aten, "_fused_rms_norm"):

    @register(aten._fused_rms_norm)
    def rms_norm_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
        """``(input, normalized_shape, weight, eps)``: 3 per element, +1 with a weight."""
        weight = args[2] if len(args) > 2 else None
        return Cost(vector_flops=(3 + int(weight is not None)) * _numel(args[0]))


@register(aten._native_batch_norm_legit_no_training)
def batch_norm_eval_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``(input, weight, bias, running_mean, running_var, momentum, eps)``: 2 (+1/+1 affine)."""
    per_element = 2 + int(args[1] is not None) + int(args[2] is not None)
    return Cost(vector_flops=per_element * _numel(args[0]))


@register(aten.native_batch_norm, aten._native_batch_norm_legit)
def batch_norm_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """Batch norm from batch statistics: as layer norm (5, +1/+1 affine)."""
    per_element = LAYER_NORM_COST + int(args[1] is not None) + int(args[2] is not None)
    return Cost(vector_flops=per_element * _numel(args[0]))


@register(aten.max_pool2d_with_indices, aten.avg_pool2d)
def pool2d_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``(input, kernel_size, stride, ...)``: one comparison or add per window element."""
    kernel = args[1] if isinstance(args[1], list | tuple) else [args[1]]
    window = math.prod(kernel) if len(kernel) > 1 else int(kernel[0]) ** 2
    return Cost(vector_flops=window * _numel(_first_tensor(out)))


@register(aten._adaptive_avg_pool2d, aten.adaptive_avg_pool2d)
def adaptive_avg_pool_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """One add per input element (the windows tile the input)."""
    return Cost(vector_flops=_numel(args[0]))


def formula_for(op: Any) -> Formula | None:
    """The formula for an op overload (looked up by its packet), or None."""
    return FORMULAS.get(getattr(op, "overloadpacket", op))


def is_free(op: Any) -> bool:
    """True when ``op`` is in the documented list of operations that cost nothing."""
    return getattr(op, "overloadpacket", op) in FREE_OPS


def op_name(op: Any) -> str:
    """``aten.addmm`` for ``aten.addmm.default``."""
    packet = getattr(op, "overloadpacket", op)
    qualified = getattr(packet, "_qualified_op_name", None)
    return qualified.replace("::", ".") if qualified else str(packet)


# ---------------------------------------------------------------------------------------------
# backward operations (training counts)
#
# These price the aten operations an autograd backward runs, so that a training step can be
# counted under the same dispatch counter as the forward. Costs are in the docstring table.

LAYER_NORM_BACKWARD_COST = 8
GELU_BACKWARD_COST = 10
SOFTMAX_BACKWARD_COST = 4

BACKWARD_VECTOR_COSTS: dict[str, int] = {
    "threshold_backward": 1, "native_dropout_backward": 2, "sigmoid_backward": 3,
    "tanh_backward": 3, "silu_backward": 6, "gelu_backward": GELU_BACKWARD_COST,
    "_softmax_backward_data": SOFTMAX_BACKWARD_COST,
    "_log_softmax_backward_data": SOFTMAX_BACKWARD_COST,
}
_register_table(BACKWARD_VECTOR_COSTS, _elementwise)

# Gradients that only move data: a zero tensor with the gradient copied into a slice of it.
FREE_OPS = FREE_OPS | frozenset(
    getattr(aten, name)
    for name in ("select_backward", "slice_backward", "diagonal_backward", "unfold_backward",
                 "as_strided_scatter", "slice_scatter", "select_scatter")
    if hasattr(aten, name)
)


def _mask(value: Any, index: int) -> bool:
    return bool(value[index]) if value is not None else True


@register(aten.convolution_backward)
def convolution_backward_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask)``: the input and the weight gradient each cost the
    forward MACs; the bias gradient sums the output gradient (1 per element)."""
    grad_output, x, weight = args[0], args[1], args[2]
    transposed = bool(args[7])
    mask = kwargs.get("output_mask", args[10] if len(args) > 10 else None)
    w = _shape(weight)
    kernel = math.prod(w[2:])
    forward = _numel(x) * w[1] * kernel if transposed else _numel(grad_output) * w[1] * kernel
    gradients = int(_mask(mask, 0)) + int(_mask(mask, 1))
    bias = _numel(grad_output) if _mask(mask, 2) and args[3] is not None else 0
    return Cost(macs=forward * gradients, vector_flops=bias)


@register(aten.native_layer_norm_backward)
def layer_norm_backward_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)``."""
    x, weight, bias = args[1], args[5], args[6]
    mask = kwargs.get("output_mask", args[7] if len(args) > 7 else None)
    per_element = 0
    if _mask(mask, 0):
        per_element += LAYER_NORM_BACKWARD_COST + int(weight is not None)
    if _mask(mask, 1) and weight is not None:
        per_element += 2
    if _mask(mask, 2) and bias is not None:
        per_element += 1
    return Cost(vector_flops=per_element * _numel(x))


@register(aten.embedding_dense_backward)
def embedding_backward_cost(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``(grad_output, indices, num_weights, ...)``: one scatter-add per gradient element."""
    return Cost(vector_flops=_numel(args[0]))


def attention_backward_cost(
    q_shape: tuple[int, ...], k_shape: tuple[int, ...], v_shape: tuple[int, ...], *,
    dropout: bool = False,
) -> Cost:
    """Gradient of softmax(Q K^T * scale) V, charged as the math path's backward.

    Four products (dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q): 2 x the forward MACs;
    softmax backward 4 per score (+2 with dropout); the scaling's gradient once per element of
    Q and of K (the math path scales Q and K^T). No recomputation of the scores is charged, so a
    fused kernel costs what the meta device's math decomposition costs.
    """
    forward = attention_cost(q_shape, k_shape, v_shape)
    *batch, length, e = q_shape
    heads = math.prod(batch)
    scores = heads * length * k_shape[-2]
    per_score = SOFTMAX_BACKWARD_COST + 2 * int(dropout)
    scaling = heads * (length + k_shape[-2]) * e
    return Cost(macs=2 * forward.macs, vector_flops=scores * per_score + scaling)


def _sdpa_backward(dropout_pos: int) -> Formula:
    def formula(args: tuple, kwargs: dict, out: Any) -> Cost:
        q, k, v = args[1:4]
        dropout_p = kwargs.get("dropout_p", args[dropout_pos] if len(args) > dropout_pos else 0)
        return attention_backward_cost(_shape(q), _shape(k), _shape(v), dropout=bool(dropout_p))

    formula.__doc__ = f"``(grad_out, query, key, value, ...)``, dropout_p at {dropout_pos}."
    return formula


for _name, _dropout_pos in (
    ("_scaled_dot_product_flash_attention_for_cpu_backward", 6),
    ("_scaled_dot_product_flash_attention_backward", 10),
    ("_scaled_dot_product_efficient_attention_backward", 9),
    ("_scaled_dot_product_cudnn_attention_backward", 13),
):
    if hasattr(aten, _name):
        register(getattr(aten, _name))(_sdpa_backward(_dropout_pos))
