"""``vitprof analyze``: params, MACs, FLOPs and vector FLOPs per component, block, module, op."""

from __future__ import annotations

import argparse

from vitprof.cli.commands.common import DEPLOY_HELP, add_model_arguments, warn, write_output
from vitprof.cli.commands.outputs import check_writable
from vitprof.core.records import MODES
from vitprof.render.tables import FORMATS, VIEWS, render


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("analyze", help="count params and MACs per component")
    add_model_arguments(parser)
    parser.add_argument("--by", choices=VIEWS, default="component")
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--output", metavar="FILE")
    parser.add_argument("--mode", choices=MODES, default="inference",
                        help="train: count forward + backward, with the ratio per component")
    parser.add_argument("--deploy", action="store_true", help=DEPLOY_HELP)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from vitprof.count.analysis import analyze
    from vitprof.render.speed import render_training

    if args.output:
        check_writable(args.output)
    profile = analyze(
        args.model, image_size=args.image_size, batch_size=args.batch_size,
        num_classes=args.num_classes, device=args.device, overrides=args.map, mode=args.mode,
        deploy=args.deploy,
    )
    for message in profile.warnings:
        warn(message)
    if profile.fallback:
        warn(profile.fallback)
    renderer = render_training if args.mode == "train" else render
    write_output(renderer(profile, by=args.by, fmt=args.format), args.output)
    return 0
