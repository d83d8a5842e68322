"""timm's published table, row by row: each transformer row counted by vitprof and explained.

The rows are those of the shipped table (:mod:`vitprof.checks.crosscheck.peers.timm_published`)
whose model is defined in one of :data:`TRANSFORMER_MODULES` of the installed timm, each counted
by vitprof as built, at the row's ``infer_img_size``, batch 1, on the meta device, and explained by
:func:`~vitprof.checks.crosscheck.peers.timm_published.explain`.
:func:`vitprof.study.pages.timm_published.timm_published_page` renders the results.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from tqdm import tqdm

from vitprof.analysis import analyze
from vitprof.checks.crosscheck.peers.timm_published import (
    Explained,
    TimmRow,
    TimmTable,
    built_model,
    explain,
    load_table,
)
from vitprof.core.errors import UserError
from vitprof.count.result import Profile

# timm modules whose models are vision transformers or transformer hybrids
TRANSFORMER_MODULES = (
    "vision_transformer", "vision_transformer_hybrid", "vision_transformer_relpos",
    "vision_transformer_sam", "deit", "cait", "swin_transformer", "swin_transformer_v2",
    "swin_transformer_v2_cr", "beit", "eva", "levit", "fastvit", "efficientvit_mit",
    "efficientvit_msra", "tiny_vit", "xcit", "volo", "pvt_v2", "twins", "coat", "crossvit",
    "mvitv2", "maxxvit", "hiera", "hieradet_sam2", "convit", "pit", "tnt", "nest", "gcvit",
    "davit", "efficientformer", "efficientformer_v2", "mobilevit", "nextvit", "vitamin",
    "naflexvit", "visformer",
)


@dataclass(frozen=True)
class RowResult:
    """One row of the table: vitprof's explanation of it, or why vitprof could not count it."""

    row: TimmRow
    module: str
    explained: Explained | None
    error: str = ""


def transformer_rows(table: TimmTable) -> list[tuple[TimmRow, str]]:
    """The rows whose model the installed timm defines in a transformer module, with it."""
    import timm

    module_of = {name: module for module in TRANSFORMER_MODULES
                 for name in timm.list_models(module=module)}
    return [(row, module_of[row.model]) for row in table.rows if row.model in module_of]


def count_row(row: TimmRow, deploy: bool = False) -> Profile:
    """vitprof's count of the row's model at its image size (:func:`built_model`)."""
    name = f"timm:{row.model}"
    return analyze(built_model(name, row.image_size), image_size=row.image_size, name=name,
                   deploy=deploy)


def explain_row(row: TimmRow, module: str, table: TimmTable, deploy: bool = False) -> RowResult:
    """Count and explain one row; a model that cannot be built or run is a result with its
    error (one line), not an exception."""
    name = f"timm:{row.model}"
    try:
        profile = count_row(row, deploy)
        return RowResult(row, module, explain(profile, name, row, table, deploy))
    except UserError as error:
        return RowResult(row, module, None, str(error).splitlines()[0])
    except Exception as error:  # a timm model whose build or forward raises
        lines = str(error).strip().splitlines()
        return RowResult(row, module, None, f"{type(error).__name__}: {lines[0] if lines else ''}")


def published_rows(models: Sequence[str] | None = None) -> tuple[TimmTable, list[RowResult]]:
    """The shipped table and every transformer row of it counted and explained (only the rows
    of ``models``, for tests), with a progress bar on stderr."""
    table = load_table()
    selected = [(row, module) for row, module in transformer_rows(table)
                if models is None or row.model in models]
    rows = tqdm(selected, desc="timm rows", unit="row", disable=None, file=sys.stderr)
    return table, [explain_row(row, module, table) for row, module in rows]
