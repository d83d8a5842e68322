"""Every storage one rank holds during a step, op by op: allocations, frees and resizes.

:class:`RankLog` is a dispatch mode that sees each aten op the rank runs, the collectives
and FSDP2's copy-in and copy-out ops among them. A storage first seen in an op's outputs (or
registered before the step: parameters, optimizer state, inputs) is logged as allocated with
the bytes it has, and as freed when its last tensor goes (a weak reference's callback). FSDP2
allocates and frees the unsharded parameters by resizing their storages in place
(``untyped_storage().resize_``): while the log is on, each resize is logged as a change of that
storage's bytes.

A tensor subclass that wraps others (FSDP2's ``DTensor``) is logged by the plain tensors it
wraps, found through ``__tensor_flatten__`` (a DTensor's local shard): the wrapper's own storage
holds no data and reports the global size. An op on DTensors is one op to this mode (the mode is
off torch's mode stack while it handles an op): the local ops DTensor runs inside, and the
shape propagation it runs on fake tensors of the global shapes, are not seen; the op is logged
by its outputs' local tensors, and what DTensor allocates and frees within the op is not.
Each entry is replayed later with the kind its allocation turned out to be
(:meth:`RankLog.replay`), once the step has shown which storages were gradients.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_leaves

from vitprof.core.vocab import Device
from vitprof.count.formulas import op_name
from vitprof.count.liveness import weakly


@dataclass(frozen=True, slots=True)
class Op:
    """An op the rank ran: its name and the phase it ran in."""

    name: str
    phase: str


@dataclass(slots=True)
class Allocation:
    """One storage: the op and phase that allocated it (``registered`` for what existed
    before the step) and its kind as far as known when it was made (None: decided later)."""

    op: str
    phase: str
    kind: str | None


Claims = Callable[[str, tuple[Any, ...], dict[str, Any]], Iterable[tuple[torch.Tensor, str]]]
# the log: (id, change in bytes) for an allocation, a free or a resize, or an Op that ran
Entry = tuple[int, int] | Op


class RankLog(TorchDispatchMode):
    """The storages of one rank's step (see the module). ``phase`` is set by the caller;
    ``kind_of_op(name)`` names the kind of what an op allocates, if its name tells;
    ``claims(name, args, kwargs)`` the kind of tensors an op reads, if it tells (each
    ``(tensor, kind)``); ``rounded(n)``: bytes as the allocator counts a request of ``n``."""

    def __init__(self, kind_of_op: Callable[[str], str | None], claims: Claims,
                 rounded: Callable[[int], int]) -> None:
        super().__init__()
        self.phase = "registered"
        self.kind_of_op = kind_of_op
        self.claims = claims
        self.rounded = rounded
        self.allocations: list[Allocation] = []
        self.log: list[Entry] = []
        self._ids: dict[int, int] = {}  # storage key -> allocation id, while alive
        self._sizes: dict[int, int] = {}  # allocation id -> its bytes now
        self._refs: dict[int, weakref.ref[torch.UntypedStorage]] = {}
        self._on_free = weakly(self._freed)

    def register(self, tensors: Any, kind: str) -> None:
        """Tensors alive before the step (nested lists, dicts), as ``kind``."""
        for tensor in tree_leaves(tensors):
            if isinstance(tensor, torch.Tensor):
                self._seen(tensor, Allocation("registered", self.phase, kind))

    def mark(self, tensor: torch.Tensor, kind: str) -> None:
        """The allocation of ``tensor`` is ``kind``; one allocated before the log began (a
        DDP bucket made at construction) is registered now as alive since the start."""
        found = self.id_of(tensor)
        if found is None:
            self._seen(tensor, Allocation("registered", "registered", kind))
            found = self.id_of(tensor)
            if found is None:  # no storage
                return
            self.log.insert(0, self.log.pop())
        self.allocations[found].kind = kind

    def id_of(self, tensor: torch.Tensor) -> int | None:
        """The allocation holding ``tensor``'s storage now, if it was logged."""
        return self._ids.get(_key(tensor))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = op_name(func)
        made = Allocation(name, self.phase, self.kind_of_op(name))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self._seen(tensor, made)
        for tensor, kind in self.claims(name, args, kwargs or {}):
            if (found := self.id_of(tensor)) is not None:
                self.allocations[found].kind = kind
        self.log.append(Op(name, self.phase))
        return out

    @contextmanager
    def resizes(self) -> Iterator[None]:
        """Storage resizes logged as changes of bytes (see the module), while inside."""
        resize = torch.UntypedStorage.resize_
        log = self

        def logged(storage: torch.UntypedStorage, size: int) -> Any:
            key = storage._cdata
            result = resize(storage, size)
            found = log._ids.get(key)
            if found is None and size > 0:
                log._new(storage, Allocation("resize_", log.phase, log.kind_of_op("resize_")))
            elif found is not None:
                log.log.append((found, log.rounded(size) - log._sizes[found]))
                log._sizes[found] = log.rounded(size)
            return result

        torch.UntypedStorage.resize_ = logged  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            torch.UntypedStorage.resize_ = resize  # type: ignore[method-assign]

    def replay(self, kind: Callable[[int], str]) -> Iterator[tuple[Entry, str, int]]:
        """The log with the kind (``kind(id)``; an Op's is "") and change in bytes of each
        entry."""
        for entry in self.log:
            if isinstance(entry, Op):
                yield entry, "", 0
            else:
                yield entry, kind(entry[0]), entry[1]

    def _seen(self, tensor: torch.Tensor, made: Allocation) -> None:
        for plain in _holding(tensor):
            if plain.device.type == Device.META:  # no data
                continue
            try:
                storage = plain.untyped_storage()
            except (RuntimeError, NotImplementedError):  # no storage (nested, sparse)
                continue
            if storage._cdata not in self._ids:
                self._new(storage, made)

    def _new(self, storage: torch.UntypedStorage, made: Allocation) -> None:
        key, index = storage._cdata, len(self.allocations)
        self.allocations.append(made)
        self._ids[key] = index
        self._sizes[index] = self.rounded(storage.nbytes())
        self._refs[key] = weakref.ref(storage, partial(self._on_free, key))
        self.log.append((index, self._sizes[index]))

    def _freed(self, key: int, ref: weakref.ref[torch.UntypedStorage]) -> None:
        if self._refs.get(key) is not ref:
            return
        del self._refs[key]
        index = self._ids.pop(key)
        self.log.append((index, -self._sizes.pop(index)))


def _holding(tensor: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors whose storages hold ``tensor``'s data: itself, or a wrapper
    subclass's inner tensors (a DTensor's local shard), found through ``__tensor_flatten__``.
    A wrapper's own storage holds nothing: a DTensor's reports its global size."""
    if not is_traceable_wrapper_subclass(tensor):
        return [tensor]
    names, _ = tensor.__tensor_flatten__()
    return [plain for name in names if isinstance(inner := getattr(tensor, name), torch.Tensor)
            for plain in _holding(inner)]


def _key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata
