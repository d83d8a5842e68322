"""A diff as a document: a text table, a pull-request comment (markdown) or JSON. Renders; never
compares.

Every format states both sides (model, input, mode), the counting convention and what else
differs (:attr:`vitprof.checks.diff.Diff.notes`) before the numbers. Tables show the totals, the
components and the blocks, one table per metric; rows zero on both sides are left out. The JSON
holds every row, the blocks' components included. Relative changes are percentages of A;
``new`` marks a count that was 0 in A.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vitprof.checks.diff import METRICS, Change, Diff, Exceeded, Snapshot
from vitprof.core.records import Counts
from vitprof.core.vocab import DiffScope
from vitprof.render.document import BLANK, Block, Col, Document, Table, columns, lines
from vitprof.render.tables import CONVENTION

_TITLES = {"params": "params", "macs": "MACs", "flops": "FLOPs", "vector_flops": "vector FLOPs"}
_COLUMNS = columns(Col.ROW, Col.A, Col.B, Col.CHANGE, Col.RELATIVE)
_SHOWN = (DiffScope.TOTAL, DiffScope.COMPONENT, DiffScope.BLOCK)


def relative_text(change: Change, metric: str) -> str:
    relative = change.relative(metric)
    if relative is None:
        return "new"
    return f"{float(relative):+.2%}" if relative else "0.00%"


def _row_name(change: Change) -> str:
    return change.name if change.scope != DiffScope.BLOCK else f"block {change.name}"


def _side(label: str, snapshot: Snapshot) -> str:
    return (f"{label}: {snapshot.label} (model {snapshot.model}, input {snapshot.shape}, "
            f"{snapshot.mode})")


def header_lines(diff: Diff) -> list[str]:
    """Both sides, the convention, then every difference besides the counts."""
    return [_side("A", diff.a), _side("B", diff.b), f"convention: {CONVENTION}",
            *(f"note: {note}" for note in diff.notes)]


def summary(diff: Diff) -> str:
    """One line: each total's change, A -> B."""
    total = diff.total
    if all(c.unchanged for c in diff.changes):
        return f"{diff.a.model} -> {diff.b.model}: no change"
    parts = [f"{_TITLES[m]} {relative_text(total, m)} ({total.value('a', m):,} -> "
             f"{total.value('b', m):,})" for m in METRICS if m != "flops"]
    return f"{diff.a.model} -> {diff.b.model}: " + ", ".join(parts)


def highlights(diff: Diff, metric: str = "macs", count: int = 5) -> list[str]:
    """The ``count`` largest changes of ``metric``, largest first: a component over a run of
    blocks that changed alike (``attn_core MACs +12.00% in blocks 6-11 (+...)``, the amount
    summed over the run) or outside the blocks (``patch_embed MACs ... outside the blocks``)."""
    items = [(c, f"in {_blocks_text(run)}") for c, run in _block_runs(diff, metric)]
    inside: dict[str, tuple[Counts, Counts]] = {}
    for c in diff.rows(DiffScope.BLOCK_COMPONENT):
        a, b = inside.get(c.name.partition(".")[2], (Counts(), Counts()))
        inside[c.name.partition(".")[2]] = (a + c.a, b + c.b)
    for c in diff.rows(DiffScope.COMPONENT):
        a, b = inside.get(c.name, (Counts(), Counts()))
        outside = Change(DiffScope.COMPONENT, c.name, c.a - a, c.b - b)
        items.append((outside, "outside the blocks"))
    items = sorted((i for i in items if i[0].delta(metric)),
                   key=lambda i: -abs(i[0].delta(metric)))
    return [f"{c.name} {_TITLES[metric]} {relative_text(c, metric)} {where} "
            f"({c.delta(metric):+,})" for c, where in items[:count]]


def _block_runs(diff: Diff, metric: str) -> list[tuple[Change, list[int]]]:
    """Per component, each run of blocks that changed alike, as one summed row."""
    per_component: dict[str, list[tuple[int | None, Change]]] = {}
    for c in diff.rows(DiffScope.BLOCK_COMPONENT):
        index, _, component = c.name.partition(".")
        per_component.setdefault(component, []).append((int(index), c))
    return [(Change(DiffScope.BLOCK_COMPONENT, component, sum((c.a for _, c in run), Counts()),
                    sum((c.b for _, c in run), Counts())), [int(i or 0) for i, _ in run])
            for component, rows in per_component.items() for run in _alike_runs(rows, metric)]


def _alike_runs(
    rows: Sequence[tuple[int | None, Change]], metric: str
) -> list[list[tuple[int | None, Change]]]:
    """Rows of consecutive block indices with the same A and B in ``metric``, grouped; a row
    without an index stands alone."""
    runs: list[list[tuple[int | None, Change]]] = []
    for index, change in rows:
        last = runs[-1][-1] if runs else (None, change)
        if (index is not None and last[0] is not None and index == last[0] + 1
                and _pair(last[1], metric) == _pair(change, metric)):
            runs[-1].append((index, change))
        else:
            runs.append([(index, change)])
    return runs


def _pair(change: Change, metric: str) -> tuple[int, int]:
    return change.value("a", metric), change.value("b", metric)


def _blocks_text(indices: list[int]) -> str:
    if len(indices) == 1:
        return f"block {indices[0]}"
    return f"blocks {indices[0]}-{indices[-1]}"


def exceeded_lines(exceeded: Sequence[Exceeded]) -> list[str]:
    """``MACs of attn_core: +12.00% is above 5% (and 2 more components)``: the largest increase
    of each scope and metric above its threshold."""
    groups: dict[tuple[str, str], list[Exceeded]] = {}
    for e in exceeded:
        groups.setdefault((e.change.scope, e.metric), []).append(e)
    lines = []
    for (scope, metric), group in groups.items():
        worst = max(group, key=lambda e: _growth(e.change, metric))
        more = f" (and {len(group) - 1} more {scope}s)" if len(group) > 1 else ""
        lines.append(f"{_TITLES[metric]} of {_row_name(worst.change)}: "
                     f"{relative_text(worst.change, metric)} is above "
                     f"{float(worst.percent):g}%{more}")
    return lines


def _growth(change: Change, metric: str) -> float:
    relative = change.relative(metric)
    return float("inf") if relative is None else float(relative)


def _runs(changes: Sequence[Change], metric: str) -> list[tuple[str, Change]]:
    """(row name, row), consecutive blocks that changed alike merged (``blocks 0-11 (each)``);
    rows zero on both sides left out."""
    rows = [(int(c.name) if c.scope == DiffScope.BLOCK else None, c) for c in changes
            if c.value("a", metric) or c.value("b", metric)]
    return [(_row_name(run[0][1]) if len(run) == 1
             else f"blocks {run[0][0]}-{run[-1][0]} (each)", run[0][1])
            for run in _alike_runs(rows, metric)]


def _rows(changes: Sequence[Change], metric: str) -> tuple[dict[str, Any], ...]:
    return tuple({"row": name, "a": c.value("a", metric), "b": c.value("b", metric),
                  "change": c.delta(metric), "relative": relative_text(c, metric)}
                 for name, c in _runs(changes, metric))


def _tables(diff: Diff) -> list[Block]:
    """A table for each metric, after a blank line."""
    changes = diff.rows(*_SHOWN)
    return [block for m in METRICS for block in
            (BLANK, Table(_COLUMNS, _rows(changes, m) or ({"row": "(all zero)"},),
                          title=_TITLES[m]))]


def _text_blocks(diff: Diff, exceeded: Sequence[Exceeded]) -> tuple[list[Block], list[Block]]:
    """What the text table shows before and after the tables."""
    text = ("table",)
    before: list[Block] = [
        lines([*header_lines(diff), "", summary(diff), *(f"  {h}" for h in highlights(diff))],
              bullets=False, only=text)]
    after: list[Block] = [lines(["", *(f"FAIL: {line}" for line in exceeded_lines(exceeded))],
                   bullets=False, only=text)] if exceeded else []
    return before, after


def _markdown_blocks(diff: Diff, exceeded: Sequence[Exceeded]) -> tuple[list[Block], list[Block]]:
    """A pull-request comment: the summary line first, the details folded."""
    markdown = ("markdown",)
    before: list[Block] = [
        lines([f"**vitprof diff** {summary(diff)}", ""], bullets=False, only=markdown),
        lines([*highlights(diff), *(f":x: {line}" for line in exceeded_lines(exceeded)),
               *diff.notes], only=markdown),
        lines(["", "<details><summary>per component and block</summary>", ""], bullets=False,
              only=markdown),
        lines(header_lines(diff)[:3], only=markdown),
    ]
    return before, [lines(["", "</details>"], bullets=False, only=markdown)]


def _side_dict(snapshot: Snapshot) -> dict[str, Any]:
    return {"label": snapshot.label, "model": snapshot.model,
            "input_shape": list(snapshot.input_shape), "mode": snapshot.mode,
            "unsupported_ops": dict(snapshot.unsupported_ops)}


def _change_dict(change: Change) -> dict[str, Any]:
    relative = {m: change.relative(m) for m in METRICS}
    return {"scope": change.scope, "name": change.name, "a": change.a.as_dict(),
            "b": change.b.as_dict(), "change": {m: change.delta(m) for m in METRICS},
            "relative": {m: None if r is None else float(r) for m, r in relative.items()}}


def _data(diff: Diff, exceeded: Sequence[Exceeded]) -> dict[str, Any]:
    """``{"a", "b", "convention", "notes", "summary", "highlights", "changes", "exceeded"}``;
    ``relative`` is a fraction of A (0.12 = +12%), null when A is 0."""
    return {
        "a": _side_dict(diff.a), "b": _side_dict(diff.b), "convention": CONVENTION,
        "notes": list(diff.notes), "summary": summary(diff), "highlights": highlights(diff),
        "changes": [_change_dict(c) for c in diff.changes],
        "exceeded": [{"scope": e.change.scope, "name": e.change.name, "metric": e.metric,
                      "percent": float(e.percent)} for e in exceeded],
    }


def diff_document(diff: Diff, exceeded: Sequence[Exceeded] = ()) -> Document:
    """The diff, with the increases above a threshold: the text table, the pull-request comment
    (markdown) and the JSON."""
    text_before, text_after = _text_blocks(diff, exceeded)
    markdown_before, markdown_after = _markdown_blocks(diff, exceeded)
    blocks = [*markdown_before, *text_before, *_tables(diff), *markdown_after, *text_after]
    return Document(tuple(blocks), _data(diff, exceeded), "diff")
