"""A sweep as a document: the model, the axis and the input, one row per swept value (written as
the model pages write it), the attention-core / MLP crossover of an image-size sweep, and the
JSON."""

from __future__ import annotations

from collections.abc import Iterable

from vitprof.checks.sweep import AXES, Sweep
from vitprof.render.document import BLANK, Block, Document, Table, lines
from vitprof.render.pages.markdown import crossover_text, sweep_cells
from vitprof.render.tables import CONVENTION


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


def sweep_document(result: Sweep) -> Document:
    """The sweep's table; an image-size sweep adds where the attention core overtakes the MLP."""
    head = [f"model: {result.model}, sweeping the {AXES[result.axis]}", _input_line(result),
            f"convention: {CONVENTION}"]
    crossover: list[Block] = ([BLANK, lines([crossover_text(result)], bullets=False)]
                 if result.axis == "image_size" else [])
    blocks = (lines(head), BLANK, Table.of_cells(*sweep_cells(result)), *crossover)
    return Document(blocks, result.to_dict(), "sweep")
