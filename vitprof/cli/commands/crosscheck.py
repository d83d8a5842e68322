"""``vitprof crosscheck``: each peer counter's number next to vitprof's, every difference explained.

Exit codes: 0 the cross-check ran (a residual, or a peer that could not run, is reported in the
output, not in the exit code); 2 a usage error, an unknown model or peer, or a model that fails
to build or run.
"""

from __future__ import annotations

import argparse

from vitprof.checks.crosscheck.peers import names as peer_names
from vitprof.cli.commands.common import (
    DEPLOY_HELP,
    add_map_option,
    add_recognizer_option,
    add_shape_options,
    output_path,
    positive_int,
    shape_options,
    warn,
    write_output,
)
from vitprof.cli.commands.outputs import check_writable
from vitprof.render.formats import choices, render


def peer_list(text: str) -> list[str]:
    """argparse type for ``--peers fvcore,torchinfo`` (names are checked by run_crosscheck)."""
    return [p.strip() for p in text.split(",")]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "crosscheck", help="compare with every peer counter and published figure (--peers "
                           "lists them); explain every difference"
    )
    parser.add_argument("model", help="model name (see 'vitprof models') or FILE.py:FACTORY")
    add_shape_options(parser)
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--format", choices=choices("crosscheck"), default="table")
    parser.add_argument("--peers", type=peer_list, metavar="PEER,...",
                        help=f"peers to run (default all): {', '.join(peer_names())}")
    parser.add_argument("--no-grad", action="store_true",
                        help="run the peers under torch.no_grad() (nn.MultiheadAttention then "
                             "takes its fused fast path)")
    add_map_option(parser)
    add_recognizer_option(parser)
    parser.add_argument("--output", type=output_path, metavar="FILE",
                        help="write the report to FILE")
    parser.add_argument("--deploy", action="store_true", help=DEPLOY_HELP)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from vitprof.checks.crosscheck import run_crosscheck
    from vitprof.render.crosscheck import crosscheck_document

    if args.output:
        check_writable(args.output)
    check = run_crosscheck(
        args.model, batch_size=args.batch_size, peers=args.peers, grad=not args.no_grad,
        overrides=args.map, deploy=args.deploy, recognizer=args.recognizer,
        **shape_options(args),
    )
    for message in check.warnings:
        warn(message)
    for row in check.rows:
        if row.macs is not None and (row.residual_macs or row.residual_params):
            warn(f"{row.peer}: unexplained residual of {row.residual_macs:,} MACs and "
                 f"{row.residual_params or 0:,} params")
    write_output(render(crosscheck_document(check), args.format), args.output)
    return 0
