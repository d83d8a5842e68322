"""Verdicts on the notes' claims, computed, never typed.

The rules, applied to every claim in this order (the corrections page states them in its preamble):

1. **correct**: the value vitprof measures for the model the note describes is within the
   claim's tolerance of the note's value. The tolerance is the rounding the note states: half a
   unit of its last digit for a rounded figure ("~8M" allows 500,000), nothing for an exact
   figure. A figure the note marks as approximate ("~", "约", "≈") is a conventional one: it is
   also correct when it is vitprof's value cut (not rounded) to its last digit, as published
   counts are (the ViT paper's and DeiT's "86M" for ViT-B's 86,567,656 parameters): within
   [value - tolerance, value + 2 x tolerance).
2. **correct only for** *X*: not 1, but the variant *X* the note's own formula or code defines
   (a bias-free projection as a formula writes it, its own model, a single head) gives the note's
   value within the tolerance; the standard model differs.
3. **declared approximation**: not 1 or 2, but the note itself says it leaves the term out or
   approximates it ("LayerNorm x 2: 忽略"); the reason gives the size of what it leaves out.
4. **wrong**: none of the above.
5. A claim about how cost *scales* (O-notation) has no value; it is decided by measuring:
   ``scales_as`` is **wrong** when the measured exponent k in MACs ~ N^k of the term it names
   is not the stated power (to 1e-9), **misleading** when it is but that term is less than half
   of the layer the claim names at the note's own size (the order leaves out what dominates),
   else **correct**; ``saves`` (a cost presented as a saving) is **correct** when it saves at
   least the stated per cent at the note's size, else **misleading**; ``fits`` (a total,
   O(f + g)) is **correct** when a block's MACs are exactly of the stated form (fitted at two
   sizes, the residual at a third within the stated bound), else **wrong**.
6. A size name that implies an order ("Base" above "Small", "Large" above "Base") has no value
   either: ``exceeds`` is **wrong** when the model the name puts higher has no more than the
   stated number of parameters more than the one below it in the note's own ladder,
   **misleading** when it has but the standard model of that name (the ViT paper's) has more
   than that many more than it (the order holds, the name does not), else **correct**.
7. A statement without a figure, an order or a size ("Attention 是线性操作", "点积可能达到几百")
   implies that a quantity reaches a level: ``reaches`` reads the quantity's *typical* size for
   the model the note describes as it is, and the *largest* size that the premise the note's
   argument takes allows (unit-variance q and k at their most aligned; attention weights held
   fixed, as a weighted average takes them); **correct** when the typical size reaches the
   level, **misleading** when only the largest does (the reason says what it takes), else
   **wrong**.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from vitprof.study.corrections.claims import Claim, ClaimRule
from vitprof.study.corrections.measure import Figures, Lab, Number, reason


class Verdict(StrEnum):
    """What vitprof finds of a claim; the string is what the page shows."""

    CORRECT = "correct"
    CORRECT_ONLY_FOR = "correct only for"
    DECLARED = "declared approximation"
    WRONG = "wrong"
    MISLEADING = "misleading"


@dataclass(frozen=True)
class Correction:
    """A claim with its measured value, verdict and reason."""

    claim: Claim
    measured: Number
    verdict: Verdict
    reason: str
    shown: str = ""  # the claim's ``shown`` filled in: vitprof's value as the page shows it

    @property
    def label(self) -> str:
        """The verdict as the page shows it: ``correct only for its own code``."""
        if self.verdict is Verdict.CORRECT_ONLY_FOR:
            assert self.claim.own_code is not None
            return f"{self.verdict} {self.claim.own_code.label}"
        return str(self.verdict)

    @property
    def difference(self) -> Number | None:
        return None if self.claim.value is None else self.measured - self.claim.value


def _scales_as(read: Mapping[str, Number], power: float) -> Verdict:
    if abs(read["exponent"] - power) >= 1e-9:
        return Verdict.WRONG
    return Verdict.CORRECT if read["share"] >= 50 else Verdict.MISLEADING


def _saves(read: Mapping[str, Number], percent: float) -> Verdict:
    return Verdict.CORRECT if read["saving"] >= percent else Verdict.MISLEADING


def _fits(read: Mapping[str, Number], within: float) -> Verdict:
    return Verdict.CORRECT if abs(read["residual"]) <= within else Verdict.WRONG


def _exceeds(read: Mapping[str, Number], by: float) -> Verdict:
    if read["larger"] - read["smaller"] <= by:
        return Verdict.WRONG
    return Verdict.MISLEADING if read["named"] - read["larger"] > by else Verdict.CORRECT


def _reaches(read: Mapping[str, Number], level: float) -> Verdict:
    if read["typical"] >= level:
        return Verdict.CORRECT
    return Verdict.MISLEADING if read["largest"] >= level else Verdict.WRONG


JUDGES: dict[ClaimRule, Callable[[Mapping[str, Number], float], Verdict]] = {
    ClaimRule.SCALES_AS: _scales_as, ClaimRule.SAVES: _saves, ClaimRule.FITS: _fits,
    ClaimRule.EXCEEDS: _exceeds, ClaimRule.REACHES: _reaches,
}


def verdict(claim: Claim, figures: Figures, measured: Number) -> Verdict:
    """Rules 1-7 of the module docstring."""
    if claim.judge is not None:
        read = {role: figures.get(name) for role, name in claim.judge.reads.items()}
        return JUDGES[claim.judge.rule](read, claim.judge.parameter)
    if within(claim, measured):
        return Verdict.CORRECT
    own = claim.own_code
    if own is not None and within(claim, figures.evaluate(own.measure)):
        return Verdict.CORRECT_ONLY_FOR
    return Verdict.DECLARED if claim.declared else Verdict.WRONG


def within(claim: Claim, found: Number) -> bool:
    """Rule 1: ``found`` gives the note's value at the rounding it states; an approximate
    figure also when ``found`` cut to its last digit is the value."""
    assert claim.value is not None
    if abs(found - claim.value) <= claim.tolerance:
        return True
    return claim.approximate and claim.value <= found < claim.value + 2 * claim.tolerance


def correct(claim: Claim, lab: Lab) -> Correction:
    """Measure ``claim`` and decide its verdict."""
    figures = Figures(claim, lab)
    measured = figures.get("measured")
    return Correction(claim, measured, verdict(claim, figures, measured),
                      reason(claim.reason, figures), reason(claim.shown, figures))
