"""Each benchmark's own section of a markdown report that several benchmarks write
(reports/benchmark.md): a section runs from its heading to the next heading of its level or
above (top-level sections by default)."""

from __future__ import annotations

import re
from pathlib import Path

from vitprof.core.atomic_write import write_atomically


def write_section(path: Path, heading: str, text: str, level: int = 1) -> None:
    """Replace the section of ``path`` that starts with the line ``heading`` (up to the next
    heading of ``level`` or above: ``#`` to ``#`` x ``level``) by ``text``, or append ``text``
    when there is none; the other sections are kept as they are."""
    old = path.read_text() if path.exists() else ""
    span = _span(old, heading, level)
    if span is None:
        write_atomically(path, old.rstrip("\n") + "\n\n" + text if old else text)
        return
    start, end = span
    rest = old[end + 1:] if end < len(old) else ""
    write_atomically(path, old[:start] + text + ("\n" + rest if rest else ""))


def read_section(text: str, heading: str, level: int = 1) -> str | None:
    """The section of ``text`` that starts with the line ``heading`` (as
    :func:`write_section` finds it), or None."""
    span = _span(text, heading, level)
    return None if span is None else text[span[0]:span[1]]


def _span(text: str, heading: str, level: int) -> tuple[int, int] | None:
    """Where the section of ``heading`` starts and ends in ``text`` (the end: the newline
    before the next heading of ``level`` or above, or the end of ``text``)."""
    start = text.find(heading)
    if start < 0:
        return None
    found = re.compile(rf"\n#{{1,{level}}} ").search(text, start + len(heading))
    return start, found.start() if found else len(text)
