"""Arguments and output helpers shared by several sub-commands."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from vitprof.core.choices import RECOGNIZERS
from vitprof.core.errors import UserError
from vitprof.core.records import Component

DEPLOY_HELP = ("count the deploy form: timm's re-parameterisation applied and BatchNorm folded "
               "into the preceding conv/linear (a copy; the default counts the model as built)")


def _int_at_least(text: str, minimum: int, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got '{text}'") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


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
    parser.add_argument("--image-size", type=positive_int, help="input height and width")
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--num-classes", type=non_negative_int, help="0: no classification head")
    parser.add_argument("--device", choices=("meta", "cpu", "cuda"), default="meta")
    add_map_option(parser)
    add_recognizer_option(parser)


def add_recognizer_option(parser: argparse.ArgumentParser) -> None:
    """``--recognizer auto|graph|tables``: who names the components (``--map`` wins)."""
    parser.add_argument("--recognizer", choices=RECOGNIZERS, default="auto",
                        help="auto: a table when it places everything cleanly, else graph; "
                             "graph: roles from the data flow; tables: a table, else names")


def add_map_option(parser: argparse.ArgumentParser) -> None:
    """``--map REGEX=COMPONENT``, repeatable: overrides that win over the recognizer."""
    parser.add_argument("--map", type=component_rule, action="append", default=[],
                        metavar="REGEX=COMPONENT",
                        help="attribute modules/parameters matching REGEX to COMPONENT")


# the stdout saved by results_only_on_stdout, innermost last
_RESULT_STREAMS: list[TextIO] = []


@contextlib.contextmanager
def results_only_on_stdout() -> Iterator[None]:
    """Keep stdout for the result alone: inside, ``sys.stdout`` is stderr, so what a factory, a
    model's forward or a library prints lands on stderr, and ``write_output`` writes to the
    stdout of the moment the block was entered."""
    _RESULT_STREAMS.append(sys.stdout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _RESULT_STREAMS.pop()


def write_output(text: str, output: str | None) -> None:
    """Print ``text`` (to the stdout saved by ``results_only_on_stdout``, if inside it) or write
    it to ``output``; either way it ends with a newline."""
    text = text if text.endswith("\n") else text + "\n"
    if output is None:
        (_RESULT_STREAMS[-1] if _RESULT_STREAMS else sys.stdout).write(text)
        return
    try:
        Path(output).write_text(text)
    except OSError as error:
        raise UserError(f"cannot write {output}: {error.strerror}") from None


def warn(message: str) -> None:
    print(f"vitprof: warning: {message}", file=sys.stderr)
