"""One model's page: conventions, stages, components, blocks, cross-check, scaling.

Every breakdown table ends with a ``total`` row, and its rows add up to it exactly (integers) or
to 100.00% within rounding (shares); the image-size table instead carries a ``total MACs``
column that its other MAC columns add up to. Tables are drawn with
:func:`vitprof.render.tables.markdown_table`. Figures are returned as :class:`FigureData` with the
file name the markdown links to (relative, beside the markdown file);
:mod:`vitprof.study.generate` writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vitprof.core.records import Counts
from vitprof.core.vocab import Component
from vitprof.count.result import Profile
from vitprof.render.crosscheck import crosscheck_document
from vitprof.render.figures import FigureData, block_macs, component_shares, file_stem, sweep_macs
from vitprof.render.formats import render
from vitprof.render.sweep import crossover_text, sweep_cells
from vitprof.render.tables import giga, header_lines, markdown_table
from vitprof.render.tables import thousands as n

if TYPE_CHECKING:
    from vitprof.study.page_inputs import ClosedFormCrossover, ModelPageInputs


@dataclass(frozen=True)
class Page:
    """A markdown file, the figures it links to (by file name relative to it) and the warnings
    of the analysis behind it (also in its text)."""

    name: str  # file name, e.g. "vit_b_16.md"
    text: str
    figures: tuple[tuple[str, FigureData], ...] = ()
    warnings: tuple[str, ...] = ()


def pct(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole`` with two decimals ("0.00%" when whole is 0)."""
    return f"{100 * part / whole:.2f}%" if whole else "0.00%"


# ------------------------------------------------------------------------------- tables


def stages(profile: Profile) -> list[tuple[str, Counts]]:
    """Patch embedding, tokens, the encoder (its blocks, then what runs outside them), head.

    The encoder's blocks are every record with a block index; "final norm" is the LayerNorm
    work outside the blocks; anything else outside the blocks and not in patch_embed, tokens
    or head is listed as "other, outside blocks" (only when there is some).
    """
    outside = profile.outside
    inside = sum((b.total for b in profile.blocks), Counts())
    named = (Component.PATCH_EMBED, Component.TOKENS, Component.NORM, Component.HEAD)
    rest = sum((v for c, v in outside.items() if c not in named), Counts())
    rows = [
        ("patch embedding", outside[Component.PATCH_EMBED]),
        ("tokens (class token, position embedding)", outside[Component.TOKENS]),
        (f"encoder: {len(profile.blocks)} blocks", inside),
        ("encoder: final norm", outside[Component.NORM]),
        ("head", outside[Component.HEAD]),
    ]
    if rest != Counts():
        rows.append(("other, outside blocks", rest))
    return rows


def breakdown_table(rows: Sequence[tuple[str, Counts]], total: Counts, label: str) -> str:
    """Params, MACs (with shares), FLOPs and vector FLOPs per row, then the total row."""
    headers = [label, "params", "% params", "MACs", "% MACs", "FLOPs", "vector FLOPs"]
    cells = [
        [name, n(c.params), pct(c.params, total.params), n(c.macs), pct(c.macs, total.macs),
         n(c.flops), n(c.vector_flops)]
        for name, c in rows
    ]
    summed = sum((c for _, c in rows), Counts())
    cells.append(["total", n(summed.params), pct(summed.params, total.params), n(summed.macs),
                  pct(summed.macs, total.macs), n(summed.flops), n(summed.vector_flops)])
    return markdown_table(headers, cells)


_BLOCK_PARTS = (
    (Component.NORM, "LayerNorms (norm)"),
    (Component.ATTN_QKV, "attention: q, k, v projections (attn_qkv)"),
    (Component.ATTN_CORE, "attention: QK^T, softmax, AV (attn_core)"),
    (Component.ATTN_PROJ, "attention: output projection (attn_proj)"),
    (Component.MLP, "MLP (mlp)"),
    (Component.OTHER, "other"),
)


def one_block_table(profile: Profile, index: int) -> str:
    """One block's params, MACs and vector FLOPs per part, with shares of the block."""
    block = profile.blocks[index].components
    total = profile.blocks[index].total
    headers = ["part", "params", "MACs", "% of block MACs", "vector FLOPs"]
    cells = [
        [label, n(block[c].params), n(block[c].macs), pct(block[c].macs, total.macs),
         n(block[c].vector_flops)]
        for c, label in _BLOCK_PARTS if block[c] != Counts()
    ]
    cells.append(["total", n(total.params), n(total.macs), pct(total.macs, total.macs),
                  n(total.vector_flops)])
    return markdown_table(headers, cells)


def blocks_table(profile: Profile) -> str:
    """Every block's params and MACs (attention, MLP, all), the outside row and the total."""
    headers = ["block", "params", "attention MACs", "MLP MACs", "other MACs", "MACs",
               "vector FLOPs"]

    def row(label: str, parts: dict[Component, Counts]) -> list[str]:
        total = sum(parts.values(), Counts())
        attention = sum(parts[c].macs for c in (Component.ATTN_QKV, Component.ATTN_CORE,
                                                Component.ATTN_PROJ))
        mlp = parts[Component.MLP].macs
        return [label, n(total.params), n(attention), n(mlp), n(total.macs - attention - mlp),
                n(total.macs), n(total.vector_flops)]

    cells = [row(str(b.index), b.components) for b in profile.blocks]
    cells.append(row("outside blocks", profile.outside))
    cells.append(row("total", profile.components))
    return markdown_table(headers, cells)


def blocks_differ(profile: Profile) -> bool:
    """Whether some block's counts (any component, any unit) differ from block 0's: only then
    is a per-block figure worth drawing."""
    return any(b.components != profile.blocks[0].components for b in profile.blocks[1:])


def same_blocks_text(profile: Profile) -> str:
    """The sentence that stands for the per-block figure when every block counts the same."""
    total, count = profile.blocks[0].total, len(profile.blocks)
    counts = f"{n(total.params)} params and {n(total.macs)} MACs"
    if count == 1:
        return f"The model has one block ({counts}), so no per-block figure is drawn."
    return f"All {count} blocks count the same ({counts} each), so no per-block figure is drawn."


def closed_form_text(found: ClosedFormCrossover | None, blocks_alike: bool = True) -> str:
    """One sentence on the closed form's crossover, or "" when there is none; where the blocks
    are not ``blocks_alike``, one more on why the model's crossover differs from it."""
    if found is None:
        return ""
    text = (
        f"The closed form (`vitprof.models.closed_form`, spec D = {found.width}, "
        f"M = {found.mlp_width}) "
        f"has core = 2 N^2 D and MLP = 2 N D M per block: N* = M = {float(found.tokens):,.1f} "
        "tokens."
    )
    if blocks_alike:
        return text
    return (f"{text} That N* is per block, for a block that sees all N tokens; this model's "
            "blocks differ (see Per block), so the whole model's N*, measured above in the "
            "tokens of its input, lies elsewhere: both are right.")


# ------------------------------------------------------------------------------- the page


def _totals_lines(profile: Profile) -> list[str]:
    t = profile.totals
    return [
        f"- params: {n(t.params)}",
        f"- MACs: {n(t.macs)} ({giga(t.macs)} GMACs)",
        f"- FLOPs = 2 x MACs: {n(t.flops)}",
        f"- vector FLOPs (element-wise work, not in the FLOPs): {n(t.vector_flops)}",
    ]


def _warnings_lines(warnings: Sequence[str]) -> list[str]:
    """A "Warnings" section listing ``warnings`` (counts they concern may be incomplete), or
    nothing when there are none."""
    if not warnings:
        return []
    return ["", "## Warnings", "", "The counts below may be incomplete:", "",
            *(f"- {message}" for message in warnings)]


def model_page(inputs: ModelPageInputs, about: Sequence[str] = ()) -> Page:
    """The page of one model from what :func:`vitprof.study.page_inputs.model_page_inputs`
    computed for it, with its figures; ``about``, paragraphs on what the model is, go first
    under "About this model"."""
    profile, result = inputs.profile, inputs.scaling
    name, stem = profile.model, file_stem(profile.model)
    shares = component_shares(profile)
    figures: list[tuple[str, FigureData]] = [(f"{stem}_components.png", shares)]
    lines = [f"# {name}", "", *(f"- {line}" for line in header_lines(profile))]
    if about:
        lines += ["", "## About this model", ""]
        lines += [line for paragraph in about for line in (paragraph, "")][:-1]
    lines += _warnings_lines(profile.warnings)
    lines += ["", "## Totals", "", *_totals_lines(profile)]
    lines += ["", "## Per stage", "", breakdown_table(stages(profile), profile.totals, "stage")]
    lines += ["", "## Per component", "",
              breakdown_table(list(profile.components.items()), profile.totals, "component"),
              "", f"![{shares.title}]({figures[0][0]})"]
    if profile.blocks:
        lines += [
            "", "## Per block", "",
            "One block (block 0), part by part. Parameter counts are not MACs: a linear layer "
            "uses each weight once per token, so its MACs are its weights x the tokens; the "
            "attention core has MACs and no parameters.", "",
            one_block_table(profile, 0), "", "Every block, and what runs outside them:", "",
            blocks_table(profile), "",
        ]
        if blocks_differ(profile):
            per_block = block_macs(profile)
            figures.append((f"{stem}_blocks.png", per_block))
            lines.append(f"![{per_block.title}]({figures[-1][0]})")
        else:
            lines.append(same_blocks_text(profile))
    lines += ["", "## Cross-check with other counters", "",
              render(crosscheck_document(inputs.crosscheck), "markdown").rstrip("\n")]
    if inputs.not_swept:
        lines += ["", "## Cost against image size", "", f"{inputs.not_swept.capitalize()}."]
    if result is not None:
        scaling = sweep_macs(result)
        figures.append((f"{stem}_scaling.png", scaling))
        lines += [
            "", "## Cost against image size", "",
            "Counted by vitprof at each size (meta device, batch 1). *other MACs* are all but "
            "the attention core's and the MLP's, the q/k/v and output projections among them; "
            "the figure's grey curve, *outside attention layer and MLP*, leaves the projections "
            "out. Dotted lines mark the sizes the model is made for (its own and, where "
            "vitprof knows them, those of its published weights).", "",
            markdown_table(*sweep_cells(result)), "",
            " ".join(filter(None, [crossover_text(result), closed_form_text(
                inputs.closed_form, not profile.blocks or not blocks_differ(profile))])),
            "", f"![{scaling.title}]({figures[-1][0]})",
        ]
    return Page(f"{stem}.md", "\n".join(lines) + "\n", tuple(figures), profile.warnings)
