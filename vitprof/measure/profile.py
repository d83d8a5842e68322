"""One profiling run: build, count on meta, measure on the device, assemble a SpeedProfile.

Conventions of every figure:

* times are interquartile means over ``iters`` timed forwards (after ``warmup``), in seconds,
  under ``torch.inference_mode()``; the end-to-end latency is measured without hooks;
* achieved FLOP/s = counted FLOPs (2 x MACs, from the meta count of the same model, dtype and
  batch) / measured time; "% of peak" divides it by the matmul peak of the same dtype;
* intensity = (FLOPs + vector FLOPs) / bytes moved (inputs + outputs of each operation);
* throughput = batch size / end-to-end latency, images per second.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from vitprof.analysis import profile_of, workload_of
from vitprof.core.choices import peak_tflops_error
from vitprof.core.errors import UserError
from vitprof.core.overrides import Override
from vitprof.core.progress import progress as progress_bar
from vitprof.core.validate import check_word
from vitprof.core.vocab import REAL_DEVICES, Device, MemoryTarget, Recognizer
from vitprof.count.running import (
    CountFailed,
    MetaFailure,
    first_on_meta,
    on_device,
    run_failed,
)
from vitprof.count.session import Inputs
from vitprof.count.state import in_place_warning, untouched
from vitprof.measure.memory.by_kind import (
    activation_bytes,
    param_bytes_by_component,
    param_bytes_by_dtype,
    saved_for_backward,
)
from vitprof.measure.peak import measure_peak
from vitprof.measure.result import Memory, SpeedProfile, above_peak_note
from vitprof.measure.timing import (
    IntervalPlan,
    Planned,
    Timings,
    clock_for,
    plan_intervals,
    time_forward,
)
from vitprof.workload import (
    InputRequest,
    Workload,
    dtype_name,
    make_workload,
    request_of,
)


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's model name where Linux says it."""
    if device == Device.CUDA:
        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def _workload(
    model: nn.Module | str | Workload, device: str, request: InputRequest | None,
    inputs: dict[str, Any], overrides: Sequence[Override],
) -> Workload:
    """The workload to measure: a workload as it is (nothing else may be given beside it); a
    name built on meta at ``request``, else at the request the deprecated keywords ``inputs``
    make (:func:`vitprof.workload.request_of`), in float32 where it names no dtype
    (materialised later, after the memory guard). A caller's module must already be on
    ``device`` in that dtype."""
    if isinstance(model, Workload):
        work = workload_of(model, request, overrides=overrides, **inputs)
        _check_placed(work.module, device, work.inputs.dtype)
        return work
    request = request_of(request, inputs, "profile_model", depth=2).or_dtype(torch.float32)
    if isinstance(model, nn.Module):
        _check_placed(model, device, request.dtype)
    return make_workload(model, request, overrides=overrides)


def _check_placed(module: nn.Module, device: str, dtype: torch.dtype | None) -> None:
    """A caller's module must be on ``device`` in ``dtype`` already: it is not moved."""
    for p in module.parameters():
        if p.device.type != device or p.dtype != dtype:
            raise UserError(
                f"the model has {dtype_name(p.dtype)} parameters on {p.device.type}; "
                f"move it with .to('{device}', {dtype}) first"
            )


def _check_arguments(
    device: str, warmup: int, iters: int, threads: int | None, recognizer: str,
    peak_tflops: float | None,
) -> None:
    check_word("recognizer", recognizer, Recognizer)
    if device not in REAL_DEVICES:
        raise UserError(
            f"profile measures on a real device: choose from {', '.join(REAL_DEVICES)}")
    if device == Device.CUDA and not torch.cuda.is_available():
        raise UserError("no CUDA device: torch.cuda.is_available() is False; use --device cpu")
    if iters < 1 or warmup < 0 or (threads is not None and threads < 1):
        raise UserError("iterations and threads must be at least 1, warmup at least 0")
    if threads is not None and threads > (cores := os.cpu_count() or 1):
        # far more threads than cores ends in libgomp aborting the process, not in an error
        raise UserError(f"threads must be at most {cores}, this machine's CPU count; "
                        f"got {threads}")
    if peak_tflops is not None and (error := peak_tflops_error(peak_tflops)):
        raise UserError(f"peak_tflops: {error}")


def _timed(
    name: str, shape: tuple[int, ...], module: nn.Module, example: Inputs, device: str,
    plan: IntervalPlan, warmup: int, iters: int, step: Callable[[], object],
) -> Timings:
    """:func:`~vitprof.measure.timing.time_forward` of the whole ``example`` on ``device``; a
    forward that fails there (it ran on meta) is a UserError naming the input."""
    try:
        return time_forward(module, example, plan, clock_for(device), warmup=warmup,
                            iters=iters, step=step)
    except UserError:
        raise
    except Exception as error:
        raise run_failed(name, shape, device, error) from None


def profile_model(
    model: nn.Module | str | Workload,
    request: InputRequest | None = None,
    *,
    device: str = Device.CPU,
    warmup: int = 2,
    iters: int = 10,
    peak_tflops: float | None = None,
    overrides: Sequence[Override] = (),
    progress: bool = False,
    threads: int | None = None,
    recognizer: str = Recognizer.AUTO,
    **inputs: Any,
) -> SpeedProfile:
    """Measure ``model`` (a name, an ``nn.Module`` or a :class:`vitprof.workload.Workload`
    already on ``device`` in its dtype).

    Counts on meta, then times on ``device``; a module is left as it was, and so are the random
    number generators (:func:`vitprof.count.state.untouched`).
    ``threads`` (at most ``os.cpu_count()``) sets ``torch.set_num_threads`` for the run
    (restored after). The input is ``request`` (:class:`vitprof.workload.InputRequest`; None:
    the model's own), measured in float32 where it names no dtype; the input keywords it took
    before (``image_size``, ``batch_size``, ``dtype``, ...: the fields of a request) still make
    one, with a DeprecationWarning. Every forward is fed the workload's whole
    example, ``model(*args, **kwargs)`` (keyword inputs included). A model named is built
    once, on meta, and materialised on ``device`` after the memory guard
    (:func:`vitprof.count.running.ensure_fits`: weights + the peak of the tensors the meta pass
    held at once).
    A forward that fails is a UserError naming the input; one that fails on meta only for a
    reason of the meta device is counted on ``device`` instead, and a note says so
    (:func:`vitprof.count.running.first_on_meta`). ``recognizer`` (``"auto"``, ``"graph"``,
    ``"tables"``) picks the breakdown the times are attributed with, as in ``analyze``.
    """
    _check_arguments(device, warmup, iters, threads, recognizer, peak_tflops)
    work = _workload(model, device, request, inputs, overrides)
    name, module, shape = work.name, work.module, work.inputs.shape
    measured = work.inputs.dtype if work.inputs.dtype.is_floating_point else next(
        (p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)
    planned: Planned | MetaFailure = first_on_meta(name, shape, lambda: plan_intervals(
        module, work.inputs.example("meta"), recognizer, work.rules))
    module = on_device(name, module, device, planned.footprint)
    notes: tuple[str, ...] = ()
    counted_on, fallback = "meta", None
    was_threads = torch.get_num_threads()
    torch.set_num_threads(threads or was_threads)
    bar = progress_bar(total=warmup + iters, desc=f"profiling {name}", unit="iter",
                       enabled=progress)
    changed: list[str] = []  # parameters the timed forwards changed in place, named in a note
    try:
        with untouched(module, changed):
            module.eval()
            example = work.inputs.example(device, random=True)
            if isinstance(planned, MetaFailure):
                counted_on, fallback = device, planned.note(device)
                notes += (fallback,)
                planned = plan_intervals(module, example, recognizer, work.rules)
            peak = measure_peak(device, measured, peak_tflops)
            if device == Device.CUDA:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            timings = _timed(name, shape, module, example, device, planned.plan, warmup, iters,
                             bar.update)
            peak_device = torch.cuda.max_memory_allocated() if device == Device.CUDA else None
            try:
                saved = saved_for_backward(dataclasses.replace(work, module=module),
                                           planned.mapping, MemoryTarget(device))
            except UserError as error:
                saved = None
                notes += (f"memory saved for backward not measured: {error}",)
            used_threads = torch.get_num_threads()
    except CountFailed as failed:
        raise run_failed(name, shape, device, failed.error) from None
    finally:
        bar.close()
        torch.set_num_threads(was_threads)
    if changed:
        notes += (in_place_warning(changed, on_meta=False),)
    memory = Memory(param_bytes_by_dtype(module),
                    param_bytes_by_component(module, planned.found.params),
                    activation_bytes(list(planned.found.ops)), saved, peak_device)
    result = SpeedProfile(
        profile=profile_of(work, planned.run, planned.found, counted_on, fallback=fallback),
        device=device, device_name=device_name(device), dtype=dtype_name(measured),
        warmup=warmup, iters=iters, threads=used_threads, timings=timings, peak=peak,
        memory=memory, notes=notes,
    )
    above = above_peak_note(result.rows(), peak)
    return result if above is None else dataclasses.replace(result, notes=(*notes, above))
