"""``vitprof memory``: the predicted memory of a training step, its peak, and what batch fits."""

from __future__ import annotations

import argparse
import os
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

from vitprof.cli.commands.common import (
    add_shape_options,
    input_request,
    output_path,
    positive_int,
    warn,
    write_output,
)
from vitprof.cli.commands.outputs import check_figure_path, check_writable
from vitprof.core.errors import UserError
from vitprof.core.parse import memory_size
from vitprof.core.vocab import Strategy, Word
from vitprof.measure.memory.settings import LOOP, MemorySettings, kind_of
from vitprof.render.formats import choices, render


def world_sizes(text: str) -> list[int]:
    """argparse type of ``--world-size``: one positive int, or several joined by commas."""
    return [positive_int(part) for part in text.split(",")]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "memory", help="predict a training step's memory per component, its peak, what fits")
    parser.add_argument("model", help="model name (see 'vitprof models') or FILE.py:FACTORY")
    add_shape_options(parser, dtype_default="float32, a model built by a factory converted")
    parser.add_argument("--batch-size", type=positive_int, default=1)
    add_setting_options(parser, [each for each in fields(MemorySettings)
                                 if each.metadata.get("group") != LOOP])
    parser.add_argument("--strategy", choices=list(Strategy), default=Strategy.NONE,
                        help="each rank's step under DDP, DDP + ZeroRedundancyOptimizer (zero1), "
                             "FSDP2 per block and root without (zero2) or with (fsdp) "
                             "resharding after the forward; --batch-size is per rank")
    parser.add_argument("--world-size", type=world_sizes, default=[1], metavar="N[,N...]",
                        help="ranks in the world (with --strategy); a list: the per-rank peak "
                             "at each")
    add_loop_options(parser)
    parser.add_argument("--fit", type=memory_size, metavar="SIZE",
                        help="also find the largest batch whose peak fits SIZE (24GiB, 80GB)")
    parser.add_argument("--format", choices=choices("memory"), default="table")
    parser.add_argument("--output", type=output_path, metavar="FILE")
    parser.add_argument("--figure", type=output_path, metavar="PNG",
                        help="also write the timeline figure (bytes alive after each op, "
                             "stacked by component, the peak marked); markdown links it")
    parser.set_defaults(run=run)


def add_loop_options(parser: argparse.ArgumentParser) -> None:
    """The training loop the step models (see docs/memory.md, "The loop")."""
    loop = parser.add_argument_group("the training loop modelled (the defaults: zero_grad() "
                                     "first, out.backward(ones_like(out)), opt.step())")
    add_setting_options(loop, [each for each in fields(MemorySettings)
                               if each.metadata.get("group") == LOOP])


def add_setting_options(parser: argparse._ActionsContainer, settings: list[Field[Any]]) -> None:
    """One option per field of :class:`MemorySettings`: a word's ``choices`` (its default
    first), ``true``/``false`` for a bool, a positive int, or the field's own ``parse``."""
    for each in settings:
        kind, default = kind_of(each), each.default
        option: dict[str, Any] = {"help": each.metadata["help"], "default": default}
        if issubclass(kind, Word):
            option["choices"] = [*([default] if default is not None else []),
                                 *(word for word in kind if word != default)]
        elif kind is bool:
            option.update(choices=("true", "false"), default=str(default).lower())
        else:
            option["type"] = positive_int if kind is int else each.metadata["parse"]
        if "metavar" in each.metadata:
            option["metavar"] = each.metadata["metavar"]
        parser.add_argument(f"--{each.name.replace('_', '-')}", **option)


def settings_of(args: argparse.Namespace) -> MemorySettings:
    """The settings the options say (a :class:`SettingError` where they do not go together)."""
    return MemorySettings(**{
        each.name: getattr(args, each.name) == "true" if kind_of(each) is bool
        else getattr(args, each.name) for each in fields(MemorySettings)})


def run(args: argparse.Namespace) -> int:
    from vitprof.measure.memory.estimate import MemoryEstimate, memory
    from vitprof.measure.memory.spelling import OPTIONS, SettingError
    from vitprof.render.distributed_memory import rank_document
    from vitprof.render.memory import memory_document

    if args.output:
        check_writable(args.output)
    if args.figure:
        check_figure_path(args.figure, ["png"])
    if len(args.world_size) > 1:
        return run_world_sizes(args)
    try:
        estimate = memory(args.model, request=input_request(args), settings=settings_of(args),
                          fit=args.fit, strategy=args.strategy, world_size=args.world_size[0])
    except SettingError as error:  # in the words of the options, not of memory()'s keywords
        raise error.spelled(OPTIONS) from None
    for message in estimate.warnings:
        warn(message)
    if not isinstance(estimate, MemoryEstimate):
        if args.figure:
            raise UserError("--figure draws a single-process timeline; with --strategy give "
                            "--world-size a list for the per-rank peak against world size")
        write_output(render(rank_document(estimate), args.format), args.output)
        return 0
    if args.figure:
        write_figure(estimate, args.figure)
    document = memory_document(estimate, figure_link(args.figure, args.output))
    write_output(render(document, args.format), args.output)
    return 0


def run_world_sizes(args: argparse.Namespace) -> int:
    """``--world-size N,M,...``: the per-rank peak at each world size under ``--strategy``
    (a table, or JSON; ``--figure``: the per-rank peak against world size)."""
    from vitprof.measure.distributed.sweep import peak_by_world_size
    from vitprof.measure.memory.spelling import OPTIONS, SettingError
    from vitprof.render.distributed_memory import world_sizes_document

    if args.strategy == Strategy.NONE:
        raise UserError("--world-size with several sizes needs --strategy (ddp, zero1, zero2, "
                        "fsdp)")
    try:
        found = peak_by_world_size(args.model, input_request(args), args.strategy,
                                   args.world_size, settings_of(args), args.fit)
    except SettingError as error:
        raise error.spelled(OPTIONS) from None
    if args.figure:
        from vitprof.render import figures
        from vitprof.render.world_size_figure import world_size_figure

        figures.save(world_size_figure(found[0].model, {args.strategy: found}, args.fit),
                     args.figure)
    write_output(render(world_sizes_document(found), args.format), args.output)
    return 0


def write_figure(estimate: Any, path: str) -> None:
    """The timeline figure of ``estimate`` as the PNG ``path``."""
    from vitprof.render import figures
    from vitprof.render.memory_report import timeline_figure

    try:
        figures.save(timeline_figure(estimate), path)
    except OSError as error:
        raise UserError(f"cannot write the figure {path}: {error.strerror or error}") from None


def figure_link(figure: str | None, output: str | None) -> str | None:
    """The figure's path as the markdown links it: relative to the output file's folder when
    the output is a file, else as given."""
    if figure is None or output is None:
        return figure
    return os.path.relpath(figure, Path(output).parent)
