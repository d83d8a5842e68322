"""open_clip's published model profile, row by row: each image tower counted by vitprof and
explained by the ``open_clip-published`` peer
(:mod:`vitprof.checks.crosscheck.peers.open_clip_published`).

Each row's tower (``open_clip:NAME``, the image tower alone, no weights) is built on the meta
device at the row's ``image_size`` and counted at batch 1;
:func:`vitprof.study.pages.open_clip_published.open_clip_published_page` renders the results.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from tqdm import tqdm

from vitprof.analysis import analyze
from vitprof.checks.crosscheck.peers.open_clip_published import (
    OpenClipRow,
    OpenClipTable,
    explain,
    load_table,
)
from vitprof.checks.crosscheck.table import PeerRow
from vitprof.core.errors import UserError
from vitprof.models.zoo import build
from vitprof.study.published_rows import TRANSFORMER_MODULES


@dataclass(frozen=True)
class TowerResult:
    """One row of the table: its tower's kind, the peer row and the ``image_width`` note, or
    why vitprof could not count it."""

    row: OpenClipRow
    tower: str  # the tower's class (a timm tower: TimmModel/its trunk's class)
    vit_family: bool  # open_clip's VisionTransformer, or a timm trunk of a transformer module
    peer: PeerRow | None
    width: str = ""  # what image_width is where it is not the tower's width
    error: str = ""

    @property
    def reconciled(self) -> bool:
        return (self.peer is not None and self.peer.residual_macs == 0
                and self.peer.residual_params == 0)


def tower_kind(tower: nn.Module) -> tuple[str, bool]:
    """The tower's class name (``TimmModel/Eva`` for a timm trunk) and whether it is a vision
    transformer: open_clip's own ``VisionTransformer``, or a trunk that timm defines in one of
    :data:`~vitprof.study.published_rows.TRANSFORMER_MODULES`."""
    trunk = getattr(tower, "trunk", None)
    if isinstance(trunk, nn.Module):
        module = type(trunk).__module__.rpartition(".")[2]
        return f"{type(tower).__name__}/{type(trunk).__name__}", module in TRANSFORMER_MODULES
    name = type(tower).__name__
    return name, name == "VisionTransformer"


def explain_row(row: OpenClipRow, table: OpenClipTable) -> TowerResult:
    """Count and explain one row; a tower that cannot be built or run is a result with its
    error (one line), not an exception."""
    name = f"open_clip:{row.model}"  # the zoo's name of an open_clip tower
    try:
        tower = build(name, image_size=row.image_size, device="meta").module
        kind, vit = tower_kind(tower)
        profile = analyze(tower, image_size=row.image_size, name=name)
        image = torch.empty(1, 3, row.image_size, row.image_size, device="meta")
        peer, width = explain(profile, row, table, tower, ((image,), {}))
        return TowerResult(row, kind, vit, peer, width)
    except UserError as error:
        return TowerResult(row, "", False, None, error=str(error).splitlines()[0])
    except Exception as error:  # an open_clip tower whose build or forward raises
        lines = str(error).strip().splitlines()
        return TowerResult(row, "", False, None,
                           error=f"{type(error).__name__}: {lines[0] if lines else ''}")


def open_clip_rows(models: Sequence[str] | None = None
                   ) -> tuple[OpenClipTable, list[TowerResult]]:
    """The shipped table and every row of it counted and explained (only the rows of
    ``models``, for tests), with a progress bar on stderr."""
    table = load_table()
    selected = [row for row in table.rows if models is None or row.model in models]
    rows = tqdm(selected, desc="open_clip rows", unit="row", disable=None, file=sys.stderr)
    return table, [explain_row(row, table) for row in rows]
