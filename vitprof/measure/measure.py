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

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from vitprof.core.choices import RECOGNIZERS, peak_tflops_error
from vitprof.core.errors import UserError
from vitprof.core.progress import progress as progress_bar
from vitprof.core.records import COMPONENTS, REAL_DEVICES, Component, Counts, OpRecord, Recognizer
from vitprof.count.families import Rule, recognize
from vitprof.count.flooring import floor_warnings
from vitprof.count.running import (
    CountFailed,
    MetaFailure,
    check_input,
    first_on_meta,
    on_device,
    run_failed,
    unsupported_warning,
)
from vitprof.count.session import image_inputs
from vitprof.count.state import untouched
from vitprof.measure.memory import (
    activation_bytes,
    param_bytes_by_component,
    param_bytes_by_dtype,
    saved_for_backward,
)
from vitprof.measure.peak import Peak, measure_peak
from vitprof.measure.roofline import bytes_moved, intensity
from vitprof.measure.timing import (
    IntervalPlan,
    Planned,
    Timings,
    clock_for,
    plan_intervals,
    time_forward,
)
from vitprof.workload import DTYPES, ImageSize, Workload, dtype_name, make_workload


@dataclass(frozen=True)
class Memory:
    """Bytes, per dtype or per component; see :mod:`vitprof.measure.memory`."""

    params_by_dtype: dict[str, int]
    params: dict[Component, int]
    activations: dict[Component, int]  # inference: bytes written by the forward's operations
    saved: dict[Component, int] | None  # training: bytes kept for the backward (None: failed)
    peak_device: int | None  # max_memory_allocated over the timed run; None on the CPU


@dataclass(frozen=True)
class Row:
    """One component: counted work, measured time, memory."""

    component: Component
    seconds: float
    counts: Counts
    bytes_moved: int
    param_bytes: int
    activation_bytes: int
    saved_bytes: int | None
    estimated: bool
    peak: Peak

    @property
    def flops(self) -> int:
        return self.counts.flops

    @property
    def vector_flops(self) -> int:
        return self.counts.vector_flops

    @property
    def achieved(self) -> float | None:
        """Counted FLOPs / measured seconds."""
        return self.flops / self.seconds if self.seconds > 0 else None

    @property
    def share_of_peak(self) -> float | None:
        achieved = self.achieved
        return achieved / self.peak.flops_per_s if achieved is not None else None

    @property
    def intensity(self) -> float | None:
        return intensity(self.flops + self.vector_flops, self.bytes_moved)


@dataclass(frozen=True)
class SpeedProfile:
    """Everything one ``vitprof profile`` run measured."""

    model: str
    family: str
    device: str
    device_name: str
    dtype: str
    input_shape: tuple[int, ...]
    warmup: int
    iters: int
    threads: int
    torch_version: str
    timings: Timings
    peak: Peak
    memory: Memory
    ops: tuple[OpRecord, ...] = field(repr=False)
    unsupported_ops: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def counts(self) -> dict[Component, Counts]:
        totals = {c: Counts() for c in COMPONENTS}
        for op in self.ops:
            totals[op.component] += Counts(macs=op.macs, vector_flops=op.vector_flops)
        return totals

    @property
    def throughput(self) -> float:
        """Images per second, end to end without hooks."""
        return self.input_shape[0] / self.timings.latency

    def rows(self) -> list[Row]:
        """One row per component, in the taxonomy's order."""
        counts, moved = self.counts, bytes_moved(self.ops)
        saved = self.memory.saved
        return [
            Row(c, self.timings.components.get(c, 0.0), counts[c], moved[c],
                self.memory.params[c], self.memory.activations[c],
                saved[c] if saved is not None else None, c in self.timings.estimated, self.peak)
            for c in COMPONENTS
        ]

    def block_rows(self) -> list[tuple[int, float, Counts]]:
        """(block, seconds, counts) for each transformer block."""
        per_block: dict[int, Counts] = {}
        for op in self.ops:
            if op.block is not None:
                per_block[op.block] = per_block.get(op.block, Counts()) + Counts(
                    macs=op.macs, vector_flops=op.vector_flops
                )
        return [(b, t, per_block.get(b, Counts())) for b, t in self.timings.blocks.items()]

    def __repr__(self) -> str:
        """Model, input, latency and the component table (not the raw timings)."""
        from vitprof.render.speed import speed_repr

        return speed_repr(self)

    def _repr_markdown_(self) -> str:
        return self._rendered("markdown")

    def _repr_html_(self) -> str:
        return self._rendered("html")

    def _rendered(self, fmt: str) -> str:
        from vitprof.render.formats import render
        from vitprof.render.speed import speed_document

        return render(speed_document(self), fmt)

    def to_dict(self) -> dict[str, Any]:
        t = self.timings
        return {
            "model": self.model,
            "family": self.family,
            "device": self.device,
            "device_name": self.device_name,
            "dtype": self.dtype,
            "input_shape": list(self.input_shape),
            "warmup": self.warmup,
            "iters": self.iters,
            "threads": self.threads,
            "torch_version": self.torch_version,
            "units": {
                "seconds": "interquartile mean over the timed iterations",
                "flops": "2 x MACs counted on meta",
                "achieved_flops_per_s": "flops / seconds",
                "intensity": "(flops + vector_flops) / bytes_moved, bytes = inputs + outputs",
                "bytes": "bytes",
            },
            "latency_s": t.latency,
            "hooked_latency_s": t.hooked_latency,
            "hook_overhead": t.overhead,
            "attributed_s": t.attributed,
            "throughput_images_per_s": self.throughput,
            "latencies_s": list(t.latencies),
            "hooked_latencies_s": list(t.hooked_latencies),
            "peak": {"flops_per_s": self.peak.flops_per_s, "bytes_per_s": self.peak.bytes_per_s,
                     "source": self.peak.source},
            "memory": {
                "params_by_dtype": self.memory.params_by_dtype,
                "peak_device_bytes": self.memory.peak_device,
            },
            "components": {
                str(r.component): {
                    "seconds": r.seconds, **r.counts.as_dict(), "bytes_moved": r.bytes_moved,
                    "achieved_flops_per_s": r.achieved, "share_of_peak": r.share_of_peak,
                    "intensity": r.intensity, "param_bytes": r.param_bytes,
                    "activation_bytes": r.activation_bytes, "saved_for_backward_bytes":
                    r.saved_bytes, "time_estimated": r.estimated,
                }
                for r in self.rows()
            },
            "blocks": [
                {"index": b, "seconds": s, **c.as_dict(),
                 "components": {str(comp): secs for (comp, blk), secs in t.cells.items()
                                if blk == b}}
                for b, s, c in self.block_rows()
            ],
            "unsupported_ops": dict(self.unsupported_ops),
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's model name where Linux says it."""
    if device == "cuda":
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
    model: nn.Module | str, device: str, dtype: torch.dtype, batch_size: int,
    num_classes: int | None, overrides: Sequence[Rule], sizes: dict[str, Any],
) -> Workload:
    """The workload to measure: a name is built on meta in ``dtype`` at ``sizes`` (the input
    keywords of :func:`vitprof.workload.make_workload`; materialised later, after the memory
    guard); a module must already be on ``device`` in ``dtype``."""
    if isinstance(model, nn.Module):
        for p in model.parameters():
            if p.device.type != device or p.dtype != dtype:
                raise UserError(
                    f"the model has {dtype_name(p.dtype)} parameters on {p.device.type}; "
                    f"move it with .to('{device}', torch.{dtype_name(dtype)}) first"
                )
    return make_workload(model, batch_size=batch_size, num_classes=num_classes,
                         overrides=overrides, dtype=dtype, **sizes)


def _check_arguments(
    device: str, dtype: str, batch_size: object, image_size: object, num_classes: object,
    warmup: int, iters: int, threads: int | None, recognizer: str, peak_tflops: float | None,
) -> None:
    if recognizer not in RECOGNIZERS:
        raise UserError(f"unknown recognizer '{recognizer}'; choose from {', '.join(RECOGNIZERS)}")
    if device not in REAL_DEVICES:
        raise UserError(
            f"profile measures on a real device: choose from {', '.join(REAL_DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("no CUDA device: torch.cuda.is_available() is False; use --device cpu")
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype '{dtype}'; choose from {', '.join(DTYPES)}")
    check_input(image_size, batch_size, num_classes)
    if iters < 1 or warmup < 0 or (threads is not None and threads < 1):
        raise UserError("iterations and threads must be at least 1, warmup at least 0")
    if threads is not None and threads > (cores := os.cpu_count() or 1):
        # far more threads than cores ends in libgomp aborting the process, not in an error
        raise UserError(f"threads must be at most {cores}, this machine's CPU count; "
                        f"got {threads}")
    if peak_tflops is not None and (error := peak_tflops_error(peak_tflops)):
        raise UserError(f"peak_tflops: {error}")


def _timed(
    name: str, shape: tuple[int, ...], module: nn.Module, example: torch.Tensor,
    plan: IntervalPlan, warmup: int, iters: int, step: Callable[[], object],
) -> Timings:
    """:func:`~vitprof.measure.timing.time_forward`; a forward that fails on the device (it
    ran on meta) is a UserError naming the input."""
    try:
        return time_forward(module, example, plan, clock_for(example.device.type),
                            warmup=warmup, iters=iters, step=step)
    except UserError:
        raise
    except Exception as error:
        raise run_failed(name, shape, example.device.type, error) from None


def profile_model(
    model: nn.Module | str,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    batch_size: int = 1,
    image_size: ImageSize | None = None,
    num_classes: int | None = None,
    warmup: int = 2,
    iters: int = 10,
    peak_tflops: float | None = None,
    overrides: Sequence[Rule] = (),
    progress: bool = False,
    threads: int | None = None,
    frames: int | None = None,
    in_chans: int | None = None,
    input_shape: Sequence[int] | None = None,
    recognizer: str = Recognizer.AUTO,
) -> SpeedProfile:
    """Measure ``model`` (a name or an ``nn.Module`` already on ``device`` in ``dtype``).

    Counts on meta, then times on ``device``; a module is left as it was, and so are the random
    number generators (:func:`vitprof.count.state.untouched`).
    ``threads`` (at most ``os.cpu_count()``) sets ``torch.set_num_threads`` for the run
    (restored after). ``image_size`` (an int or ``(H, W)``), ``frames``, ``in_chans`` and
    ``input_shape`` are the input's, as in :func:`vitprof.analysis.analyze`; the forward is fed
    the input tensor alone. A model named is built once, on meta, and materialised on ``device``
    after the memory guard (:func:`vitprof.count.running.ensure_fits`: weights + the peak of the
    tensors the meta pass held at once).
    A forward that fails is a UserError naming the input; one that fails on meta only for a
    reason of the meta device is counted on ``device`` instead, and a note says so
    (:func:`vitprof.count.running.first_on_meta`). ``recognizer`` (``"auto"``, ``"graph"``,
    ``"tables"``) picks the breakdown the times are attributed with, as in ``analyze``.
    """
    _check_arguments(device, dtype, batch_size, image_size, num_classes, warmup, iters, threads,
                     recognizer, peak_tflops)
    torch_dtype = DTYPES[dtype]
    sizes = {"image_size": image_size, "frames": frames, "in_chans": in_chans,
             "input_shape": input_shape}
    work = _workload(model, device, torch_dtype, batch_size, num_classes, overrides, sizes)
    name, module, shape = work.name, work.module, work.inputs.shape
    mapping = recognize(module, work.rules)
    planned: Planned | MetaFailure = first_on_meta(name, shape, lambda: plan_intervals(
        module, work.inputs.example("meta"), mapping, recognizer, work.rules))
    module = on_device(name, module, device, planned.footprint)
    notes: tuple[str, ...] = ()
    was_threads = torch.get_num_threads()
    torch.set_num_threads(threads or was_threads)
    bar = progress_bar(total=warmup + iters, desc=f"profiling {name}", unit="iter",
                       enabled=progress)
    try:
        with untouched(module):
            module.eval()
            example = work.inputs.tensor(device, random=True)
            if isinstance(planned, MetaFailure):
                notes += (planned.note(device),)
                planned = plan_intervals(module, image_inputs(example), mapping, recognizer,
                                         work.rules)
            peak = measure_peak(device, torch_dtype, peak_tflops)
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            timings = _timed(name, shape, module, example, planned.plan, warmup, iters,
                             bar.update)
            peak_device = torch.cuda.max_memory_allocated() if device == "cuda" else None
            try:
                saved = saved_for_backward(module, example, planned.mapping)
            except (CountFailed, UserError) as error:
                saved = None
                failure = error.error if isinstance(error, CountFailed) else error
                notes += (f"memory saved for backward not measured: the training-mode forward "
                          f"on meta failed ({type(failure).__name__})",)
            used_threads = torch.get_num_threads()
    except CountFailed as failed:
        raise run_failed(name, shape, device, failed.error) from None
    finally:
        bar.close()
        torch.set_num_threads(was_threads)
    records, unsupported = list(planned.found.ops), planned.run.unsupported
    memory = Memory(param_bytes_by_dtype(module),
                    param_bytes_by_component(module, planned.found.params),
                    activation_bytes(records), saved, peak_device)
    return SpeedProfile(
        model=name, family=planned.found.family, device=device, device_name=device_name(device),
        dtype=dtype, input_shape=shape, warmup=warmup, iters=iters,
        threads=used_threads, torch_version=torch.__version__, timings=timings,
        peak=peak, memory=memory, ops=tuple(records), unsupported_ops=unsupported, notes=notes,
        warnings=floor_warnings(planned.run.floors) + work.warnings + planned.found.warnings
        + unsupported_warning(unsupported),
    )
