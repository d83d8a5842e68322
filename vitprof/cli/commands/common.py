"""Arguments and output helpers shared by several sub-commands."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from vitprof.core.atomic_write import write_atomically
from vitprof.core.errors import UserError
from vitprof.core.parse import image_size, non_negative_int, positive_int
from vitprof.core.records import Component
from vitprof.core.vocab import Device, Dtype, Recognizer

if TYPE_CHECKING:
    from vitprof.workload import InputRequest

DEPLOY_HELP = ("count the deploy form: timm's re-parameterisation applied and BatchNorm folded "
               "into the preceding conv/linear (a copy; the default counts the model as built)")


def output_path(text: str) -> str:
    """argparse type of an output option (``--output``, ``--out``, ``--figure``, ``--roofline``):
    a path, not empty. An empty one names no file, and would be found out only after the work."""
    if not text:
        raise argparse.ArgumentTypeError(f"expected a path, got '{text}'")
    return text


def input_shape(text: str) -> tuple[int, ...]:
    """argparse type for ``--input-shape B,C,...``: 3 or more positive ints."""
    try:
        sizes = tuple(positive_int(part) for part in text.split(","))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected positive integers B,C,SIZE[,SIZE...], got '{text}'") from None
    if len(sizes) < 3:
        raise argparse.ArgumentTypeError(
            f"expected batch, channels and at least one size (B,C,SIZE[,SIZE...]), got '{text}'")
    return sizes


def named_input(text: str) -> tuple[str, str]:
    """argparse type for ``--input NAME=VALUE``: the pair, read by the request
    (:meth:`vitprof.workload.InputRequest.from_text`, which knows the names)."""
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got '{text}'")
    return name, value


def component_rule(text: str) -> tuple[str, Component]:
    """argparse type for ``--map REGEX=COMPONENT``."""
    regex, sep, name = text.rpartition("=")
    if not sep or not regex:
        raise argparse.ArgumentTypeError(f"expected REGEX=COMPONENT, got '{text}'")
    try:
        re.compile(regex)
    except re.error as error:
        raise argparse.ArgumentTypeError(f"bad regular expression '{regex}': {error}") from None
    try:
        return regex, Component(name)
    except ValueError:
        names = ", ".join(c.value for c in Component)
        raise argparse.ArgumentTypeError(f"unknown component '{name}' (one of {names})") from None


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """MODEL and the input options every counting command takes."""
    parser.add_argument("model", help="model name (see 'vitprof models') or FILE.py:FACTORY")
    add_input_options(parser)


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """The options that say how a model is built and run."""
    add_shape_options(parser)
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--num-classes", type=non_negative_int, help="0: no classification head")
    parser.add_argument("--device", choices=list(Device), default=Device.META)
    add_map_option(parser)
    add_recognizer_option(parser)


def add_recognizer_option(parser: argparse.ArgumentParser) -> None:
    """``--recognizer auto|graph|tables``: who names the components (``--map`` wins)."""
    parser.add_argument("--recognizer", choices=list(Recognizer), default=Recognizer.AUTO,
                        help="auto: the graph, compared with the table that detects the "
                             "model (the header says if it agrees); graph: roles from the data "
                             "flow alone; tables: a table's breakdown, else the graph")


SHAPE_OPTIONS = ("image_size", "frames", "in_chans", "dtype", "input_shape")
"""The destinations of :func:`add_shape_options`, the keywords of ``analyze()`` they fill."""


def add_shape_options(parser: argparse.ArgumentParser,
                      dtype_default: str = "the model's own") -> None:
    """``--image-size N|HxW``, ``--frames T``, ``--in-chans C``, ``--dtype`` and
    ``--input-shape B,C,...`` (which excludes the first three and ``--batch-size``): the input
    a model is built for and fed (:func:`shape_options` reads them). ``dtype_default``: what
    the command runs in without ``--dtype``, in words."""
    parser.add_argument("--image-size", type=image_size, metavar="N|HxW",
                        help="input height and width: N (square) or HxW")
    parser.add_argument("--frames", type=positive_int, metavar="T",
                        help="frames of a video input (B,C,T,H,W; B,T,C,H,W for transformers' "
                             "video models)")
    parser.add_argument("--in-chans", type=positive_int, metavar="C", help="input channels")
    parser.add_argument("--dtype", choices=list(Dtype),
                        help=f"model and input dtype (default: {dtype_default}; MACs do not "
                             "change, bytes do)")
    parser.add_argument("--input-shape", type=input_shape, metavar="B,C,...", action="append",
                        help="the whole input tensor; a model named is built for it where its "
                             "builder takes the sizes, else at its own size (excludes "
                             "--image-size, --frames, --in-chans, --batch-size); again: a "
                             "further positional tensor, such as a mask (B,1,N,N)")
    parser.add_argument("--input", type=named_input, action="append", metavar="NAME=VALUE",
                        help="a further input: NAME a field of vitprof.workload.InputRequest "
                             "that the command line gives as text (the README lists them; "
                             "repeatable)")
    parser.set_defaults(validate=shape_conflicts)


def shape_conflicts(args: argparse.Namespace) -> str | None:
    """The usage error of ``--input-shape`` given with an option it excludes, if any."""
    if getattr(args, "input_shape", None) is None:
        return None
    excluded = {"--image-size": args.image_size is not None, "--frames": args.frames is not None,
                "--in-chans": args.in_chans is not None,
                "--batch-size": getattr(args, "batch_size", 1) != 1}
    given = [option for option, set_ in excluded.items() if set_]
    return f"--input-shape excludes {', '.join(given)}" if given else None


def given_shape_options(args: argparse.Namespace) -> list[str]:
    """The shape options given, as written on the command line (``--image-size``, ...)."""
    given = [f"--{key.replace('_', '-')}" for key in SHAPE_OPTIONS
             if getattr(args, key, None) is not None]
    return [*given, *(["--input"] if getattr(args, "input", None) else [])]


def shape_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of ``analyze()`` (and ``make_workload``) the shape options give (None
    where the command has not the option)."""
    return {key: getattr(args, key, None) for key in SHAPE_OPTIONS}


def input_request(args: argparse.Namespace) -> InputRequest:
    """The :class:`vitprof.workload.InputRequest` the input options ask for: the shape options,
    ``--batch-size`` and ``--num-classes``, those the command has."""
    from vitprof.workload import InputRequest  # torch: imported when a command runs

    shapes = getattr(args, "input_shape", None) or [None]
    keywords = {**shape_options(args), "input_shape": shapes[0], "extra_shapes": tuple(shapes[1:]),
                "batch_size": getattr(args, "batch_size", 1),
                "num_classes": getattr(args, "num_classes", None)}
    named = InputRequest.from_text(getattr(args, "input", None) or [])
    if twice := [name for name in named if keywords.get(name)]:
        raise UserError(f"--input {twice[0]}= repeats an option given beside it")
    return InputRequest(**{**keywords, **named})


def add_map_option(parser: argparse.ArgumentParser) -> None:
    """``--map REGEX=COMPONENT``, repeatable: overrides that win over the recognizer."""
    parser.add_argument("--map", type=component_rule, action="append", default=[],
                        metavar="REGEX=COMPONENT",
                        help="attribute modules/parameters matching REGEX to COMPONENT")


@dataclass(frozen=True)
class _Stdout:
    """stdout as :func:`results_only_on_stdout` found it: ``sys.stdout`` and a duplicate of file
    descriptor 1 (each None where stdout is closed)."""

    stream: TextIO | None
    fd: int | None


# the stdouts saved by results_only_on_stdout, innermost last
_RESULT_STREAMS: list[_Stdout] = []


def _duplicate(fd: int) -> int | None:
    """A new file descriptor for what ``fd`` refers to; None where ``fd`` is closed."""
    try:
        return os.dup(fd)
    except OSError:
        return None


def _point(fd: int, at: int | None) -> None:
    """Make file descriptor ``fd`` refer to what ``at`` refers to; ``at`` None: close ``fd``."""
    if at is None:
        os.close(fd)
    else:
        os.dup2(at, fd)


def _point_at_null(fd: int) -> None:
    """Make file descriptor ``fd`` refer to the null device."""
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:  # a closed ``fd`` is the first free descriptor: the one ``open`` returns
        os.dup2(null, fd)
        os.close(null)


@contextlib.contextmanager
def results_only_on_stdout() -> Iterator[None]:
    """Keep stdout for the result alone. Inside, ``sys.stdout`` is stderr and so is file
    descriptor 1: whatever a factory, a model's forward, a library or a child process writes,
    through Python or below it (``os.write(1, ...)``, C code, ``echo``), lands on stderr (on
    the null device where stderr is closed), and ``write_output`` writes to the stdout of the
    moment the block was entered. Afterwards file descriptor 1 is what it was, closed if it was.
    """
    saved = _Stdout(sys.stdout, _duplicate(1))
    if saved.stream is not None:
        saved.stream.flush()  # what was written before the block goes where it was meant to
    try:
        os.dup2(2, 1)
    except OSError:  # stderr is closed
        _point_at_null(1)
    _RESULT_STREAMS.append(saved)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _RESULT_STREAMS.pop()
        _point(1, saved.fd)
        if saved.fd is not None:
            os.close(saved.fd)


def _write_or_fail(stream: TextIO | None, text: str, fd: int | None) -> None:
    """Write and flush ``text`` on ``stream``, a stdout whose writes reach file descriptor
    ``fd``. A closed stdout (None), or one that fails (a full device, a closed pipe), is a
    UserError; ``fd`` is then pointed at the null device, so that what could not be written is
    dropped and Python's flush at exit does not fail on it again."""
    if stream is None:
        raise UserError("cannot write the result: stdout is closed")
    try:
        stream.write(text)
        stream.flush()
    except OSError as error:
        if fd is not None:
            _point_at_null(fd)
        raise UserError(f"cannot write the result to stdout: {error.strerror}") from None


def _write_result(text: str) -> None:
    """``text`` on the stdout saved by the innermost ``results_only_on_stdout`` (file descriptor
    1 pointed back at it for the write), or on ``sys.stdout`` outside it (help, ``--version``);
    see :func:`_write_or_fail` for a stdout that is closed or fails."""
    if not _RESULT_STREAMS:
        _write_or_fail(sys.stdout, text, 1)
        return
    saved = _RESULT_STREAMS[-1]
    inside = _duplicate(1)
    _point(1, saved.fd)
    try:
        _write_or_fail(saved.stream, text, saved.fd)  # saved.fd: where fd 1 is restored to
    finally:
        _point(1, inside)
        if inside is not None:
            os.close(inside)


def write_output(text: str, output: str | None) -> None:
    """Print ``text`` (to the stdout saved by ``results_only_on_stdout``, if inside it) or write
    it to ``output``, whole or not at all (:mod:`vitprof.core.atomic_write`); either way it
    ends with a newline."""
    text = text if text.endswith("\n") else text + "\n"
    if output is None:
        _write_result(text)
        return
    try:
        write_atomically(output, text)
    except OSError as error:
        raise UserError(f"cannot write {output}: {error.strerror}") from None


def warn(message: str) -> None:
    print(f"vitprof: warning: {message}", file=sys.stderr)
