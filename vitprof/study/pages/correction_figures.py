"""The figures of ``corrections.md``: the notes' figures against vitprof's, and note 002's linear
against softmax attention as the note writes them.

Both take finished results: the corrections measured by :mod:`vitprof.study.corrections`, and
the spec of note 002's model (:class:`~vitprof.models.closed_form.ViTSpec`), whose closed forms
below are arithmetic on its width, heads and tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from vitprof.render import figures
from vitprof.render.figures import COLORS, FigureData

if TYPE_CHECKING:
    from vitprof.models.closed_form import ViTSpec
    from vitprof.study.corrections import Correction

CLAIMS_FILE = "corrections_claims.png"
ATTENTION_FILE = "corrections_note002_attention.png"
OFF = 1.1  # a point further than this ratio from equal values is labelled with its claim
NEAR = 1.5  # labelled points closer than this ratio on both axes share one label
CLOSE = 1.03  # points within this ratio of equal values are drawn again, in per cent
SAME = 1.0005  # in that drawing, labelled points this close on y share one label


def claimed_vs_measured(found: Sequence[Correction]) -> FigureData:
    """Every correction with a positive note's value and a positive measured value (a log scale
    shows no zero), in the corrections' order: the claim, its verdict, whether the note's value
    is vitprof's evaluation of its formula or code, the note's value and vitprof's."""
    rows = [c for c in found if c.claim.value and c.claim.value > 0 and c.measured > 0]
    return FigureData("claims", "The notes' figures against vitprof's", {
        "claims": [c.claim.id for c in rows],
        "verdicts": [str(c.verdict) for c in rows],
        "evaluated": [c.claim.evaluated for c in rows],
        "claimed": [float(c.claim.value) for c in rows],  # type: ignore[arg-type]
        "measured": [float(c.measured) for c in rows],
    })


def _token_grid(width: int, tokens: int) -> list[int]:
    """Powers of two from 8 to 8 x ``width``, with the note's ``tokens`` and ``width`` (where
    the two costs cross) added."""
    grid = {2 ** k for k in range(3, (8 * width).bit_length())} | {tokens, width}
    return sorted(grid)


def attention_against_tokens(spec: ViTSpec) -> FigureData:
    """MACs of one block's attention core against the token count N, for note 002's width D
    and heads H (the note's model: D = 512, H = 8, N = 65 at 32 px with 4 px patches).

    * softmax attention, Q K^T then A V over H heads of width d = D / H: H (N^2 d + N^2 d)
      = 2 N^2 D;
    * the linear attention as note 002 writes it, ``Context = K.T @ V # (D, D)`` then
      ``Q @ Context`` with no heads: N D^2 + N D^2 = 2 N D^2;
    * the same read per head (vitprof's reading, not the note's): H (N d^2 + N d^2)
      = 2 N D^2 / H.

    At N = 65, D = 512: softmax 2 x 65^2 x 512 = 4,326,400, the linear attention as written
    2 x 65 x 512^2 = 34,078,720 (x7.9), per head (H = 8) 34,078,720 / 8 = 4,259,840. The
    linear attention costs less than softmax only past N = D tokens.
    """
    width, heads = spec.width, spec.heads
    tokens = spec.prefix_tokens + spec.num_patches
    grid = _token_grid(width, tokens)
    title = "Note 002: attention core MACs per block against tokens"
    return FigureData("note002_attention", title, {
        "width": width, "heads": heads, "tokens": tokens, "grid": grid,
        "softmax": [2 * n * n * width for n in grid],
        "linear": [2 * n * width * width for n in grid],
        "per_head": [2 * n * width * width // heads for n in grid],
    })


_VERDICT_COLORS = {"correct": "#2ca02c", "correct only for": "#1f77b4",
                   "declared approximation": "#9467bd", "wrong": "#d62728",
                   "misleading": "#ff7f0e"}


def _scatter_by_verdict(ax: Axes, xs: list[float], ys: list[float], data: dict,
                        shown: list[int]) -> None:
    """The points ``shown`` (indices), coloured by verdict, hollow where evaluated."""
    for verdict, color in _VERDICT_COLORS.items():
        for evaluated, fill in ((False, color), (True, "none")):
            mine = [i for i in shown
                    if (data["verdicts"][i], data["evaluated"][i]) == (verdict, evaluated)]
            if mine:
                label = f"{verdict} ({len(mine)})" + (", evaluated" if evaluated else "")
                ax.scatter([xs[i] for i in mine], [ys[i] for i in mine], s=18, label=label,
                           facecolors=fill, edgecolors=color, zorder=3)


def _draw_claims(fig: Figure, data: dict) -> None:
    """Above: the note's value / vitprof's against vitprof's value, both on log scales, the
    points more than :data:`OFF` off labelled; below: the points within :data:`CLOSE` of 1
    as the difference in per cent, linear, every one off 1 labelled, so that a figure 0.1%
    off does not sit on the line of equal values."""
    fig.set_size_inches(7.0, 8.0)
    wide, close = fig.subplots(2, 1, height_ratios=(3, 2))
    xs = data["measured"]
    ratios = [c / m for c, m in zip(data["claimed"], xs, strict=True)]
    everything = list(range(len(xs)))
    _scatter_by_verdict(wide, xs, ratios, data, everything)
    for ax in (wide, close):
        ax.set_xscale("log")
        ax.axhline(1 if ax is wide else 0, color="#7f7f7f", linewidth=0.8, zorder=1)
        ax.grid(True, which="major", alpha=0.3)
    wide.set_yscale("log")
    wide.set_ylabel("the note's value / vitprof's (log scale)")
    wide.legend(loc="upper right", fontsize="x-small")
    off = [i for i in everything if max(ratios[i], 1 / ratios[i]) > OFF]
    groups = figures.label_groups([xs[i] for i in off], [ratios[i] for i in off], NEAR)
    figures.place_labels(wide, [(xs[off[g[0]]], ratios[off[g[0]]]) for g in groups],
                         [", ".join(data["claims"][off[i]] for i in g) for g in groups],
                         [(xs[i], ratios[i]) for i in everything])
    near = [i for i in everything if max(ratios[i], 1 / ratios[i]) <= CLOSE]
    percent = [100 * (r - 1) for r in ratios]
    _scatter_by_verdict(close, xs, percent, data, near)
    limit = 100 * (CLOSE - 1)
    close.set_ylim(-limit, limit)
    close.set_xlim(wide.get_xlim())
    close.set_ylabel("the note's value - vitprof's, % of vitprof's")
    close.set_xlabel("vitprof's value (log scale; hollow: vitprof's evaluation of the note's "
                     "formula)")
    apart = [i for i in near if ratios[i] != 1]
    groups = figures.label_groups([xs[i] for i in apart], [ratios[i] for i in apart], NEAR,
                                  near_y=SAME)
    figures.place_labels(close, [(xs[apart[g[0]]], percent[apart[g[0]]]) for g in groups],
                         [", ".join(data["claims"][apart[i]] for i in g) for g in groups],
                         [(xs[i], percent[i]) for i in near])


def _draw_attention(fig: Figure, data: dict) -> None:
    ax = fig.add_subplot()
    grid, width, heads = data["grid"], data["width"], data["heads"]
    lines = (("softmax", "softmax attention, 2 N^2 D", COLORS["attn_core"], "-"),
             ("linear", "linear attention as written, 2 N D^2", COLORS["attn_qkv"], "-"),
             ("per_head", f"per head (our reading), 2 N D^2 / H, H = {heads}",
              COLORS["attn_qkv"], "--"))
    for key, label, color, style in lines:
        ax.plot(grid, data[key], label=label, color=color, linestyle=style)
    at = grid.index(data["tokens"])
    for key, _, color, _ in lines:
        ax.plot(data["tokens"], data[key][at], marker="o", color=color, zorder=3)
    ax.axvline(data["tokens"], color="#999999", linestyle=":", linewidth=1)
    ax.annotate(f"the note's N = {data['tokens']}", xy=(data["tokens"], 0.98),
                xycoords=("data", "axes fraction"), xytext=(4, 0), textcoords="offset points",
                va="top", fontsize="small")
    ax.annotate(f"N = D = {width}", xy=(width, data["softmax"][grid.index(width)]),
                xytext=(6, -12), textcoords="offset points", fontsize="small")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"tokens N (log scale), D = {width}")
    ax.set_ylabel("MACs per block (log scale)")
    ax.legend(loc="lower right", fontsize="small")


figures.register("claims", _draw_claims)
figures.register("note002_attention", _draw_attention)
