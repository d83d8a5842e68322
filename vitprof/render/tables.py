"""A Profile as a document (its views as tables, JSON), and the table primitives every format
uses. Renders; never counts.

Every view is a list of rows of Python ints (exact at any size, never a fixed-width integer)
whose count columns add up to the profile's totals. Cells are formatted by their column's kind
(:class:`vitprof.core.vocab.CellKind`): text as is, counts with thousands separators, shares
as percentages.

CSV: one row per view row, no total row. When the count fell back from meta to the CPU, the
first line is a comment, ``# fallback: <why>``, before the header (``pandas.read_csv(...,
comment="#")`` skips it); without a fallback the CSV has no comment line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vitprof.core.records import COMPONENTS, Counts, InputRecord
from vitprof.core.vocab import Dtype, Mode, View
from vitprof.count.result import Profile
from vitprof.count.training import PhaseCounts, phase_components, phase_totals
from vitprof.render.document import (
    BLANK,
    COUNT_COLUMNS,
    Col,
    Column,
    Document,
    Lines,
    Table,
    columns,
    giga,
    lines,
    only,
    total_row,
)
from vitprof.render.formats import html_table as html_table
from vitprof.render.formats import markdown_table as markdown_table
from vitprof.render.formats import text_table

CONVENTION = (
    "MACs = multiply-accumulates of matmul/linear/conv/attention products; FLOPs = 2 x MACs; "
    "vector FLOPs = element-wise work (LayerNorm, softmax, GELU, bias and residual adds) at the "
    "per-element costs of vitprof.count.formulas"
)
_KEYS: dict[str, tuple[Col, ...]] = {
    "component": (Col.COMPONENT,),
    "block": (Col.BLOCK, Col.COMPONENT),
    "module": (Col.MODULE, Col.COMPONENT),
    "op": (Col.OP, Col.CALLS),
    # --explain: per module, or per op, the rule that placed the records (placed_by)
    "explain": (Col.MODULE, Col.COMPONENT, Col.BLOCK, Col.PLACED_BY),
    "op_rules": (Col.OP, Col.PLACED_BY, Col.CALLS),
}
_EXPLAINED = {"op": "op_rules"}  # the view `--explain` turns each into (else "explain")


def thousands(value: int) -> str:
    """An integer with thousands separators: ``17,563,828,224``."""
    return f"{value:,}"


def view_columns(by: str) -> tuple[Column, ...]:
    """The columns of one view: its keys, then the counts and the MACs share."""
    if by not in _KEYS:
        raise ValueError(f"unknown view {by}")
    evidence = (Col.EVIDENCE,) if by == "explain" else ()
    return columns(*_KEYS[by], *COUNT_COLUMNS, Col.MACS_SHARE, *evidence)


def explained(by: str) -> str:
    """The view ``analyze --by BY --explain`` shows: the op rows split by rule for ``op``,
    else the modules with their component, block, rule and the warnings naming them."""
    return _EXPLAINED.get(by, "explain")


def view_rows(profile: Profile, by: str) -> list[dict[str, Any]]:
    """Rows of one view whose count columns add up to the profile's totals.

    ``block`` adds an ``outside`` row per component for what no block holds; ``op`` adds a
    ``(parameters)`` row (parameters belong to no op).
    """
    rows = {
        "component": profile.component_rows,
        "block": lambda: [*profile.block_rows(), *_outside_rows(profile)],
        "module": profile.module_rows,
        "op": lambda: [*profile.op_rows(), _param_row(profile.totals.params)],
        "explain": profile.explain_rows,
        "op_rules": lambda: [*profile.op_rule_rows(),
                             {**_param_row(profile.totals.params), "placed_by": ""}],
    }[by]()
    macs = profile.totals.macs
    return [{**row, "macs_share": row["macs"] / macs if macs else 0.0} for row in rows]


def _outside_rows(profile: Profile) -> list[dict[str, Any]]:
    return [{"block": "outside", "component": str(c), **profile.outside[c].as_dict()}
            for c in COMPONENTS if profile.outside[c] != Counts()]


def _param_row(params: int) -> dict[str, Any]:
    return {"op": "(parameters)", "calls": 0, **Counts(params=params).as_dict()}


def view_table(profile: Profile, by: str) -> Table:
    """One view as a table, its total row last."""
    cols, rows = view_columns(by), view_rows(profile, by)
    return Table(cols, tuple(rows), total_row(cols, rows))


def input_text(shape: Sequence[int]) -> str:
    """An input shape ``(batch, channels, *spatial)`` of any rank: ``batch 1, 3x224x224``."""
    return f"batch {shape[0]}, {'x'.join(str(n) for n in shape[1:])}"


def inputs_text(inputs: Sequence[InputRecord]) -> str:
    """The tensors of the forward, ``" (pixel_values 1x3x224x224 bfloat16, ...)"``; nothing for
    the plain case, one float32 tensor."""
    if len(inputs) == 1 and inputs[0].dtype == Dtype.FLOAT32:
        return ""
    return f" ({', '.join(i.describe() for i in inputs)})" if inputs else ""


def header_lines(profile: Profile) -> list[str]:
    """What was counted, on what, under which convention."""
    lines = [
        f"model: {profile.model} (recognized as {profile.recognizer})",
        f"input: {input_text(profile.input_shape)}{inputs_text(profile.inputs)}; "
        f"device {profile.device}; torch {profile.torch_version}",
        *([f"input from: {profile.input_source}"] if profile.input_source else []),
        f"attention: {profile.attention_implementation}",
        f"convention: {CONVENTION}",
    ]
    if profile.fallback:
        lines.append(f"fallback: {profile.fallback}")
    return lines


def summary_line(profile: Profile) -> str:
    """The totals in one line, exact integers (and the MACs in billions)."""
    t = profile.totals
    return (f"total: {t.params:,} params, {t.macs:,} MACs ({giga(t.macs)} GMACs), "
            f"{t.flops:,} FLOPs, {t.vector_flops:,} vector FLOPs")


def profile_document(profile: Profile, by: str = "component", explain: bool = False
                     ) -> Document:
    """The analysis in one view: header lines, the totals (in the text table), the view and the
    JSON (``by_module`` / ``by_op`` rows for those views). ``explain`` shows the view
    :func:`explained` instead, its rows with ``placed_by`` in the JSON (``by_op`` for ``op``,
    else ``by_module``). A train-mode profile adds the split
    into forward and backward (:func:`training_blocks`); CSV is the view alone (one table per
    file), its counts forward + backward. A fallback is the CSV's first line, a comment."""
    data = profile.to_dict()
    if by in (View.MODULE, View.OP) and not explain:
        data[f"by_{by}"] = view_rows(profile, by)
    if explain:
        data["by_op" if by == View.OP else "by_module"] = view_rows(profile, explained(by))
        by = explained(by)
    blocks: list[Lines | Table] = [lines(header_lines(profile)),
                                   lines([summary_line(profile)], only=("table", "html")),
                                   BLANK, view_table(profile, by)]
    if profile.mode == Mode.TRAIN:
        blocks += training_blocks(profile)
    comments = (f"fallback: {profile.fallback}",) if profile.fallback else ()
    return Document(tuple(blocks), data, "profile", comments)


def profile_repr(profile: Profile) -> str:
    """A short text: model, input, totals and the component table (``repr(profile)``)."""
    shape = "x".join(str(n) for n in profile.input_shape)
    head = (f"Profile({profile.model}, {profile.recognizer}, input {shape} on {profile.device}, "
            f"{profile.mode})")
    extra = [f"fallback: {profile.fallback}"] if profile.fallback else []
    extra += [f"warning: {w}" for w in profile.warnings]
    table = view_table(profile, "component")
    return "\n".join([head, summary_line(profile), *extra, "",
                      text_table(table.headers, table.cells())])


# ------------------------------------------------------------------------------ training

TRAINING_NOTE = "mode: train (counts above are forward + backward; the split follows)"
_PHASE_COLUMNS = columns(Col.COMPONENT, Col.FORWARD_MACS, Col.BACKWARD_MACS, Col.MACS_RATIO,
                         Col.FORWARD_VECTOR, Col.BACKWARD_VECTOR, Col.VECTOR_RATIO)


def _phase_row(name: str, counts: PhaseCounts) -> dict[str, Any]:
    return {"component": name, "forward_macs": counts.forward.macs,
            "backward_macs": counts.backward.macs, "macs_ratio": counts.macs_ratio,
            "forward_vector_flops": counts.forward.vector_flops,
            "backward_vector_flops": counts.backward.vector_flops,
            "vector_flops_ratio": counts.vector_ratio}


def training_table(profile: Profile) -> Table:
    """Forward, backward and backward / forward per component, and the total."""
    rows = tuple(_phase_row(str(c), v) for c, v in phase_components(profile.ops).items())
    return Table(_PHASE_COLUMNS, rows, _phase_row("total", phase_totals(profile.ops)))


def training_blocks(profile: Profile) -> list[Lines | Table]:
    """The note and the phase table that follow a train-mode view (not in CSV)."""
    shown = ("table", "markdown", "html")
    return [BLANK, lines([TRAINING_NOTE], only=shown), BLANK,
            only(training_table(profile), *shown)]
