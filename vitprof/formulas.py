"""The public formula registry (:mod:`vitprof.count.formulas`): price an aten operation vitprof
does not know, for good with :func:`register` or for one call with ``vitprof.analyze(model,
formulas={op: formula})``.

A formula is ``formula(inputs, out) -> Cost | Mapping[Component, Cost]``: ``inputs`` maps each
argument name of the op's schema to its value (defaults filled in), ``out`` is the op's output.
``Cost.macs`` counts multiply-accumulates (FLOPs = 2 x MACs); ``Cost.vector_flops`` element-wise
work (a bias add is one per output element, never a MAC). ``kind`` says what the operation is
(:class:`OpKind`; every record of it carries the kind): an ``attention`` kernel is found as an
attention core by the recognizer and the self-checks, a ``conv`` as a convolution::

    import vitprof.formulas
    from vitprof.formulas import Cost, OpKind, aten, numel

    @vitprof.formulas.register(aten.cumsum, kind=OpKind.ELEMENTWISE)
    def cumsum_cost(inputs, out):
        return Cost(vector_flops=numel(inputs["self"]))
"""

from __future__ import annotations

from vitprof.core.records import Component, Cost, OpKind
from vitprof.count.formulas import (
    Arguments,
    CostRow,
    Formula,
    OpCost,
    arguments,
    aten,
    first_tensor,
    formula_for,
    numel,
    register,
    shape,
)

__all__ = [
    "Arguments", "Component", "Cost", "CostRow", "Formula", "OpCost", "OpKind", "arguments", "aten",
    "first_tensor", "formula_for", "numel", "register", "shape",
]
