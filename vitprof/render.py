"""Turn a Profile into tables (text, markdown, CSV) or JSON. Renders; never counts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from vitprof.records import Counts
from vitprof.result import Profile
from vitprof.schema import versioned

VIEWS = ("component", "block", "module", "op")
FORMATS = ("table", "markdown", "json", "csv")
CONVENTION = (
    "MACs = multiply-accumulates of matmul/linear/conv/attention products; FLOPs = 2 x MACs; "
    "vector FLOPs = element-wise work (LayerNorm, softmax, GELU, bias and residual adds) at the "
    "per-element costs of vitprof.formulas"
)
_NUMERIC = ("params", "macs", "flops", "vector_flops")


def view_frame(profile: Profile, by: str) -> pd.DataFrame:
    """Rows of one view whose numeric columns add up to the profile's totals."""
    if by == "component":
        frame = profile.by_component()
    elif by == "block":
        frame = _blocks_with_outside(profile)
    elif by == "module":
        frame = profile.by_module()
    elif by == "op":
        frame = profile.by_op()
        frame = _with_param_row(frame, profile.totals.params)
    else:
        raise ValueError(f"unknown view {by}")
    frame = frame[[c for c in frame.columns if not c.endswith("_share")]].copy()
    frame["macs_share"] = frame["macs"] / profile.totals.macs if profile.totals.macs else 0.0
    return frame


def _blocks_with_outside(profile: Profile) -> pd.DataFrame:
    frame = profile.by_block()
    frame["block"] = frame["block"].astype(str)
    inside: dict[str, Counts] = {}
    for block in profile.blocks:
        for component, counts in block.components.items():
            inside[str(component)] = inside.get(str(component), Counts()) + counts
    rows = []
    for component, total in profile.components.items():
        outside = Counts(
            total.params - inside.get(str(component), Counts()).params,
            total.macs - inside.get(str(component), Counts()).macs,
            total.vector_flops - inside.get(str(component), Counts()).vector_flops,
        )
        if outside != Counts():
            rows.append({"block": "outside", "component": str(component), **outside.as_dict()})
    return pd.concat([frame, pd.DataFrame(rows)], ignore_index=True)


def _with_param_row(frame: pd.DataFrame, params: int) -> pd.DataFrame:
    row = {"op": "(parameters)", "calls": 0, "params": params, "macs": 0, "flops": 0,
           "vector_flops": 0}
    return pd.concat([frame, pd.DataFrame([row])], ignore_index=True)


def _with_total(frame: pd.DataFrame) -> pd.DataFrame:
    total: dict[str, Any] = {c: "" for c in frame.columns}
    total[frame.columns[0]] = "total"
    for column in _NUMERIC:
        total[column] = int(frame[column].sum())
    if "macs_share" in frame.columns:
        total["macs_share"] = float(frame["macs_share"].sum())
    return pd.concat([frame, pd.DataFrame([total])], ignore_index=True)


def _cells(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [_HEADERS.get(c, c) for c in frame.columns]
    rows = []
    for record in frame.to_dict("records"):
        row = []
        for column, value in record.items():
            if column == "macs_share":
                row.append(f"{value:.2%}" if value != "" else "")
            elif column in _NUMERIC or column == "calls":
                row.append(f"{int(value):,}")
            else:
                row.append(str(value))
        rows.append(row)
    return headers, rows


_HEADERS = {"params": "params", "macs": "MACs", "flops": "FLOPs", "vector_flops": "vector FLOPs",
            "macs_share": "% MACs"}


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned table: text left, numbers right."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    numeric = [all(_is_number(r[i]) for r in rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub pipe table, numbers right-aligned."""
    numeric = [all(_is_number(r[i]) for r in rows) for i in range(len(headers))]
    align = ["---:" if n else ":---" for n in numeric]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _is_number(cell: str) -> bool:
    digits = cell.replace(",", "").replace(".", "").replace("%", "").lstrip("+-")
    return digits.isdigit() or not cell


def header_lines(profile: Profile) -> list[str]:
    """What was counted, on what, under which convention."""
    batch, chans, height, width = profile.input_shape
    lines = [
        f"model: {profile.model} (recognized as {profile.family})",
        f"input: batch {batch}, {chans}x{height}x{width}; device {profile.device}; "
        f"torch {profile.torch_version}",
        f"attention: {profile.attention_implementation}",
        f"convention: {CONVENTION}",
    ]
    if profile.fallback:
        lines.append(f"fallback: {profile.fallback}")
    return lines


def render(profile: Profile, by: str = "component", fmt: str = "table") -> str:
    """The analysis of ``profile`` in one view and one format."""
    if fmt == "json":
        data = profile.to_dict()
        if by in ("module", "op"):
            data[f"by_{by}"] = view_frame(profile, by).to_dict("records")
        return json.dumps(versioned(data, "profile"), indent=2)
    frame = view_frame(profile, by)
    if fmt == "csv":
        return frame.to_csv(index=False)
    headers, rows = _cells(_with_total(frame))
    if fmt == "markdown":
        head = "\n".join(f"- {line}" for line in header_lines(profile))
        return f"{head}\n\n{markdown_table(headers, rows)}\n"
    t = profile.totals
    summary = (f"total: {t.params:,} params, {t.macs:,} MACs ({t.macs / 1e9:.3f} GMACs), "
               f"{t.flops:,} FLOPs, {t.vector_flops:,} vector FLOPs")
    return "\n".join([*header_lines(profile), summary, "", text_table(headers, rows)]) + "\n"
