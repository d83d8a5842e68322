"""The figures stated in the five source notes and their correction by vitprof.

The claims are data, ``vitprof/data/corrections.toml``, read by :mod:`.claims`; :mod:`.measure`
measures them on vitprof profiles; :mod:`.verdicts` states and applies the verdict rules. The
page is :mod:`vitprof.study.pages.corrections`.

Unless a claim says otherwise the standard model is torchvision ``vit_b_16`` at 224 px, batch 1,
the model notes 000, 003 and 004 describe. Quantities follow vitprof's conventions: MACs are
multiply-accumulates, FLOPs = 2 x MACs, parameters are counted once each.
"""

from __future__ import annotations

from vitprof.study.corrections.claims import Claim, Note, load
from vitprof.study.corrections.measure import Lab
from vitprof.study.corrections.verdicts import Correction, Verdict, correct

__all__ = ["Claim", "Correction", "Lab", "Note", "Verdict", "claims", "correct", "corrections",
           "notes"]


def notes() -> dict[str, Note]:
    """The source notes, by id (``"000"``)."""
    return load()[0]


def claims() -> tuple[Claim, ...]:
    """Every claim of every note, in the data file's order."""
    return load()[1]


def corrections(lab: Lab | None = None) -> list[Correction]:
    """Every claim of every note, measured now."""
    lab = lab or Lab()
    return [correct(claim, lab) for claim in claims()]
