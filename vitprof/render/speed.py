"""Tables and JSON for a profiling run and for a training count. Renders; never measures."""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING

from vitprof.count.result import Profile
from vitprof.count.training import PhaseCounts, phase_components, phase_totals
from vitprof.render.schema import versioned
from vitprof.render.tables import (
    CONVENTION,
    giga,
    html_table,
    input_text,
    markdown_table,
    render,
    text_table,
)

if TYPE_CHECKING:  # the analyze command renders a training count without the measuring code
    from vitprof.measure.measure import SpeedProfile

TIMING_CONVENTION = (
    "times are interquartile means of the timed iterations (exclusive module times cut at module "
    "boundaries, split by counted work where one module spans components: marked *); "
    "achieved = FLOPs / time; % peak against the FLOP/s of the peak line (given or measured); "
    "intensity = (FLOPs + vector FLOPs) / bytes read and written per operation"
)


def _mib(n: int | None) -> str:
    return "" if n is None else f"{n / 2**20:.2f}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value / 1e9:.2f}"


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def profile_header(result: SpeedProfile) -> list[str]:
    """What was measured, on what, under which conventions, and the end-to-end figures."""
    t, peak, mem = result.timings, result.peak, result.memory
    params = ", ".join(f"{_mib(b)} MiB {d}" for d, b in sorted(mem.params_by_dtype.items()))
    bandwidth = f", copy bandwidth {peak.bytes_per_s / 1e9:.1f} GB/s" if peak.bytes_per_s else ""
    lines = [
        f"model: {result.model} (recognized as {result.family})",
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
    if result.unsupported_ops:
        listed = ", ".join(f"{op} x{n}" for op, n in sorted(result.unsupported_ops.items()))
        lines.append(f"ops without a formula, not counted: {listed}")
    return lines


def component_table(result: SpeedProfile) -> tuple[list[str], list[list[str]]]:
    headers = ["component", "time ms", "% time", "GFLOPs", "GFLOP/s", "% peak", "FLOP/B",
               "params MiB", "activ. MiB", "saved MiB"]
    latency = result.timings.attributed
    rows = []
    for r in result.rows():
        rows.append([
            str(r.component) + (" *" if r.estimated else ""), _ms(r.seconds),
            _pct(r.seconds / latency if latency else None), giga(r.flops),
            _rate(r.achieved), _pct(r.share_of_peak), _ratio(r.intensity), _mib(r.param_bytes),
            _mib(r.activation_bytes), _mib(r.saved_bytes),
        ])
    total_flops = sum(r.flops for r in result.rows())
    rows.append([
        "total", _ms(latency), _pct(1.0 if latency else None), giga(total_flops),
        _rate(total_flops / latency if latency else None),
        _pct(total_flops / latency / result.peak.flops_per_s if latency else None), "",
        _mib(sum(r.param_bytes for r in result.rows())),
        _mib(sum(r.activation_bytes for r in result.rows())),
        _mib(None if result.memory.saved is None else sum(result.memory.saved.values())),
    ])
    return headers, rows


def block_table(result: SpeedProfile) -> tuple[list[str], list[list[str]]]:
    headers = ["block", "time ms", "% time", "GFLOPs", "GFLOP/s", "% peak"]
    latency = result.timings.attributed
    rows = []
    for block, seconds, counts in result.block_rows():
        achieved = counts.flops / seconds if seconds > 0 else None
        rows.append([
            str(block), _ms(seconds), _pct(seconds / latency if latency else None),
            giga(counts.flops), _rate(achieved),
            _pct(achieved / result.peak.flops_per_s if achieved is not None else None),
        ])
    return headers, rows


def _tables(result: SpeedProfile) -> list[tuple[list[str], list[list[str]]]]:
    """The component table, and the block table when the model has transformer blocks."""
    blocks = block_table(result)
    return [component_table(result), *([blocks] if blocks[1] else [])]


def render_profile(result: SpeedProfile, fmt: str = "table") -> str:
    """A profiling run as a text table, a markdown report or JSON.

    A model without transformer blocks (a CNN) has no block table; its header says so.
    """
    if fmt == "json":
        return json.dumps(versioned(result.to_dict(), "speed"), indent=2)
    tables = _tables(result)
    if fmt == "markdown":
        head = "\n".join(f"- {line}" for line in profile_header(result))
        body = "\n\n".join(markdown_table(h, r) for h, r in tables)
        return f"{head}\n\n{body}\n"
    body = "\n\n".join(text_table(h, r) for h, r in tables)
    return "\n".join(profile_header(result)) + "\n\n" + body + "\n"


def speed_repr(result: SpeedProfile) -> str:
    """A short text: model, input, latency and the component table (``repr(result)``)."""
    return "\n".join([*profile_header(result)[:4], "", text_table(*component_table(result))])


def speed_html(result: SpeedProfile) -> str:
    """The header lines and the tables as HTML (a notebook's display)."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in profile_header(result))
    return f"<ul>{items}</ul>\n" + "\n".join(html_table(h, r) for h, r in _tables(result))


# ------------------------------------------------------------------------------ training


def training_table(profile: Profile) -> tuple[list[str], list[list[str]]]:
    """Forward, backward and backward / forward per component, and the total."""
    headers = ["component", "forward MACs", "backward MACs", "bwd/fwd MACs",
               "forward vector FLOPs", "backward vector FLOPs", "bwd/fwd vector"]

    def row(name: str, counts: PhaseCounts) -> list[str]:
        return [name, f"{counts.forward.macs:,}", f"{counts.backward.macs:,}",
                _ratio(counts.macs_ratio), f"{counts.forward.vector_flops:,}",
                f"{counts.backward.vector_flops:,}", _ratio(counts.vector_ratio)]

    rows = [row(str(c), counts) for c, counts in phase_components(profile.ops).items()]
    rows.append(row("total", phase_totals(profile.ops)))
    return headers, rows


def _training_dict(profile: Profile) -> dict[str, object]:
    def entry(counts: PhaseCounts) -> dict[str, object]:
        return {"forward": counts.forward.as_dict(), "backward": counts.backward.as_dict(),
                "macs_ratio": counts.macs_ratio, "vector_flops_ratio": counts.vector_ratio}

    return {
        "convention": "a training step: forward in train mode, then the gradient of the "
                      "output (a ones gradient, no loss) to every trainable parameter",
        "total": entry(phase_totals(profile.ops)),
        "components": {str(c): entry(v) for c, v in phase_components(profile.ops).items()},
    }


def render_training(profile: Profile, by: str = "component", fmt: str = "table") -> str:
    """``render`` of a train-mode profile (forward + backward summed) plus the phase split.

    JSON adds a ``training`` object, tables and markdown a second table; CSV is the view alone
    (one table per file), its counts forward + backward, like the first table.
    """
    base = render(profile, by=by, fmt=fmt)
    if fmt == "json":
        data = json.loads(base)
        data["training"] = _training_dict(profile)
        return json.dumps(data, indent=2)
    if fmt == "csv":
        return base
    headers, rows = training_table(profile)
    note = "mode: train (counts above are forward + backward; the split follows)"
    if fmt == "markdown":
        return f"{base}\n- {note}\n\n{markdown_table(headers, rows)}\n"
    return f"{base}\n{note}\n\n{text_table(headers, rows)}\n"
