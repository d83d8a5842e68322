"""A cross-check as a document: vitprof's count, one row per peer, and for each peer the causes
that take vitprof's number to the peer's. Renders; never runs a peer.

The table gives each peer's number in its own unit, converted to MACs, the deltas and the
residuals; below it, each peer's explanation (amount, cause) ends in its residual.
"""

from __future__ import annotations

from vitprof.checks.crosscheck.table import CONVENTION, CrossCheck, PeerRow
from vitprof.core.vocab import CellKind
from vitprof.render.document import (
    BLANK,
    Block,
    Col,
    Column,
    Document,
    Table,
    cell,
    columns,
    lines,
)
from vitprof.render.tables import input_text

_COLUMNS = columns(Col.PEER, Col.REPORTED, Col.UNIT, Col.MACS, Col.DELTA_MACS,
                   Col.RESIDUAL_MACS, Col.PARAMS, Col.DELTA_PARAMS, Col.RESIDUAL_PARAMS)
_AMOUNT = Column("amount", "", CellKind.SIGNED)


def _header(check: CrossCheck) -> list[str]:
    v = check.vitprof
    return [
        f"model: {check.model}; input: {input_text(check.input_shape)}, {check.input_dtype}; "
        f"torch {check.torch_version}",
        f"vitprof ({check.device} device): {v.params:,} params, {v.macs:,} MACs; attention: "
        f"{check.attention_implementation}",
        f"convention: {CONVENTION}",
    ]


def _explanation(row: PeerRow) -> list[tuple[str, str]]:
    """(amount, text) lines that take a row from vitprof's count to the peer's."""
    if row.macs is None:
        return [("", row.note)]
    lines_ = [(cell(_AMOUNT, c.macs), c.text) for c in row.causes if c.macs]
    lines_ += [(f"{cell(_AMOUNT, c.params)} params", c.text) for c in row.causes if c.params]
    lines_.append((cell(_AMOUNT, row.residual_macs), "residual MACs"))
    if row.residual_params is not None:
        lines_.append((cell(_AMOUNT, row.residual_params), "residual params"))
    if row.note:
        lines_.append(("", row.note))
    return lines_


def _text_explanation(row: PeerRow) -> list[str]:
    """``peer:`` and its explanation, the amounts right-aligned."""
    explanation = _explanation(row)
    width = max(len(amount) for amount, _ in explanation)
    return [f"{row.peer}:", *(f"  {amount.rjust(width)}  {text}".rstrip()
                              for amount, text in explanation)]


def _markdown_explanation(row: PeerRow) -> list[Block]:
    """``**peer**`` and its explanation as bullets."""
    markdown = ("markdown",)
    return [lines(["", f"**{row.peer}**", ""], bullets=False, only=markdown),
            lines([f"{amount}: {text}" if amount else text for amount, text in _explanation(row)],
                  only=markdown)]


def crosscheck_document(check: CrossCheck) -> Document:
    """The header, the peers' table and each peer's explanation; the JSON."""
    table = Table(_COLUMNS, tuple({c.key: getattr(row, c.key) for c in _COLUMNS}
                                  for row in check.rows))
    text = [lines(["", *(line for row in check.rows for line in _text_explanation(row))],
                  bullets=False, only=("table",))]
    markdown = [block for row in check.rows for block in _markdown_explanation(row)]
    return Document((lines(_header(check)), BLANK, table, *text, *markdown),
                    check.to_dict(), "crosscheck")
