"""``vitprof analyze``: params, MACs, FLOPs and vector FLOPs per component, block, module, op."""

from __future__ import annotations

import argparse
import sys

from vitprof.cli.commands.common import (
    DEPLOY_HELP,
    add_model_arguments,
    input_request,
    output_path,
    warn,
    write_output,
)
from vitprof.cli.commands.outputs import check_writable
from vitprof.core.errors import UserError
from vitprof.core.vocab import Mode, View
from vitprof.render.formats import choices, render


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("analyze", help="count params and MACs per component")
    add_model_arguments(parser)
    parser.add_argument("--by", choices=list(View), default=View.COMPONENT)
    parser.add_argument("--format", choices=choices("analyze"), default="table")
    parser.add_argument("--output", type=output_path, metavar="FILE")
    parser.add_argument("--mode", choices=list(Mode), default=Mode.INFERENCE,
                        help="train: count forward + backward, with the ratio per component")
    parser.add_argument("--deploy", action="store_true", help=DEPLOY_HELP)
    parser.add_argument("--explain", action="store_true",
                        help="per module, its component, block and the rule that placed it "
                             "(per op with --by op; not with --by block): "
                             "docs/recognition.md lists the rules")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the breakdown fails a self-check (listed in the README)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from vitprof.analysis import analyze
    from vitprof.render.tables import profile_document

    if args.explain and args.by == View.BLOCK:
        raise UserError("--explain lists modules, each with its block (or ops with --by op); "
                        "it has no view by block: drop --by block")
    if args.output:
        check_writable(args.output)
    profile = analyze(
        args.model, request=input_request(args), device=args.device, overrides=args.map,
        mode=args.mode, deploy=args.deploy, recognizer=args.recognizer,
    )
    for message in profile.warnings:
        warn(message)
    if profile.fallback:
        warn(profile.fallback)
    write_output(render(profile_document(profile, args.by, args.explain), args.format), args.output)
    if args.strict and profile.self_checks:
        print(f"vitprof: {len(profile.self_checks)} self-check(s) failed (--strict)",
              file=sys.stderr)
        return 1
    return 0
