"""Each benchmark's own section of a markdown report that several benchmarks write
(reports/benchmark.md): a section runs from its heading to the next heading of its level or
above (top-level sections by default)."""

from __future__ import annotations

import re
from pathlib import Path


def section_of(text: str, heading: str, level: int = 1) -> str | None:
    """The section of ``text`` that starts with the line ``heading`` (up to the next heading of
    ``level`` or above), or None when there is none."""
    start = text.find(heading)
    if start < 0:
        return None
    found = re.compile(rf"\n#{{1,{level}}} ").search(text, start + len(heading))
    return text[start:found.start() + 1] if found else text[start:]


def write_section(path: Path, heading: str, text: str, level: int = 1) -> None:
    """Replace the section of ``path`` that starts with the line ``heading`` (up to the next
    heading of ``level`` or above: ``#`` to ``#`` x ``level``) by ``text``, or append ``text``
    when there is none; the other sections are kept as they are."""
    old = path.read_text() if path.exists() else ""
    start = old.find(heading)
    if start < 0:
        path.write_text(old.rstrip("\n") + "\n\n" + text if old else text)
        return
    found = re.compile(rf"\n#{{1,{level}}} ").search(old, start + len(heading))
    end = found.start() if found else -1
    rest = old[end + 1:] if end >= 0 else ""
    path.write_text(old[:start] + text + ("\n" + rest if rest else ""))
