"""Each benchmark's own section of a markdown report that several benchmarks write
(reports/benchmark.md): a section runs from its heading to the next heading of its level or
above (top-level sections by default).

Run as a command, it replaces one section of a page by the text on its standard input (a
section written elsewhere, pasted in), the rest of the page kept::

    python benchmarks/sections.py reports/memory.md "## CUDA" --level 2 < cuda_section.md
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Replace a section of a page by standard input.")
    parser.add_argument("page", type=Path)
    parser.add_argument("heading", help="the section's heading line, e.g. '## CUDA'")
    parser.add_argument("--level", type=int, default=1,
                        help="the section ends at the next heading of this level or above")
    args = parser.parse_args(argv)
    write_section(args.page, args.heading, sys.stdin.read(), level=args.level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
