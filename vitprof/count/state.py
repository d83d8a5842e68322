"""What running a model may change in the caller's model and process, put back afterwards.

A forward changes more than its output: BatchNorm in train mode updates its running statistics
and its batch counter in place; dropout, random inputs and random initialisation advance the
global random number generators; a mode switch (``model.train(flag)``) flattens a model whose
submodules were in different modes and resets caches (timm LeViT's attention-bias cache); a
forward or a peer binds attributes (ptflops leaves ``start_flops_count`` and four more on the
root module). :func:`untouched` is the one guard every real run passes through: it captures, on
entry, and puts back, on exit (after an error too):

* each module's attributes, by identity: a name rebound, added or deleted in the run holds the
  object it held before (``training`` among them, per module);
* the contents of each module's dict and set attributes (parameters, buffers, submodules, hook
  tables, caches), in the same dict and set objects, so that a caller's hook handles stay valid;
* the values of the buffers: each one not on meta and not fake (neither holds values: a fake
  one, in a step predicted on fake tensors, cannot even be compared) is cloned on entry and
  copied back where its values changed (BatchNorm's kernels update the running statistics
  without moving the tensor's version counter, so values are compared, not versions);
* the random number generators: torch's CPU generator, every CUDA generator where CUDA is
  initialised, Python's ``random`` and, where numpy is imported, numpy's global one.

Parameters are not copied (that would double a model's memory): one whose version counter moved
in the run was changed in place and cannot be put back; :func:`untouched` names it to its caller
(a counted run makes it a line of the profile's warnings, :func:`in_place_warning`), else in a
Python warning. A fake parameter (a stand-in of a step predicted on fake tensors) holds no values
and is not watched: nothing of the model can have changed through it. Running on a deep
copy instead was rejected: it doubles the parameters' memory (a model that fits a GPU once may
not fit twice), not every module can be copied, and the copy's random draws still advance the
global generators. Capturing what a run can change costs a copy of the buffers only.
"""

from __future__ import annotations

import random
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import is_
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import is_fake

Container = dict[Any, Any] | set[Any]  # a module attribute whose entries are put back


_MISSING = object()


def _rebind(attributes: dict[str, Any], saved: dict[str, Any]) -> None:
    """Give a module's ``attributes`` (its ``vars``) the names of ``saved`` again, each bound
    to the object it held: a name added since is deleted."""
    for name in [name for name in attributes if name not in saved]:
        del attributes[name]
    for name, value in saved.items():
        if attributes.get(name, _MISSING) is not value:
            attributes[name] = value


def _same(current: dict[Any, Any], saved: dict[Any, Any]) -> bool:
    """The same keys in the same order, with the same objects (by identity: a tensor's ``==``
    compares elements)."""
    return (len(current) == len(saved) and all(map(is_, current.values(), saved.values()))
            and list(current) == list(saved))


def _refill(current: Container, saved: Container) -> None:
    """Give ``current`` the entries of ``saved`` again, in order, where they differ."""
    if isinstance(current, dict) and isinstance(saved, dict):
        same = _same(current, saved)
    else:
        same = current == saved
    if not same:
        current.clear()
        current.update(saved)


@dataclass
class ModelState:
    """What a run may change in ``model`` (see the module docstring), captured on creation.

    Per module its attributes; of its dict and set attributes, a copy of those holding entries
    and, apart, the empty ones (most are hook tables), which restoring only empties again."""

    model: nn.Module
    attributes: list[tuple[dict[str, Any], dict[str, Any]]] = field(init=False)  # (vars, copy)
    contents: list[tuple[Container, Container]] = field(init=False)  # (dict or set, copy)
    empty: list[Container] = field(init=False)
    buffers: list[tuple[torch.Tensor, torch.Tensor]] = field(init=False)  # (buffer, clone)
    versions: list[tuple[torch.Tensor, int]] = field(init=False)  # (parameter, its version)

    def __post_init__(self) -> None:
        self.attributes = [(vars(m), vars(m).copy()) for m in self.model.modules()]
        held = [value for _, saved in self.attributes for value in saved.values()
                if isinstance(value, (dict, set))]
        self.contents = [(value, value.copy()) for value in held if value]
        self.empty = [value for value in held if not value]
        with torch.no_grad():
            self.buffers = [(b, b.clone()) for b in self._held("_buffers")
                            if not b.is_meta and not is_fake(b)]
        self.versions = [(p, p._version) for p in self._held("_parameters") if not is_fake(p)]

    def _held(self, table: str) -> list[torch.Tensor]:
        """The tensors in every module's ``table`` (``_parameters``, ``_buffers``), each once:
        read from the attributes captured, instead of walking the modules again."""
        return _unique(t for _, saved in self.attributes
                       for t in saved.get(table, {}).values() if t is not None)

    def restore(self) -> list[str]:
        """Put everything back; return the names of the parameters changed in place."""
        for attributes, saved in self.attributes:
            if not _same(attributes, saved):
                _rebind(attributes, saved)
        if any(self.empty):
            for value in self.empty:
                value.clear()
        for current, saved_entries in self.contents:
            _refill(current, saved_entries)
        with torch.inference_mode():  # an inference tensor accepts copies only in this mode
            for buffer, saved_buffer in self.buffers:
                if not torch.equal(buffer, saved_buffer):
                    buffer.copy_(saved_buffer)
        changed = {id(p) for p, version in self.versions if p._version != version}
        if not changed:
            return []
        return [name for name, p in self.model.named_parameters() if id(p) in changed]


def in_place_warning(changed: list[str], on_meta: bool) -> str:
    """The line that names the parameters a run ``changed`` in place: on meta no value changed
    (the run's operations are counted as they ran); with values, they cannot be put back."""
    if on_meta:
        return (f"the forward changes parameters in place (counted as it ran; on the meta "
                f"device no value changed): {', '.join(changed)}")
    return (f"the run changed parameters in place, which vitprof cannot put back: "
            f"{', '.join(changed)}")


def _unique(tensors: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    return list({id(t): t for t in tensors}.values())


@dataclass
class RngState:
    """The global random number generators' states, captured on creation."""

    cpu: torch.Tensor = field(default_factory=torch.get_rng_state)
    cuda: list[torch.Tensor] | None = field(default_factory=lambda: (
        torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None))
    python: object = field(default_factory=random.getstate)
    numpy: object = field(default_factory=lambda: _numpy_random(None))

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
        random.setstate(self.python)  # type: ignore[arg-type]
        _numpy_random(self.numpy)


def _numpy_random(state: object) -> object:
    """numpy's global random state (set to ``state`` when given); None where numpy is not
    imported (nothing can have drawn from it)."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    if state is not None:
        numpy.random.set_state(state)
    return numpy.random.get_state()


@contextmanager
def untouched(model: nn.Module | None = None, changed: list[str] | None = None
              ) -> Iterator[None]:
    """Run the body, then put back ``model`` (if given) and the random number generators
    as they were on entry (see the module docstring), also after an error. The names of the
    parameters changed in place are appended to ``changed`` when it is given, else named in a
    Python warning."""
    rng = RngState()
    state = ModelState(model) if model is not None else None
    try:
        yield
    finally:
        found = state.restore() if state is not None else []
        rng.restore()
        if found and changed is not None:
            changed.extend(found)
        elif found:
            warnings.warn(in_place_warning(found, on_meta=False), stacklevel=3)
