"""Adapters that run one peer counter on one model and input and return what it saw.

An adapter returns the peer's own number in the peer's own unit, plus the per-operator or
per-layer detail that :mod:`vitprof.checks.crosscheck.causes` needs to explain it. Adapters explain
nothing and never print: each peer's prints, log records and warnings are captured and dropped,
while what it reports as unsupported is kept in the returned record.

* fvcore ``FlopCountAnalysis`` (one "flop" = one MAC) traces ``model(x)`` with ``torch.jit``;
  it is called the way its documentation calls it: eval mode, grad mode left enabled.
* torchinfo ``summary`` (mult-adds = MACs) hooks every module; it runs eval and ``no_grad``
  itself. Its total is the sum over the leaf layers listed here.
* ``torch.utils.flop_counter.FlopCounterMode`` (FLOPs = 2 x MACs) runs ``model(x)`` in eval mode
  with grad enabled, as in its documentation. Below it, a :class:`KernelLog` notes every kernel
  that ran without a formula.
* ptflops ``get_model_complexity_info`` (MACs) with its ``pytorch`` backend (module hooks and
  patched functions) or its ``aten`` backend (a dispatch mode); calflops ``calculate_flops`` and
  DeepSpeed ``get_model_profile`` (no engine) patch ``torch.nn.functional`` and tensor methods and
  report MACs beside FLOPs. Each runs in eval mode with the grad mode it is given; a
  :class:`KernelLog` notes every kernel that ran (or, for ptflops's ``aten`` backend, every kernel
  it has no formula for) and a :class:`CallLog` every ``@``, ``torch.bmm``, ``F.softmax`` and
  ``F.gelu`` call, with modules.

A peer that cannot be imported raises :class:`PeerUnavailable`.
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
from vitprof.count.session import call, image_inputs

Uncounted = Counter[tuple[str, str]]  # (op as "aten.name", module path) -> calls
# Python-level calls that some peers patch and others do not: name -> (owner, attribute).
LOGGED_CALLS = {
    "Tensor.__matmul__": (torch.Tensor, "__matmul__"),
    "torch.bmm": (torch, "bmm"),
    "F.softmax": (F, "softmax"),
    "F.gelu": (F, "gelu"),
}
INSTALL = "not installed: pip install vitprof[peers]"


class PeerUnavailable(Exception):
    """The peer's package is not installed."""


@dataclass(frozen=True)
class FvcoreRun:
    """What fvcore reported: its total, its per-operator counts and its unsupported ops."""

    total: int
    params: int
    by_operator: dict[str, int]
    unsupported: Uncounted  # at the innermost module that ran them


@dataclass(frozen=True)
class LayerRow:
    """One leaf layer of a torchinfo summary, as torchinfo saw it."""

    path: str
    class_name: str
    output_size: tuple[int, ...]
    params: dict[str, int]  # the layer's own parameter names -> elements


@dataclass(frozen=True)
class TorchinfoRun:
    """torchinfo's totals and the leaf layers whose mult-adds make up its total."""

    total_mult_adds: int
    total_params: int
    layers: tuple[LayerRow, ...]


@dataclass(frozen=True)
class FlopCounterRun:
    """FlopCounterMode's total FLOPs, per-operator FLOPs and the kernels it ran uncounted."""

    device: str
    total_flops: int
    by_operator: dict[str, int]
    uncounted: Uncounted


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


class _TensorOutputs(nn.Module):
    """Returns a model's output as a tuple of tensors, which ``torch.jit`` tracing requires."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(x)
        if hasattr(out, "to_tuple"):
            out = out.to_tuple()
        elif isinstance(out, dict):
            out = tuple(out.values())
        elif isinstance(out, torch.Tensor):
            out = (out,)
        return tuple(t for t in out if isinstance(t, torch.Tensor))


def _strip_wrapper(path: str) -> str:
    return path.removeprefix("model").removeprefix(".")


def run_fvcore(model: nn.Module, example: torch.Tensor, grad: bool = True) -> FvcoreRun:
    """fvcore ``FlopCountAnalysis(model, (x,))`` and ``parameter_count(model)``."""
    with quiet():  # importing fvcore warns that torch.jit.script is deprecated
        try:
            from fvcore.nn import FlopCountAnalysis, parameter_count
        except ImportError:
            raise PeerUnavailable("fvcore is not installed (pip install fvcore)") from None
    wrapper = _TensorOutputs(model)
    with quiet(), evaluating(model), torch.set_grad_enabled(grad):
        analysis = FlopCountAnalysis(wrapper, (example,))
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        analysis.tracer_warnings("none")
        total = int(analysis.total())
        by_operator = {op: int(n) for op, n in analysis.by_operator().items()}
        per_module = {name: analysis.unsupported_ops(name) for name in analysis.by_module()}
    unsupported: Uncounted = Counter()
    children = _direct_children(per_module)
    for name, ops in per_module.items():
        own = ops - sum((per_module[child] for child in children.get(name, ())), Counter())
        for op, calls in own.items():
            unsupported[(op.replace("::", "."), _strip_wrapper(name))] += calls
    return FvcoreRun(total, int(parameter_count(model)[""]), by_operator, unsupported)


def _direct_children(names: Any) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for name in names:
        if name:
            children.setdefault(name.rpartition(".")[0], []).append(name)
    return children


def run_torchinfo(model: nn.Module, example: torch.Tensor) -> TorchinfoRun:
    """torchinfo ``summary(model, input_data=[x])``; its global forward-pass cache is cleared."""
    try:
        import torchinfo
        from torchinfo.torchinfo import clear_cached_forward_pass
    except ImportError:
        raise PeerUnavailable("torchinfo is not installed (pip install torchinfo)") from None
    try:
        with quiet():
            stats = torchinfo.summary(model, input_data=[example], device=example.device, verbose=0)
        layers = tuple(
            LayerRow(
                _layer_path(info), info.class_name, tuple(info.output_size),
                {name: p.numel() for name, p in info.module.named_parameters()},
            )
            for info in stats.summary_list
            if info.is_leaf_layer
        )
        return TorchinfoRun(int(stats.total_mult_adds), int(stats.total_params), layers)
    finally:
        clear_cached_forward_pass()


def _layer_path(info: Any) -> str:
    names = []
    while info.parent_info is not None:
        names.append(info.var_name)
        info = info.parent_info
    return ".".join(reversed(names))


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


def run_flop_counter(model: nn.Module, example: torch.Tensor, grad: bool = True) -> FlopCounterRun:
    """``with FlopCounterMode(display=False): model(x)`` on the device of ``example``."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    log = KernelLog(model, counter.flop_registry)
    with quiet(), evaluating(model), torch.set_grad_enabled(grad), log, counter:
        call(model, image_inputs(example))
    flops = counter.get_flop_counts().get("Global", {})
    by_operator = {op_name(op): int(n) for op, n in flops.items()}
    return FlopCounterRun(
        example.device.type, int(counter.get_total_flops()), by_operator, log.uncounted
    )


Hooked = dict[str, list[tuple[tuple[int, ...], ...]]]
"""Module path -> the input shapes of each call of that module."""


@dataclass(frozen=True)
class PatchRun:
    """What a hook-and-patch counter (ptflops, calflops, DeepSpeed) reported, and what ran.

    ``kernels``: every kernel that ran, or for ptflops's ``aten`` backend every kernel it has no
    formula for; ``calls``: the :data:`LOGGED_CALLS` made; ``hooked``: the modules ptflops's
    ``pytorch`` backend hooks, with the input shapes each call of them saw.
    """

    macs: int
    params: int
    kernels: Uncounted
    calls: Uncounted
    hooked: Hooked


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


def _patch_run(
    model: nn.Module, example: torch.Tensor, grad: bool, count: Any, registry: Any = frozenset(),
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


def run_ptflops(
    model: nn.Module, example: torch.Tensor, backend: str = "pytorch", grad: bool = True
) -> PatchRun:
    """ptflops ``get_model_complexity_info(model, shape, backend=...)`` on ``example``."""
    try:
        from ptflops import get_model_complexity_info
        from ptflops.aten_ops import ATEN_OPS_MAPPING
        from ptflops.pytorch_ops import MODULES_MAPPING
    except ImportError:
        raise PeerUnavailable(f"ptflops {INSTALL}") from None
    hooked: Hooked = {} if backend == "aten" else {
        path: [] for path, module in model.named_modules() if type(module) in MODULES_MAPPING
    }

    def count() -> tuple[Any, Any]:
        return get_model_complexity_info(
            model, tuple(example.shape[1:]), print_per_layer_stat=False, as_strings=False,
            input_constructor=lambda _: example, backend=backend,
        )

    registry = ATEN_OPS_MAPPING if backend == "aten" else frozenset()
    return _patch_run(model, example, grad, count, registry, hooked)


def run_calflops(model: nn.Module, example: torch.Tensor, grad: bool = True) -> PatchRun:
    """calflops ``calculate_flops(model, args=[x])``: its MACs and params."""
    try:
        from calflops import calculate_flops
    except ImportError:
        raise PeerUnavailable(f"calflops {INSTALL}") from None

    def count() -> tuple[Any, Any]:
        _, macs, params = calculate_flops(
            model, args=[example], print_results=False, print_detailed=False,
            output_as_string=False,
        )
        return macs, params

    return _patch_run(model, example, grad, count)


def run_deepspeed(model: nn.Module, example: torch.Tensor, grad: bool = True) -> PatchRun:
    """DeepSpeed ``get_model_profile(model, args=[x])`` without an engine, no warm-up run."""
    try:
        with quiet():  # importing DeepSpeed logs the accelerator it picked
            from deepspeed.profiling.flops_profiler import get_model_profile
    except ImportError:
        raise PeerUnavailable(f"deepspeed {INSTALL}") from None

    def count() -> tuple[Any, Any]:
        _, macs, params = get_model_profile(
            model, args=[example], print_profile=False, warm_up=0, as_string=False,
        )
        return macs, params

    return _patch_run(model, example, grad, count)
