"""Checks of the values a caller passes (counts, image sizes, input shapes): each returns the
value, normalised, or raises one :class:`~vitprof.core.errors.UserError` line naming it.

The Python API's one place for them is :class:`vitprof.workload.InputRequest`, which checks a
request once, in its constructor; the command line and the budget file parse text first
(:mod:`vitprof.core.parse`) and then build that request too."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from vitprof.core.errors import UserError
from vitprof.core.vocab import Word

W = TypeVar("W", bound=Word)

TENSOR_ELEMENTS = 2**63 - 1
"""The most elements a tensor's sizes describe: torch holds sizes and their product in int64."""


def check_int(what: str, value: object, minimum: int) -> int:
    """``value`` if it is an int >= ``minimum`` (not a bool, not a float), else a UserError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{what} must be an int, got {value!r}")
    if value < minimum:
        raise UserError(f"{what} must be at least {minimum}, got {value}")
    return value


def check_word(what: str, value: object, words: type[W]) -> W:
    """``value`` (a word of ``words`` or its string) as that word, else a UserError naming the
    choices."""
    if not isinstance(value, str) or value not in words.__members__.values():
        raise UserError(f"unknown {what} '{value}'; choose from {', '.join(words)}")
    return words(value)


def check_image_size(value: object) -> int | tuple[int, int] | None:
    """None (the model's own size), a positive int (a square image) or a pair of positive ints
    (height, width), returned as a tuple."""
    if value is None:
        return None
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise UserError(f"image size must be one int or (height, width), got {value!r}")
        return (check_int("image height", value[0], 1), check_int("image width", value[1], 1))
    return check_int("image size", value, 1)


def check_shape(shape: object) -> tuple[int, ...]:
    """An input shape ``(batch, channels, *spatial)``: 3 or more positive ints."""
    if not isinstance(shape, tuple | list) or len(shape) < 3:
        raise UserError(f"an input shape needs batch, channels and at least one size, got "
                        f"{shape!r}")
    for size in shape:
        check_int("input shape size", size, 1)
    return tuple(shape)


def check_elements(what: str, sizes: Sequence[int]) -> None:
    """A UserError when the tensor ``what`` of ``sizes`` (each already checked) has more than
    :data:`TENSOR_ELEMENTS` elements, which torch cannot hold (it fails in C++ with several
    lines, or in a factory's own tensors)."""
    elements = math.prod(sizes)
    if elements > TENSOR_ELEMENTS:
        shown = " x ".join(f"{size:,}" for size in sizes)
        raise UserError(f"{what} has {elements:,} elements ({shown}), more than the 2^63 - 1 "
                        f"that torch's int64 sizes hold")
