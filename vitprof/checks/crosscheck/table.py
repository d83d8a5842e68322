"""The cross-check result (:class:`CrossCheck`, one :class:`PeerRow` per peer) and its rendering.

Convention: MACs are the primary unit. Each peer's number is shown in its own unit, then
converted to MACs; ``delta = peer MACs - vitprof MACs = sum of the named causes + residual``, and
the same for params where the peer reports params. A peer that could not run has no number, and
its ``note`` says why.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from vitprof.checks.crosscheck.causes import Cause
from vitprof.core.choices import CROSSCHECK_FORMATS as FORMATS
from vitprof.core.records import Counts
from vitprof.render.schema import versioned
from vitprof.render.tables import input_text, markdown_table, text_table

CONVENTION = (
    "MACs are the primary unit (FLOPs = 2 x MACs); each peer's number is shown in its own unit "
    "and converted to MACs; delta = peer - vitprof = sum of the named causes + residual"
)


@dataclass(frozen=True)
class PeerRow:
    """One peer's number, converted to MACs, its difference from vitprof and why."""

    peer: str
    reported: int | float | None
    unit: str
    macs: int | None
    params: int | None
    delta_macs: int | None
    delta_params: int | None
    causes: list[Cause] = field(default_factory=list)
    residual_macs: int | None = None
    residual_params: int | None = None
    note: str = ""


def peer_row(
    peer: str, reported: int | float, unit: str, macs: int, params: int | None,
    vitprof: Counts, causes: list[Cause], note: str = "",
) -> PeerRow:
    """A row whose residuals are what the causes leave of the deltas."""
    delta_macs = macs - vitprof.macs
    delta_params = None if params is None else params - vitprof.params
    return PeerRow(
        peer, reported, unit, macs, params, delta_macs, delta_params, causes,
        delta_macs - sum(c.macs for c in causes),
        None if delta_params is None else delta_params - sum(c.params for c in causes),
        note,
    )


def missing_row(peer: str, unit: str, note: str) -> PeerRow:
    """A peer that could not produce a number for this case, and why."""
    return PeerRow(peer, None, unit, None, None, None, None, [], None, None, note)


@dataclass(frozen=True)
class CrossCheck:
    """vitprof's count of one model and input, and every peer's row against it."""

    model: str
    input_shape: tuple[int, ...]
    torch_version: str
    device: str  # where vitprof counted: meta, or cpu after a fallback
    attention_implementation: str
    vitprof: Counts
    rows: list[PeerRow]
    warnings: tuple[str, ...] = ()  # vitprof's own warnings about the model (its Profile's)

    def to_dict(self) -> dict[str, Any]:
        """The JSON interface: the model, vitprof's totals, the convention and every row."""
        return {
            "model": self.model,
            "input_shape": list(self.input_shape),
            "torch_version": self.torch_version,
            "device": self.device,
            "attention_implementation": self.attention_implementation,
            "convention": CONVENTION,
            "vitprof": self.vitprof.as_dict(),
            "rows": [asdict(row) for row in self.rows],
            "warnings": list(self.warnings),
        }


def _n(value: int | None, signed: bool = False) -> str:
    if value is None:
        return ""
    return f"{value:+,}" if signed and value else f"{value:,}"


def _reported(row: PeerRow) -> str:
    if row.reported is None:
        return ""
    if isinstance(row.reported, float):
        return f"{row.reported:g}"
    return f"{row.reported:,}"


_HEADERS = ["peer", "reported", "unit", "MACs", "delta MACs", "residual MACs", "params",
            "delta params", "residual params"]


def _cells(row: PeerRow) -> list[str]:
    return [row.peer, _reported(row), row.unit, _n(row.macs), _n(row.delta_macs),
            _n(row.residual_macs), _n(row.params), _n(row.delta_params), _n(row.residual_params)]


def _header(check: CrossCheck) -> list[str]:
    v = check.vitprof
    return [
        f"model: {check.model}; input: {input_text(check.input_shape)}; "
        f"torch {check.torch_version}",
        f"vitprof ({check.device} device): {v.params:,} params, {v.macs:,} MACs; attention: "
        f"{check.attention_implementation}",
        f"convention: {CONVENTION}",
    ]


def _explanation(row: PeerRow) -> list[tuple[str, str]]:
    """(amount, text) lines that take a row from vitprof's count to the peer's."""
    if row.macs is None:
        return [("", row.note)]
    lines = [(_n(c.macs, True), c.text) for c in row.causes if c.macs]
    lines += [(f"{_n(c.params, True)} params", c.text) for c in row.causes if c.params]
    lines.append((_n(row.residual_macs, True), "residual MACs"))
    if row.residual_params is not None:
        lines.append((_n(row.residual_params, True), "residual params"))
    if row.note:
        lines.append(("", row.note))
    return lines


def render_crosscheck(check: CrossCheck, fmt: str = "table") -> str:
    """The cross-check as an aligned text table, a markdown document or JSON."""
    if fmt == "json":
        return json.dumps(versioned(check.to_dict(), "crosscheck"), indent=2)
    rows = [_cells(row) for row in check.rows]
    if fmt == "markdown":
        parts = ["\n".join(f"- {line}" for line in _header(check)), "",
                 markdown_table(_HEADERS, rows), ""]
        for row in check.rows:
            parts.append(f"**{row.peer}**\n")
            parts += [f"- {amount}: {text}" if amount else f"- {text}"
                      for amount, text in _explanation(row)]
            parts.append("")
        return "\n".join(parts)
    if fmt != "table":
        raise ValueError(f"unknown format {fmt}; choose from {', '.join(FORMATS)}")
    parts = [*_header(check), "", text_table(_HEADERS, rows), ""]
    for row in check.rows:
        explanation = _explanation(row)
        width = max(len(amount) for amount, _ in explanation)
        parts.append(f"{row.peer}:")
        parts += [f"  {amount.rjust(width)}  {text}".rstrip() for amount, text in explanation]
    return "\n".join(parts) + "\n"
