"""``torchvision_published.md``: every classification and video weight of the installed
torchvision, its ``num_params`` and ``_ops`` against vitprof's count, one line each: reconciled,
or the cause.

The rows are :func:`vitprof.study.torchvision_rows.torchvision_rows`; ``vitprof report
torchvision-published`` writes the page (every model built on meta: minutes, so never with
``--all``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vitprof.render.tables import markdown_table
from vitprof.study.pages.markdown import Page, n

if TYPE_CHECKING:
    from vitprof.study.torchvision_rows import WeightResult

PAGE = "torchvision-published"
FILES = ("torchvision_published.md",)
HEADERS = ["weight", "kind", "px", "frames", "clip_len", "num_params", "vitprof params",
           "dropped modules (params)", "residual params",
           "_ops (GMACs)", "vitprof MACs", "rounding (MACs)", "residual MACs", "verdict"]


def _signed(value: int) -> str:
    return f"{value:+,}" if value else "0"


def verdict(result: WeightResult) -> str:
    """``reconciled``, or the cause: not counted (why), or the residual the rounding leaves."""
    peer = result.peer
    if peer is None:
        return f"not counted: {result.error}".replace("|", "/")
    if result.reconciled:
        return "reconciled"
    return (f"**not reconciled**: residual {_signed(peer.residual_macs or 0)} MACs, "
            f"{_signed(peer.residual_params or 0)} params after the named causes")


def _cells(result: WeightResult) -> list[str]:
    peer = result.peer
    head = [result.weight, result.kind, str(result.image_size), str(result.frames or ""),
            str(result.clip_length or ""), n(result.num_params)]
    if peer is None:
        return [*head, "", "", "", str(result.ops), "", "", "", verdict(result)]
    vitprof_params = result.num_params - (peer.delta_params or 0)
    vitprof_macs = (peer.macs or 0) - (peer.delta_macs or 0)
    return [*head, n(vitprof_params), _signed(sum(c.params for c in peer.causes)),
            _signed(peer.residual_params or 0), str(result.ops),
            n(vitprof_macs), _signed(sum(c.macs for c in peer.causes)),
            _signed(peer.residual_macs or 0), verdict(result)]


def torchvision_published_page(results: Sequence[WeightResult], version: str) -> Page:
    """The page of every weight in ``results``, from torchvision ``version``."""
    kinds = sorted({r.kind for r in results})
    counts = [f"{kind}: {sum(r.kind == kind for r in results)} weights, reconciled "
              f"{sum(r.reconciled for r in results if r.kind == kind)}" for kind in kinds]
    others = [f"- `{r.weight}`: {verdict(r)}" for r in results if not r.reconciled]
    clips = [f"- `{r.weight}`: `_ops` {r.ops} G is a {r.frames}-frame clip; at its clip_len "
             f"{r.clip_length} vitprof counts {n(r.at_clip_length)} MACs "
             f"({r.at_clip_length / 1e9:.3f} G)" for r in results if r.at_clip_length]
    lines = [
        "# torchvision's published weights against vitprof", "",
        f"Source: torchvision {version}, `torchvision.models.get_model_weights(name)` of every "
        "model of `torchvision.models` (classification) and `torchvision.models.video`, "
        "each weight's `meta[\"num_params\"]` and `meta[\"_ops\"]` (no download).", "",
        "Each weight's model is built with `weights=None` on the meta device, with the weight's "
        "class count and the sizes its weighted builder takes from its meta (ViT `image_size`, "
        "MaxViT `input_size`), counted by vitprof at batch 1 at the weight's crop size; a "
        "video weight over 16 frames, the clip every video `_ops` is counted over (the page "
        "names those whose `_docs` state another `clip_len`). `_ops` is labelled GFLOPS "
        "but is GMACs of matmuls and convolutions, bias excluded; its cause is the rounding "
        "to the decimals printed (three), computed from vitprof's count. `num_params` must "
        "equal vitprof's params, less the modules a weighted builder drops after loading "
        "(GoogLeNet's auxiliary classifiers `aux1`, `aux2`, which `weights=None` keeps). A "
        "weight is **reconciled** when both residuals are 0.", "",
        "## Summary", "", f"- weights: {len(results)}; reconciled (params and GMACs): "
        f"{sum(r.reconciled for r in results)}", *(f"- {c}" for c in counts), "",
        "Weights that do not reconcile, and why:", "",
        *(others or ["- none: every weight reconciles"]), "",
        f"Video weights whose `_ops` is not for the clip their accuracy is measured on "
        f"(`_docs`: `clip_len`): {len(clips)}", "", *(clips or ["- none"]), "",
        "## Every weight", "",
        markdown_table(HEADERS, [_cells(r) for r in results]),
    ]
    return Page(FILES[0], "\n".join(lines) + "\n")
