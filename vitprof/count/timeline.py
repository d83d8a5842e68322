"""The tensors a run holds, op by op: :class:`Liveness` that logs each allocation and free.

:class:`~vitprof.count.liveness.Liveness` knows when each storage is allocated (the op that
returns it) and freed (its last tensor gone, a weak reference's callback). :class:`Timeline`
keeps the order of these moments, in a log that a caller replays once it knows what each
allocation was (:meth:`Timeline.replay`): the component of the op record it belongs to, a
gradient, the optimizer's state. An allocation belongs to the op record being made when it
happens (``position()``: the counter's next record), the last one at the end of the run: a
priced op's outputs are its own, the copies and views an unpriced op makes belong to the priced
op that follows (they prepare its operands), and what a fused attention makes inside belongs to
the attention. A replay's events, each op with the bytes alive after it, are
:class:`LiveEvent` values.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from vitprof.count.formulas import op_name
from vitprof.count.liveness import Liveness, weakly


@dataclass(frozen=True, slots=True)
class Allocation:
    """One storage allocated: ``size`` bytes, at the op record ``position`` of ``stage``."""

    size: int
    position: int
    stage: str


@dataclass(frozen=True, slots=True)
class Moment:
    """An op of the run: its name, its ``stage`` (as the caller set it: forward, backward,
    optimizer) and the op record it belongs to (``position``)."""

    op: str
    stage: str
    position: int


@dataclass(frozen=True)
class LiveEvent:
    """One op of a replayed step, in run order: its ``index``, its ``op``, its ``phase``
    (forward, backward, optimizer, ...) and the bytes ``live`` after it, by kind (the kinds
    are the caller's: the state and components of a step, the kinds of a rank's storages)."""

    index: int
    op: str
    phase: str
    live: Mapping[str, int]

    @property
    def total(self) -> int:
        """The bytes alive after the op, all kinds together."""
        return sum(self.live.values())


# the log: an allocation's id (>= 0) allocated, ~id freed, or a Moment (an op just ran)
Entry = int | Moment


class Timeline(Liveness):
    """Liveness that logs every allocation, free and op, in order (see the module)."""

    def __init__(self) -> None:
        super().__init__()
        self.stage = "forward"
        self.allocations: list[Allocation] = []
        self.log: list[Entry] = []
        self._ids: dict[int, int] = {}  # storage key -> id of its allocation, while alive
        self._on_logged_free = weakly(self._logged_free)

    def created(self, op: Any, out: Any) -> None:
        """Aten ``op`` returned ``out``: its new storages are allocated, then the op is logged."""
        super().created(op, out)
        self.log.append(Moment(op_name(op), self.stage, self.position()))

    def allocation_of(self, tensor: torch.Tensor) -> int | None:
        """The id of the allocation that holds ``tensor``'s storage now, if one was logged."""
        return self._ids.get(tensor.untyped_storage()._cdata)

    def _allocate(self, storages: Iterator[torch.UntypedStorage]) -> None:
        for storage in storages:
            key = storage._cdata
            if key in self._alive:
                continue
            super()._allocate(iter((storage,)))
            self._ids[key] = len(self.allocations)
            self.log.append(len(self.allocations))
            self.allocations.append(Allocation(storage.nbytes(), self.position(), self.stage))
            # the base class's callback frees the bytes; this one logs the free after it
            self._alive[key] = weakref.ref(storage, partial(self._on_logged_free, key,
                                                            storage.nbytes()))

    def _logged_free(self, key: int, size: int, dead: weakref.ref[torch.UntypedStorage]) -> None:
        if self._alive.get(key) is dead:
            self._free(key, size, dead)
            self.log.append(~self._ids.pop(key))

    def replay(self, kind: Callable[[int, Allocation], str],
               rounded: Callable[[int], int] = lambda n: n) -> Iterator[tuple[Entry, str, int]]:
        """The log with, for each entry, the kind of memory it changes (``kind(id,
        allocation)``; a Moment's is "") and the change in bytes (each size ``rounded``)."""
        kinds = [kind(i, a) for i, a in enumerate(self.allocations)]
        for entry in self.log:
            if isinstance(entry, Moment):
                yield entry, "", 0
            elif entry >= 0:
                yield entry, kinds[entry], rounded(self.allocations[entry].size)
            else:
                yield entry, kinds[~entry], -rounded(self.allocations[~entry].size)

