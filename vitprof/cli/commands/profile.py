"""``vitprof profile``: measured time, FLOP/s, intensity and memory per component and block."""

from __future__ import annotations

import argparse

from vitprof.cli.commands.common import (
    add_map_option,
    add_recognizer_option,
    add_shape_options,
    input_request,
    non_negative_int,
    output_path,
    positive_int,
    warn,
    write_output,
)
from vitprof.cli.commands.outputs import check_figure_path, check_writable
from vitprof.core.choices import peak_tflops_error
from vitprof.core.vocab import REAL_DEVICES, Device
from vitprof.render.formats import choices, render


def peak_tflops(text: str) -> float:
    """argparse type of ``--peak-tflops``: a number :func:`~vitprof.core.choices.
    peak_tflops_error` accepts."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got '{text}'") from None
    if error := peak_tflops_error(value):
        raise argparse.ArgumentTypeError(error)
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "profile", help="measure time, FLOP/s and memory per component on cpu or cuda"
    )
    parser.add_argument("model", help="model name (see 'vitprof models') or FILE.py:FACTORY")
    parser.add_argument("--device", choices=list(REAL_DEVICES), default=Device.CPU)
    add_shape_options(parser, dtype_default="float32, a model built by a factory converted")
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--num-classes", type=non_negative_int, help="0: no classification head")
    parser.add_argument("--warmup", type=non_negative_int, default=2,
                        help="untimed forwards before timing (default 2)")
    parser.add_argument("--iters", type=positive_int, default=10,
                        help="timed forwards, each with and without hooks (default 10)")
    parser.add_argument("--threads", type=positive_int,
                        help="CPU threads for the run, at most the CPU count (default: torch's)")
    parser.add_argument("--peak-tflops", type=peak_tflops,
                        help="the device's peak in TFLOP/s instead of measuring a matmul")
    add_map_option(parser)
    add_recognizer_option(parser)
    parser.add_argument("--format", choices=choices("profile"), default="table")
    parser.add_argument("--output", type=output_path, metavar="FILE")
    parser.add_argument("--roofline", type=output_path, metavar="PNG",
                        help="also write the roofline figure")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (it is shown only on a terminal anyway)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from vitprof.measure.profile import profile_model
    from vitprof.render.roofline import write_roofline
    from vitprof.render.speed import speed_document

    if args.output:
        check_writable(args.output)
    if args.roofline:
        check_figure_path(args.roofline)
    result = profile_model(
        args.model, device=args.device, warmup=args.warmup, iters=args.iters,
        peak_tflops=args.peak_tflops, overrides=args.map, progress=not args.no_progress,
        threads=args.threads, recognizer=args.recognizer, request=input_request(args),
    )
    for message in result.warnings:
        warn(message)
    if args.roofline:
        write_roofline(result, args.roofline)
    write_output(render(speed_document(result), args.format), args.output)
    return 0
