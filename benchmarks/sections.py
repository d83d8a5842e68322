"""Each benchmark's own section of a markdown report that several benchmarks write
(reports/benchmark.md): a section runs from its top-level heading to the next one."""

from __future__ import annotations

from pathlib import Path


def write_section(path: Path, heading: str, text: str) -> None:
    """Replace the section of ``path`` that starts with the line ``heading`` (up to the next
    top-level heading) by ``text``, or append ``text`` when there is none; the other sections
    are kept as they are."""
    old = path.read_text() if path.exists() else ""
    start = old.find(heading)
    if start < 0:
        path.write_text(old.rstrip("\n") + "\n\n" + text if old else text)
        return
    end = old.find("\n# ", start + len(heading))
    rest = old[end + 1:] if end >= 0 else ""
    path.write_text(old[:start] + text + ("\n" + rest if rest else ""))
