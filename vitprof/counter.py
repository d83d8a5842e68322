"""The counting engine: every aten op a model runs, priced and attributed to a component.

A ``TorchDispatchMode`` sees each aten operation below autograd, so functional code
(``q @ k.transpose(-2, -1)``, ``F.linear`` on a parameter nobody calls as a module) is seen as
well as module code. Module hooks keep the stack of running modules. A ``TorchFunctionMode``
catches ``F.scaled_dot_product_attention`` so that it is priced as one operation whichever kernel
PyTorch picks (a math decomposition on the meta device, a flash kernel on the CPU).

Attribution of one operation, in order:

1. a fused operation that spans components (``_native_multi_head_attention``) names them itself;
2. an operation that reads a parameter belongs to that parameter's component;
3. otherwise, the innermost running module that has a component;
4. otherwise (a residual add in a block's own ``forward``, pooling in the model's ``forward``),
   its position: inside a block, the component of the previous operation of that block (a
   residual add closes the branch before it); outside blocks, ``tokens`` before the first
   block and ``head`` after it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from vitprof.families import ComponentMap
from vitprof.formulas import aten, formula_for, is_free, op_name, sdpa_cost
from vitprof.records import Component, Cost, OpRecord

_SDPA = F.scaled_dot_product_attention


def storage_key(tensor: torch.Tensor) -> int | None:
    """An id shared by a tensor and all its views (also on the meta device)."""
    try:
        return tensor.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


@dataclass(slots=True)
class _Pending:
    op: str
    module: str
    component: Component | None
    block: int | None
    cost: Cost
    phase: str


class OpCounter:
    """Counts the operations of ``model`` while :meth:`running` is active."""

    def __init__(
        self, model: nn.Module, mapping: ComponentMap, params: Mapping[str, torch.Tensor]
    ) -> None:
        self.model = model
        self.mapping = mapping
        self.param_of_storage = {storage_key(t): name for name, t in params.items()}
        self.stack: list[str] = []
        self.pending: list[_Pending] = []
        self.unsupported: Counter[str] = Counter()
        self.phase = "forward"
        self.muted = 0

    @contextmanager
    def running(self) -> Iterator[OpCounter]:
        """Install hooks and modes; remove them all on exit, even after an error."""
        handles = []
        for path, module in self.model.named_modules():
            handles.append(module.register_forward_pre_hook(partial(self._enter, path)))
            handles.append(
                module.register_forward_hook(partial(self._leave, path), always_call=True)
            )
        try:
            with _attention_wrapped(self), _AttentionMode(self), _DispatchCounter(self):
                yield self
        finally:
            for handle in handles:
                handle.remove()
            self.stack.clear()

    def _enter(self, path: str, module: nn.Module, args: Any) -> None:
        self.stack.append(path)

    def _leave(self, path: str, module: nn.Module, args: Any, output: Any) -> None:
        if self.stack and self.stack[-1] == path:
            self.stack.pop()

    def record(self, op: Any, cost: Cost | Mapping[Component, Cost], args: Any) -> None:
        """Attribute ``cost`` of ``op`` (called with ``args``) to the running context."""
        if self.muted:
            return
        params = self._params_read(args)
        block = self._block(params)
        module = self.stack[-1] if self.stack else ""
        parts = cost.items() if isinstance(cost, Mapping) else [(None, cost)]
        name = op_name(op)
        for component, part in parts:
            self.pending.append(
                _Pending(
                    name, module, component or self._component(params), block, part, self.phase
                )
            )

    def _params_read(self, args: Any) -> list[str]:
        names = []
        for value in args:
            tensors = value if isinstance(value, list | tuple) else (value,)
            for tensor in tensors:
                if isinstance(tensor, torch.Tensor):
                    name = self.param_of_storage.get(storage_key(tensor))
                    if name is not None:
                        names.append(name)
        return names

    def _component(self, params: list[str]) -> Component | None:
        if params:
            return self.mapping.params[params[0]]
        for path in reversed(self.stack):
            component = self.mapping.modules.get(path)
            if component is not None:
                return component
        return None

    def _block(self, params: list[str]) -> int | None:
        for path in reversed(self.stack):
            index = self.mapping.blocks.get(path)
            if index is not None:
                return index
        return self.mapping.block_of(params[0]) if params else None

    def records(self) -> list[OpRecord]:
        """The counted operations, each with a component (resolved by position if need be)."""
        components = _resolve_positions(self.pending, has_blocks=bool(self.mapping.blocks))
        return [
            OpRecord(p.op, p.module, component, p.block, p.cost.macs, p.cost.vector_flops, p.phase)
            for p, component in zip(self.pending, components, strict=True)
        ]


def _resolve_positions(pending: list[_Pending], has_blocks: bool) -> list[Component]:
    resolved: list[Component | None] = [p.component for p in pending]
    last_in_block: dict[int, Component] = {}
    seen_block = False
    for i, p in enumerate(pending):
        if p.block is not None:
            seen_block = True
            if resolved[i] is None:
                resolved[i] = last_in_block.get(p.block)
            if resolved[i] is not None:
                last_in_block[p.block] = resolved[i]
        elif resolved[i] is None and has_blocks:
            resolved[i] = Component.HEAD if seen_block else Component.TOKENS
    next_in_block: dict[int, Component] = {}
    for i in reversed(range(len(pending))):
        block = pending[i].block
        if block is None:
            continue
        if resolved[i] is None:
            resolved[i] = next_in_block.get(block)
        if resolved[i] is not None:
            next_in_block[block] = resolved[i]
    return [c or Component.OTHER for c in resolved]


class _DispatchCounter(TorchDispatchMode):
    """Prices every aten op; decomposes what has no formula; reports what stays unpriced."""

    def __init__(self, counter: OpCounter) -> None:
        super().__init__()
        self.counter = counter
        self.meta_outputs = MetaOutputCache()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        formula = formula_for(func)
        if formula is None and not is_free(func):
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
            if not self.counter.muted:
                self.counter.unsupported[op_name(func)] += 1
        out = self.meta_outputs.run(func, args, kwargs)
        if formula is not None and not self.counter.muted:
            self.counter.record(func, formula(args, kwargs, out), args)
        return out


def _signature(value: Any) -> Any:
    """A hashable stand-in for an op argument; tensors by metadata. Raises TypeError if none."""
    if isinstance(value, torch.Tensor):
        if value.device.type != "meta":
            raise TypeError("not a meta tensor")
        return (tuple(value.shape), value.stride(), value.dtype)
    if isinstance(value, list | tuple):
        return tuple(_signature(v) for v in value)
    hash(value)
    return value


class MetaOutputCache:
    """Reuses output metadata of functional ops on meta tensors instead of rerunning kernels.

    On the meta device an op's outputs depend only on its inputs' shapes, strides and dtypes,
    and the twelve identical blocks of a ViT repeat the same calls, so after the first block
    outputs are made with ``empty_strided``. Ops that alias or mutate their inputs (views,
    in-place ops) always run, so storage sharing stays exact.
    """

    def __init__(self) -> None:
        self.outputs: dict[Any, Any] = {}

    def run(self, func: Any, args: tuple, kwargs: dict) -> Any:
        schema = func._schema
        if schema.is_mutable or any(r.alias_info is not None for r in schema.returns):
            return func(*args, **kwargs)
        try:
            key = (func, _signature(args), _signature(tuple(sorted(kwargs.items()))))
        except TypeError:
            return func(*args, **kwargs)
        cached = self.outputs.get(key)
        if cached is not None:
            return _rebuild(cached)
        out = func(*args, **kwargs)
        layout = _layout(out)
        if layout is not None:
            self.outputs[key] = layout
        return out


def _layout(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return ("tensor", tuple(out.shape), out.stride(), out.dtype) if out.is_meta else None
    if isinstance(out, tuple | list) and out:
        parts = tuple(_layout(o) for o in out)
        return ("tuple", parts) if all(p is not None for p in parts) else None
    return None


def _rebuild(layout: Any) -> Any:
    if layout[0] == "tensor":
        _, shape, stride, dtype = layout
        return torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    return tuple(_rebuild(part) for part in layout[1])


def _priced_attention(counter: OpCounter, *args: Any, **kwargs: Any) -> Any:
    """Run the real ``scaled_dot_product_attention`` unseen, and record it as one op."""
    if counter.muted:
        return _SDPA(*args, **kwargs)
    counter.muted += 1
    try:
        out = _SDPA(*args, **kwargs)
    finally:
        counter.muted -= 1
    counter.record(aten.scaled_dot_product_attention, sdpa_cost(args, kwargs, out), args)
    return out


@contextmanager
def _attention_wrapped(counter: OpCounter) -> Iterator[None]:
    """Point ``torch.nn.functional.scaled_dot_product_attention`` at :func:`_priced_attention`.

    A torch-function mode alone misses calls nested in functions that handle torch functions
    themselves (``F.multi_head_attention_forward`` runs its body with modes popped), so the
    module attribute is swapped for the duration of the count and always restored.
    """
    F.scaled_dot_product_attention = partial(_priced_attention, counter)
    try:
        yield
    finally:
        F.scaled_dot_product_attention = _SDPA


class _AttentionMode(TorchFunctionMode):
    """Catches direct calls of the builtin ``scaled_dot_product_attention`` under other names."""

    def __init__(self, counter: OpCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if func is _SDPA:
            return _priced_attention(self.counter, *args, **kwargs)
        return func(*args, **kwargs)
