"""Verdicts on the notes' claims, computed, never typed.

The rules, applied in this order to every claim:

1. A claim with a value is **correct** when vitprof's measured value is within the claim's
   tolerance of the note's value (the tolerance is the rounding the note states: "~8M" allows
   500,000, an exact figure nothing).
2. Otherwise it is **correct only for** the claim's own-code label when it has one and the
   own-code measure is within the tolerance: the note's own code, or the variant named, gives
   the note's value, and the standard model it describes differs.
3. Otherwise it is **wrong**.
4. A claim about how cost *scales* (O-notation) has no value; its judge decides by measuring:
   ``scales_as`` is **correct** when the measured exponent k in MACs ~ N^k equals the stated
   power (to 1e-9), else **wrong**; ``saves`` is **correct** when the measured saving is at least
   the stated per cent, else **misleading** (the order is right but the comparison the note
   draws from it is not).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from vitprof.checks.corrections.claims import Claim
from vitprof.checks.corrections.measure import Figures, Lab, Number, reason


class Verdict(StrEnum):
    """What vitprof finds of a claim; the string is what the report shows."""

    CORRECT = "correct"
    CORRECT_ONLY_FOR = "correct only for"
    WRONG = "wrong"
    MISLEADING = "misleading"


@dataclass(frozen=True)
class Correction:
    """A claim with its measured value, verdict and reason."""

    claim: Claim
    measured: Number
    verdict: Verdict
    reason: str

    @property
    def label(self) -> str:
        """The verdict as the report shows it: ``correct only for its own code``."""
        if self.verdict is Verdict.CORRECT_ONLY_FOR:
            assert self.claim.own_code is not None
            return f"{self.verdict} {self.claim.own_code.label}"
        return str(self.verdict)

    @property
    def difference(self) -> Number | None:
        return None if self.claim.value is None else self.measured - self.claim.value


def _scales_as(exponent: Number, power: float) -> Verdict:
    return Verdict.CORRECT if abs(exponent - power) < 1e-9 else Verdict.WRONG


def _saves(saving: Number, percent: float) -> Verdict:
    return Verdict.CORRECT if saving >= percent else Verdict.MISLEADING


JUDGES: dict[str, Callable[[Number, float], Verdict]] = {
    "scales_as": _scales_as, "saves": _saves,
}


def verdict(claim: Claim, figures: Figures, measured: Number) -> Verdict:
    """Rules 1-4 of the module docstring."""
    if claim.judge is not None:
        return JUDGES[claim.judge.rule](figures.get(claim.judge.value), claim.judge.parameter)
    assert claim.value is not None
    if abs(measured - claim.value) <= claim.tolerance:
        return Verdict.CORRECT
    own = claim.own_code
    if own is not None and abs(figures.evaluate(own.measure) - claim.value) <= claim.tolerance:
        return Verdict.CORRECT_ONLY_FOR
    return Verdict.WRONG


def correct(claim: Claim, lab: Lab) -> Correction:
    """Measure ``claim`` and decide its verdict."""
    figures = Figures(claim, lab)
    measured = figures.get("measured")
    return Correction(claim, measured, verdict(claim, figures, measured), reason(claim, figures))
