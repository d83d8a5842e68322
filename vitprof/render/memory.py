"""Tables, markdown and JSON of a training step's predicted memory (``vitprof memory``).
Renders; never predicts.

The table (and html) form is the header lines and the tables below; the markdown form is
:func:`vitprof.render.memory_report.memory_section` (the report's section, with the timeline
figure when one is written); the JSON form is :func:`memory_dict`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from vitprof.core.vocab import CellKind
from vitprof.measure.memory.cuda_model import PART_NAMES, estimate_parts
from vitprof.measure.memory.estimate import ComponentMemory, MemoryEstimate
from vitprof.render.document import (
    Col,
    Column,
    Document,
    Lines,
    Table,
    columns,
    lines,
    only,
)

MEMORY_COLUMNS = (Column("params", "params B", CellKind.COUNT),
                  Column("grads", "grads B", CellKind.COUNT),
                  Column("optimizer_state", "optimizer B", CellKind.COUNT),
                  Column("activations", "saved B", CellKind.COUNT))


def size_text(n: int) -> str:
    """``n`` bytes, exact, and in GiB to three decimals."""
    return f"{n:,} bytes ({n / 2**30:,.3f} GiB)"


def memory_header(estimate: MemoryEstimate) -> list[str]:
    """The model, input, settings, peak (its moment and component), and the fit."""
    settings = ", ".join(f"{k} {v}" for k, v in estimate.settings.items())
    peak = estimate.timeline[estimate.peak_index]
    out = [
        f"model: {estimate.model}",
        f"input: {estimate.input} (batch {estimate.batch_size})",
        f"settings: {settings}",
        f"convention: {estimate.convention}",
        f"peak: {size_text(estimate.peak_bytes)} at op {estimate.peak_index} ({peak.op}, "
        f"{estimate.peak_phase}, {estimate.peak_component})",
        f"saved for backward: {size_text(estimate.saved_bytes)}",
    ]
    if estimate.largest_batch is not None and estimate.fit_bytes is not None:
        out.append("fit: the largest batch whose peak is at most "
                   f"{size_text(estimate.fit_bytes)} is "
                   f"{estimate.largest_batch}")
    parts = estimate_parts(estimate.settings)
    out += [f"{PART_NAMES[part]}: {words}" for part, words in parts.items()]
    return out


def _rows(key: str, table: dict[Any, ComponentMemory]) -> tuple[dict[str, Any], ...]:
    return tuple({key: str(name), **asdict(values)} for name, values in table.items())


def memory_tables(estimate: MemoryEstimate) -> list[Table]:
    """Per component, then per block (when the model has blocks)."""
    cols = (*columns(Col.COMPONENT), *MEMORY_COLUMNS)
    rows = _rows("component", dict(estimate.by_component))
    found = [Table(cols, rows, {"component": "total", **asdict(estimate.total)})]
    if estimate.by_block:
        block_cols = (*columns(Col.BLOCK), *MEMORY_COLUMNS)
        found.append(Table(block_cols, _rows("block", dict(estimate.by_block)), title="blocks"))
    return found


def memory_dict(estimate: MemoryEstimate) -> dict[str, Any]:
    """The JSON form (``vitprof/schemas/memory.json``): the timeline is left out (thousands
    of ops); the peak's moment stays."""
    data: dict[str, Any] = {
        "model": estimate.model, "input": estimate.input, "batch_size": estimate.batch_size,
        "settings": dict(estimate.settings), "convention": estimate.convention,
        "peak_bytes": estimate.peak_bytes, "peak_phase": estimate.peak_phase,
        "peak_index": estimate.peak_index, "peak_component": estimate.peak_component,
        "peak_live": dict(estimate.timeline[estimate.peak_index].live),
        "saved_bytes": estimate.saved_bytes,
        "components": {k: asdict(v) for k, v in estimate.by_component.items()},
        "blocks": {str(k): asdict(v) for k, v in estimate.by_block.items()},
        "total": asdict(estimate.total), "ops": len(estimate.timeline),
        "warnings": list(estimate.warnings),
    }
    return with_fit_and_model(data, estimate)


def with_fit_and_model(data: dict[str, Any], estimate: Any) -> dict[str, Any]:
    """``data`` with the largest batch that fits and its memory size (when ``--fit`` asked for
    them) and the parts of the estimate modelled, not measured (when its settings have any):
    the keys the one-process and the per-rank documents share."""
    if estimate.largest_batch is not None:
        data["largest_batch"] = estimate.largest_batch
        data["fit_bytes"] = estimate.fit_bytes
    if parts := estimate_parts(estimate.settings):
        data["modelled_not_measured"] = parts
    return data


TEXT_FORMATS = ("table", "html")


def memory_document(estimate: MemoryEstimate, figure: str | None = None) -> Document:
    """The estimate in every format; ``figure``: the timeline figure's path as the markdown
    links it (None: no figure)."""
    from vitprof.render.memory_report import memory_section

    blank = lines([""], bullets=False, only=TEXT_FORMATS)
    blocks: list[Lines | Table] = [lines(memory_header(estimate), only=TEXT_FORMATS)]
    for table in memory_tables(estimate):
        blocks += [blank, only(table, *TEXT_FORMATS)]
    section = memory_section(estimate, figure=figure)
    blocks.append(lines(section.splitlines(), bullets=False, only=("markdown",)))
    return Document(tuple(blocks), memory_dict(estimate), "memory")
