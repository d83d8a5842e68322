"""``vitprof formula``: closed-form params, MACs and vector FLOPs of a ViT spec, no model run.

The spec comes from a zoo model (inferred from the model built on meta) or from flags alone;
flags given with a model override the fields they name.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from vitprof.cli.commands.common import (
    image_size,
    non_negative_int,
    output_path,
    positive_int,
    write_output,
)
from vitprof.cli.commands.outputs import check_writable
from vitprof.core.errors import UserError
from vitprof.core.vocab import AttentionImpl, AttentionKind, FinalNorm, HeadKind
from vitprof.render.formats import choices, render

if TYPE_CHECKING:
    from vitprof.models.closed_form import ViTSpec

# ViTSpec fields set by flags of the same name (dashes for underscores)
SPEC_FLAGS = (
    "image_size", "patch_size", "width", "depth", "heads", "mlp_width", "num_classes",
    "in_chans", "class_token", "dist_token", "reg_tokens", "pos_embed_covers_prefix",
    "qkv_bias", "head", "final_norm", "attention", "attention_impl",
)
REQUIRED_WITHOUT_MODEL = ("image_size", "patch_size", "width", "depth", "heads")


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
    spec.add_argument("--image-size", type=image_size, metavar="N|HxW",
                      help="N (square) or HxW: floor(H / patch) x floor(W / patch) patches")
    for name in ("patch_size", "width", "depth", "heads", "in_chans"):
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
    parser.add_argument("--format", choices=choices("formula"), default="table")
    parser.add_argument("--output", type=output_path, metavar="FILE")
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


def run(args: argparse.Namespace) -> int:
    from vitprof.models.closed_form import closed_form
    from vitprof.render.formula import formula_document

    if args.output:
        check_writable(args.output)
    spec = spec_from_args(args)
    form = closed_form(spec, args.batch_size)
    flags = [name for name in (*SPEC_FLAGS, "keep_ratios") if getattr(args, name) is not None]
    overridden = f", overridden: {', '.join(flags)}" if flags else ""
    source = f"{args.model} (spec inferred{overridden})" if args.model else "the spec given"
    write_output(render(formula_document(form, source, args.by), args.format), args.output)
    return 0

