"""The closed form of a ViT spec as a document: the spec, the totals, one view (per component
or per block) and the JSON. Renders; the counts come from :mod:`vitprof.models.closed_form`."""

from __future__ import annotations

from typing import Any

from vitprof.core.records import Counts
from vitprof.core.vocab import View
from vitprof.models.closed_form import ClosedForm, ViTSpec
from vitprof.models.zoo import size_text
from vitprof.render.document import BLANK, Document, Table, giga, lines
from vitprof.render.tables import CONVENTION, view_columns


def describe(spec: ViTSpec) -> str:
    """One line with the spec's shape."""
    prefix = spec.prefix_tokens
    tokens = (f"patch tokens per block {list(spec.tokens_per_block)}" if spec.tokens_per_block
              else f"{spec.num_patches} patch tokens")
    return (
        f"spec: D={spec.width}, depth {spec.depth}, {spec.heads} heads, MLP {spec.mlp_width}, "
        f"patch {spec.patch_size}, {size_text(spec.image_size)}px x {spec.in_chans}, "
        f"{tokens} + {prefix} prefix, {spec.num_classes} classes, head {spec.head}, "
        f"final norm {spec.final_norm}, {spec.attention} attention ({spec.attention_impl}), "
        f"qkv bias {spec.qkv_bias}"
    )


def _row(keys: dict[str, Any], counts: Counts, total_macs: int) -> dict[str, Any]:
    share = counts.macs / total_macs if total_macs else 0.0
    return {**keys, **counts.as_dict(), "macs_share": share}


def formula_table(form: ClosedForm, by: str) -> Table:
    """One view (``component`` or ``block``: the blocks, then ``outside``), rows zero in every
    count left out of the block view; the total row is the closed form's total."""
    macs = form.totals.macs
    if by == View.COMPONENT:
        rows = [_row({"component": str(c)}, v, macs) for c, v in form.components.items()]
        return Table(view_columns(by), tuple(rows), _row({"component": "total"}, form.totals,
                                                         macs))
    rows = [_row({"block": str(index), "component": str(c)}, v, macs)
            for index, block in enumerate(form.blocks) for c, v in block.items() if v != Counts()]
    rows += [_row({"block": "outside", "component": str(c)}, v, macs)
             for c, v in form.outside.items() if v != Counts()]
    total = _row({"block": "total", "component": ""}, form.totals, macs)
    return Table(view_columns(by), tuple(rows), total)


def formula_document(form: ClosedForm, source: str, by: str) -> Document:
    """The closed form in one view; every format states the convention."""
    spec, t = form.spec, form.totals
    height, width = spec.sides
    head = [
        f"closed form of {source}",
        describe(spec),
        f"input: batch {form.batch_size}, {spec.in_chans}x{height}x{width}",
        *([f"floored: {spec.floor.text()}"] if spec.floor else []),
        f"convention: {CONVENTION}",
    ]
    summary = (f"total: {t.params:,} params ({t.params / 1e6:.2f} M), {t.macs:,} MACs "
               f"({giga(t.macs)} GMACs), {t.flops:,} FLOPs, {t.vector_flops:,} vector FLOPs")
    data = {"source": source, "convention": CONVENTION, **form.to_dict()}
    blocks = (lines(head), lines([summary], only=("table", "html")), BLANK,
              formula_table(form, by))
    return Document(blocks, data, "formula")
