"""What ``token_reduction.md`` shows, computed: note 002's Dynamic ViT (its first row), DeiT-S
dense and under each method block by block, and every published row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vitprof.analysis import analyze
from vitprof.models.zoo import build
from vitprof.study.token_reduction.counts import ReducedCount, count
from vitprof.study.token_reduction.published import RowResult, published_results

NOTE_MODEL, NOTE_DENSE = "note002_dynamic_vit", "note002_cifar_vit"
PER_BLOCK = ("dense", "rho=0.7", "keep=0.7 fuse", "r=13")  # on DeiT-S, the figure's lines


@dataclass(frozen=True)
class NoteRow:
    """Note 002's Dynamic ViT as vitprof builds it: its tokens per block, the blocks its
    predictors precede, its MACs outside the predictors and theirs, and the dense
    CIFAR-ViT's MACs."""

    tokens: tuple[int, ...]
    prune_at: tuple[int, ...]
    backbone_macs: int
    predictor_macs: int
    dense_macs: int


@dataclass(frozen=True)
class TokenReductionInputs:
    """The page's results: the note's row, DeiT-S under :data:`PER_BLOCK` (dense first), the
    published rows."""

    note: NoteRow
    per_block: tuple[ReducedCount, ...]
    published: tuple[RowResult, ...]


def note_row() -> NoteRow:
    """Note 002's Dynamic ViT counted by vitprof, its predictors (modules ``predictors.*``)
    apart."""
    model: Any = build(NOTE_MODEL, device="meta").module
    profile = analyze(NOTE_MODEL)
    predictors = sum(op.macs for op in profile.ops if op.module.startswith("predictors."))
    return NoteRow(tuple(1 + kept for kept in model.keep_tokens), tuple(model.prune_at),
                   profile.totals.macs - predictors, predictors,
                   analyze(NOTE_DENSE).totals.macs)


def token_reduction_inputs() -> TokenReductionInputs:
    """Everything the page shows (a minute or two of counting on meta)."""
    return TokenReductionInputs(
        note_row(), tuple(count("deit_small_patch16_224", s) for s in PER_BLOCK),
        tuple(published_results()))
