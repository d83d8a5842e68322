"""Lines, a table and JSON of one rank's predicted memory under a data-parallel strategy
(``vitprof memory --strategy``). Renders; never predicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vitprof.core.schema import versioned
from vitprof.core.vocab import CellKind
from vitprof.measure.distributed.estimate import RankMemory
from vitprof.measure.distributed.kinds import KINDS
from vitprof.measure.memory.cuda_model import PART_NAMES, estimate_parts
from vitprof.render.document import Column, Document, Table, lines
from vitprof.render.memory import size_text, with_fit_and_model

KIND_COLUMNS = (Column("kind", "kind", CellKind.TEXT),
                Column("at_peak", "at the peak B", CellKind.COUNT),
                Column("most", "most in the step B", CellKind.COUNT))


def rank_header(estimate: RankMemory) -> list[str]:
    """The model, input, strategy, settings, the per-rank peak (its op and phase), the fit."""
    settings = ", ".join(f"{k} {v}" for k, v in estimate.settings.items())
    out = [
        f"model: {estimate.model}",
        f"input: {estimate.input} (batch {estimate.batch_size} per rank)",
        f"strategy: {estimate.strategy}, world size {estimate.world_size:,}, rank "
        f"{estimate.rank} (the one that holds the most)",
        f"settings: {settings}",
        f"convention: {estimate.convention}",
        f"per-rank peak: {size_text(estimate.peak_bytes)} at op {estimate.peak_index} "
        f"({estimate.peak_op}, {estimate.peak_phase})",
    ]
    if estimate.sharded_blocks:
        out.append(f"sharded: {blocks_text(estimate.sharded_blocks)}, then the root")
    if estimate.largest_batch is not None and estimate.fit_bytes is not None:
        out.append(f"fit: the largest per-rank batch whose peak is at most "
                   f"{size_text(estimate.fit_bytes)} is {estimate.largest_batch}")
    out += [f"{PART_NAMES[part]}: {words}"
            for part, words in estimate_parts(estimate.settings).items()]
    return out


def blocks_text(paths: Sequence[str]) -> str:
    """``12 blocks (encoder.layers.0 ... encoder.layers.11)``: how many, the first and the
    last module path (both where there are two or fewer)."""
    shown = " ... ".join((paths[0], paths[-1])) if len(paths) > 2 else ", ".join(paths)
    return f"{len(paths)} block{'s' * (len(paths) != 1)} ({shown})"


def kinds_table(estimate: RankMemory) -> Table:
    """Bytes by kind at the peak, and each kind's largest in the step."""
    rows = tuple({"kind": kind, "at_peak": estimate.peak_live[kind], "most": estimate.most[kind]}
                 for kind in KINDS)
    return Table(KIND_COLUMNS, rows, {"kind": "total", "at_peak": estimate.peak_bytes,
                                      "most": None})


def rank_dict(estimate: RankMemory) -> dict[str, Any]:
    """The JSON form (``vitprof/schemas/distributed_memory.json``); the timeline is left out."""
    data: dict[str, Any] = {
        "model": estimate.model, "input": estimate.input, "batch_size": estimate.batch_size,
        "strategy": estimate.strategy, "world_size": estimate.world_size,
        "settings": dict(estimate.settings), "convention": estimate.convention,
        "peak_bytes": estimate.peak_bytes, "peak_phase": estimate.peak_phase,
        "peak_op": estimate.peak_op, "peak_index": estimate.peak_index,
        "peak_live": dict(estimate.peak_live), "most": dict(estimate.most),
        "ops": len(estimate.timeline), "warnings": list(estimate.warnings),
        "sharded_blocks": list(estimate.sharded_blocks), "rank": estimate.rank,
    }
    return with_fit_and_model(data, estimate)


def rank_document(estimate: RankMemory) -> Document:
    """The estimate in every format."""
    return Document((lines(rank_header(estimate), bullets=False), lines([""], bullets=False),
                     kinds_table(estimate)), rank_dict(estimate), "distributed_memory")


WORLD_COLUMNS = (Column("world_size", "world size", CellKind.COUNT),
                 Column("peak_bytes", "per-rank peak B", CellKind.COUNT),
                 Column("peak_phase", "phase", CellKind.TEXT),
                 *(Column(kind, f"{kind} B", CellKind.COUNT) for kind in KINDS))
FIT_COLUMN = Column("largest_batch", "largest batch", CellKind.COUNT)


def world_sizes_document(found: Sequence[RankMemory]) -> Document:
    """The per-rank peak at each world size, and its kinds at the peak (with ``--fit``, the
    largest per-rank batch at each)."""
    head = found[0]
    fitted = head.fit_bytes is not None
    rows = tuple({"world_size": e.world_size, "peak_bytes": e.peak_bytes,
                  "peak_phase": e.peak_phase, **e.peak_live,
                  **({"largest_batch": e.largest_batch} if fitted else {})} for e in found)
    header = [f"model: {head.model}", f"input: {head.input} (batch {head.batch_size} per rank)",
              f"strategy: {head.strategy}", f"convention: {head.convention}"]
    if head.fit_bytes is not None:
        header.append(f"fit: the largest per-rank batch whose peak is at most "
                      f"{size_text(head.fit_bytes)}, at each world size")
    data = {"model": head.model, "strategy": head.strategy,  # each entry one world size's JSON
            "world_sizes": [versioned(rank_dict(e), "distributed_memory") for e in found]}
    columns = (*WORLD_COLUMNS[:3], *((FIT_COLUMN,) if fitted else ()), *WORLD_COLUMNS[3:])
    return Document((lines(header, bullets=False), lines([""], bullets=False),
                     Table(columns, rows)), data, "distributed_memory_world_sizes")
