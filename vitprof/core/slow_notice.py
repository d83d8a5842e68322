"""A one-line notice on a terminal's stderr when something slow (a model build) is still
running after a delay: a single line, not a progress bar; nothing when it finishes sooner, and
nothing when stderr is not a terminal (logs and captured output stay as they were)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

NOTICE_AFTER_S = 2.0


def _notice(message: str) -> None:
    print(f"vitprof: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def notice_if_slow(message: str, after_s: float = NOTICE_AFTER_S) -> Iterator[None]:
    """Print ``vitprof: {message}`` to stderr once if the body is still running ``after_s``
    seconds after it started and stderr is a terminal (from a daemon timer thread, cancelled
    when the body ends)."""
    if not sys.stderr.isatty():
        yield
        return
    timer = threading.Timer(after_s, _notice, args=(message,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
