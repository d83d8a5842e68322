"""``open_clip_published.md``: open_clip's published model profile against vitprof, one line per
row of it: reconciled, or the cause.

The page renders the rows :func:`vitprof.study.open_clip_rows.open_clip_rows` counted and
explained: for each row the published figures, vitprof's, the named causes (FLOPs at 2 per MAC,
kernels its counter misses, rounding) and the residual, and what its ``image_width`` column is
where it is not the tower's width; a summary counts the vision-transformer towers apart.
``vitprof report open_clip-published`` writes it (every tower is built on meta: minutes, so
never with ``--all``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vitprof.render.tables import markdown_table
from vitprof.study.pages.markdown import Page, n

if TYPE_CHECKING:
    from vitprof.checks.crosscheck.peers.open_clip_published import OpenClipTable
    from vitprof.study.open_clip_rows import TowerResult

PAGE = "open_clip-published"
FILES = ("open_clip_published.md",)
HEADERS = ["model", "px", "tower", "ViT family", "image_mparams", "vitprof params",
           "rounding params", "residual params", "image_gflops", "vitprof MACs",
           "x 2 = FLOPs", "counter misses (MACs)", "rounding (MACs)", "residual MACs",
           "image_width", "verdict"]


def _signed(value: int) -> str:
    return f"{value:+,}" if value else "0"


def _rounding(result: TowerResult, what: str) -> int:
    causes = result.peer.causes if result.peer else []
    return sum(getattr(c, what) for c in causes if c.text.startswith("rounded to"))


def _missed(result: TowerResult) -> int:
    causes = result.peer.causes if result.peer else []
    return sum(c.macs for c in causes if not c.text.startswith("rounded to"))


def verdict(result: TowerResult) -> str:
    """``reconciled``, or the cause: not counted (why), or the residual the causes leave."""
    peer = result.peer
    if peer is None:
        return f"not counted: {result.error}"
    if result.reconciled:
        return "reconciled"
    return (f"**not reconciled**: residual {_signed(peer.residual_macs or 0)} MACs, "
            f"{_signed(peer.residual_params or 0)} params after every named cause")


def _cells(result: TowerResult) -> list[str]:
    row, peer = result.row, result.peer
    width = f"{row.image_width}: {result.width}" if result.width else str(row.image_width)
    if peer is None:
        return [row.model, str(row.image_size), "", "", row.image_mparams, "", "", "",
                row.image_gflops, "", "", "", "", "", width, verdict(result).replace("|", "/")]
    macs = (peer.macs or 0) - (peer.delta_macs or 0)
    params = (peer.params or 0) - (peer.delta_params or 0)
    return [row.model, str(row.image_size), f"`{result.tower}`",
            "yes" if result.vit_family else "no", row.image_mparams, n(params),
            _signed(_rounding(result, "params")), _signed(peer.residual_params or 0),
            row.image_gflops, n(macs), n(2 * macs), _signed(_missed(result)),
            _signed(_rounding(result, "macs")), _signed(peer.residual_macs or 0), width,
            verdict(result)]


def _summary(results: Sequence[TowerResult]) -> list[str]:
    vit = [r for r in results if r.vit_family]
    others = [r for r in results if not r.vit_family]
    not_reconciled = [f"- `{r.row.model}`: {verdict(r)}" for r in results if not r.reconciled]
    widths = [r for r in results if r.width]
    return [
        f"- rows: {len(results)}; reconciled (params and FLOPs): "
        f"{sum(r.reconciled for r in results)}",
        f"- vision-transformer towers: {len(vit)}, reconciled {sum(r.reconciled for r in vit)}; "
        f"other towers (ResNet, ConvNeXt...): {len(others)}, reconciled "
        f"{sum(r.reconciled for r in others)}",
        f"- `image_width` not the tower's width: {len(widths)} rows "
        f"({', '.join(f'`{r.row.model}`' for r in widths) or 'none'})",
        "", "Rows that do not reconcile, and why:", "",
        *(not_reconciled or ["- none: every row reconciles"]),
    ]


def open_clip_published_page(table: OpenClipTable, results: Sequence[TowerResult]) -> Page:
    """The page of ``table``'s rows as counted and explained in ``results``."""
    lines = [
        "# open_clip's published model profile against vitprof", "",
        f"Source: {table.citation}, {table.source}; columns `image_size`, `image_width`, "
        "`image_mparams` and `image_gflops`, written by open_clip's `src/training/profiler.py` "
        "at that commit (`round(x / 1e6, 2)`, `round(flops / 1e9, 2)`).", "",
        "Each row's image tower (`open_clip:NAME`: `model.visual` alone, no weights) is counted "
        "by vitprof at the row's `image_size`, batch 1, on the meta device. Causes, each an "
        "exact amount (see `vitprof.checks.crosscheck.peers.open_clip_published`):", "",
        "- **FLOPs, not MACs**: `image_gflops` is `torch.utils.flop_counter.FlopCounterMode`'s "
        "total, 2 FLOPs per MAC of matmuls, convolutions and attention, bias and element-wise "
        "work excluded: the published figure is halved into MACs;",
        "- **counter misses**: kernels FlopCounterMode runs without a formula, priced by "
        "vitprof's records;",
        "- **rounding**: 2 x vitprof's MACs rounded to 0.01 GFLOPs, params to 0.01 M.", "",
        "A row is **reconciled** when these take vitprof's count exactly to both printed "
        "figures (residual 0). The `image_width` column is no count: it is "
        "`CLIPVisionCfg(**vision_cfg).width`, the dataclass default 768 for a timm tower whose "
        "config sets none; where it is not the tower's width the column says so.", "",
        "## Summary", "", *_summary(results), "", "## Every row", "",
        markdown_table(HEADERS, [_cells(r) for r in results]),
    ]
    return Page(FILES[0], "\n".join(lines) + "\n")
