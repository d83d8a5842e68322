"""Formulas of backward operations (training counts) beyond the element-wise table.

These price the aten operations an autograd backward runs, so that a training step is counted
under the same dispatch counter as the forward. Arguments are read by schema name; a gradient
operation has its forward's kind, and its registration gives its row of the cost table (among
the backward rows), written with the same constants.
"""

from __future__ import annotations

import math
from typing import Any

from vitprof.core.records import Cost, OpKind
from vitprof.count.formulas.elementwise import SOFTMAX_BACKWARD_COST
from vitprof.count.formulas.forward import attention_cost, convolution_macs
from vitprof.count.formulas.registry import Arguments, CostRow, aten, register
from vitprof.count.formulas.shapes import numel, shape

LAYER_NORM_BACKWARD_COST = 8  # x-hat 2, two row sums 3, combine 3
LAYER_NORM_WEIGHT_GRAD_COST = 2  # multiply by x-hat, accumulate
SDPA_DROPOUT_BACKWARD_COST = 2  # mask and scale, per score

SDPA_BACKWARD_KERNELS: tuple[str, ...] = (
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward",
)

def _asked(output_mask: Any, index: int) -> bool:
    """Whether gradient ``index`` is asked for (all are when there is no mask)."""
    return bool(output_mask[index]) if output_mask is not None else True


@register(aten.convolution_backward, kind=OpKind.CONV, row=CostRow(
    "forward MACs per gradient asked for", "the input and the weight gradient each cost the "
    "forward MACs; the bias gradient 1 per output element", backward=True))
def convolution_backward_cost(inputs: Arguments, out: Any) -> Cost:
    """The input and the weight gradient each cost the forward MACs; the bias gradient sums the
    output gradient (1 per element)."""
    grad_output, mask = inputs["grad_output"], inputs["output_mask"]
    forward = convolution_macs(inputs["input"], inputs["weight"], grad_output,
                               bool(inputs["transposed"]))
    gradients = int(_asked(mask, 0)) + int(_asked(mask, 1))
    bias = numel(grad_output) if _asked(mask, 2) and inputs["bias_sizes"] is not None else 0
    return Cost(macs=forward * gradients, vector_flops=bias)


@register(aten.native_layer_norm_backward, kind=OpKind.NORM, row=CostRow(
    f"{LAYER_NORM_BACKWARD_COST} per input, +1 weight; +{LAYER_NORM_WEIGHT_GRAD_COST} weight "
    "gradient, +1 bias gradient",
    "input gradient: recompute x-hat 2, two row sums 3, combine 3 (+1 with a weight: g * w); "
    "weight gradient: multiply by x-hat and accumulate; bias gradient: accumulate",
    backward=True))
def layer_norm_backward_cost(inputs: Arguments, out: Any) -> Cost:
    """Input gradient 8 per element (+1 with a weight), weight gradient 2, bias gradient 1."""
    weight, mask = inputs["weight"], inputs["output_mask"]
    per_element = 0
    if _asked(mask, 0):
        per_element += LAYER_NORM_BACKWARD_COST + int(weight is not None)
    if _asked(mask, 1) and weight is not None:
        per_element += LAYER_NORM_WEIGHT_GRAD_COST
    if _asked(mask, 2) and inputs["bias"] is not None:
        per_element += 1
    return Cost(vector_flops=per_element * numel(inputs["input"]))


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
    per_score = SOFTMAX_BACKWARD_COST + SDPA_DROPOUT_BACKWARD_COST * int(dropout)
    scaling = heads * (length + k_shape[-2]) * e
    return Cost(macs=2 * forward.macs, vector_flops=scores * per_score + scaling)


def sdpa_backward_cost(inputs: Arguments, out: Any) -> Cost:
    """Every fused attention kernel's backward: ``query``, ``key``, ``value``, ``dropout_p``."""
    return attention_backward_cost(
        shape(inputs["query"]), shape(inputs["key"]), shape(inputs["value"]),
        dropout=bool(inputs["dropout_p"]),
    )


register(*(getattr(aten, kernel) for kernel in SDPA_BACKWARD_KERNELS if hasattr(aten, kernel)),
         sdpa_backward_cost, kind=OpKind.ATTENTION, row=CostRow(
             f"2 x the forward MACs; {SOFTMAX_BACKWARD_COST} per score, +1 per q and k element",
             f"four products; softmax backward per score (+{SDPA_DROPOUT_BACKWARD_COST} with "
             "dropout); the scaling's gradient per element of q and k; no recomputation of the "
             "scores is charged", backward=True))
