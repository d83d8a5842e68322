"""A sweep as a document: the model and the axis, one row per swept value (written as the model
pages write it), the attention-core / MLP crossover of an image-size sweep, and the JSON."""

from __future__ import annotations

from vitprof.checks.sweep import AXES, Sweep
from vitprof.render.document import BLANK, Block, Document, Table, lines
from vitprof.render.pages.markdown import crossover_text, sweep_cells
from vitprof.render.tables import CONVENTION


def sweep_document(result: Sweep) -> Document:
    """The sweep's table; an image-size sweep adds where the attention core overtakes the MLP."""
    head = [f"model: {result.model}, sweeping the {AXES[result.axis]}", f"convention: {CONVENTION}"]
    crossover: list[Block] = ([BLANK, lines([crossover_text(result)], bullets=False)]
                 if result.axis == "image_size" else [])
    blocks = (lines(head), BLANK, Table.of_cells(*sweep_cells(result)), *crossover)
    return Document(blocks, result.to_dict(), "sweep")
