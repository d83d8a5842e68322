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
    start = old.find(heading)
    if start < 0:
        write_atomically(path, old.rstrip("\n") + "\n\n" + text if old else text)
        return
    found = re.compile(rf"\n#{{1,{level}}} ").search(old, start + len(heading))
    end = found.start() if found else -1
    rest = old[end + 1:] if end >= 0 else ""
    write_atomically(path, old[:start] + text + ("\n" + rest if rest else ""))
