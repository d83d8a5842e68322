"""The counting engine: every aten op a model runs, priced, with where it ran.

A ``TorchDispatchMode`` sees each aten operation below autograd, so functional code
(``q @ k.transpose(-2, -1)``, ``F.linear`` on a parameter nobody calls as a module) is seen as
well as module code. The stack of running modules is
:class:`vitprof.count.module_stack.ModuleStack`. Every
``F.scaled_dot_product_attention`` call is routed (:func:`vitprof.count.sdpa.attention_routed`,
the one SDPA override: a torch-function mode and the module attribute swapped) so that it is
priced as one operation whichever kernel PyTorch picks (a math decomposition on the meta device,
a flash kernel on the CPU); it runs :attr:`OpCounter.attention` (torch's own function, or the
kernel a memory step chose), in a checkpointed block's recomputation too. Likewise
``torch.nn.attention.flex_attention.flex_attention`` (which refuses the meta device) is priced as
one operation, ``torch.nn.attention.flex_attention``, at the cost of the dense SDPA it
generalises: a ``score_mod`` or a ``block_mask`` costs what SDPA's mask does, one element-wise
op per score, and a block mask's skipped blocks are not subtracted. On meta it is not run: its
output is made from the shapes.

The count is neutral: it places nothing. Each record keeps where it ran
(:class:`~vitprof.count.trace.Whereabouts`: the running modules, the parameters it reads, the
records that produced its inputs, its forward record, and the component a fused operation that
spans components, ``_native_multi_head_attention``, names itself); the recognize layer places
it afterwards (:mod:`vitprof.recognize`). Producers are followed through views and data movement
by storage.

Backward operations (``phase = "backward"``, with autograd tracked during the forward) run
without a module stack: each belongs to the forward operation whose autograd node runs it. In
the forward, the outputs of every operation are mapped, through their ``grad_fn``, to the record
of that operation (or, for an operation that is not priced, to the record before it; inside a
muted fused attention, to the attention's record); in the backward,
``torch._C._current_autograd_node()`` names the node. A gradient accumulation (two uses of one
tensor) runs under the node whose gradient completes the sum and is charged to its component.

Each record also carries the bytes its operation reads and writes (tensor sizes at their dtype;
a broadcast dimension of stride 0 is read once), for arithmetic intensity.
"""

from __future__ import annotations

import sys
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from vitprof.core.records import Component, Cost, OpKind, OpRecord, Phase
from vitprof.core.vocab import Device
from vitprof.count.flooring import Floor, floored
from vitprof.count.formulas import (
    OWN_FORMULAS,
    Formula,
    arguments,
    aten,
    formula_for,
    in_real_arithmetic,
    is_free,
    kind_of,
    op_name,
    overriding,
    sdpa_cost,
)
from vitprof.count.liveness import Liveness, allocates
from vitprof.count.module_stack import ModuleStack
from vitprof.count.sdpa import SDPA, attention_routed
from vitprof.count.trace import Step, Trace, Whereabouts

# products that add their first input to what they multiply (``beta * self + a @ b``): that
# input is a term beside the product's operands (a bias of the scores, a linear's bias)
_ADDED_TERM = frozenset({"aten.addmm", "aten.baddbmm", "aten.addbmm", "aten.addmv", "aten.addr"})


def storage_key(tensor: torch.Tensor) -> int | None:
    """An id shared by a tensor and all its views (also on the meta device)."""
    try:
        return tensor.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


@dataclass(slots=True)
class _Pending:
    op: str
    stack: tuple[str, ...]  # the running modules' paths, innermost last
    named: Component | None  # a part of a fused op that named its component itself
    cost: Cost
    phase: Phase
    traffic: tuple[int, int] = (0, 0)  # bytes read, bytes written
    owner: int | None = None  # backward: index of the forward record whose node ran it
    sources: tuple[int, ...] = ()  # forward: indices of the records that produced its inputs
    params: tuple[str, ...] = ()  # the parameters it reads
    carried: tuple[str, ...] = ()  # forward: parameters reaching it through free ops only
    shape: tuple[int, ...] = ()  # forward: shape of its (first) output
    beside: tuple[int, ...] = ()  # forward: producers of inputs that are not operands (a mask)
    indexed: tuple[int, ...] = ()  # forward: the sources reaching it only as indices
    operand: tuple[int, ...] = ()  # forward: shape of its first input tensor
    parts: tuple[tuple[int, int, int], ...] = ()  # forward: columns of a producer's output read
    carried_beside: tuple[str, ...] = ()  # forward: those of ``carried`` reaching no operand
    # forward: those of ``carried`` in an operand that a record wrote too (joined to activations)
    carried_joined: tuple[str, ...] = ()
    # forward: the producers of each operand that several records wrote (a concatenation)
    joined: tuple[tuple[int, ...], ...] = ()
    # forward: an operand that no record, parameter or parameter carried through free ops made:
    # the model's input data (a mask fed beside the image), or a constant made in the forward
    unsourced: bool = False
    fed: bool = False  # forward: an operand is the model's input data (:meth:`OpCounter.feed`)
    kind: OpKind = OpKind.OTHER  # what the op is (its formula's registration)
    calls: tuple[tuple[str, int], ...] = ()  # forward: the running modules' calls (ModuleStack)


def tensor_bytes(value: Any) -> int:
    """Bytes addressed by the tensors in ``value`` (nested lists, tuples, dict values).

    A dimension of stride 0 (a broadcast) is counted once, so an expanded bias is read once.
    """
    if isinstance(value, torch.Tensor):
        distinct = 1
        for size, stride in zip(value.shape, value.stride(), strict=True):
            if stride != 0:
                distinct *= int(size)
        return distinct * value.element_size()
    if isinstance(value, list | tuple):
        return sum(tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    return 0


def _store(table: dict[Any, Any], key: Any, value: Any) -> None:
    """``table[key] = value``, or no entry for ``key`` when ``value`` is None or empty."""
    if value is not None and value != ():
        table[key] = value
    else:
        table.pop(key, None)


def _first_shape(out: Any) -> tuple[int, ...]:
    """Shape of the first tensor in ``out``, () if none."""
    return next((tuple(t.shape) for t in _tensors(out)), ())


def _row_width(tensor: torch.Tensor) -> int | None:
    """The width of the rows ``tensor`` lays out from the start of its storage (its last
    dimension, if it is contiguous), else None (also for a nested tensor: it has no shape)."""
    try:
        if tensor.dim() and tensor.is_contiguous() and not tensor.storage_offset():
            return int(tensor.shape[-1])
    except (RuntimeError, NotImplementedError):
        pass
    return None


def columns(tensor: torch.Tensor, width: int) -> tuple[int, int] | None:
    """The columns ``(first, stop)`` of the rows of ``width`` elements laid out from the start
    of its storage that ``tensor``, a view of them, reads (a split, chunk or slice along the
    last dimension, viewed as heads and transposed: q of a fused projection); None when it
    reads all of them, or elements that are not in one range of columns of a row."""
    first = int(tensor.storage_offset()) % width
    span = 0
    for size, stride in zip(tensor.shape, tensor.stride(), strict=True):
        if size == 0:
            return None
        if size > 1 and stride % width:
            span += (int(size) - 1) * int(stride)
    stop = first + span + 1
    return (first, stop) if stop <= width and (first, stop) != (0, width) else None


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)


class OpCounter:
    """Counts the operations of ``model`` while :meth:`running` is active.

    ``formulas`` (``{op: formula}``) win over the registered formulas for this counter only.
    ``modules`` is the module stack to read (one is made for ``model`` if not given); it is
    entered by :meth:`running`. ``live`` tracks the tensors the run holds (a
    :class:`~vitprof.count.liveness.Liveness` is made if not given). A training step is
    counted by calling :meth:`track_autograd` before the forward and :meth:`begin_backward`
    between the forward and the backward. ``real_step=True`` counts the user's own step of
    real tensors as it runs: each op runs as it is (nothing decomposed), the backward starts
    with the first op the autograd engine runs, and a failure to price an op ends the count in
    :attr:`failed` instead of the step.
    """

    def __init__(
        self, model: nn.Module, params: Mapping[str, torch.Tensor],
        formulas: Mapping[Any, Formula] | None = None,
        modules: ModuleStack | None = None, live: Liveness | None = None,
        real_step: bool = False, attention: Callable[..., Any] | None = None,
    ) -> None:
        self.model = model
        self.real_step = real_step
        # what every scaled_dot_product_attention call runs (a kernel chosen for a memory
        # step: vitprof.measure.memory.attention_kernels); None: torch's own choice
        self.attention = attention if attention is not None else SDPA
        self.failed: Exception | None = None  # a real step's pricing that failed
        self.formulas = overriding(formulas)
        self.param_of_storage = {storage_key(t): name for name, t in params.items()}
        self.modules = modules if modules is not None else ModuleStack(model)
        self.pending: list[_Pending] = []
        self.unsupported: Counter[str] = Counter()
        self.phase = Phase.FORWARD
        self.muted = 0
        self.switching = False  # a mode switch runs: nothing counted, parameters followed
        self.tracking = False  # map autograd nodes to records, to attribute a backward
        self.owners: dict[Any, int] = {}  # autograd node -> index of its forward record
        self._fresh: list[tuple[Any, int]] = []  # outputs whose grad_fn is not set yet
        # storage -> indices of the records that wrote it (several through a concatenation)
        self.producer: dict[int | None, tuple[int, ...]] = {}
        self.carried: dict[int | None, tuple[str, ...]] = {}  # storage -> params in it (free ops)
        # storage -> those of its producers that reach it only as indices (:meth:`_indexed`)
        self.selecting: dict[int | None, tuple[int, ...]] = {}
        # the storages of the model's input data (:meth:`feed`) and of free ops' copies of it
        self.fed: set[int | None] = set()
        # storage -> the width of the rows of a record's output it holds whole (row-major, from
        # its start), or the columns (first, stop) of such rows that a copy of a part holds
        self.width: dict[int | None, int] = {}
        self.part: dict[int | None, tuple[int, int]] = {}
        # storage -> a weak reference to it: when the storage is freed, what was known of it goes
        self._watched: dict[int | None, weakref.ref[Any]] = {}
        self._owner = weakref.ref(self)  # what _watch's callbacks reach it by: no cycle
        self.floors: dict[Floor, None] = {}  # the forward's convolutions that floor (in order)
        # the bytes of the tensors the run holds, and their peak (``live``: a caller's own)
        self.live = live if live is not None else Liveness()
        self.live.position = self.pending.__len__  # no closure over self: no reference cycle

    @property
    def stack(self) -> list[str]:
        """Paths of the running modules, innermost last."""
        return self.modules.paths

    @property
    def recorded(self) -> int:
        """How many op records have been counted so far (the index of the next one)."""
        return len(self.pending)

    @contextmanager
    def running(self) -> Iterator[OpCounter]:
        """Enter the module stack and the modes; leave them all on exit, even after an error."""
        with self.modules, attention_routed(partial(_priced_attention, self)), \
                _flex_attention_wrapped(self), _DispatchCounter(self):
            yield self

    @contextmanager
    def mode_switch(self, own: Mapping[str, torch.Tensor]) -> Iterator[None]:
        """Inside :meth:`running`, a mode switch (``model.train(flag)``) runs here: nothing is
        counted or held, but what it computes from parameters carries them, as a free op does in
        the forward, so that a tensor a module caches when it is switched to eval mode (an
        attention bias indexed from its table once: TinyViT's and LeViT's ``ab``) reaches the
        forward's records with its parameters. ``own`` are the model's own parameters by name,
        which the switch reads where stand-ins replace them in the forward."""
        self.param_of_storage.update({storage_key(t): name for name, t in own.items()})
        self.switching = True
        try:
            yield
        finally:
            self.switching = False

    def feed(self, tensors: Iterable[torch.Tensor]) -> None:
        """``tensors`` are the model's input data (the forward's arguments): a record reading
        one of them, a view of it or a copy a free op made of it is ``fed``; a record writing
        into it ends that."""
        self.fed.update(storage_key(t) for t in tensors)

    def track_autograd(self) -> None:
        """From now on, map the autograd node of each forward output to its record."""
        self.tracking = True

    def begin_backward(self) -> None:
        """The forward is over: the operations from now on are the backward's."""
        self.settle()
        self.phase = Phase.BACKWARD

    def nodes(self) -> dict[Any, int]:
        """Autograd node -> index of the forward record it belongs to (with autograd tracked)."""
        self.settle()
        return dict(self.owners)

    def record(
        self, op: Any, cost: Cost | Mapping[Component, Cost], args: Any,
        traffic: tuple[int, int] = (0, 0), out: Any = None, beside: Any = (),
        kind: OpKind | None = None,
    ) -> None:
        """Attribute ``cost`` of ``op`` (called with ``args``, returning ``out``) to the running
        context. ``beside`` are inputs that are not operands (an attention mask or bias): the
        trace keeps their producers apart from the sources. ``kind`` is what the op is, by
        default its registration's (:func:`~vitprof.count.formulas.kind_of`).

        ``traffic`` (bytes read, bytes written) of a fused op priced in parts is shared among the
        parts in proportion to their MACs; ``out`` is written by the last part.
        """
        if self.muted:
            return
        forward = self.phase == Phase.FORWARD
        tensors = list(_tensors(args))
        operands = [storage_key(t) for t in tensors]
        extra = [storage_key(t) for t in _tensors(beside)]
        keys = operands + extra
        params = self._params_of(keys)
        sources = self._sources(operands) if forward else ()
        indexed = self._indexed(tensors, operands) if forward else ()
        apart = self._sources(extra) if forward and extra else ()
        # before the carried parameters are taken: an operand carrying one is no input data
        unsourced = forward and any(
            key is not None and key not in self.producer and key not in self.carried
            and key not in self.param_of_storage for key in operands)
        fed = forward and any(key in self.fed for key in operands)
        beside_only = self._take_carried(extra, params) if forward else ()
        joined = self._joined(operands, params) if forward else ()
        shared = tuple(group for key in operands if len(group := self.producer.get(key, ())) > 1
                       ) if forward else ()
        carried = self._take_carried(operands, params) if forward else ()
        beside_only = tuple(name for name in beside_only if name not in carried)
        carried += beside_only
        read = self._parts(args) if forward else ()
        owner = None
        if not forward:
            owner = self.owners.get(torch._C._current_autograd_node())
        stack = tuple(self.stack)
        parts = list(cost.items()) if isinstance(cost, Mapping) else [(None, cost)]
        shares = _shares(traffic, [part.macs for _, part in parts])
        name = op_name(op)
        shape = _first_shape(out) if forward else ()
        operand = _first_shape(args) if forward else ()
        for (component, part), share in zip(parts, shares, strict=True):
            self.pending.append(
                _Pending(
                    name, stack, component, part, self.phase, share, owner, sources,
                    tuple(params), carried, shape, apart, indexed, operand, read, beside_only,
                    joined, shared, unsourced, fed, kind_of(op) if kind is None else kind,
                    self.modules.calls if forward else (),
                )
            )
        if forward:
            for tensor in _tensors(out):
                key = storage_key(tensor)
                self._forget(key)  # a storage freed and reused holds nothing old
                self.producer[key] = (len(self.pending) - 1,)
                _store(self.width, key, _row_width(tensor))
                self._watch(tensor, key)

    def note_floor(self, op: Any, named: Mapping[str, Any], out: Any) -> None:
        """Keep a forward convolution that leaves input positions unread
        (:func:`vitprof.count.flooring.floored`), once."""
        if self.phase == Phase.FORWARD and not self.muted:
            floor = floored(op, named, out, self.stack[-1] if self.stack else "")
            if floor is not None:
                self.floors[floor] = None

    def _watch(self, tensor: torch.Tensor, key: int | None) -> None:
        """Forget the producer and carried parameters of ``tensor``'s storage when it is freed.
        A tensor made outside the dispatch (``torch.tensor(value)``, a buffer sliced in Python)
        may get the address of a freed storage: without this it inherited that storage's
        producer (ImageGPT's mask value took the freed scores' product, joining two blocks)."""
        known = self._watched.get(key)
        if key is None or (known is not None and known() is not None):
            return
        owner = self._owner

        def forget(dead: weakref.ref[Any]) -> None:
            counter = owner()
            if counter is not None:
                counter._freed(key, dead)

        self._watched[key] = weakref.ref(tensor.untyped_storage(), forget)

    def _freed(self, key: int | None, dead: weakref.ref[Any]) -> None:
        """The storage ``key`` watched by :meth:`_watch` was freed: forget it."""
        if self._watched.get(key) is dead:
            del self._watched[key]
            self._forget(key)

    def _forget(self, key: int | None) -> None:
        """Drop what is known of the storage ``key``: its producers, the parameters it carries,
        those producers that reach it only as indices, its row width and its columns."""
        for known in (self.producer, self.carried, self.selecting, self.width, self.part):
            known.pop(key, None)
        self.fed.discard(key)

    def _sources(self, keys: list[int | None]) -> tuple[int, ...]:
        return tuple(sorted({index for key in keys for index in self.producer.get(key, ())}))

    def _indexed(self, tensors: list[torch.Tensor], keys: list[int | None]) -> tuple[int, ...]:
        """The producers of ``tensors`` (with their storages ``keys``) that reach them only as
        indices: every producer of an integer tensor (``topk``'s indices), none of a tensor of
        values (floating, complex or boolean) but those that reach it only as indices itself
        (patches gathered at those indices)."""
        every: set[int] = set()
        valued: set[int] = set()
        for tensor, key in zip(tensors, keys, strict=True):
            producers = set(self.producer.get(key, ()))
            every |= producers
            if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
                valued |= producers - set(self.selecting.get(key, ()))
        return tuple(sorted(every - valued))

    def _columns(self, tensor: torch.Tensor) -> tuple[int, int] | None:
        """The columns of its producer's output rows that ``tensor`` reads, if not all of them."""
        key = storage_key(tensor)
        if key in self.part:
            return self.part[key]
        width = self.width.get(key)
        return None if width is None else columns(tensor, width)

    def _parts(self, args: Any) -> tuple[tuple[int, int, int], ...]:
        """(source, first, stop) per tensor in ``args`` that reads only columns first..stop-1
        of the output of one record, ``source``."""
        found = []
        for tensor in _tensors(args):
            producers = self.producer.get(storage_key(tensor), ())
            window = self._columns(tensor)
            if len(producers) == 1 and window is not None:
                found.append((producers[0], *window))
        return tuple(dict.fromkeys(found))

    def _copied(self, args: Any, tensor: torch.Tensor, key: int | None) -> None:
        """``tensor`` (storage ``key``) is a copy made by a free op: a copy of one record's
        output, or of a part of it, keeps what is known of its columns (the columns of the part,
        or the width of whole rows copied in order: a reshape that could not be a view)."""
        inputs = [t for t in _tensors(args) if len(self.producer.get(storage_key(t), ())) == 1]
        window = width = None
        if len(inputs) == 1:
            source = inputs[0]
            window = self._columns(source)
            known = self.width.get(storage_key(source))
            if (window is None and known is not None and source.stride()[-1:] == (1,)
                    and source.shape[-1:] == (known,) and _row_width(tensor) == known):
                width = known
        _store(self.part, key, window)
        _store(self.width, key, width)

    def _joined(self, keys: list[int | None], params: list[str]) -> tuple[str, ...]:
        """The parameters carried in an operand that records wrote too: a parameter
        concatenated to activations (memory key/values joined to the keys), not a weight."""
        names = (name for key in keys if self.producer.get(key)
                 for name in self.carried.get(key, ()))
        return tuple(dict.fromkeys(name for name in names if name not in params))

    def _take_carried(self, keys: list[int | None], params: list[str]) -> tuple[str, ...]:
        """The parameters that reach an op only through free ops (an expanded class token, an
        indexed bias table); the first op to consume them takes them."""
        names = (name for key in keys for name in self.carried.pop(key, ()))
        return tuple(dict.fromkeys(name for name in names if name not in params))

    def pass_through(self, args: Any, out: Any) -> None:
        """An op that is not counted (a copy, a concatenation, a gather) hands on its inputs'
        producers, all of them (MAE's class token joined to its gathered patches comes from
        both), the parameters it reads or carries, and which of those producers reach it only
        as indices (:meth:`_indexed`: patches gathered at a ``topk``'s indices)."""
        if self.muted or self.phase != Phase.FORWARD:
            return
        tensors = list(_tensors(args))
        keys = [storage_key(t) for t in tensors]
        sources = self._sources(keys)
        indexed = self._indexed(tensors, keys)
        fed = any(key in self.fed for key in keys)
        held = tuple(dict.fromkeys(
            [*self._params_of(keys), *(name for key in keys for name in self.carried.get(key, ()))]
        ))
        for tensor in _tensors(out):
            key = storage_key(tensor)
            # a new output may reuse the storage of a freed tensor: what was known of it goes
            _store(self.producer, key, sources)
            _store(self.carried, key, held)
            _store(self.selecting, key, indexed)
            if fed:
                self.fed.add(key)
            else:
                self.fed.discard(key)
            if key not in keys:
                self._copied(args, tensor, key)
            self._watch(tensor, key)

    def current(self) -> int | None:
        """Index of the record an output produced now belongs to: the last one, or inside a
        muted fused attention the attention's own, recorded next."""
        index = len(self.pending) if self.muted else len(self.pending) - 1
        return index if index >= 0 else None

    def adopt(self, out: Any) -> None:
        """Forward: the autograd node of ``out`` will belong to the current record. An output
        without tensors changes nothing: a fake tensor's ``prim.device``, which autograd asks
        while it sets the previous output's history, would settle that output before its
        ``grad_fn`` is set, and lose it."""
        if next(_tensors(out), None) is None:
            return
        self.settle()
        index = self.current()
        if index is not None:
            self._fresh.append((out, index))

    def settle(self) -> None:
        """Map the ``grad_fn`` of the outputs adopted so far (autograd sets it after dispatch)."""
        for out, index in self._fresh:
            for tensor in _tensors(out):
                if tensor.grad_fn is not None:
                    self.owners.setdefault(tensor.grad_fn, index)
        self._fresh.clear()

    def _params_of(self, keys: list[int | None]) -> list[str]:
        """Names of the parameters among the storages ``keys``, in order."""
        found = (self.param_of_storage.get(key) for key in keys)
        return [name for name in found if name is not None]

    def records(self) -> list[OpRecord]:
        """The counted operations, not placed: a record's component is the one a fused op
        named for its part (else ``other``) and its block None, until the recognize layer
        places it from its :meth:`whereabouts` (:func:`vitprof.recognize.placement.place`)."""
        return [
            OpRecord(p.op, p.stack[-1] if p.stack else "", p.named or Component.OTHER, None,
                     p.cost.macs, p.cost.vector_flops, p.phase, *p.traffic, kind=p.kind)
            for p in self.pending
        ]

    def whereabouts(self) -> tuple[Whereabouts, ...]:
        """Where each counted operation ran, in the order of :meth:`records`."""
        return tuple(Whereabouts(p.stack, p.params, p.sources, p.owner, p.named)
                     for p in self.pending)


    def trace(self) -> Trace:
        """The data flow of the forward records (:class:`~vitprof.count.trace.Trace`)."""
        steps = tuple(
            Step(p.op, p.stack[-1] if p.stack else "", p.params, p.carried, p.sources, p.shape,
                 p.cost.macs, p.named, p.beside, p.indexed,
                 p.operand, p.parts, p.carried_beside, p.carried_joined, p.joined,
                 p.unsourced, p.fed, p.kind, p.calls)
            for p in self.pending if p.phase == Phase.FORWARD
        )
        owners = tuple(
            i if p.phase == Phase.FORWARD else p.owner for i, p in enumerate(self.pending)
        )
        return Trace(steps, owners)


def _shares(traffic: tuple[int, int], macs: list[int]) -> list[tuple[int, int]]:
    """``traffic`` split among parts in proportion to ``macs`` (all to the first if none)."""
    if len(macs) == 1:
        return [traffic]
    total = sum(macs)
    weights = [m / total for m in macs] if total else [1.0] + [0.0] * (len(macs) - 1)
    return [(round(traffic[0] * w), round(traffic[1] * w)) for w in weights]


class _DispatchCounter(TorchDispatchMode):
    """Prices every aten op; decomposes what has no formula; reports what stays unpriced."""

    def __init__(self, counter: OpCounter) -> None:
        super().__init__()
        self.counter = counter
        self.meta_outputs = MetaOutputCache()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.counter.real_step:
            return self._as_it_runs(func, args, kwargs)
        if self.counter.switching:
            out = func(*args, **kwargs)
            self.counter.pass_through(args, out)
            return out
        formula = formula_for(func, self.counter.formulas)
        tracking = self.counter.tracking and self.counter.phase == Phase.FORWARD
        if formula is None and not is_free(func):
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                if tracking:
                    self.counter.adopt(decomposed)
                return decomposed
            if not self.counter.muted:
                self.counter.unsupported[op_name(func)] += 1
        out = self.meta_outputs.run(func, args, kwargs)
        self._price(func, formula, args, kwargs, out, tracking)
        return out

    def _as_it_runs(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """An op of a real step (:attr:`OpCounter.real_step`): run as it is, never decomposed,
        so that the step computes and draws what it does uncounted; then priced. The first op
        run by the autograd engine starts the backward phase. A failure to price is kept in
        :attr:`OpCounter.failed`, never raised into the step; nothing is priced after it."""
        out = func(*args, **kwargs)
        counter = self.counter
        if counter.failed is None:
            try:
                if counter.phase == Phase.FORWARD and torch._C._current_autograd_node() is not None:
                    counter.begin_backward()
                formula = formula_for(func, counter.formulas)
                if formula is None and not is_free(func) and not counter.muted:
                    counter.unsupported[op_name(func)] += 1
                tracking = counter.tracking and counter.phase == Phase.FORWARD
                self._price(func, formula, args, kwargs, out, tracking)
            except Exception as error:  # vitprof's own failure: the step goes on
                counter.failed = error
        return out

    def _price(self, func: Any, formula: Formula | None, args: tuple, kwargs: dict, out: Any,
               tracking: bool) -> None:
        """Record ``func``'s cost (or pass its inputs' producers on to ``out``)."""
        self.counter.live.created(func, out)
        if formula is not None and not self.counter.muted:
            traffic = (tensor_bytes(args) + tensor_bytes(kwargs), tensor_bytes(out))
            named = arguments(func, args, kwargs)
            cost = formula(named, out)
            if formula in OWN_FORMULAS:
                cost = in_real_arithmetic(func, cost, out)
            if op_name(func) in _ADDED_TERM and args:
                self.counter.record(func, cost, args[1:], traffic, out, beside=args[:1])
            else:
                self.counter.record(func, cost, args, traffic, out)
            self.counter.note_floor(func, named, out)
        else:
            self.counter.pass_through(args, out)
        if tracking:
            self.counter.adopt(out)


def _signature(value: Any) -> Any:
    """A hashable stand-in for an op argument; tensors by metadata. Raises TypeError if none."""
    if isinstance(value, torch.Tensor):
        if value.device.type != Device.META:
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
        if not allocates(func):  # a view or an in-place op (by its schema, read once per op)
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
    """Run ``scaled_dot_product_attention`` (or the counter's stand-in for it,
    :attr:`OpCounter.attention`) unseen, and record it as one op."""
    if counter.muted:
        return counter.attention(*args, **kwargs)
    counter.muted += 1
    try:
        out = counter.attention(*args, **kwargs)
    finally:
        counter.muted -= 1
    traffic = (tensor_bytes(args) + tensor_bytes(kwargs), tensor_bytes(out))
    sdpa = aten.scaled_dot_product_attention.default
    formula = formula_for(sdpa, counter.formulas) or sdpa_cost
    counter.record(sdpa, formula(arguments(sdpa, args, kwargs), out), args[:3], traffic, out,
                   beside=(*args[3:], *kwargs.values()))
    return out


FLEX_ATTENTION = "torch.nn.attention.flex_attention"  # the module, and the op name of its records


def _priced_flex_attention(
    counter: OpCounter, original: Callable[..., Any], query: torch.Tensor, key: torch.Tensor,
    value: torch.Tensor, score_mod: Any = None, block_mask: Any = None, *args: Any,
    **kwargs: Any,
) -> Any:
    """``flex_attention`` recorded as one op at SDPA's dense cost; on meta, its outputs are
    made from the shapes, elsewhere the real function runs unseen (without autograd unless a
    training step is counted: its CPU kernel has no backward)."""
    if query.is_meta:
        out = _flex_outputs(query, value, *args, **kwargs)
    else:
        q, k, v = (query, key, value) if counter.tracking else (
            query.detach(), key.detach(), value.detach())
        with _disable_current_modes():
            out = original(q, k, v, score_mod, block_mask, *args, **kwargs)
    dense = {"query": query, "key": key, "value": value,
             "attn_mask": None if score_mod is None and block_mask is None else "score_mod"}
    traffic = (tensor_bytes((query, key, value)), tensor_bytes(out))
    counter.record(FLEX_ATTENTION, sdpa_cost(dense, out), (query, key, value), traffic, out,
                   kind=OpKind.ATTENTION)
    return out


def _flex_outputs(
    query: torch.Tensor, value: torch.Tensor, scale: Any = None, enable_gqa: bool = False,
    return_lse: bool = False, kernel_options: Any = None, *, return_aux: Any = None,
) -> Any:
    """What ``flex_attention`` returns, on meta: the output (query's batch, heads and length,
    value's width, query's dtype), and the float32 log-sum-exp (and max scores) if asked."""
    out = query.new_empty((*query.shape[:-1], value.shape[-1]))
    lse = query.new_empty(query.shape[:-1], dtype=torch.float32)
    if return_aux is not None:
        from torch.nn.attention.flex_attention import AuxOutput

        return out, AuxOutput(lse if return_aux.lse else None,
                              torch.empty_like(lse) if return_aux.max_scores else None)
    return (out, lse) if return_lse else out


@contextmanager
def _flex_attention_wrapped(counter: OpCounter) -> Iterator[None]:
    """Point every module-level name ``flex_attention`` bound to torch's function (its own
    module's, those of modules that imported it by name, and those of the files the counted
    model's classes come from, even a file loaded outside ``sys.modules``) at
    :func:`_priced_flex_attention`; restored on exit. Nothing to do when it was never
    imported."""
    module = sys.modules.get(FLEX_ATTENTION)
    original = getattr(module, "flex_attention", None)
    if original is None:
        yield
        return
    priced = partial(_priced_flex_attention, counter, original)
    bound = _flex_bindings(original)
    bound += [n for n in _model_namespaces(counter.model) if n.get("flex_attention") is original
              and all(n is not seen for seen in bound)]
    for namespace in bound:
        namespace["flex_attention"] = priced
    try:
        yield
    finally:
        for namespace in bound:
            namespace["flex_attention"] = original


_BINDINGS: dict[str, Any] = {}  # the last scan: modules seen and the namespaces found


def _flex_bindings(original: Callable[..., Any]) -> list[dict[str, Any]]:
    """The namespaces of loaded modules whose ``flex_attention`` is ``original``; scanned again
    only when modules were loaded since the last scan (a scan takes milliseconds)."""
    if _BINDINGS.get("modules") != len(sys.modules) or _BINDINGS.get("original") is not original:
        found = [vars(m) for m in list(sys.modules.values())
                 if isinstance(m, ModuleType) and vars(m).get("flex_attention") is original]
        _BINDINGS.update(modules=len(sys.modules), original=original, found=found)
    return list(_BINDINGS["found"])


def _model_namespaces(model: nn.Module) -> list[dict[str, Any]]:
    """The global namespaces of the ``forward`` of every module class in ``model``: the files
    its classes come from, whether or not they are in ``sys.modules`` (a ``FILE.py:factory``
    is loaded outside it)."""
    spaces: dict[int, dict[str, Any]] = {}
    for kind in {type(m) for m in model.modules()}:
        space = getattr(kind.forward, "__globals__", None)
        if isinstance(space, dict):
            spaces[id(space)] = space
    return list(spaces.values())
