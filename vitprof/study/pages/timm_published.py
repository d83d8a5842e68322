"""``timm_published.md``: timm's published table against vitprof, every transformer row explained.

The page renders the rows :func:`vitprof.study.published_rows.published_rows`
counted and explained (those of the shipped table whose model is defined in one of
:data:`~vitprof.study.published_rows.TRANSFORMER_MODULES` of the installed timm):
for every row the published figures, vitprof's, the named causes by group and the residual; a
summary of how many rows reconcile, why the others do not, and a figure of published against
vitprof GMACs. Building every model takes long (about 500 rows), so ``vitprof report
timm-published`` writes this page only when named, never with ``--all``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from vitprof.render import figures
from vitprof.render.figures import FigureData
from vitprof.render.tables import markdown_table
from vitprof.study.pages.markdown import Page, n
from vitprof.study.published_rows import TRANSFORMER_MODULES

if TYPE_CHECKING:
    from vitprof.checks.crosscheck.causes import Cause
    from vitprof.checks.crosscheck.peers.timm_published import TimmTable
    from vitprof.study.published_rows import RowResult

PAGE = "timm-published"
FILES = ("timm_published.md", "timm_published.png")  # the page and its figure


def _sum(causes: list[Cause], what: str) -> int:
    return sum(getattr(c, what) for c in causes)


def _signed(value: int) -> str:
    return f"{value:+,}" if value else "0"


HEADERS = ["model", "px", "module", "params (M) published", "vitprof params",
           "deploy form params", "rounding params", "residual params", "GMACs published",
           "vitprof MACs", "deploy form MACs", "fvcore rules MACs", "rounding MACs",
           "residual MACs", "reconciled"]


def _cells(result: RowResult) -> list[str]:
    row, e = result.row, result.explained
    head = [row.model, str(row.image_size), result.module, row.param_count]
    if e is None:
        return [*head, "", "", "", "", row.gmacs, "", "", "", "", "",
                f"not counted: {result.error.replace('|', '/')}"]
    g, peer = e.groups, e.peer
    vitprof_params = row.params - (peer.delta_params or 0)
    vitprof_macs = row.macs - (peer.delta_macs or 0)
    return [
        *head, n(vitprof_params), _signed(_sum(g["deploy form"], "params")),
        _signed(_sum(g["rounding"], "params")), _signed(peer.residual_params or 0), row.gmacs,
        n(vitprof_macs), _signed(_sum(g["deploy form"], "macs")),
        _signed(_sum(g["fvcore rules"], "macs")), _signed(_sum(g["rounding"], "macs")),
        _signed(peer.residual_macs or 0), "yes" if e.reconciled else "**no**",
    ]


def scatter(results: Sequence[RowResult]) -> FigureData:
    """Published GMACs against vitprof's, one point per counted row, reconciled or not."""
    points = [(r.row.model, float(r.row.gmacs),
               round((r.row.macs - (r.explained.peer.delta_macs or 0)) / 1e9, 6),
               r.explained.reconciled)
              for r in results if r.explained is not None]
    return FigureData("timm_published", "timm's published GMACs against vitprof's", {
        "models": [p[0] for p in points], "published": [p[1] for p in points],
        "vitprof": [p[2] for p in points], "reconciled": [p[3] for p in points],
    })


ROUNDING = 0.005  # GMACs: half the 0.01 G that timm prints


def _by_verdict(data: dict) -> list[tuple[str, str, list[int]]]:
    """Label, colour and indices of the reconciled rows, then of the others (if any)."""
    groups = []
    for reconciled, color, label in ((True, "#1f77b4", "reconciled"),
                                     (False, "#d62728", "not reconciled")):
        mine = [i for i, ok in enumerate(data["reconciled"]) if ok is reconciled]
        if mine:
            groups.append((f"{label} ({len(mine)})", color, mine))
    return groups


def _draw_against(ax: Axes, data: dict) -> None:
    """Published GMACs against vitprof's, log-log, with the diagonal."""
    for label, color, mine in _by_verdict(data):
        ax.scatter([data["vitprof"][i] for i in mine], [data["published"][i] for i in mine],
                   s=8, color=color, label=label)
    values = [v for v in data["vitprof"] + data["published"] if v > 0]
    if values:
        low, high = min(values) / 1.5, max(values) * 1.5
        ax.plot([low, high], [low, high], color="#7f7f7f", linewidth=0.8, label="equal")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("vitprof GMACs (as built, log scale)")
    ax.set_ylabel("published GMACs (log scale)")
    ax.set_title("published against vitprof", fontsize="small")
    ax.legend(loc="upper left", fontsize="small")


def _draw_difference(ax: Axes, data: dict) -> None:
    """(published - vitprof) / vitprof in per cent against vitprof's GMACs, with the band that
    timm's rounding alone explains; a point outside it needs a named cause."""
    shown = [i for i, v in enumerate(data["vitprof"]) if v > 0]
    percent = {i: 100 * (data["published"][i] - data["vitprof"][i]) / data["vitprof"][i]
               for i in shown}
    if shown:
        xs = sorted({data["vitprof"][i] for i in shown})
        band = [100 * ROUNDING / x for x in xs]
        ax.fill_between(xs, [-b for b in band], band, color="#dddddd",
                        label="timm's rounding to 0.01 G")
        ax.set_xscale("log")
        reach = 1.5 * max(abs(p) for p in percent.values())
        ax.set_ylim(-reach, reach)
    for label, color, mine in _by_verdict(data):
        mine = [i for i in mine if i in percent]
        ax.scatter([data["vitprof"][i] for i in mine], [percent[i] for i in mine], s=8,
                   color=color, label=label)
    ax.axhline(0, color="#7f7f7f", linewidth=0.8)
    ax.set_xlabel("vitprof GMACs (as built, log scale)")
    ax.set_ylabel("published - vitprof (% of vitprof)")
    ax.set_title("outside the grey band: a named cause (deploy form, fvcore rules)",
                 fontsize="small")
    ax.legend(loc="lower right", fontsize="small")


def _draw(fig: Figure, data: dict) -> None:
    fig.set_size_inches(11.0, 4.5)
    _draw_against(fig.add_subplot(1, 2, 1), data)
    _draw_difference(fig.add_subplot(1, 2, 2), data)


figures.register("timm_published", _draw)


def _why_not(results: Sequence[RowResult]) -> list[str]:
    lines = []
    for r in results:
        if r.explained is None:
            lines.append(f"- `{r.row.model}` at {r.row.image_size}px: not counted: {r.error}")
        elif not r.explained.reconciled:
            peer = r.explained.peer
            lines.append(f"- `{r.row.model}` at {r.row.image_size}px: residual "
                         f"{_signed(peer.residual_macs or 0)} MACs, "
                         f"{_signed(peer.residual_params or 0)} params after every named cause")
    return lines or ["- none: every row reconciles"]


def _preamble(table: TimmTable, rows: int) -> list[str]:
    return [
        "# timm's published table against vitprof", "",
        f"Source: {table.citation}, {table.source}; columns `param_count` (M) and "
        f"`infer_gmacs` (G), both rounded to 0.01 by timm's `benchmark.py`.", "",
        f"Rows: the {rows} rows whose model the installed timm defines in one of these modules "
        f"(the transformer family): {', '.join(f'`{m}`' for m in TRANSFORMER_MODULES)}. Each is "
        "counted by vitprof as built, at the row's `infer_img_size`, batch 1, meta device.", "",
        "Causes, each an exact amount from vitprof's op records (see "
        "`vitprof.checks.crosscheck.peers.timm_published`):", "",
        "- **deploy form**: timm counts the model after `timm.utils.reparameterize_model` "
        "(BatchNorm fused, branches merged), built with timm's non-fused attention (the "
        "differential attention of the `vit_d*` models computes A @ V once there, twice on "
        "its fused path); the amount is that form's count minus the built model's;",
        "- **fvcore rules**: timm's MACs come from fvcore, which adds LayerNorm/GroupNorm at 5 "
        "per element (4 without a weight), eval BatchNorm at 2 (1 without affine), a batch "
        "norm over batch statistics (weight standardisation) at 5 (4 without affine), "
        "bilinear upsampling at 4 per output element and adaptive average pooling at 1 per "
        "input element, and counts no `aten::baddbmm`;",
        "- **rounding**: the count those give, rounded to 0.01 as timm prints it.", "",
        "A row is **reconciled** when these causes take vitprof's count exactly to the published "
        "figure (residual 0): |published - (vitprof + deploy form + fvcore rules)| <= 0.005.",
    ]


def timm_published_page(table: TimmTable, results: Sequence[RowResult]) -> Page:
    """The page of ``table``'s rows as counted and explained in ``results``."""
    counted = [r for r in results if r.explained is not None]
    reconciled = sum(r.explained.reconciled for r in counted)  # type: ignore[union-attr]
    figure = scatter(results)
    lines = [*_preamble(table, len(results)), "", "## Summary", "",
             f"- rows: {len(results)}; counted by vitprof: {len(counted)}; "
             f"reconciled (params and GMACs): {reconciled}",
             f"- params reconciled: "
             f"{sum(r.explained.peer.residual_params == 0 for r in counted)}; "  # type: ignore[union-attr]
             f"GMACs reconciled: "
             f"{sum(r.explained.peer.residual_macs == 0 for r in counted)}",  # type: ignore[union-attr]
             "", "Rows that do not reconcile, and why:", "", *_why_not(results), "",
             f"![{figure.title}]({FILES[1]})", "", "## Every row", "",
             markdown_table(HEADERS, [_cells(r) for r in results])]
    return Page(FILES[0], "\n".join(lines) + "\n", ((FILES[1], figure),))
