"""Parsers of the values a user types (positive integers, image sizes), shared by the command
line and the budget file. Each raises ``argparse.ArgumentTypeError`` with the text it expected,
which argparse and the budget parser both turn into one line."""

from __future__ import annotations

import argparse


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


def image_size(text: str) -> int | tuple[int, int]:
    """argparse type for ``--image-size``: ``N`` (a square) or ``HxW``, positive ints."""
    sides = text.split("x")
    if len(sides) > 2:
        raise argparse.ArgumentTypeError(f"expected N or HxW, got '{text}'")
    try:
        values = [_int_at_least(side, 1, "N or HxW of positive integers") for side in sides]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected N or HxW of positive integers, got '{text}'") from None
    return values[0] if len(values) == 1 else (values[0], values[1])


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def memory_size(text: str) -> int:
    """argparse type for a memory size: a positive number of bytes, with an optional unit
    (``80GiB``, ``24GB``, ``512MiB``, ``1000000``; KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/
    TiB powers of 1024), floored to whole bytes."""
    stripped = text.strip()
    number = stripped.rstrip("KMGTBikmgtb ")
    unit = stripped[len(number):].strip().lower()
    expected = f"expected a positive memory size such as 24GiB or 80GB, got '{text}'"
    if unit not in _UNITS:
        raise argparse.ArgumentTypeError(expected)
    try:
        value = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(expected) from None
    size = int(value * _UNITS[unit]) if value == value and value != float("inf") else 0
    if size < 1:
        raise argparse.ArgumentTypeError(expected)
    return size


def checkpointing(text: str) -> str:
    """argparse type of a checkpoint setting: none, blocks, or ``every N`` (also
    ``every=N``), returned as ``every N``."""
    words = text.replace("=", " ").split()
    if text in ("none", "blocks"):
        return text
    if len(words) == 2 and words[0] == "every":
        return f"every {positive_int(words[1])}"
    raise argparse.ArgumentTypeError(f"expected none, blocks or 'every N', got '{text}'")
