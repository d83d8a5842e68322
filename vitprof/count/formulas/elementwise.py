"""Element-wise costs: one table, and the formulas made from it.

Each row of :data:`ELEMENTWISE` prices its operations as ``per_input`` vector FLOPs per element of
the first argument plus ``per_output`` per element of the (first) output, as fvcore's
``elementwise_flop_counter(input_scale, output_scale)`` does. Each operation is registered with
its in-place twin (``add`` and ``add_``), of the row's kind (element-wise, unless the row says
a pool or a vector norm), with the row as its documented one. The per-element costs that other
formulas share (softmax, GELU, layer norm) are named constants here, so the formulas and the
documented table (:mod:`vitprof.count.formulas.table`) read the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vitprof.core.records import Cost, OpKind
from vitprof.count.formulas.registry import Arguments, CostRow, Formula, aten, register
from vitprof.count.formulas.shapes import first_argument, first_tensor, numel

SOFTMAX_COST = 5  # max, subtract, exp, sum, divide
GELU_COST = 5  # scale, erf, add one, two multiplies
LAYER_NORM_COST = 5  # mean, subtract, square, accumulate, scale by 1/std
VARIANCE_COST = 4  # per input element: mean, subtract, square, accumulate
SDPA_SCALE_COST = 1  # the scaling of each attention score
GELU_BACKWARD_COST = 10
SOFTMAX_BACKWARD_COST = 4


@dataclass(frozen=True, slots=True)
class Elementwise:
    """``per_input`` x first-argument elements + ``per_output`` x output elements."""

    ops: tuple[str, ...]
    per_input: int
    per_output: int
    why: str
    backward: bool = False  # a gradient operation (training counts)
    kind: OpKind = OpKind.ELEMENTWISE


def _out(cost: int, why: str, *ops: str) -> Elementwise:
    return Elementwise(ops, 0, cost, why)


def _in(cost: int, why: str, *ops: str) -> Elementwise:
    return Elementwise(ops, cost, 0, why)


def _grad(cost: int, why: str, *ops: str) -> Elementwise:
    return Elementwise(ops, 0, cost, why, backward=True)


ELEMENTWISE: tuple[Elementwise, ...] = (
    _out(1, "one arithmetic operation", "add", "sub", "rsub", "mul", "div", "neg", "reciprocal",
         "floor_divide", "remainder", "fmod"),
    _out(1, "one operation", "relu", "clamp", "clamp_min", "clamp_max", "abs", "hardtanh",
         "leaky_relu", "maximum", "minimum", "sign"),
    _out(1, "one comparison", "eq", "ne", "lt", "le", "gt", "ge", "isnan"),
    _out(1, "one logical operation", "logical_not", "logical_and", "logical_or", "bitwise_not",
         "bitwise_and", "bitwise_or"),
    _out(1, "one add per element (a running sum)", "cumsum"),
    _out(1, "one transcendental counted as one operation", "exp", "log", "sqrt", "rsqrt", "tanh",
         "erf", "sin", "cos", "pow", "sigmoid"),
    _out(2, "sigmoid, multiply", "silu"),
    _out(3, "add 3, clamp, scale by 1/6", "hardsigmoid"),
    _out(4, "hardsigmoid, multiply", "hardswish"),
    _out(GELU_COST, "scale, erf (or tanh), add one, two multiplies", "gelu"),
    _out(SOFTMAX_COST, "max, subtract, exp, sum, divide", "_softmax", "_safe_softmax",
         "_log_softmax"),
    _out(2, "dropout while training: mask and multiply", "native_dropout"),
    _out(3, "subtract, multiply by the weight, add", "lerp"),
    _out(2 * 2, "weight and accumulate each of 2 taps", "upsample_linear1d"),
    _out(2 * 4, "weight and accumulate each of 4 taps", "upsample_bilinear2d"),
    _out(2 * 8, "weight and accumulate each of 8 taps", "upsample_trilinear3d"),
    _out(2 * 16, "weight and accumulate each of 16 taps (nearest is free; antialiased "
         "resampling has its own formula)", "upsample_bicubic2d"),
    _in(1, "one add, multiply or comparison per input element", "sum", "mean", "prod", "amax",
        "amin", "all", "any", "_is_all_true", "_is_any_true"),
    _in(1, "fold: each input element is added into its pixel", "col2im"),
    Elementwise(("_adaptive_avg_pool2d", "adaptive_avg_pool2d"), 1, 0,
                "one add per input element (the windows tile the input)", kind=OpKind.POOL),
    Elementwise(("linalg_vector_norm",), 2, 1,
                "power and accumulate per input element, the root per output element",
                kind=OpKind.VECTOR_NORM),
    _in(3, "weight_norm's g v / ||v||: square and accumulate, then scale, per element of v",
        "_weight_norm_interface"),
    Elementwise(("var",), VARIANCE_COST, 1, "mean, subtract, square, accumulate per input "
                "element; divide by the count per output element"),
    Elementwise(("std",), VARIANCE_COST, 2, "var's, and the square root per output element"),
    Elementwise(("var_mean",), VARIANCE_COST, 2, "var's, and the mean's divide per output "
                "element"),
    Elementwise(("std_mean",), VARIANCE_COST, 3, "var_mean's, and the square root per output "
                "element"),
    _grad(1, "relu gradient: compare and select", "threshold_backward"),
    _grad(2, "mask and scale", "native_dropout_backward"),
    _grad(3, "(1 - y) or (1 - y^2), two multiplies", "sigmoid_backward", "tanh_backward"),
    _grad(6, "sigmoid 1, x * (1 - s) + 1 3, two multiplies", "silu_backward"),
    _grad(GELU_BACKWARD_COST, "cdf 4 (scale, erf, add one, halve), pdf 3 (square, exp, scale), "
          "x * pdf + cdf 2, x grad 1", "gelu_backward"),
    _grad(SOFTMAX_BACKWARD_COST, "multiply, row sum, subtract, multiply",
          "_softmax_backward_data", "_log_softmax_backward_data"),
    Elementwise(("embedding_dense_backward",), 1, 0, "one scatter-add per gradient element",
                backward=True),
)

# Views of the table by operation name, for the closed form (forward rows only).
VECTOR_COSTS: dict[str, int] = {
    op: row.per_output for row in ELEMENTWISE if not row.backward and not row.per_input
    for op in row.ops
}
REDUCTION_COSTS: dict[str, int] = {
    op: row.per_input for row in ELEMENTWISE if not row.backward and not row.per_output
    for op in row.ops
}


def elementwise_formula(per_input: int, per_output: int) -> Formula:
    """``per_input`` x first-argument elements + ``per_output`` x output elements."""

    def formula(inputs: Arguments, out: Any) -> Cost:
        flops = per_input * numel(first_argument(inputs)) if per_input else 0
        flops += per_output * numel(first_tensor(out)) if per_output else 0
        return Cost(vector_flops=flops)

    formula.__doc__ = f"{per_input} per input element + {per_output} per output element."
    return formula


def cost_in_words(row: Elementwise) -> str:
    """``1 per output``, ``2 per input + 1 per output``."""
    parts = [f"{row.per_input} per input"] if row.per_input else []
    parts += [f"{row.per_output} per output"] if row.per_output else []
    return " + ".join(parts)


def documented(row: Elementwise) -> CostRow:
    """``row`` as a row of the documented cost table."""
    return CostRow(cost_in_words(row), row.why, row.backward)


def _register_table() -> None:
    for row in ELEMENTWISE:
        formula = elementwise_formula(row.per_input, row.per_output)
        variants = (variant for name in row.ops for variant in (name, f"{name}_"))
        ops = [getattr(aten, variant) for variant in variants if hasattr(aten, variant)]
        register(*ops, formula, kind=row.kind, row=documented(row))


_register_table()
