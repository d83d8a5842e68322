"""The optimizer step's element-wise work, counted once on a real step, reported apart.

An optimizer step is element-wise work only (vector FLOPs: no MACs), the same at every step once
its state exists, whatever the batch. It is counted on the optimizer's SECOND ``step()`` (the
first initialises the state: SGD's momentum buffer starts as a copy of the gradient), between a
pre-hook and a post-hook of that optimizer (the harness the memory step shares:
:mod:`vitprof.measure.optimizer_step`; a closure passed to ``step``, Lightning's forward and
backward, runs unpriced), by a dispatch mode that prices every operation with
vitprof's registered formulas (:mod:`vitprof.count.formulas`); a ``_foreach_`` operation is
priced as its operation on each element of its lists (``_foreach_mul_`` as one ``mul_`` per
tensor), on meta twins, so that nothing runs twice for real; a fused optimizer's single kernel
(``aten._fused_adamw_``) as the unfused step it replaces
(:mod:`vitprof.measure.mfu.fused_optimizers`). The hooks are removed after the count.
Operations without a formula are named in one warning and the step stays uncounted (None),
never a part of it.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_map

from vitprof.core.records import op_calls
from vitprof.count.formulas.registry import OpCost, arguments, foreach_base, formula_for, is_free
from vitprof.measure.mfu.fused_optimizers import FUSED_STEPS
from vitprof.measure.optimizer_step import SecondStep, StepMode


def _vector(cost: OpCost) -> int:
    """The vector FLOPs of a formula's cost (a fused op's: summed over its components)."""
    if isinstance(cost, Mapping):
        return sum(part.vector_flops for part in cost.values())
    return cost.vector_flops


def _meta(value: Any) -> Any:
    return tree_map(lambda v: torch.empty_like(v, device="meta")
                    if isinstance(v, torch.Tensor) else v, value)


def _element(value: Any, index: int, length: int) -> Any:
    """The ``index``-th element of a foreach list argument; any other argument as it is."""
    if isinstance(value, list | tuple) and len(value) == length:
        return value[index]
    return value


def _bound(overload: Any, values: Sequence[Any], kwargs: dict[str, Any]) -> tuple[
        list[Any], dict[str, Any]]:
    """The foreach call's positional ``values`` laid on ``overload``'s schema in order: a
    keyword-only argument of the base (``addcmul_``'s ``value``) is passed by its name."""
    args: list[Any] = []
    named = dict(kwargs)
    rest = list(values)
    for argument in overload._schema.arguments:
        if not rest:
            break
        if argument.name in named:
            continue
        if argument.kwarg_only:
            named[argument.name] = rest.pop(0)
        else:
            args.append(rest.pop(0))
    return args, named


def _run_any(packet: Any, values: Sequence[Any], kwargs: dict[str, Any]) -> tuple[
        Any, list[Any], dict[str, Any], Any]:
    """(overload, args, kwargs, output) of the first overload of ``packet`` that accepts the
    arguments of one element of a foreach call."""
    for name in packet.overloads():
        overload = getattr(packet, name)
        args, named = _bound(overload, values, kwargs)
        try:
            return overload, args, named, overload(*args, **named)
        except (RuntimeError, TypeError):
            continue
    raise TypeError(f"no overload of {packet} accepts these arguments")


class _Pricing(StepMode):
    """Runs every operation as it is and adds up its vector FLOPs (not while ``paused``)."""

    def __init__(self) -> None:
        super().__init__()
        self.vector_flops = 0
        self.unpriced: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self.paused:
            try:
                self.vector_flops += self._price(func, args, kwargs, out)
            except Exception:  # pricing never breaks the user's step: the op counts as unpriced
                self.unpriced[f"aten.{func.overloadpacket.__name__}"] += 1
        return out

    def _price(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        name = func.overloadpacket.__name__
        formula = formula_for(func) or FUSED_STEPS.get(name)
        if formula is not None:
            return _vector(formula(arguments(func, args, kwargs), out))
        base = foreach_base(func)
        if base is not None and formula_for(base) is not None:
            return self._foreach(base, args, kwargs)
        if not is_free(func):
            self.unpriced[f"aten.{name}"] += 1
        return 0

    def _foreach(self, base: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        """A foreach operation as ``base`` on each element, on meta twins."""
        length = len(args[0])
        formula = formula_for(base)
        assert formula is not None
        total = 0
        for index in range(length):
            one = _meta([_element(a, index, length) for a in args])
            named = _meta({k: _element(v, index, length) for k, v in kwargs.items()})
            overload, args_one, kwargs_one, out = _run_any(base, one, named)
            total += _vector(formula(arguments(overload, tuple(args_one), kwargs_one), out))
        return total


class OptimizerCount:
    """Counts the vector FLOPs of ``optimizer``'s second step (the shared harness:
    :class:`vitprof.measure.optimizer_step.SecondStep`); ``vector_flops`` is None until then."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.vector_flops: int | None = None
        self._step = SecondStep(optimizer, _Pricing, self._priced)

    def _priced(self, mode: _Pricing) -> None:
        if mode.unpriced:  # a part would be a wrong total: none rather than too few
            warnings.warn(f"vitprof: the optimizer step is not counted, its ops without a "
                          f"formula: {op_calls(dict(mode.unpriced))}", stacklevel=3)
        else:
            self.vector_flops = mode.vector_flops

    def remove(self) -> None:
        """Take the hooks off the optimizer."""
        self._step.remove()
