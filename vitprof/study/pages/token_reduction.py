"""``token_reduction.md``: DynamicViT, EViT and ToMe on timm's DeiT, counted by vitprof block by
block (:mod:`vitprof.study.token_reduction`), against the papers' published rows, with note 002's
Dynamic ViT as the first row and a figure of MACs per block against the dense DeiT.

Every figure on the page is derived: vitprof's counts, the closed forms of
:mod:`vitprof.study.token_reduction.closed_forms` written out as arithmetic beside them, and the
published rows as printed (``vitprof/data/token_reduction_published.csv``).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from matplotlib.figure import Figure

from vitprof.render import figures
from vitprof.render.figures import COLORS, FigureData
from vitprof.render.tables import markdown_table
from vitprof.render.tables import thousands as n
from vitprof.study.pages.markdown import Page
from vitprof.study.token_reduction.closed_forms import (
    block_macs,
    dynamic_vit_kept,
    evit_kept,
    fusion_macs,
    matching_macs,
    predictor_macs,
    tome_kept,
)
from vitprof.study.token_reduction.counts import BlockCount, ReducedCount
from vitprof.study.token_reduction.inputs import NoteRow, TokenReductionInputs
from vitprof.study.token_reduction.published import TOLERANCE, RowResult, printed

PAGE = "token-reduction"
FILES = ("token_reduction.md", "token_reduction_blocks.png")
GIGA = 10**9


def _label(found: ReducedCount) -> str:
    key, _, value = found.setting.partition("=")
    if found.setting == "dense":
        return "dense"
    if key == "rho":
        return f"DynamicViT rho = {value}"
    if key == "keep":
        rate, _, fuse = value.partition(" ")
        return f"EViT keep rate {rate}{', fused' if fuse else ''}"
    return f"ToMe r = {value}"


def _g(macs: int) -> str:
    return f"{macs / GIGA:.3f}"


# --------------------------------------------------------------------------- closed forms


def _block_arithmetic(found: ReducedCount, block: BlockCount) -> str:
    na, nm, d, m = block.attention_tokens, block.mlp_tokens, found.width, found.mlp_width
    return f"4·{na}·{d}² + 2·{na}²·{d} + 2·{nm}·{d}·{m}"


def _reduction_arithmetic(found: ReducedCount, block: BlockCount, previous: int) -> tuple[str, int]:
    """The closed form of the reduction module in ``block`` (tokens before it: ``previous``)
    as arithmetic, and its value; ("", 0) for a block without one."""
    key = found.setting.partition("=")[0]
    d = found.width
    if key == "rho" and block.attention_tokens < previous:
        patches = previous - 1
        return (f"{patches}·({d}² + {d}·{d // 2} + {d // 2}·{d // 4} + {d // 4}·2)",
                predictor_macs(patches, d))
    if key == "keep" and found.setting.endswith("fuse") and block.mlp_tokens < previous:
        dropped = block.attention_tokens - block.mlp_tokens + 1  # one fused token added
        return f"{dropped}·{d}", fusion_macs(dropped, d)
    if key == "r":
        na, head = block.attention_tokens, d // found.heads
        return f"{(na + 1) // 2}·{na // 2}·{head}", matching_macs(na, head)
    return "", 0


def agrees(found: ReducedCount) -> bool:
    """Whether every block's MACs and its reduction's equal their closed forms, and the
    patch embedding and head theirs."""
    outside = found.patches * 3 * found.patch_size**2 * found.width + found.width * found.classes
    return outside == found.outside_macs and all(row[-1] == "yes" for row in block_rows(found))


def token_path(found: ReducedCount) -> str:
    """The token counts in the order the blocks reach them: 197 -> 138 -> 97 -> 68."""
    path = [1 + found.patches]
    for block in found.blocks:
        for tokens in (block.attention_tokens, block.mlp_tokens):
            if tokens != path[-1]:
                path.append(tokens)
    return " -> ".join(map(str, path))


def block_rows(found: ReducedCount) -> list[list[str]]:
    """One row per block: tokens, vitprof's MACs, the closed forms and whether they agree."""
    rows, previous = [], 1 + found.patches
    for block in found.blocks:
        arithmetic = _block_arithmetic(found, block)
        closed = block_macs(block.attention_tokens, block.mlp_tokens, found.width,
                            found.mlp_width)
        reduction, reduction_closed = _reduction_arithmetic(found, block, previous)
        agree = closed == block.backbone_macs and reduction_closed == block.reduction_macs
        rows.append([str(block.index), str(block.attention_tokens), str(block.mlp_tokens),
                     n(block.backbone_macs), f"{arithmetic} = {n(closed)}",
                     n(block.reduction_macs),
                     f"{reduction} = {n(reduction_closed)}" if reduction else "",
                     n(block.reduction_vector_flops), "yes" if agree else "**no**"])
        previous = block.mlp_tokens
    return rows


def _tokens_text(found: ReducedCount) -> str:
    key, _, value = found.setting.partition("=")
    patches = found.patches
    if key == "rho":
        kept = dynamic_vit_kept(patches, float(value))
        return (f"DynamicViT keeps int({patches} × {value}^s) patch tokens at stage s = 1, 2, 3: "
                f"{', '.join(map(str, kept))}, and the class token.")
    if key == "keep":
        rate, _, fuse = value.partition(" ")
        kept = evit_kept(patches, float(rate), fuse == "fuse")
        extra = " and 1 fused token" if fuse else ""
        return (f"EViT keeps 1 + ceil({rate} × (N - 1)) tokens{extra} in blocks 3, 6, 9, "
                f"between attention and MLP: {1 + patches} -> {' -> '.join(map(str, kept))}.")
    if key == "r":
        kept = tome_kept(patches, int(value), len(found.blocks))
        return (f"ToMe merges {value} tokens in every block between attention and MLP: "
                f"{1 + patches} - {value}·(i + 1) after block i: "
                f"{', '.join(map(str, kept))}.")
    return f"Every block sees all {1 + patches} tokens."


# ------------------------------------------------------------------------------- figure


def blocks_figure(counts: Sequence[ReducedCount]) -> FigureData:
    """MACs per block of each count (the dense one first), the reduction's share apart."""
    return FigureData("token_reduction_blocks", "DeiT-S: MACs per block, token reduction "
                      "against the dense model", {
                          "labels": [_label(c) for c in counts],
                          "macs": [[b.macs for b in c.blocks] for c in counts],
                          "reduction": [[b.reduction_macs for b in c.blocks] for c in counts],
                      })


_LINES = ("#7f7f7f", COLORS["attn_qkv"], COLORS["mlp"], COLORS["attn_core"], COLORS["head"])


def _draw_blocks(fig: Figure, data: dict) -> None:
    """Above: MACs per block, one line per method, the dense model grey; below: the
    reduction's own MACs per block (predictor, fusion, matching), log scale."""
    fig.set_size_inches(7.0, 6.5)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    for i, (label, macs) in enumerate(zip(data["labels"], data["macs"], strict=True)):
        style = "--" if i == 0 else "-"
        top.plot(range(len(macs)), [m / 1e6 for m in macs], style, marker="o", markersize=3,
                 color=_LINES[i % len(_LINES)], label=label)
    top.set_ylabel("MACs per block (M)")
    top.set_ylim(bottom=0)
    top.legend(fontsize="small")
    for i, (label, macs) in enumerate(zip(data["labels"], data["reduction"], strict=True)):
        points = [(b, m / 1e6) for b, m in enumerate(macs) if m]
        if points:
            xs, ys = zip(*points, strict=True)
            bottom.plot(xs, ys, marker="o", markersize=3, color=_LINES[i % len(_LINES)],
                        label=label)
    bottom.set_yscale("log")
    bottom.set_ylabel("reduction's own MACs (M, log)")
    bottom.set_xlabel("block")
    bottom.set_xticks(range(len(data["macs"][0])))


figures.register("token_reduction_blocks", _draw_blocks)


# ------------------------------------------------------------------------------- page


def _published_cells(result: RowResult) -> list[str]:
    row = result.row
    where = row.source.split(" (")[0].removesuffix(" README.md")
    source = f"[{where}@{row.commit[:7]}]({row.url})" if row.commit else f"[{where}]({row.url})"
    head = [row.paper, row.row, row.backbone, row.setting, row.published, row.unit]
    found = result.count
    if found is None:
        return [*head, "", "", "", "", "", "", f"not counted: {row.backbone} is not built here",
                source]
    verdict = "; ".join(result.causes) or ("within 2%" if result.reproduced else "")
    label = "**reproduced**" if result.reproduced else "**not reproduced**"
    return [*head, token_path(found), n(found.backbone_macs), n(found.reduction_macs),
            n(found.macs), "yes" if agrees(found) else "**no**", f"{100 * result.off:+.1f}%",
            f"{label}: {verdict}" if verdict else label, source]


def _note_lines(note: NoteRow) -> list[str]:
    total = note.backbone_macs + note.predictor_macs
    return [
        "| model | tokens per block | backbone MACs | predictors' MACs | MACs | dense MACs | "
        "saved |",
        "| :--- | :--- | ---: | ---: | ---: | ---: | ---: |",
        f"| note002_dynamic_vit (predictors before blocks {', '.join(map(str, note.prune_at))})"
        f" | {', '.join(map(str, note.tokens))} | {n(note.backbone_macs)} | "
        f"{n(note.predictor_macs)} | {n(total)} | {n(note.dense_macs)} | "
        f"{100 * (1 - total / note.dense_macs):.1f}% |",
    ]


# DynamicViT issue 35's figure: fvcore's FlopCountAnalysis of DynamicViT-LVViT-M/0.7
FVCORE_LVVIT_M = 12_962_899_456
# LV-ViT-M as DynamicViT's main.py builds it: D, MLP hidden width, blocks, pruning locations
LVVIT_M = (512, 1536, 20, (5, 10, 15))


def _fvcore_issue_lines(dense: ReducedCount, pruned: ReducedCount, published: Decimal
                        ) -> list[str]:
    """DynamicViT issue 35: fvcore's :data:`FVCORE_LVVIT_M` for DynamicViT-LVViT-M/0.7 against
    the README's ``published`` G. In training mode DynamicViT's code keeps every token and
    masks the attention instead, so a FlopCountAnalysis without ``model.eval()`` counts the
    dense blocks and the predictors on all tokens: LV-ViT-M's blocks (:data:`LVVIT_M`) dense
    and pruned, in closed form, and the same on DeiT-S counted by vitprof (``dense``,
    ``pruned``)."""
    width, mlp, depth, stages = LVVIT_M
    patches, rho = dense.patches, 0.7
    kept = [patches, *dynamic_vit_kept(patches, rho)]
    bounds = [0, *stages, depth]
    tokens = [1 + kept[s] for s in range(len(bounds) - 1) for _ in range(bounds[s], bounds[s + 1])]
    dense_blocks = depth * block_macs(1 + patches, 1 + patches, width, mlp)
    pruned_blocks = sum(block_macs(t, t, width, mlp) for t in tokens)
    gap = dense_blocks - pruned_blocks
    train_predictors = len(stages) * predictor_macs(patches, width)
    eval_predictors = sum(predictor_macs(p, width) for p in kept[:-1])
    left = FVCORE_LVVIT_M - gap - (train_predictors - eval_predictors)
    deit_train = dense.macs + 3 * predictor_macs(dense.patches, dense.width)
    n0 = 1 + patches
    return [
        f"## fvcore's {FVCORE_LVVIT_M / GIGA:.2f} G against DynamicViT's {published} G", "",
        "[raoyongming/DynamicViT#35](https://github.com/raoyongming/DynamicViT/issues/35): "
        f"`FlopCountAnalysis` gives {n(FVCORE_LVVIT_M)} for DynamicViT-LVViT-M/{rho}, whose "
        f"README says {published} G. In training mode DynamicViT's code keeps every token and "
        "masks the attention with the predictors' decisions; only in eval mode does it drop "
        "them ([#14](https://github.com/raoyongming/DynamicViT/issues/14): \"add "
        "`model.eval()` before `FlopCountAnalysis`\"). A count of a model left in training "
        "mode is the dense backbone plus the predictors on all tokens. In closed form, "
        f"LV-ViT-M's {depth} blocks (D = {width}, MLP {mlp}, predictors before blocks "
        f"{', '.join(map(str, stages))}; {' -> '.join(str(1 + k) for k in kept)} tokens):", "",
        f"- dense: {depth} × (4·{n0}·{width}² + 2·{n0}²·{width} + 2·{n0}·{width}·{mlp}) = "
        f"{n(dense_blocks)}",
        f"- pruned: the same at {', '.join(map(str, tokens))} tokens = {n(pruned_blocks)}; the "
        f"gap {n(gap)} MACs",
        f"- predictors on all tokens {len(stages)} × {n(predictor_macs(patches, width))} = "
        f"{n(train_predictors)}, against {n(eval_predictors)} on "
        f"{', '.join(map(str, kept[:-1]))} tokens",
        f"- {n(FVCORE_LVVIT_M)} - {n(gap)} - {n(train_predictors - eval_predictors)} = "
        f"{n(left)} = {left / GIGA:.2f} G, {100 * (left / (float(published) * GIGA) - 1):+.1f}%"
        f" from {published} G: the rest is LV-ViT's convolutional stem and its dense "
        "token-labelling head (on every token in training mode), which vitprof does not "
        "build, and fvcore's LayerNorm (5 per element).", "",
        f"The same on DeiT-S, counted by vitprof: dense {n(dense.macs)} + three predictors on "
        f"{patches} tokens 3 × {n(predictor_macs(dense.patches, dense.width))} = "
        f"{n(deit_train)} ({_g(deit_train)} G) in training mode, against {n(pruned.macs)} "
        f"({_g(pruned.macs)} G) with the tokens dropped.",
    ]


def token_reduction_page(inputs: TokenReductionInputs) -> Page:
    """The page of ``inputs``, with its figure."""
    published = inputs.published
    counted = [r for r in published if r.count is not None]
    papers = sorted({r.row.paper for r in counted if r.reproduced})
    figure = blocks_figure(inputs.per_block)
    dense = inputs.per_block[0]
    rho = next(c for c in inputs.per_block if c.setting.startswith("rho"))
    lvvit_m = next(r for r in published if r.row.backbone == "lvvit_m")
    dynamic = [r for r in counted if r.row.paper == "DynamicViT"]
    deit_b = next(r.count for r in dynamic if r.count and "DeiT-B" in r.row.row)
    lines = [
        "# Token reduction: DynamicViT, EViT and ToMe counted", "",
        "Three ways to cut a ViT's tokens, written on timm's DeiT from the papers' algorithms "
        "(`vitprof.study.token_reduction.models`, no weights) and counted by vitprof on the "
        "meta device at 224 px, batch 1, block by block: block i is everything under the "
        "module `blocks.i`, and the reduction's own modules in it (DynamicViT's predictor, "
        "EViT's fusion, ToMe's matching) are counted apart from the backbone's layers. "
        "Top-k, argsort, gathers and ToMe's size-weighted merges cost no MACs (vector work "
        "only); ToMe's `scatter_add` is priced as one add per element added.", "",
        "- **DynamicViT** (Rao et al. 2021): before blocks 3, 6, 9 a predictor (LayerNorm, "
        "Linear(D, D), GELU; local half and mean-pooled global half; Linear(D, D/2), GELU, "
        "Linear(D/2, D/4), GELU, Linear(D/4, 2), softmax) scores the patch tokens and top-k "
        "keeps int(196 ρ^s) at stage s.",
        "- **EViT** (Liang et al. 2022): in blocks 3, 6, 9 (the paper's 4, 7, 10) the attention "
        "runs on all tokens; before the MLP the ceil(κ (N - 1)) tokens with the most [CLS] "
        "attention are kept and, fused, the rest become one token, their attention-weighted "
        "sum.",
        "- **ToMe** (Bolya et al. 2023): in every block, between attention and MLP, bipartite "
        "soft matching on the keys (averaged over heads, cosine similarity) merges r tokens; "
        "proportional attention adds log(size) to each key's logits.", "",
        "Convention: MACs (FLOPs = 2 × MACs). The papers' \"FLOPs\" are MACs: DynamicViT's "
        "FLOPs column and ToMe's GFLOPs hold MACs, EViT's column says MACs (G).", "",
        "## Summary", "",
        f"- published rows: {len(published)} ({', '.join(sorted({r.row.paper for r in published}))}"
        f"); counted by vitprof: {len(counted)}; reproduced within {TOLERANCE:.0%} or the "
        f"difference named as arithmetic: {sum(r.reproduced for r in counted)}, from "
        f"{len(papers)} papers ({', '.join(papers)})",
        f"- not counted: {len(published) - len(counted)} (LV-ViT backbones: LV-ViT is not a "
        "timm model; their arithmetic for the fvcore issue is below)",
        "- ToMe's README publishes accuracy and images per second, no FLOPs: its rows are its "
        "paper's DeiT rows (arXiv 2210.09461) as paperswithcode lists them", "",
        "## Note 002's Dynamic ViT, the first row", "",
        "[note002_dynamic_vit.md](note002_dynamic_vit.md): the note's CIFAR-ViT with vitprof's "
        "assumed predictors (LayerNorm, Linear(D, D/4), GELU, Linear(D/4, 1)) and keep ratios "
        "1, 1, 0.7, 0.7, 0.49, 0.49, counted the same way (its predictors are the modules "
        "`predictors.*`).", "",
        *_note_lines(inputs.note), "",
        "## Published rows", "",
        f"A row is **reproduced** when vitprof's MACs (the reduction's own included) round to "
        f"the printed figure, or lie within {TOLERANCE:.0%} of it, or arithmetic named in the "
        "verdict takes the one to the other. *tokens*: the token counts the blocks reach, "
        "in order; *closed forms agree*: every block's MACs and its reduction's equal the "
        "closed forms written out under Per block (and the patch embedding's and head's "
        "theirs).", "",
        markdown_table(["paper", "row", "backbone", "setting", "published", "unit", "tokens",
                        "backbone MACs", "reduction MACs", "vitprof MACs", "closed forms agree",
                        "off", "verdict", "source"], [_published_cells(r) for r in published]),
        "",
        f"DynamicViT's {len(dynamic)} DeiT rows: one rule fits "
        f"{sum(r.rounds or r.cut for r in dynamic)} of them, the full count (predictors "
        "included) cut to one decimal rather than rounded; the predictors left out fits "
        f"{sum(r.rounds or r.without_reduction for r in dynamic)} (not DeiT-B, whose "
        "backbone alone rounds to "
        f"{printed(deit_b.backbone_macs, Decimal('0.1'))}"
        "). Its column says FLOPs and holds MACs: in FLOPs, 2 × MACs, DeiT-S's row would be "
        f"{2 * next(r for r in dynamic if 'DeiT-S' in r.row.row).row.value} G.", "",
        "## Per block", "",
        "Each block's tokens (attention, MLP), vitprof's MACs of the backbone's layers and of "
        "the reduction module, each beside its closed form "
        "(`vitprof.study.token_reduction.closed_forms`), and the reduction's element-wise work "
        "(vector FLOPs, not in the MACs): DynamicViT's GELUs, pooling and softmax; EViT's "
        "[CLS]-attention mean; ToMe's key mean and norms, best-match max and the merges' "
        "size weighting, adds (`scatter_add`) and division. The top-k, sorts, gathers and "
        "concatenations move tokens and cost nothing.", "",
    ]
    for found in inputs.per_block:
        lines += [f"### {found.backbone}: {_label(found)}", "", _tokens_text(found), "",
                  markdown_table(["block", "attention tokens", "MLP tokens", "backbone MACs",
                                  "closed form", "reduction MACs", "closed form",
                                  "reduction vector FLOPs", "agree"],
                                 block_rows(found)), "",
                  f"Outside the blocks (patch embedding {found.patches}·3·{found.patch_size}²·"
                  f"{found.width}, head {found.width}·{found.classes}): {n(found.outside_macs)};"
                  f" total {n(found.macs)} MACs ({_g(found.macs)} G), the reduction's "
                  f"{n(found.reduction_macs)}.", ""]
    lines += [f"![{figure.title}]({FILES[1]})", "",
              *_fvcore_issue_lines(dense, rho, lvvit_m.row.value)]
    return Page(FILES[0], "\n".join(lines) + "\n", ((FILES[1], figure),))
