"""One process's memory through a training step, read by code that shares none with vitprof.

:class:`StepMemory` is a ``TorchDispatchMode``. Entered before the model is built, it sees every
aten op the process's main thread dispatches, collectives included (``c10d.allreduce_``,
``c10d.reduce_scatter_tensor_coalesced_``... go through the dispatcher like any op), and after
each one it takes two readings:

* **the heap**: glibc's ``mallinfo2()``, ``uordblks + hblkhd``, the bytes malloc has handed out
  and not taken back, in every arena and every mmapped chunk. It is the whole process: the
  tensors' storages, what torch's kernels keep between ops (oneDNN's scratch), gloo's own
  buffers and its worker threads' allocations, the DDP reducer's buckets, malloc's chunk
  headers, and Python objects larger than pymalloc's 512 bytes. It misses a buffer made and
  freed inside one op or inside one collective between two readings, and whatever is not
  allocated through malloc (pymalloc's own arenas, which hold small Python objects);
* **the live tensor storages**: every storage an op returns (the local tensors of a wrapper
  subclass such as FSDP2's ``DTensor``, unwrapped through ``__tensor_flatten__``) is followed
  by a weak reference until it dies, and the live storages' ``nbytes`` are summed after every
  op of the step at the size they have then (FSDP2 resizes its gathered parameters' storages
  to nothing and back, out of the dispatcher's sight). It sees only tensors made by ops
  on this thread, as the program holds them, with no allocator overhead: storages that C++
  code makes on another thread (gloo's worker threads) or inside one op's kernel and keeps (an
  op run under a subclass's ``__torch_dispatch__`` is one op to this mode) are not in it.

The heap is the sound reading of what a rank holds: it sees everything the process allocates
through malloc, whatever made it. But its absolute value carries the interpreter, the libraries
and their caches (hundreds of MB unrelated to the step), so a step's peak is read as

    peak_bytes = baseline_bytes + (largest heap reading during the step
                                   - the heap reading at the step's start)

where ``baseline_bytes`` is the live tensor storages at the step's start: the state the step
begins with (parameters or their shards, buffers, optimizer state, the DDP reducer's flat
gradient buckets, the batch), counted exactly. ``storage_peak_bytes`` is the largest live
storage sum during the step, a second reading of the same peak that leaves out the allocator's
overhead and what C++ keeps unseen: the two agree to a few MB when the harness is sound.

Each reading is labelled with the phase the step was in (``forward``, ``backward``,
``optimizer``, set by the caller) or ``collective`` when the op just run was one of
torch.distributed's (namespaces ``c10d`` and ``_c10d_functional``), and with the op's name.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from independent_memory import (
    heap_bytes,  # glibc's mallinfo2: the same reader as the one-process harness
)
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_leaves

COLLECTIVE_NAMESPACES = frozenset({"c10d", "_c10d_functional"})


def local_tensors(tensor: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors holding ``tensor``'s data: itself, or a wrapper subclass's inner ones."""
    if not is_traceable_wrapper_subclass(tensor):
        return [tensor]
    names, _ = tensor.__tensor_flatten__()
    inner = [getattr(tensor, name) for name in names]  # DTensor's names its mesh too
    return [plain for part in inner if isinstance(part, torch.Tensor)
            for plain in local_tensors(part)]


@dataclass(frozen=True)
class Peak:
    """The largest reading of a step: its bytes, phase and the op read after."""

    bytes: int
    phase: str
    op: str


class StepMemory(TorchDispatchMode):
    """Heap and live-storage readings after every aten op (see the module).

    Enter it before the model is built, so that every storage of the state is counted; set
    ``phase`` as the step goes; call :meth:`start_step` at the step's start and read
    :meth:`heap_peak` and :attr:`storage_peak` at its end. A storage's bytes are read when they
    are summed, not when it was made: FSDP2 frees a gathered parameter by resizing its storage
    to nothing (``untyped_storage().resize_(0)``, no aten op) and grows it again before the next
    all-gather, so the storage lives on at a size that changes.
    """

    def __init__(self) -> None:
        super().__init__()
        self.phase = "setup"
        self._storages: dict[int, weakref.ref[torch.UntypedStorage]] = {}  # by C++ address
        self._in_step = False
        self.start_step()
        self._in_step = False

    def live_bytes(self) -> int:
        """The bytes of every storage made under this mode and alive, at their size now."""
        # a copy: a storage whose last reference is the one taken here dies within the sum,
        # and its callback leaves the dictionary
        return sum(storage.nbytes() for ref in list(self._storages.values())
                   if (storage := ref()) is not None)

    def start_step(self) -> None:
        """Readings start again from here: the heap now and the storages live now. Until the
        first call, the storages are registered but not summed after every op (cheaper)."""
        self._in_step = True
        self.baseline_bytes = self.live_bytes()
        self.heap_start = heap_bytes()
        self._heap_peak = Peak(self.heap_start, self.phase, "(start)")
        self.storage_peak = Peak(self.baseline_bytes, self.phase, "(start)")

    def heap_peak(self) -> Peak:
        """The step's peak from the heap: the baseline plus the heap's largest rise."""
        rise = self._heap_peak.bytes - self.heap_start
        return Peak(self.baseline_bytes + rise, self._heap_peak.phase, self._heap_peak.op)

    def track(self, tensor: torch.Tensor) -> None:
        """Follow ``tensor``'s storages until they die (once each, however many views)."""
        for plain in local_tensors(tensor):
            if plain.device.type == "meta":
                continue
            storage = plain.untyped_storage()
            key = storage._cdata
            if key not in self._storages:
                self._storages[key] = weakref.ref(storage, partial(self._forget, key))

    def _forget(self, key: int, dead: object) -> None:
        self._storages.pop(key, None)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self.track(leaf)
        if not self._in_step:
            return out
        namespace = func.namespace
        phase = "collective" if namespace in COLLECTIVE_NAMESPACES else self.phase
        heap = heap_bytes()
        if heap > self._heap_peak.bytes:
            self._heap_peak = Peak(heap, phase, str(func))
        live = self.live_bytes()
        if live > self.storage_peak.bytes:
            self.storage_peak = Peak(live, phase, str(func))
        return out
