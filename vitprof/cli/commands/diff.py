"""``vitprof diff A B``: what changed between two analyses; exit 1 when an increase passes
``--fail-above``.

A and B are anything ``vitprof analyze`` accepts (the input options apply to both) or saved
profiles (``vitprof analyze MODEL --format json --output A.json``). Exit codes: 0 the diff is
shown and no increase passes a threshold, 1 one does, 2 a usage error or a bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vitprof.checks.diff import Snapshot, compare, parse_fail_above, read_profile
from vitprof.cli.commands.common import (
    add_input_options,
    given_shape_options,
    input_request,
    output_path,
    warn,
    write_output,
)
from vitprof.cli.commands.outputs import check_writable
from vitprof.core.vocab import Device, Mode, Recognizer
from vitprof.models.libraries import model_file
from vitprof.render.formats import choices, render


def _fail_above(text: str) -> str:
    """argparse type: ``PCT`` or ``METRIC=PCT``, checked here, parsed with the others later."""
    try:
        parse_fail_above([text])
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "diff", help="compare two models or saved profiles (exit 1 past --fail-above)"
    )
    for side in ("a", "b"):
        parser.add_argument(side, metavar=side.upper(),
                            help="model name, FILE.py:FACTORY, or a saved profile FILE.json")
    add_input_options(parser)
    parser.add_argument("--mode", choices=list(Mode), default=Mode.INFERENCE)
    parser.add_argument("--format", choices=choices("diff"), default="table")
    parser.add_argument("--output", type=output_path, metavar="FILE")
    parser.add_argument("--fail-above", type=_fail_above, action="append", default=[],
                        metavar="[METRIC=]PCT",
                        help="exit 1 when a total, component or block grows by more than PCT "
                             "percent (all metrics, or one: params, macs, flops, vector_flops)")
    parser.set_defaults(run=run)


def is_saved_profile(spec: str) -> bool:
    """A ``.json`` path that is not a model named by its file (``hf:config.json``: a library's
    :func:`~vitprof.models.libraries.model_file`)."""
    return spec.endswith(".json") and model_file(spec) is None


def _saved_or_checked(spec: str) -> Snapshot | None:
    """A saved profile, read; a model name, checked without building it
    (:func:`~vitprof.models.zoo.validate_name`), None: both sides are resolved before either
    is counted, so that a bad B fails before A is analysed."""
    from vitprof.models.zoo import validate_name

    if is_saved_profile(spec):
        return read_profile(Path(spec))
    validate_name(spec)
    return None


def _snapshot(spec: str, saved: Snapshot | None, args: argparse.Namespace) -> Snapshot:
    """``saved``, or the analysis of the model ``spec``."""
    from vitprof.analysis import analyze

    if saved is not None:
        return saved
    profile = analyze(
        spec, request=input_request(args), device=args.device, overrides=args.map,
        mode=args.mode, recognizer=args.recognizer,
    )
    for message in profile.warnings:
        warn(f"{spec}: {message}")
    return Snapshot.from_profile(profile)


def _options_given(args: argparse.Namespace) -> list[str]:
    shapes = dict.fromkeys(given_shape_options(args), True)
    given = {**shapes, "--batch-size": args.batch_size != 1,
             "--num-classes": args.num_classes is not None, "--device": args.device != Device.META,
             "--map": bool(args.map), "--mode": args.mode != Mode.INFERENCE,
             "--recognizer": args.recognizer != Recognizer.AUTO}
    return [option for option, set_ in given.items() if set_]


def run(args: argparse.Namespace) -> int:
    from vitprof.render.diff import diff_document, exceeded_lines

    if args.output:
        check_writable(args.output)
    if is_saved_profile(args.a) and is_saved_profile(args.b) and _options_given(args):
        warn(f"{', '.join(_options_given(args))} ignored: both sides are saved profiles")
    saved_a, saved_b = (_saved_or_checked(spec) for spec in (args.a, args.b))
    diff = compare(_snapshot(args.a, saved_a, args), _snapshot(args.b, saved_b, args))
    exceeded = diff.exceeded(parse_fail_above(args.fail_above))
    write_output(render(diff_document(diff, exceeded), args.format), args.output)
    for line in exceeded_lines(exceeded):
        print(f"vitprof: FAIL: {line}", file=sys.stderr)
    return 1 if exceeded else 0
