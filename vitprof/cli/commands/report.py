"""``vitprof report``: markdown reports with figures, or ``--check`` that they are up to date."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vitprof.cli.commands.common import (
    add_recognizer_option,
    add_shape_options,
    given_shape_options,
    input_request,
    output_path,
    shape_conflicts,
    warn,
    write_output,
)
from vitprof.cli.commands.outputs import check_folder
from vitprof.core.vocab import Recognizer


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="write markdown reports with figures (or check them)",
        description="Write one markdown report per model, figures beside it. --all writes the "
        "torchvision ViTs, note 002's Dynamic ViT, the zoo table, the corrections to the source "
        "notes, the index of published figures and an index.",
    )
    parser.add_argument("models", nargs="*", metavar="MODEL",
                        help="model names (see 'vitprof models'), timm:NAME, hf:..., or "
                        "timm-published: timm's results table against vitprof (slow), "
                        "open_clip-published: open_clip's model profile against vitprof, "
                        "torchvision-published: every torchvision weight's figures, "
                        "token-reduction: DynamicViT, EViT and ToMe on DeiT against their "
                        "papers' rows")
    parser.add_argument("--all", action="store_true", dest="everything",
                        help="every torchvision ViT, note002_dynamic_vit, zoo.md, corrections.md "
                        "and README.md")
    parser.add_argument("--out", type=output_path, default="reports", metavar="DIR",
                        help="folder to write (or check) the reports in (default: reports)")
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temporary folder and fail (exit 1) if DIR "
                        "differs; without MODEL it checks everything")
    inputs = parser.add_argument_group(
        "input and recognizer of the model pages",
        "Each model page is analysed, cross-checked and swept at this input (default: the "
        "model's own), its components named by this recognizer (the page's header says which "
        "made the breakdown). The image-size sweep holds --frames, --in-chans and --dtype and "
        "sweeps square sizes from the width analysed; with --input-shape the page has no "
        "sweep. Not with --all or --check (pages at their own sizes, recognizer auto) nor "
        "timm-published, open_clip-published, torchvision-published or token-reduction.")
    add_shape_options(inputs)
    add_recognizer_option(inputs)
    parser.set_defaults(run=run, validate=_usage_error)


def _page_options(args: argparse.Namespace) -> list[str]:
    """The options given that change how model pages are counted, as written."""
    recognizer = ["--recognizer"] if args.recognizer != Recognizer.AUTO else []
    return [*given_shape_options(args), *recognizer]


def _usage_error(args: argparse.Namespace) -> str | None:
    """The usage error of the options given together, if any: ``--input-shape`` with what it
    excludes, or an input option or a recognizer with ``--all`` or ``--check``, whose pages are
    the committed ones, at each model's own input, by the auto recognizer."""
    given = _page_options(args)
    whole = [option for option, on in (("--all", args.everything), ("--check", args.check))
             if on]
    if given and whole:
        verb = "sets" if len(given) == 1 else "set"
        return (f"{', '.join(given)} {verb} how model pages are counted; {' and '.join(whole)} "
                f"writes or checks the pages at each model's own input, recognizer auto")
    return shape_conflicts(args)


def run(args: argparse.Namespace) -> int:
    from vitprof.study.generate import pages, write
    from vitprof.study.page_check import page_check, report_command

    models = list(dict.fromkeys(args.models))  # a model named twice is one page
    everything = args.everything or (args.check and not models)
    if args.check:
        problems = page_check(args.out, models, everything)
        for problem in problems:
            print(f"vitprof: {problem}", file=sys.stderr)
        if problems:
            if Path(args.out).is_dir():  # else the one problem says it is missing, and what to run
                print(f"vitprof: {args.out} is out of date; regenerate with "
                      f"'{report_command(args.out, models, everything)}'", file=sys.stderr)
            return 1
        write_output(f"{args.out} is up to date", None)
        return 0
    check_folder(args.out)
    found = pages(models, everything, input_request(args), args.recognizer)
    for page in found:
        for message in page.warnings:
            warn(f"{page.name}: {message}")
    for path in write(found, args.out):
        write_output(str(path), None)
    return 0
