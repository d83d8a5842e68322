"""The formula registry: which function prices which aten operation, and how it is called.

A formula is ``formula(inputs, out) -> Cost | Mapping[Component, Cost]``. ``inputs`` maps each
argument name of the operation's schema (``op._schema.arguments``) to its value, however it was
passed (by position or by keyword) and with the schema's defaults filled in (:func:`arguments`);
``out`` is what the operation returned. A formula reads shapes only, never values, so it works on
meta tensors. It returns a :class:`~vitprof.core.records.Cost`: ``macs`` counts multiply-accumulates
of products (a matmul ``(m, k) @ (k, n)`` is ``m * k * n`` MACs; FLOPs = 2 x MACs) and
``vector_flops`` element-wise work (a bias add is one vector FLOP per output element, never a MAC).
A fused operation that spans components returns a mapping from component to cost.

Formulas are keyed by overload packet (``aten.addmm`` prices ``aten.addmm.default`` and every
other overload). :func:`register` adds one for good and refuses a second; a per-call mapping
(``analyze(..., formulas={op: fn})``, normalised by :func:`overriding`) wins over the registry for
one count only, as ``FlopCounterMode(custom_mapping=...)`` does.

A registration holds, in one place, the formula, what the operation is (its
:class:`~vitprof.core.records.OpKind`, which every record of it carries: the recognizer and the
checks ask for the kind, never the name) and its row in the documented cost table
(:class:`CostRow`, listing every operation registered with it: :mod:`.table`). A new attention
kernel is one decorated function::

    @register(torch.ops.mylib.attention, kind=OpKind.ATTENTION,
              row=CostRow("as scaled_dot_product_attention", "QK^T and AV"))
    def my_attention_cost(inputs, out): ...
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from vitprof.core.errors import UserError
from vitprof.core.records import Component, Cost, OpKind
from vitprof.count.formulas.free import FREE_OPS

aten = torch.ops.aten

OpCost = Cost | Mapping[Component, Cost]
Arguments = Mapping[str, Any]
Formula = Callable[[Arguments, Any], OpCost]


@dataclass(frozen=True, slots=True)
class CostRow:
    """One documented row of the cost table: the cost in words and why; ``backward`` rows go to
    the table of gradient operations. The row lists the operations registered with it (an
    operation and its in-place twin once)."""

    cost: str
    why: str
    backward: bool = False


@dataclass(frozen=True, slots=True)
class Registered:
    """One registration: the formula, the operation's kind, its documented row (None for a
    formula registered outside vitprof)."""

    formula: Formula
    kind: OpKind
    row: CostRow | None


FORMULAS: dict[Any, Registered] = {}

_OP_TYPES = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)
_FOREACH = "_foreach_"


def packet(op: Any) -> Any:
    """The overload packet of ``op`` (``aten.addmm`` for ``aten.addmm.default``)."""
    return getattr(op, "overloadpacket", op)


def register(*targets: Any, kind: OpKind = OpKind.OTHER, row: CostRow | None = None) -> Any:
    """Register a formula for one or more aten operations (packets or overloads), with what
    they are (``kind``: every record of them carries it) and their documented ``row``.

    ``register(aten.cumprod, formula)`` registers at once and returns ``formula``;
    ``@register(aten.cumprod, aten.logcumsumexp)`` decorates. A second formula for an operation is
    refused (``ValueError``); to replace a formula for one count, pass ``formulas=`` to
    :func:`vitprof.analyze` (the operation keeps its registered kind).
    """
    if len(targets) > 1 and not isinstance(targets[-1], _OP_TYPES) and callable(targets[-1]):
        _add(targets[:-1], Registered(targets[-1], kind, row))
        return targets[-1]

    def decorate(formula: Formula) -> Formula:
        _add(targets, Registered(formula, kind, row))
        return formula

    return decorate


def _add(ops: tuple[Any, ...], registered: Registered) -> None:
    if not ops:
        raise TypeError("register() needs at least one aten operation")
    for op in ops:
        if not isinstance(op, _OP_TYPES):
            raise TypeError(f"expected an aten operation, got {op!r}")
        if packet(op) in FORMULAS:
            raise ValueError(f"a formula for {op} is already registered")
        FORMULAS[packet(op)] = registered


def overriding(formulas: Mapping[Any, Formula] | None) -> dict[Any, Formula]:
    """A per-call mapping ``{op: formula}`` keyed by overload packet; a bad entry is a UserError."""
    checked: dict[Any, Formula] = {}
    for op, formula in (formulas or {}).items():
        if not isinstance(op, _OP_TYPES):
            raise UserError(f"formulas: {op!r} is not an aten operation (use torch.ops.aten.NAME)")
        if not callable(formula):
            raise UserError(f"formulas: the formula given for {op_name(op)} is not callable")
        checked[packet(op)] = formula
    return checked


def formula_for(op: Any, overrides: Mapping[Any, Formula] | None = None) -> Formula | None:
    """The formula for ``op`` (looked up by its packet): from ``overrides`` first, else the
    registry; None when neither has one."""
    key = packet(op)
    if overrides and key in overrides:
        return overrides[key]
    registered = FORMULAS.get(key)
    return registered.formula if registered else None


def kind_of(op: Any) -> OpKind:
    """What ``op`` is, as its registration says; ``other`` for an operation registered without
    a kind or not at all."""
    registered = FORMULAS.get(packet(op))
    return registered.kind if registered else OpKind.OTHER


def kind_named(name: str) -> OpKind:
    """:func:`kind_of` the operation spelt ``aten.addmm`` (or ``aten::addmm``, a namespace and
    a name, as peers log the kernels they ran); ``other`` for a name that is no operation."""
    namespace, _, op = name.replace("::", ".").partition(".")
    found = getattr(getattr(torch.ops, namespace, None), op, None) if op else None
    return kind_of(found) if isinstance(found, _OP_TYPES) else OpKind.OTHER


@functools.cache
def _parameters(op: Any) -> tuple[tuple[str, bool, Any], ...]:
    """(name, has a default, default) of each argument in ``op``'s schema, in order."""
    return tuple(
        (a.name, a.has_default_value(), a.default_value if a.has_default_value() else None)
        for a in op._schema.arguments
    )


def arguments(op: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` and ``kwargs`` of a call of the overload ``op``, bound to its schema's argument
    names in schema order; an argument not passed takes the schema's default (if it has one)."""
    parameters = _parameters(op)
    bound = {name: value for (name, _, _), value in zip(parameters, args, strict=False)}
    for name, has_default, default in parameters[len(args):]:
        if name in kwargs:
            bound[name] = kwargs[name]
        elif has_default:
            bound[name] = default
    return bound


def foreach_base(op: Any) -> Any:
    """The operation a ``_foreach_`` operation runs on each element of its lists
    (``_foreach_mul_``: ``mul_``; ``_foreach_maximum_``, whose base has no in-place twin:
    ``maximum``, which costs the same); None for any other operation."""
    name = getattr(packet(op), "__name__", "")
    if not name.startswith(_FOREACH):
        return None
    base = name.removeprefix(_FOREACH)
    return getattr(aten, base, None) or getattr(aten, base.removesuffix("_"), None)


def is_free(op: Any) -> bool:
    """True when ``op`` is in the documented list of operations that cost nothing."""
    return packet(op) in FREE_OPS


def op_name(op: Any) -> str:
    """``aten.addmm`` for ``aten.addmm.default``."""
    qualified = getattr(packet(op), "_qualified_op_name", None)
    return qualified.replace("::", ".") if qualified else str(packet(op))
