"""Complex numbers priced in real arithmetic.

vitprof's formulas count per element of their tensors, whatever the dtype; an operation whose
output is complex (a rotary embedding computed as ``view_as_complex(x) * polar(1, angles)``, a
complex matmul) does more real work per element, and :func:`in_real_arithmetic` charges it (the
counter applies it to vitprof's own formulas only: a formula a user gives prices what it says):

* MACs x :data:`COMPLEX_MAC_COST`: one complex multiply-accumulate ``(a + bi)(c + di)`` takes
  four real multiplies and four real adds, four real MACs;
* vector FLOPs x the operation's entry in :data:`COMPLEX_VECTOR_COSTS`, else x
  :data:`COMPLEX_PARTS` (an add, a negation, a sum works on the real and the imaginary part).

The views between complex and real tensors (``view_as_complex``, ``view_as_real``) and the
packing of two real tensors into one (``complex``) are free (:mod:`.free`).
"""

from __future__ import annotations

from typing import Any

from vitprof.core.records import Cost
from vitprof.count.formulas.registry import OpCost, op_name
from vitprof.count.formulas.shapes import first_tensor

COMPLEX_MAC_COST = 4  # (a + bi)(c + di): ac - bd, ad + bc: 4 real multiply-accumulates
COMPLEX_PARTS = 2  # an element-wise operation on the real and the imaginary part
COMPLEX_VECTOR_COSTS: dict[str, int] = {
    "mul": 6,  # ac - bd, ad + bc: 4 multiplies, 2 adds
    "div": 11,  # ((ac + bd) + (bc - ad) i) / (c^2 + d^2): 6 multiplies, 3 adds, 2 divides
}


def _complex_output(out: Any) -> bool:
    try:
        return first_tensor(out).is_complex()
    except StopIteration:  # no tensor among the outputs
        return False


def _scaled(cost: Cost, vector: int) -> Cost:
    return Cost(cost.macs * COMPLEX_MAC_COST, cost.vector_flops * vector)


def in_real_arithmetic(op: Any, cost: OpCost, out: Any) -> OpCost:
    """``cost`` of ``op`` (per complex element, as its formula counts) in real arithmetic when
    its output is complex (see the module docstring); unchanged otherwise."""
    if not _complex_output(out):
        return cost
    name = op_name(op).removeprefix("aten.").rstrip("_")
    vector = COMPLEX_VECTOR_COSTS.get(name, COMPLEX_PARTS)
    if isinstance(cost, Cost):
        return _scaled(cost, vector)
    return {component: _scaled(part, vector) for component, part in cost.items()}
