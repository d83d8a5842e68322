"""Shape-only cost formulas for aten operations, and the operations known to cost nothing.

Conventions (see :mod:`vitprof.core.records`): a formula returns MACs (one multiply-accumulate of a
matmul, linear, convolution or attention product; FLOPs = 2 x MACs) and vector FLOPs (element-wise
work at a documented per-element cost). A bias addition is never a MAC: it is one vector FLOP per
output element.

A formula is ``formula(inputs, out) -> Cost | Mapping[Component, Cost]``: ``inputs`` maps each
argument name of the op's schema to its value, however it was passed and with defaults filled in;
``out`` is the op's output. Add one for good with :func:`register` (with the op's kind, which its
records carry, and its documented row), or for one count with
``vitprof.analyze(model, formulas={op: formula})``::

    from vitprof.core.records import Cost, OpKind
    from vitprof.count.formulas import aten, numel, register

    @register(aten.cumprod, kind=OpKind.ELEMENTWISE)
    def cumprod_cost(inputs, out):
        return Cost(vector_flops=numel(inputs["self"]))  # one multiply per element

Modules: :mod:`.registry` (the registry: formula, kind and documented row of each operation;
argument binding), :mod:`.elementwise` (the one table of
element-wise costs, per input and per output element), :mod:`.forward` and :mod:`.backward` (the
other formulas), :mod:`.complex_numbers` (an operation with a complex output in real arithmetic),
:mod:`.free` (the operations that cost nothing) and :mod:`.table` (the cost table of
``docs/formulas.md``, rendered from the tables above).

Fused kernels are charged what their unfused reference computation costs, so that a count does
not depend on which kernel PyTorch picked: ``aten._native_multi_head_attention`` (the fast path of
``nn.MultiheadAttention``) costs exactly what ``F.multi_head_attention_forward`` costs, and every
``_scaled_dot_product_*_attention`` kernel costs what ``scaled_dot_product_attention`` costs.
"""

from __future__ import annotations

from vitprof.count.formulas.backward import attention_backward_cost
from vitprof.count.formulas.complex_numbers import in_real_arithmetic
from vitprof.count.formulas.elementwise import (
    ELEMENTWISE,
    GELU_COST,
    LAYER_NORM_COST,
    REDUCTION_COSTS,
    SDPA_SCALE_COST,
    SOFTMAX_COST,
    VECTOR_COSTS,
    Elementwise,
)
from vitprof.count.formulas.forward import attention_cost, sdpa_cost
from vitprof.count.formulas.free import FREE_OPS
from vitprof.count.formulas.registry import (
    FORMULAS,
    Arguments,
    CostRow,
    Formula,
    OpCost,
    arguments,
    aten,
    formula_for,
    is_free,
    kind_named,
    kind_of,
    op_name,
    overriding,
    register,
)
from vitprof.count.formulas.shapes import first_tensor, numel, shape

OWN_FORMULAS: frozenset[Formula] = frozenset(r.formula for r in FORMULAS.values())
"""vitprof's own formulas, those registered when this package is imported: they count per element
whatever the dtype, and the counter prices an operation with a complex output in real arithmetic
(:func:`in_real_arithmetic`). A formula registered or passed by a user prices what it returns."""

__all__ = [
    "ELEMENTWISE", "FORMULAS", "FREE_OPS", "GELU_COST", "LAYER_NORM_COST", "OWN_FORMULAS",
    "REDUCTION_COSTS", "SDPA_SCALE_COST", "SOFTMAX_COST", "VECTOR_COSTS", "Arguments", "CostRow",
    "Elementwise", "Formula", "OpCost", "arguments", "aten", "attention_backward_cost",
    "attention_cost", "first_tensor", "formula_for", "in_real_arithmetic", "is_free",
    "kind_named", "kind_of", "numel", "op_name", "overriding", "register", "sdpa_cost", "shape",
]
