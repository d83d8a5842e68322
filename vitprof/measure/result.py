"""What one profiling run measured, as plain data: :class:`SpeedProfile` (beside the
:class:`~vitprof.count.result.Profile` its times are attributed with), per component
:class:`Row`, and :class:`Memory`. Made by :func:`vitprof.measure.profile.profile_model`;
shown by the renderer (:mod:`vitprof.render.speed`, registered through
:mod:`vitprof.core.display`).

Conventions of every figure:

* times are interquartile means over ``iters`` timed forwards (after ``warmup``), in seconds,
  under ``torch.inference_mode()``; the end-to-end latency is measured without hooks;
* achieved FLOP/s = counted FLOPs (2 x MACs, from the meta count of the same model, dtype and
  batch) / measured time; "% of peak" divides it by the matmul peak of the same dtype;
* intensity = (FLOPs + vector FLOPs) / bytes moved (inputs + outputs of each operation);
* throughput = batch size / end-to-end latency, images per second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vitprof.core.display import Shown
from vitprof.core.records import COMPONENTS, Component, Counts, OpRecord
from vitprof.count.result import Profile
from vitprof.measure.peak import Peak
from vitprof.measure.roofline import bytes_moved, intensity
from vitprof.measure.timing import Timings


@dataclass(frozen=True)
class Memory:
    """Bytes, per dtype or per component; see :mod:`vitprof.measure.memory.by_kind`."""

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


@dataclass(frozen=True, repr=False)
class SpeedProfile(Shown):
    """Everything one ``vitprof profile`` run measured, beside the :class:`Profile` its times
    are attributed with (counted on meta in the run's dtype and batch; ``device`` there says
    where it was counted, ``device`` here where it was timed). Its model, input, records and
    warnings are the profile's; ``notes`` are the run's own."""

    profile: Profile
    device: str
    device_name: str
    dtype: str
    warmup: int
    iters: int
    threads: int
    timings: Timings
    peak: Peak
    memory: Memory
    notes: tuple[str, ...] = ()

    @property
    def model(self) -> str:
        return self.profile.model

    @property
    def recognizer(self) -> str:
        return self.profile.recognizer

    @property
    def family(self) -> str:
        """Deprecated: :attr:`recognizer`, as :attr:`Profile.family`."""
        return self.profile.family

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.profile.input_shape

    @property
    def torch_version(self) -> str:
        return self.profile.torch_version

    @property
    def ops(self) -> tuple[OpRecord, ...]:
        return self.profile.ops

    @property
    def unsupported_ops(self) -> dict[str, int]:
        return self.profile.unsupported_ops

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.profile.warnings

    @property
    def counts(self) -> dict[Component, Counts]:
        """The work per component: the profile's MACs and vector FLOPs (parameters are counted
        here as bytes, :attr:`Memory.params`)."""
        return {c: _work(v) for c, v in self.profile.components.items()}

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
        """(block, seconds, counts) for each transformer block: the profile's work in it."""
        blocks = self.profile.blocks
        return [(b, t, _work(blocks[b].total) if b < len(blocks) else Counts())
                for b, t in self.timings.blocks.items()]

    def to_dict(self) -> dict[str, Any]:
        t = self.timings
        return {
            "model": self.model,
            "recognizer": self.recognizer,
            "family": self.recognizer,  # deprecated: the same as "recognizer"
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




def above_peak_note(rows: list[Row], peak: Peak) -> str | None:
    """A note naming the components that ran above 100% of ``peak``, which can only mean a
    peak below what the device did (measured while the machine was busy, say) or a time
    attributed short; None when every component is at or below it."""
    above = [r for r in rows if r.share_of_peak is not None and r.share_of_peak > 1]
    if not above:
        return None
    shares = ", ".join(f"{r.component} {100 * r.share_of_peak:.0f}%" for r in above
                       if r.share_of_peak is not None)
    return (f"above 100% of peak ({shares}): the peak ({peak.source}, "
            f"{peak.flops_per_s / 1e12:.3g} TFLOP/s) is below what ran, or a time is attributed "
            f"short; a peak measured on a busy machine is low: run again, or give --peak-tflops")


def _work(counts: Counts) -> Counts:
    """``counts`` without its parameters: the MACs and vector FLOPs."""
    return Counts(macs=counts.macs, vector_flops=counts.vector_flops)
