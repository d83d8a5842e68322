"""``vitprof formula``: closed-form params, MACs and vector FLOPs of a ViT spec, no model run.

The spec comes from a zoo model (inferred from the model built on meta) or from flags alone;
flags given with a model override the fields they name.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import TYPE_CHECKING

from vitprof.cli.commands.common import non_negative_int, positive_int, write_output
from vitprof.cli.commands.outputs import check_writable
from vitprof.core.errors import UserError
from vitprof.core.records import Counts
from vitprof.models.spec_kinds import AttentionImpl, AttentionKind, FinalNorm, HeadKind
from vitprof.render.schema import versioned
from vitprof.render.tables import CONVENTION, giga, markdown_table, text_table

if TYPE_CHECKING:
    from vitprof.models.closed_form import ClosedForm, ViTSpec

# ViTSpec fields set by flags of the same name (dashes for underscores)
SPEC_FLAGS = (
    "image_size", "patch_size", "width", "depth", "heads", "mlp_width", "num_classes",
    "in_chans", "class_token", "dist_token", "reg_tokens", "pos_embed_covers_prefix",
    "qkv_bias", "head", "final_norm", "attention", "attention_impl",
)
REQUIRED_WITHOUT_MODEL = ("image_size", "patch_size", "width", "depth", "heads")
FORMATS = ("table", "markdown", "json")
_HEADERS = ["params", "MACs", "FLOPs", "vector FLOPs", "% MACs"]


def keep_ratios(text: str) -> tuple[float, ...]:
    """argparse type: comma-separated fractions, one per block (``1,1,0.7,0.7``)."""
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers such as 1,1,0.7, got '{text}'"
        ) from None


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "formula", help="closed-form params and MACs of a ViT spec (no model is run)",
        description="Closed-form params, MACs, FLOPs and vector FLOPs per component and block. "
        "Give MODEL to infer its spec (flags then override fields), or the spec by flags alone.",
    )
    parser.add_argument("model", nargs="?", help="zoo model whose spec is inferred")
    spec = parser.add_argument_group("spec (required without MODEL: " + ", ".join(
        "--" + name.replace("_", "-") for name in REQUIRED_WITHOUT_MODEL) + ")")
    for name in ("image_size", "patch_size", "width", "depth", "heads", "in_chans"):
        spec.add_argument("--" + name.replace("_", "-"), type=positive_int)
    spec.add_argument("--mlp-width", type=positive_int, help="default 4 x width")
    spec.add_argument("--num-classes", type=non_negative_int, help="0: no classifier")
    spec.add_argument("--reg-tokens", type=non_negative_int)
    for name, about in (
        ("class_token", "a class token"),
        ("dist_token", "a distillation token"),
        ("pos_embed_covers_prefix", "position embedding rows for the prefix tokens"),
        ("qkv_bias", "biases on q, k, v"),
    ):
        spec.add_argument("--" + name.replace("_", "-"), action=argparse.BooleanOptionalAction,
                          help=about)
    for name, kind in (("head", HeadKind), ("final_norm", FinalNorm),
                       ("attention", AttentionKind), ("attention_impl", AttentionImpl)):
        spec.add_argument("--" + name.replace("_", "-"), choices=[k.value for k in kind])
    spec.add_argument("--keep-ratios", type=keep_ratios, metavar="R,R,...",
                      help="token pruning: fraction of the patch tokens kept before each block")
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--by", choices=("component", "block"), default="component")
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--output", metavar="FILE")
    parser.set_defaults(run=run)


def spec_from_args(args: argparse.Namespace) -> ViTSpec:
    """The spec the arguments describe: MODEL's, with the flags given replacing its fields."""
    from vitprof.models.closed_form import ViTSpec
    from vitprof.models.notes.note002 import check_keep_ratios, pruning_blocks, tokens_per_block
    from vitprof.models.spec_inference import spec_from_model
    from vitprof.models.zoo import build

    changes = {name: getattr(args, name) for name in SPEC_FLAGS if getattr(args, name) is not None}
    if args.keep_ratios is not None:  # a new schedule replaces the model's
        changes.update(tokens_per_block=None, prune_at=None)
    if args.model:
        built = build(args.model, image_size=args.image_size, num_classes=args.num_classes or None)
        spec = replace(spec_from_model(built.module), **changes)
    else:
        missing = [n for n in REQUIRED_WITHOUT_MODEL if changes.get(n) is None]
        if missing:
            flags = ", ".join("--" + n.replace("_", "-") for n in missing)
            raise UserError(f"without MODEL, give the spec by flags; missing {flags}")
        changes.setdefault("mlp_width", 4 * changes["width"])
        spec = ViTSpec(**changes)
    if args.keep_ratios is None:
        return spec
    try:
        check_keep_ratios(args.keep_ratios, spec.depth)
    except ValueError as error:
        raise UserError(str(error)) from None
    return replace(
        spec,
        tokens_per_block=tuple(tokens_per_block(spec.num_patches, args.keep_ratios)),
        prune_at=tuple(pruning_blocks(args.keep_ratios)),
    )


def describe(spec: ViTSpec) -> str:
    """One line with the spec's shape."""
    prefix = spec.prefix_tokens
    tokens = (f"patch tokens per block {list(spec.tokens_per_block)}" if spec.tokens_per_block
              else f"{spec.num_patches} patch tokens")
    return (
        f"spec: D={spec.width}, depth {spec.depth}, {spec.heads} heads, MLP {spec.mlp_width}, "
        f"patch {spec.patch_size}, {spec.image_size}px x {spec.in_chans}, {tokens} + {prefix} "
        f"prefix, {spec.num_classes} classes, head {spec.head}, final norm {spec.final_norm}, "
        f"{spec.attention} attention ({spec.attention_impl}), qkv bias {spec.qkv_bias}"
    )


def _cells(label: list[str], counts: Counts, total_macs: int) -> list[str]:
    share = counts.macs / total_macs if total_macs else 0.0
    return [*label, f"{counts.params:,}", f"{counts.macs:,}", f"{counts.flops:,}",
            f"{counts.vector_flops:,}", f"{share:.2%}"]


def table_rows(form: ClosedForm, by: str) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of one view, with a total row; the rows add up to the total."""
    total = form.totals
    if by == "component":
        rows = [_cells([str(c)], v, total.macs) for c, v in form.components.items()]
        return ["component", *_HEADERS], [*rows, _cells(["total"], total, total.macs)]
    rows = []
    for index, block in enumerate(form.blocks):
        rows += [_cells([str(index), str(c)], v, total.macs)
                 for c, v in block.items() if v != Counts()]
    rows += [_cells(["outside", str(c)], v, total.macs)
             for c, v in form.outside.items() if v != Counts()]
    return ["block", "component", *_HEADERS], [*rows, _cells(["total", ""], total, total.macs)]


def render_formula(form: ClosedForm, source: str, by: str, fmt: str) -> str:
    """The closed form in one view and one format; every output states the convention."""
    if fmt == "json":
        data = {"source": source, "convention": CONVENTION, **form.to_dict()}
        return json.dumps(versioned(data, "formula"), indent=2)
    spec = form.spec
    side = spec.image_size
    lines = [
        f"closed form of {source}",
        describe(spec),
        f"input: batch {form.batch_size}, {spec.in_chans}x{side}x{side}",
        f"convention: {CONVENTION}",
    ]
    headers, rows = table_rows(form, by)
    if fmt == "markdown":
        head = "\n".join(f"- {line}" for line in lines)
        return f"{head}\n\n{markdown_table(headers, rows)}\n"
    t = form.totals
    summary = (f"total: {t.params:,} params ({t.params / 1e6:.2f} M), {t.macs:,} MACs "
               f"({giga(t.macs)} GMACs), "
               f"{t.flops:,} FLOPs, {t.vector_flops:,} vector FLOPs")
    return "\n".join([*lines, summary, "", text_table(headers, rows)]) + "\n"


def run(args: argparse.Namespace) -> int:
    from vitprof.models.closed_form import closed_form

    if args.output:
        check_writable(args.output)
    spec = spec_from_args(args)
    form = closed_form(spec, args.batch_size)
    flags = [name for name in (*SPEC_FLAGS, "keep_ratios") if getattr(args, name) is not None]
    overridden = f", overridden: {', '.join(flags)}" if flags else ""
    source = f"{args.model} (spec inferred{overridden})" if args.model else "the spec given"
    write_output(render_formula(form, source, args.by, args.format), args.output)
    return 0

