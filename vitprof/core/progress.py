"""Progress bars for long runs, shown on a terminal only.

A bar is drawn on stderr with carriage returns; in a log file or a pipe those frames are noise,
so when stderr is not a terminal the bar is disabled and nothing is written. A bar appears only
once its run has lasted :data:`DELAY_S` seconds, so quick runs stay silent on a terminal too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tqdm import tqdm

T = TypeVar("T")
DELAY_S = 1.0  # a bar appears only on runs longer than this


def on_terminal() -> bool:
    """Whether stderr is a terminal (where a bar can redraw itself in place)."""
    return sys.stderr.isatty()


def progress(
    items: Iterable[T] | None = None, *, desc: str, unit: str, total: int | None = None,
    enabled: bool = True,
) -> tqdm[T]:
    """A tqdm bar over ``items`` (or one advanced by ``update`` up to ``total``) on stderr,
    drawn only when ``enabled`` and stderr is a terminal; it clears itself when done. tqdm is
    imported here, by the first bar: a command's parser and its help do not need it."""
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit=unit, total=total, file=sys.stderr, delay=DELAY_S,
                leave=False, disable=not (enabled and on_terminal()))
