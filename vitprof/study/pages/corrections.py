"""``corrections.md``: the source notes' figures against vitprof, from computed corrections.

The page only renders: the claims are measured and judged by :mod:`vitprof.study.corrections`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from vitprof.render.figures import FigureData
from vitprof.render.tables import markdown_table
from vitprof.study.corrections import Claim, Correction, Note
from vitprof.study.pages.correction_figures import (
    ATTENTION_FILE,
    CLAIMS_FILE,
    attention_against_tokens,
    claimed_vs_measured,
)
from vitprof.study.pages.markdown import Page, n

if TYPE_CHECKING:
    from vitprof.models.closed_form import ViTSpec


def _decimals(value: float) -> int:
    """Two decimals, or as many as it takes to show a small non-zero value (0.0044)."""
    if value == 0 or abs(value) >= 0.01:
        return 2
    return 1 - math.floor(math.log10(abs(value)))


def _number(value: float, unit: str) -> str:
    if unit.startswith("%"):
        return f"{value:.{_decimals(value)}f}%"
    if unit.startswith("MB"):
        return f"{value:.2f} MB"
    return n(round(value)) if abs(value - round(value)) < 1e-9 else f"{value:,.2f}"


def _points(diff: float) -> str:
    """A difference of percentages in points, to two significant digits: -0.75 pt, -0.012 pt,
    +0.0014 pt."""
    magnitude = abs(diff)
    decimals = max(0, 1 - math.floor(math.log10(magnitude)))
    return f"{diff:+.{decimals}f} pt"


def _difference(c: Correction) -> str:
    diff = c.difference
    if diff is None:
        return "-"
    if diff == 0:
        return "0"
    if c.claim.unit.startswith("%"):
        return _points(diff)
    text = f"+{_number(diff, c.claim.unit)}" if diff > 0 else f"-{_number(-diff, c.claim.unit)}"
    if c.claim.value and c.measured / c.claim.value >= 2:
        return f"{text} (x{c.measured / c.claim.value:,.1f})"
    if c.claim.value:
        return f"{text} ({100 * diff / c.claim.value:+.2f}%)"
    return text


def _value(claim: Claim) -> str:
    """The note's value; marked when it is vitprof's evaluation of the note's formula or code."""
    if claim.value is None:
        return "-"
    shown = _number(claim.value, claim.unit)
    return f"{shown} *(evaluated)*" if claim.evaluated else shown


def _quote(claim: Claim) -> str:
    """The claim's quotes as code spans (the table escapes a ``|`` in them)."""
    return " … ".join(f"`{q}`" for q in claim.quote)


def _preamble(found: Sequence[Correction]) -> list[str]:
    verdicts: dict[str, int] = {}
    for c in found:
        verdicts[c.label] = verdicts.get(c.label, 0) + 1
    return [
        "# Corrections to the source notes", "",
        "Every parameter or FLOP figure the five source notes (`shared/seeds/`) state, and the "
        "structural claims that drive them, checked against vitprof. The quotes and their "
        "places are data in `vitprof/data/corrections.toml`; every value in the *vitprof* "
        "column, and every number in the reasons that is not the note's, is counted by vitprof "
        "when this file is generated (`vitprof report --all`).", "",
        "- units: MACs = multiply-accumulates; FLOPs = 2 x MACs; parameters counted once each; "
        "meta device, batch 1, the note's own image size",
        "- note's value: a figure the note states, or *(evaluated)*: vitprof's evaluation of the "
        "note's formula or code for the model compared, where the note states no number",
        "- verdict rules, applied to every row in this order "
        "(`vitprof/study/corrections/verdicts.py`):",
        "  1. *correct*: vitprof's value is within the rounding the note states (half a unit of "
        "its last digit for a rounded figure: \"≈ 85.8 Million\" allows ±0.05M, \"~8M\" "
        "±0.5M; an exact figure nothing), or, for a figure the note marks as approximate "
        "(\"~\", \"约\", \"≈\"), vitprof's value cut to that digit is the note's, as "
        "published counts are cut (the ViT paper's and DeiT's \"86M\" for ViT-B's 86,567,656 "
        "parameters: \"~86M\" allows 85.5M to 87M, 87M excluded);",
        "  2. *correct only for X*: otherwise, when the variant X that the note's own formula or "
        "code defines (a bias-free projection as a formula writes it, its own model, a single "
        "head) gives its value;",
        "  3. *declared approximation*: otherwise, when the note itself says it leaves the term "
        "out or approximates it; the reason gives the size of what is left out;",
        "  4. *wrong*: otherwise;",
        "  5. O-notation (no value): *wrong* when the measured growth with the tokens is not the "
        "stated power, or a total O(f + g) does not fit a block's MACs exactly; *misleading* "
        "when the growth is right but the term is less than half of the layer the claim names "
        "at the note's own size, or when what the note presents as a saving costs more there; "
        "*correct* otherwise;",
        "  6. a size name that implies an order (no value): *wrong* when the model the name "
        "puts higher has no more parameters than the one below it in the note's own ladder; "
        "*misleading* when it has, but the standard model of that name (the ViT paper's) has "
        "more (the order holds, the name does not); else *correct*;",
        "  7. a statement without a figure, an order or a size: it implies that a quantity "
        "reaches a level; *correct* when the quantity's typical size for the model the note "
        "describes, as it is, reaches it, *misleading* when only the largest size that the "
        "premise the note's argument takes allows does (unit-variance q and k at their most "
        "aligned; attention weights held fixed, as a weighted average takes them; the reason "
        "says what it takes), else *wrong*",
        "- verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())), "",
    ]


def _note_section(note: Note, rows: Sequence[Correction]) -> list[str]:
    lines = [f"## Note {note.id}: {note.title}", "",
             f"File `{note.file}`; compared with {note.compared_with}.", ""]
    cells = [
        [c.claim.id, c.claim.where, _quote(c.claim),
         _value(c.claim),
         c.shown or _number(c.measured, c.claim.unit), c.claim.unit, _difference(c), c.label]
        for c in rows
    ]
    lines += [markdown_table(["#", "where", "the note says", "note's value", "vitprof",
                              "unit", "difference", "verdict"], cells), "", "Why:", ""]
    lines += [f"- **{c.claim.id}** ({c.label}): {c.reason.rstrip('.')}." for c in rows]
    lines.append("")
    return lines


def _attention_lines(spec: ViTSpec, figure: FigureData) -> list[str]:
    """Note 002's linear against softmax attention: one sentence and the figure."""
    return [f"Note 002's attention core per block against the token count, from the closed "
            f"forms at its model's D = {spec.width}, H = {spec.heads}: softmax 2 N^2 D, the "
            "linear attention as the note writes it (one (D, D) context) 2 N D^2, and per head "
            "(our reading, not the note's) 2 N D^2 / H. The linear attention as written costs "
            f"less than softmax only past N = D = {spec.width} tokens; the note's model has "
            f"N = {figure.data['tokens']}.", "", f"![{figure.title}]({ATTENTION_FILE})", ""]


def corrections_page(notes: Iterable[Note], found: Sequence[Correction],
                     note002: ViTSpec | None = None) -> Page:
    """``corrections.md``: per note, a table of its figures with vitprof's values and verdicts,
    then the reason for each; a figure of every note's value against vitprof's, and with
    ``note002`` (the spec of note 002's model) one of its attention costs against tokens."""
    claimed = claimed_vs_measured(found)
    shown: list[tuple[str, FigureData]] = [(CLAIMS_FILE, claimed)]
    lines = [*_preamble(found), "Every note's value divided by vitprof's, against vitprof's "
             "value (the rows with a positive value): above, the whole range, each point more "
             "than 10% off labelled; below, the points within 3%, as the difference in per "
             "cent, each one off labelled:", "",
             f"![{claimed.title}]({CLAIMS_FILE})", ""]
    for note in notes:
        lines += _note_section(note, [c for c in found if c.claim.note == note])
        if note.id == "002" and note002 is not None:
            shown.append((ATTENTION_FILE, attention_against_tokens(note002)))
            lines += _attention_lines(note002, shown[-1][1])
    return Page("corrections.md", "\n".join(lines), tuple(shown))
