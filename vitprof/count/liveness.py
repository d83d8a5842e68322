"""The peak of the tensors a run holds at once: what a real run of the same forward needs.

The counter hands :class:`Liveness` the inputs of a run and the outputs of each aten operation
it runs (forward and backward). The outputs of an operation that mutates none of its arguments
and returns no alias of one (by its schema: not a view, not an in-place or ``out=`` op) are
*allocated*, each storage once: its bytes join the live total, and leave it when the storage is
freed, which a weak reference's callback reports: the last tensor or view of it is gone (after
its last reader; in a training step, when autograd releases what it saved for the backward).
The inputs are alive from the start.
:attr:`Liveness.peak` is the largest live total; parameters and buffers are not in it (they
exist before the run).

On meta this is the peak a real run of the same forward holds: Python frees a tensor at the same
point on any device. It is not an allocator's figure: a caching allocator rounds sizes and keeps
freed blocks. And on meta ``scaled_dot_product_attention`` runs its math decomposition, which
holds the scores (batch x heads x L x L) that a flash kernel never stores: there the meta peak
is higher than a real run's.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from functools import cache, partial
from typing import Any

import torch


def _storages(value: Any) -> Iterator[torch.UntypedStorage]:
    """The storages of the tensors in ``value`` (nested tuples and lists); a tensor without one
    (a nested or sparse tensor) is skipped."""
    if isinstance(value, torch.Tensor):
        try:
            yield value.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _storages(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _storages(item)


def weakly(method: Callable[..., None]) -> Callable[..., None]:
    """The bound ``method``, called through a weak reference to its object (a no-op once that
    is gone): the callback of a weak reference its object keeps in a table. A callback bound
    strongly closes a reference cycle (object -> table -> weak reference -> callback ->
    object) that keeps the object, and the model it holds, alive until a full collection."""
    owner = weakref.ref(method.__self__)  # type: ignore[attr-defined]
    function = method.__func__  # type: ignore[attr-defined]

    def call(*args: Any) -> None:
        if (found := owner()) is not None:
            function(found, *args)

    return call


@cache
def allocates(op: Any) -> bool:
    """Whether aten ``op`` returns new storage: it mutates no argument and returns no alias of
    one (not a view, not an in-place or ``out=`` op)."""
    schema = op._schema
    return not schema.is_mutable and all(r.alias_info is None for r in schema.returns)


class Liveness:
    """Bytes of the tensors a run holds now (``live``), at most (``peak``), and of its inputs."""

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0
        self.inputs = 0
        # where the run is: the index of the next op record (set by the counter that runs it),
        # for subclasses that place what they see (:class:`vitprof.count.timeline.Timeline`)
        self.position: Callable[[], int] = lambda: 0
        self._alive: dict[int, weakref.ref[torch.UntypedStorage]] = {}
        self._on_free = weakly(self._free)

    def hold(self, inputs: Any) -> None:
        """The run's inputs (tensors in nested tuples, lists and dicts): alive from the start."""
        before = self.live
        self._allocate(_storages(inputs))
        self.inputs += self.live - before

    def created(self, op: Any, out: Any) -> None:
        """Aten ``op`` returned ``out``: its storages are new where :func:`allocates` says so."""
        if allocates(op):
            self._allocate(_storages(out))

    def _allocate(self, storages: Iterator[torch.UntypedStorage]) -> None:
        for storage in storages:
            key = storage._cdata
            if key in self._alive:
                continue
            size = storage.nbytes()
            self._alive[key] = weakref.ref(storage, partial(self._on_free, key, size))
            self.live += size
            self.peak = max(self.peak, self.live)

    def _free(self, key: int, size: int, dead: weakref.ref[torch.UntypedStorage]) -> None:
        if self._alive.get(key) is dead:
            del self._alive[key]
            self.live -= size
