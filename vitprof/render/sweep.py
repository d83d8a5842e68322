"""A sweep as a document: the model, the axis and the input, one row per swept value, the
attention-core / MLP crossover of an image-size sweep, and the JSON. The rows and the crossover
sentence (:func:`sweep_cells`, :func:`crossover_text`) are also those of the model pages'
"Cost against image size"."""

from __future__ import annotations

from collections.abc import Iterable

from vitprof.core.vocab import SweepAxis
from vitprof.render.document import BLANK, Block, Document, Table, lines
from vitprof.render.tables import CONVENTION, thousands
from vitprof.sweep import AXES, Sweep


def _distinct(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _input_line(result: Sweep) -> str:
    """What the points were fed: ``input: batch 2, float32; 3x224x224, 3x384x384 (one per
    value)``, the sizes in the order of the values (one when every point had the same)."""
    points = sorted(result.points, key=lambda p: p.value)
    batches = _distinct(str(p.input_shape[0]) for p in points)
    dtypes = _distinct(p.input_dtype for p in points)
    sizes = _distinct("x".join(map(str, p.input_shape[1:])) for p in points)
    each = " (one per value)" if len(sizes) > 1 else ""
    return f"input: batch {', '.join(batches)}, {', '.join(dtypes)}; {', '.join(sizes)}{each}"


def sweep_cells(result: Sweep) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of a sweep: the swept value (and patches, for image sizes), params,
    attention-core / MLP / other MACs, total MACs (the three before it add up to it) and the
    attention-core / MLP ratio."""
    image = result.axis == SweepAxis.IMAGE_SIZE
    headers = [AXES[result.axis], *(["patches"] if image else []), "params", "attn_core MACs",
               "MLP MACs", "other MACs", "total MACs", "attn_core / MLP"]
    cells = []
    for p in sorted(result.points, key=lambda p: p.value):
        other = p.totals.macs - p.attn_core.macs - p.mlp.macs
        ratio = f"{p.attn_core.macs / p.mlp.macs:.3f}" if p.mlp.macs else "-"
        patches = thousands(p.patches) if p.patches is not None else "-"  # no patch size known
        counts = (p.totals.params, p.attn_core.macs, p.mlp.macs, other, p.totals.macs)
        cells.append([str(p.value), *([patches] if image else []), *map(thousands, counts),
                      ratio])
    return headers, cells


def crossover_text(result: Sweep) -> str:
    """One sentence on where the attention core overtakes the MLP, or that it does not."""
    crossover = result.crossover()
    largest = max(p.value for p in result.points)
    if crossover is None:
        return (f"The attention core stays below the MLP up to {largest} px, the largest size "
                "swept.")
    return (
        f"The attention core's MACs overtake the MLP's at N* = {float(crossover.tokens):,.1f} "
        f"tokens ({float(crossover.patches):,.1f} patches, an image side of "
        f"{crossover.image_size:.1f} px); {crossover.first_swept} px is the first swept size "
        "past it. The core grows as N^2 and the MLP as N, so their ratio is N / N*."
    )


def sweep_document(result: Sweep) -> Document:
    """The sweep's table; an image-size sweep adds where the attention core overtakes the MLP."""
    head = [f"model: {result.model}, sweeping the {AXES[result.axis]}", _input_line(result),
            f"convention: {CONVENTION}"]
    crossover: list[Block] = ([BLANK, lines([crossover_text(result)], bullets=False)]
                 if result.axis == SweepAxis.IMAGE_SIZE else [])
    blocks = (lines(head), BLANK, Table.of_cells(*sweep_cells(result)), *crossover)
    return Document(blocks, result.to_dict(), "sweep")
