"""Tables and JSON for a profiling run and for a training count. Renders; never measures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vitprof.count.running import unsupported_warning
from vitprof.render.document import BLANK, Block, Col, Document, Table, columns, lines
from vitprof.render.tables import CONVENTION, input_text, text_table

if TYPE_CHECKING:
    from vitprof.measure.result import SpeedProfile

TIMING_CONVENTION = (
    "times are interquartile means of the timed iterations (exclusive module times cut at module "
    "boundaries, split by counted work where one module spans components: marked *); "
    "achieved = FLOPs / time; % peak against the FLOP/s of the peak line (given or measured); "
    "intensity = (FLOPs + vector FLOPs) / bytes read and written per operation"
)
_COMPONENT_COLUMNS = columns(
    Col.COMPONENT, Col.SECONDS, Col.TIME_SHARE, Col.GFLOPS, Col.ACHIEVED, Col.PEAK_SHARE,
    Col.INTENSITY, Col.PARAM_BYTES, Col.ACTIVATION_BYTES, Col.SAVED_BYTES,
)
_BLOCK_COLUMNS = columns(Col.BLOCK, Col.SECONDS, Col.TIME_SHARE, Col.GFLOPS, Col.ACHIEVED,
                         Col.PEAK_SHARE)


def _mib(n: int | None) -> str:
    return "" if n is None else f"{n / 2**20:.2f}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def profile_header(result: SpeedProfile) -> list[str]:
    """What was measured, on what, under which conventions, and the end-to-end figures."""
    t, peak, mem = result.timings, result.peak, result.memory
    params = ", ".join(f"{_mib(b)} MiB {d}" for d, b in sorted(mem.params_by_dtype.items()))
    bandwidth = f", copy bandwidth {peak.bytes_per_s / 1e9:.1f} GB/s" if peak.bytes_per_s else ""
    lines = [
        f"model: {result.model} (recognized as {result.recognizer})",
        f"input: {input_text(result.input_shape)}, {result.dtype}; device "
        f"{result.device} ({result.device_name}), {_plural(result.threads, 'thread')}; "
        f"torch {result.torch_version}",
        f"timing: {result.warmup} warm-up + {result.iters} timed iterations",
        f"latency: {_ms(t.latency)} ms end to end ({result.throughput:.1f} images/s); "
        f"with hooks {_ms(t.hooked_latency)} ms, overhead {t.overhead:+.1%}; "
        f"components add up to {_ms(t.attributed)} ms",
        f"peak: {peak.flops_per_s / 1e9:.1f} GFLOP/s{bandwidth} ({peak.source})",
        f"memory: parameters {params}; peak device memory "
        + (f"{_mib(mem.peak_device)} MiB" if mem.peak_device is not None
           else "not reported by the CPU"),
        f"convention: {CONVENTION}",
        f"timing convention: {TIMING_CONVENTION}",
    ]
    lines += [f"note: {note}" for note in result.notes]
    if not result.block_rows():
        lines.append("blocks: no transformer blocks recognized, so no per-block table")
    lines += unsupported_warning(result.unsupported_ops)
    return lines


def _fraction(part: float | None, whole: float) -> float | None:
    return None if part is None or not whole else part / whole


def component_table(result: SpeedProfile) -> Table:
    """Per component: time, counted GFLOPs, achieved rate, intensity and memory; the total."""
    latency, peak = result.timings.attributed, result.peak.flops_per_s
    rows = tuple({
        "component": str(r.component) + (" *" if r.estimated else ""), "seconds": r.seconds,
        "time_share": _fraction(r.seconds, latency), "gflops": r.flops,
        "achieved": r.achieved, "peak_share": r.share_of_peak, "intensity": r.intensity,
        "param_bytes": r.param_bytes, "activation_bytes": r.activation_bytes,
        "saved_bytes": r.saved_bytes,
    } for r in result.rows())
    total_flops = sum(r.flops for r in result.rows())
    saved = result.memory.saved
    total = {
        "component": "total", "seconds": latency, "time_share": 1.0 if latency else None,
        "gflops": total_flops, "achieved": _fraction(total_flops, latency),
        "peak_share": _fraction(_fraction(total_flops, latency), peak),
        "param_bytes": sum(r.param_bytes for r in result.rows()),
        "activation_bytes": sum(r.activation_bytes for r in result.rows()),
        "saved_bytes": None if saved is None else sum(saved.values()),
    }
    return Table(_COMPONENT_COLUMNS, rows, total)


def block_table(result: SpeedProfile) -> Table:
    """Per transformer block: time, counted GFLOPs and achieved rate."""
    latency, peak = result.timings.attributed, result.peak.flops_per_s
    rows: list[dict[str, Any]] = []
    for block, seconds, counts in result.block_rows():
        achieved = counts.flops / seconds if seconds > 0 else None
        rows.append({"block": block, "seconds": seconds,
                     "time_share": _fraction(seconds, latency), "gflops": counts.flops,
                     "achieved": achieved, "peak_share": _fraction(achieved, peak)})
    return Table(_BLOCK_COLUMNS, tuple(rows))


def speed_document(result: SpeedProfile) -> Document:
    """A profiling run: the header, the component table and, when the model has transformer
    blocks, the block table (a CNN has none; its header says so); the JSON."""
    blocks = block_table(result)
    tables: list[Block] = [component_table(result)]
    if blocks.rows:
        tables += [BLANK, blocks]
    return Document((lines(profile_header(result)), BLANK, *tables), result.to_dict(), "speed")


def speed_repr(result: SpeedProfile) -> str:
    """A short text: model, input, latency and the component table (``repr(result)``)."""
    table = component_table(result)
    return "\n".join([*profile_header(result)[:4], "", text_table(table.headers, table.cells())])
