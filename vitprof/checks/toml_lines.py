"""Where a key sits in TOML text.

``tomllib`` reports a line only for syntax errors; a valid file loses its positions. To point an
error about a valid key (a typo such as ``max_parms``) at its line, the text is scanned again
here. The scan understands what budget files are written with: ``[table]`` headers with bare or
quoted keys, ``key = value`` and dotted ``a.b = value`` lines, and single-line inline tables
``key = { inner = 1 }``. It does not track multi-line strings or ``[[arrays of tables]]``; a key
it cannot place gets ``None``, and the caller's message goes without a line number.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence

_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\]|\\.)*"'
_LITERAL = r"'[^']*'"
_PART = rf"(?:{_BARE}|{_BASIC}|{_LITERAL})"
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"^\s*\[\s*({_DOTTED})\s*\]")
_ASSIGN = re.compile(rf"^\s*({_DOTTED})\s*=")
_PART_RE = re.compile(_PART)
_INLINE_KEY = re.compile(rf"[{{,]\s*({_DOTTED})\s*=")


def split_key(dotted: str) -> tuple[str, ...]:
    """``'a."b.c".d'`` -> ``('a', 'b.c', 'd')``: the parts of a dotted TOML key, unquoted."""
    return tuple(_unquote(part) for part in _PART_RE.findall(dotted))


def _unquote(part: str) -> str:
    if part[0] in "\"'":
        return str(tomllib.loads(f"k = {part}")["k"])
    return part


def _statements(text: str) -> list[tuple[int, tuple[str, ...], str | None]]:
    """(line, full key path, rest of the line) of every assignment; rest is None for headers."""
    found: list[tuple[int, tuple[str, ...], str | None]] = []
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = split_key(header[1])
            found.append((number, table, None))
            continue
        assign = _ASSIGN.match(line)
        if assign:
            found.append((number, table + split_key(assign[1]), line[assign.end():]))
    return found


def _inline_has(rest: str, keys: Sequence[str]) -> bool:
    """Whether ``rest`` (an inline table) assigns ``keys`` in order, each inside the last. Its
    keys are those after a ``{`` or a ``,``: bare, quoted (escapes read as TOML reads them) or
    dotted."""
    wanted = tuple(keys)
    for match in _INLINE_KEY.finditer(rest):
        parts = split_key(match[1])
        if wanted and wanted[: len(parts)] == parts:
            wanted = wanted[len(parts):]
    return not wanted


def key_line(text: str, path: Sequence[str]) -> int | None:
    """Line (1-based) where the key ``path`` is defined, or None where the scan cannot tell.

    A table that is only ever opened through a longer header (``[entry.components]`` without
    ``[entry]``) is placed at that first header.
    """
    path = tuple(path)
    first_inside = None
    for number, key, rest in _statements(text):
        if key == path:
            return number
        if rest is not None and path[: len(key)] == key and _inline_has(rest, path[len(key):]):
            return number
        if first_inside is None and key[: len(path)] == path:
            first_inside = number
    return first_inside


def table_at(text: str, line: int) -> tuple[str, ...]:
    """Path of the ``[table]`` whose body holds ``line`` (``()`` before the first header)."""
    table: tuple[str, ...] = ()
    for number, key, rest in _statements(text):
        if number > line:
            break
        if rest is None:
            table = key
    return table
