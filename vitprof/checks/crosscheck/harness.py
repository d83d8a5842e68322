"""What every peer adapter runs in: quiet, in eval mode, with logs of what ran.

An adapter (one per file of :mod:`vitprof.checks.crosscheck.peers`) runs one peer counter on one
model and one forward's inputs, ``model(*args, **kwargs)``, and returns the peer's own number in
the peer's own unit, plus the per-operator or per-layer detail its causes need. Adapters explain
nothing and never print: each peer's prints, log records and warnings are captured and dropped
(:func:`quiet`), while what it reports as unsupported is kept in the returned record.

Below a peer, a :class:`KernelLog` notes every kernel that ran (or every kernel without a
formula in a counting dispatch mode's registry), and a :class:`CallLog` every ``@``,
``torch.bmm``, ``F.softmax``, ``F.gelu`` and ``F.scaled_dot_product_attention`` call, with
modules. A peer that cannot be imported raises :class:`PeerUnavailable`; one that cannot take
the inputs raises :class:`CannotTake`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from vitprof.count.formulas import op_name
from vitprof.count.module_stack import ModuleStack

Uncounted = Counter[tuple[str, str]]  # (op as "aten.name", module path) -> calls
# Python-level calls that some peers patch and others do not: name -> (owner, attribute).
LOGGED_CALLS = {
    "Tensor.__matmul__": (torch.Tensor, "__matmul__"),
    "torch.bmm": (torch, "bmm"),
    "F.softmax": (F, "softmax"),
    "F.gelu": (F, "gelu"),
    "F.scaled_dot_product_attention": (F, "scaled_dot_product_attention"),
}


class PeerUnavailable(Exception):
    """The peer's package is not installed."""


class CannotTake(Exception):
    """The peer cannot be called with this forward's inputs; the message says why."""


def not_installed(package: str, extra: str | None = None) -> PeerUnavailable:
    """The error of a peer whose ``package`` is missing, naming the vitprof ``extra`` that
    installs it, else the package itself (a peer no extra lists)."""
    install = f"vitprof[{extra}]" if extra else package
    return PeerUnavailable(f"{package} not installed: pip install {install}")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Capture stdout, stderr, warnings and log records for the duration."""
    sink = io.StringIO()
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """Eval mode for the duration; the previous mode is restored even after an error."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


class KernelLog(TorchDispatchMode):
    """Notes, with the innermost running module, every kernel run that has no FLOP formula.

    Entered *before* a counting dispatch mode (``FlopCounterMode``, ptflops's ``aten`` backend),
    it sits below it and sees exactly the kernels that mode executed after its own
    decompositions. With an empty ``registry`` it notes every kernel.
    """

    def __init__(self, model: nn.Module, registry: Any) -> None:
        super().__init__()
        self.modules = ModuleStack(model)
        self.registry = registry
        self.uncounted: Uncounted = Counter()

    def __enter__(self) -> KernelLog:
        self.modules.__enter__()
        return super().__enter__()

    def __exit__(self, *args: Any) -> None:
        self.modules.__exit__(*args)
        super().__exit__(*args)

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        if func._overloadpacket not in self.registry:
            self.uncounted[(op_name(func), self.modules.current)] += 1
        return func(*args, **(kwargs or {}))


class CallLog:
    """Notes, with the innermost running module, every call of the :data:`LOGGED_CALLS`.

    It wraps them for the duration, as the peers themselves patch functions (a peer that patches
    one wraps the wrapper and restores it): a torch function mode would instead turn off
    ``nn.MultiheadAttention``'s fast path. A peer may keep a wrapper after its run (calflops
    keeps every function it patched in a module-level dict, for good), so on exit each wrapper
    forgets this log, and with it the model: what a peer keeps holds nothing of the model.
    """

    def __init__(self, model: nn.Module) -> None:
        self.modules = ModuleStack(model)
        self.calls: Uncounted = Counter()
        self.originals = {
            name: getattr(owner, attr) for name, (owner, attr) in LOGGED_CALLS.items()
        }
        self.wrappers: list[_Logged] = []

    def __enter__(self) -> CallLog:
        self.modules.__enter__()
        for name, (owner, attr) in LOGGED_CALLS.items():
            wrapper = _Logged(self.originals[name], partial(self._note, name))
            self.wrappers.append(wrapper)
            setattr(owner, attr, wrapper)
        return self

    def __exit__(self, *args: Any) -> None:
        for name, (owner, attr) in LOGGED_CALLS.items():
            setattr(owner, attr, self.originals[name])
        for wrapper in self.wrappers:
            wrapper.forget()
        self.wrappers.clear()
        self.modules.__exit__(*args)

    def _note(self, name: str) -> None:
        self.calls[(name, self.modules.current)] += 1


class _Logged:
    """``original`` with a note of each call; it hashes and compares equal to ``original``, so
    the peers' tables keyed by the function (ptflops's ``FUNCTIONAL_MAPPING``) still find it,
    and binds as a method where ``original`` does (``Tensor.__matmul__``)."""

    def __init__(self, original: Any, note: Any) -> None:
        self.original = original
        self.note = note

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.note()
        return self.original(*args, **kwargs)

    def forget(self) -> None:
        """Notes nothing from now on, and drops the note (and what it refers to)."""
        self.note = _note_nothing

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self if instance is None else partial(self, instance)

    def __hash__(self) -> int:
        return hash(self.original)

    def __eq__(self, other: object) -> bool:
        return other is self or other is self.original or other == self.original


def _note_nothing() -> None:
    """The note of a wrapper whose log has ended."""


Hooked = dict[str, list[tuple[tuple[int, ...], ...]]]
"""Module path -> the input shapes of each call of that module."""


@dataclass(frozen=True)
class PatchRun:
    """What a hook-and-patch counter (ptflops, calflops, DeepSpeed) reported, and what ran.

    ``kernels``: every kernel that ran, or for ptflops's ``aten`` backend every kernel it has no
    formula for; ``calls``: the :data:`LOGGED_CALLS` made; ``hooked``: the modules ptflops's
    ``pytorch`` backend hooks, with the input shapes each call of them saw, and ``batch`` what
    it divides their counts by.
    """

    macs: int
    params: int
    kernels: Uncounted
    calls: Uncounted
    hooked: Hooked
    batch: int = 1  # what ptflops's pytorch backend divides its hook counts by


@contextlib.contextmanager
def _watching(
    model: nn.Module, registry: Any, hooked: Hooked
) -> Iterator[tuple[KernelLog, CallLog]]:
    """Logs kernels and ``@`` calls, and records the input shapes of the ``hooked`` modules."""
    handles = [
        model.get_submodule(path).register_forward_hook(partial(_shapes, hooked[path]))
        for path in hooked
    ]
    try:
        with KernelLog(model, registry) as kernels, CallLog(model) as calls:
            yield kernels, calls
    finally:
        for handle in handles:
            handle.remove()


def _shapes(seen: list, module: nn.Module, args: tuple, output: Any) -> None:
    seen.append(tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor)))


def patch_run(
    model: nn.Module, grad: bool, count: Any, registry: Any = frozenset(),
    hooked: Hooked | None = None,
) -> PatchRun:
    """``count()`` -> (MACs, params) in eval mode and ``grad`` mode, quietly, everything logged."""
    hooked = {} if hooked is None else hooked
    with (
        quiet(), evaluating(model), torch.set_grad_enabled(grad),
        _watching(model, registry, hooked) as (kernels, calls),
    ):
        macs, params = count()
    if macs is None:
        raise RuntimeError("the peer returned no count (it failed on this model)")
    return PatchRun(int(macs), int(params), kernels.uncounted, calls.calls, hooked)
