"""Running a model for real: meta failures told apart, memory guarded.

Counting runs on the meta device, where nothing is allocated. Three things decide whether and
how a model is run with real tensors afterwards (``analyze``'s fallback, ``--device cpu``,
``profile``):

* :func:`meta_caused` says whether a failure on meta is the meta device's own doing (an op
  without a meta kernel, a data-dependent shape, reading a value); only those are retried with
  real tensors. Anything else (a wrong forward signature, a shape mismatch) would fail on any
  device and is reported at once with :func:`run_failed`. :func:`first_on_meta` is that rule,
  the one every caller uses: its :class:`MetaFailure` carries the note the result must show.
* :func:`ensure_fits` refuses, before anything is allocated, a run whose weights plus the
  activations of its :class:`Footprint` exceed the memory available (``VITPROF_MEMORY_LIMIT``
  bytes, when set, replaces the measured figure: tests and cautious users set it). The one
  estimate both ``--device cpu`` and the fallback use is the peak of the tensors alive at once
  in the meta run (:func:`traced`); a meta run that stopped early gives only a lower bound, and
  :func:`untraced` says what replaces it.
* :func:`materialize` gives a module built on meta real storage without calling its factory a
  second time, so that a factory's side effects happen once.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain
from typing import TypeVar

import torch
from torch import nn

from vitprof.core.collector import collector_paused
from vitprof.core.errors import UserError, one_line
from vitprof.core.records import op_calls
from vitprof.core.validate import check_int
from vitprof.core.vocab import Device
from vitprof.count.liveness import Liveness
from vitprof.count.state import untouched

MEMORY_LIMIT_ENV = "VITPROF_MEMORY_LIMIT"
ZERO_ELEMENT_WARNING = "Initializing zero-element tensors is a no-op"  # a Linear(D, 0) head

# (exception type, pattern of its message): the failures the meta device itself causes.
META_FAILURES: tuple[tuple[type[BaseException], str], ...] = (
    # no meta kernel ("attempted to run this operator with Meta tensors", "register_meta"),
    # reading data ("Cannot copy out of meta tensor; no data!" from .tolist() or .cpu())
    (NotImplementedError, r"meta"),
    # .item(), bool(), int() of a meta tensor; repeat_interleave without output_size
    (RuntimeError, r"on meta tensors|a meta tensor"),
    (RuntimeError, r"data pointer"),  # "Cannot access data pointer of Tensor ... storage"
    (RuntimeError, r"data.dependent|dynamic output shape"),
    (TypeError, r"meta device type tensor"),  # .numpy()
    # a library that checks devices itself ("FlexAttention is only supported on CUDA, CPU, HPU,
    # or MPS devices. Found input tensors on meta device.")
    (ValueError, r"on meta device"),
)
# failures raised on meta that any device raises, whatever frame they come from: a tensor whose
# size in bytes overflows int64 ("Storage size calculation overflowed with sizes=[12, N, N]":
# the attention scores of a huge image), which no CPU run can make either
ANY_DEVICE_FAILURES: tuple[tuple[type[BaseException], str], ...] = (
    (RuntimeError, r"size calculation overflowed"),
)
TORCH_DIR = os.path.dirname(torch.__file__)
DEVICE_ARGUMENTS = ("device_type", "device")  # the locals a torch function names its device by


def meta_caused(error: BaseException) -> bool:
    """True when ``error`` (or an exception it was raised from) is one the meta device causes.

    The rules are :data:`META_FAILURES`: an exception type and a pattern its message must match
    (case-insensitive); and a failure raised by a torch function called for the meta device
    itself (:func:`raised_for_meta`), whatever its message, unless it is one of
    :data:`ANY_DEVICE_FAILURES`. Everything else is an error the model would raise on any
    device.
    """
    seen: BaseException | None = error
    while seen is not None:
        text = str(seen)
        if any(isinstance(seen, kind) and re.search(pattern, text, re.IGNORECASE)
               for kind, pattern in ANY_DEVICE_FAILURES):
            return False
        if raised_for_meta(seen) or any(
                isinstance(seen, kind) and re.search(pattern, text, re.IGNORECASE)
                for kind, pattern in META_FAILURES):
            return True
        seen = seen.__cause__
    return False


def raised_for_meta(error: BaseException) -> bool:
    """The innermost Python frame ``error`` was raised through is torch's own and was called
    for the meta device: one of its :data:`DEVICE_ARGUMENTS` names ``meta``.
    ``torch.autocast("meta", enabled=False)`` (x-transformers' rotary disables autocast on its
    input's device type) raises "unsupported scalarType", which names no device."""
    trace = error.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    if trace is None or not trace.tb_frame.f_code.co_filename.startswith(TORCH_DIR):
        return False
    local = trace.tb_frame.f_locals
    return any(_names_meta(local.get(name)) for name in DEVICE_ARGUMENTS)


def _names_meta(device: object) -> bool:
    """``device`` is the meta device, as a string or a ``torch.device``."""
    return device == Device.META or (isinstance(device, torch.device)
                                    and device.type == Device.META)


def unsupported_warning(unsupported: dict[str, int]) -> tuple[str, ...]:
    """The warning, if any, for ops that ran without a formula (``{op name: calls}``)."""
    if not unsupported:
        return ()
    return (f"ops without a formula, not counted: {op_calls(unsupported)}",)


def run_failed(name: str, shape: tuple[int, ...], device: str, error: BaseException) -> UserError:
    """The one-line error for a model whose forward failed on ``shape``."""
    shown = "x".join(str(n) for n in shape)
    return UserError(f"running {name} failed: {one_line(error)} (input of shape {shown}, on "
                     f"{device})")


@dataclass(frozen=True)
class Footprint:
    """What a real run of a counted forward holds besides its weights, for the memory guard:
    ``activations`` bytes, and what they count (``counted``, stated in the guard's line)."""

    activations: int
    counted: str


def traced(live: Liveness, train: bool) -> Footprint:
    """The footprint of a run that finished: the peak of the tensors alive at once
    (:mod:`vitprof.count.liveness`: the inputs, and every tensor an operation created until its
    last reference went; in a training step what autograd saved for the backward, and the
    gradients the backward returned; in a forward with grad enabled, what autograd saves for a
    backward). Called after the run, in the caller's grad mode."""
    if train:
        passes = "forward and backward"
    elif torch.is_grad_enabled():
        passes = "forward, grad enabled (autograd keeps what a backward needs)"
    else:
        passes = "forward"
    return Footprint(live.peak, f"the peak of tensors alive at once in the {passes}")


def untraced(model: nn.Module, live: Liveness, ops: int, train: bool) -> Footprint:
    """The footprint of a run that stopped after ``ops`` counted operations (the meta device
    could not go on): its peak so far is only a lower bound, so it is not trusted alone.

    The rule: the larger of that peak and the inputs' bytes times (1 + the number of leaf
    modules of ``model``), as if the inputs and one output of the inputs' size per leaf module
    were all alive at once (a training step keeps about one per layer for its backward; a
    forward frees most of them early, so there the rule is generous); for a training step, plus
    the gradients (the bytes of the parameters that require one). It is a rough bound from the
    shapes, not a measurement, and the counted text says so.
    """
    leaves = sum(1 for m in model.modules() if next(m.children(), None) is None)
    bound = live.inputs * (1 + leaves)
    rule = f"inputs {live.inputs:,} x (1 + {leaves:,} leaf modules)"
    if live.peak > bound:
        rule = f"the {live.peak:,} alive by then, more than {rule}"
    counted = f"no full trace, the meta run stopped after {ops:,} counted ops: {rule}"
    activations = max(bound, live.peak)
    if train:
        gradients = sum(p.numel() * p.element_size() for p in model.parameters()
                        if p.requires_grad)
        activations += gradients
        counted += f", + gradients {gradients:,}"
    return Footprint(activations, counted)


class CountFailed(Exception):
    """A counting pass failed with ``error``; ``footprint`` is what the memory guard can know
    of its memory (:func:`untraced`)."""

    def __init__(self, error: Exception, footprint: Footprint) -> None:
        super().__init__(str(error))
        self.error = error
        self.footprint = footprint


@dataclass(frozen=True)
class MetaFailure:
    """A counting pass that failed on meta for a reason of the meta device: ``reason`` (one
    line) and the footprint the memory guard goes by (:func:`untraced`)."""

    reason: str
    footprint: Footprint

    def note(self, device: str) -> str:
        """What a result counted again on ``device`` says of it."""
        return f"meta device failed ({self.reason}); counted on {device} with real tensors"


T = TypeVar("T")


def first_on_meta(name: str, shape: tuple[int, ...], attempt: Callable[[], T]) -> T | MetaFailure:
    """``attempt()`` (a counting pass on meta), or the :class:`MetaFailure` to fall back from.

    A :class:`CountFailed` the meta device caused (:func:`meta_caused`) becomes a MetaFailure:
    the caller counts again with real tensors and records ``note()`` on its result. Any other
    failure is the UserError of :func:`run_failed` for ``name`` on ``shape``. The cyclic
    collector waits meanwhile (:func:`vitprof.core.collector.collector_paused`): nothing a count
    on meta holds is big, and it makes no cycles.
    """
    try:
        with collector_paused():
            return attempt()
    except CountFailed as failed:
        if not meta_caused(failed.error):
            raise run_failed(name, shape, "meta", failed.error) from None
        return MetaFailure(one_line(failed.error), failed.footprint)


def weight_bytes(module: nn.Module) -> int:
    """Bytes of every parameter and buffer, ``numel x element size`` (known on meta)."""
    return sum(t.numel() * t.element_size() for t in chain(module.parameters(), module.buffers()))


def available_bytes(device: str) -> int | None:
    """Memory a run may use: ``VITPROF_MEMORY_LIMIT`` when set; else a CUDA device's free
    memory, or the host's available memory (psutil, else ``MemAvailable`` of /proc/meminfo);
    None where none of these can be read."""
    limit = os.environ.get(MEMORY_LIMIT_ENV)
    if limit is not None:
        try:
            return check_int(MEMORY_LIMIT_ENV, int(limit), 0)
        except ValueError:
            message = f"{MEMORY_LIMIT_ENV} must be a number of bytes, got '{limit}'"
            raise UserError(message) from None
    if device == Device.CUDA:
        return int(torch.cuda.mem_get_info()[0])
    try:
        import psutil
    except ImportError:
        return _meminfo_available()
    return int(psutil.virtual_memory().available)


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _size(n: int) -> str:
    return f"{n:,} bytes ({n / 2**30:,.1f} GiB)"


def ensure_fits(name: str, device: str, weights: int, footprint: Footprint) -> None:
    """Refuse a real run of ``name`` on ``device`` that would not fit, before allocating.

    ``weights`` are the bytes still to allocate for parameters and buffers; ``footprint`` the
    counting pass's estimate of the rest (:func:`traced`, :func:`untraced`), whose ``counted``
    the refusal states.
    """
    available = available_bytes(device)
    needed = weights + footprint.activations
    if available is not None and needed > available:
        source = f" ({MEMORY_LIMIT_ENV})" if MEMORY_LIMIT_ENV in os.environ else ""
        raise UserError(
            f"{name} needs about {_size(needed)} on {device} (weights {weights:,} + activations "
            f"{footprint.activations:,}: {footprint.counted}) but {_size(available)} is "
            f"available{source}"
        )


def on_meta(module: nn.Module) -> bool:
    """True for a module whose parameters and buffers (at least one) all live on meta."""
    tensors = [*module.parameters(), *module.buffers()]
    return bool(tensors) and all(t.device.type == Device.META for t in tensors)


def on_device(name: str, module: nn.Module, device: str, footprint: Footprint) -> nn.Module:
    """``module`` ready to run on ``device`` after :func:`ensure_fits`: a meta build is
    materialised there (its weights counted), a module with weights is used as it is."""
    if not on_meta(module):
        ensure_fits(name, device, 0, footprint)
        return module
    ensure_fits(name, device, weight_bytes(module), footprint)
    return materialize(module, device)


def materialize(module: nn.Module, device: str) -> nn.Module:
    """Give a module built on meta real storage on ``device``, in place, without its factory.

    ``to_empty``, then zeros in every parameter and buffer, and in every meta tensor a submodule
    keeps as a plain attribute (neither parameter nor buffer: a rotary table made in an
    ``__init__``, ``self.freqs = ...``, which ``to_empty`` leaves on meta), then each
    submodule's ``reset_parameters`` (``_reset_parameters`` for ``nn.MultiheadAttention``). The
    values are not the factory's: counts and times depend on shapes only, and zeros keep
    buffers computed in an ``__init__`` (index tables) valid and nothing NaN. The random
    initialisation leaves the global random number generators as they were
    (:func:`vitprof.count.state.untouched`).
    """
    module.to_empty(device=device)
    for child in module.modules():
        attributes = vars(child)
        for name in [n for n, v in attributes.items() if isinstance(v, torch.Tensor) and v.is_meta]:
            attributes[name] = torch.zeros_like(attributes[name], device=device)
    with torch.no_grad():
        for tensor in chain(module.parameters(), module.buffers()):
            tensor.zero_()
    with warnings.catch_warnings(), untouched():
        warnings.filterwarnings("ignore", message=ZERO_ELEMENT_WARNING)
        for child in module.modules():
            reset = getattr(child, "reset_parameters", None) or getattr(
                child, "_reset_parameters", None
            )
            if callable(reset):
                reset()
    return module
