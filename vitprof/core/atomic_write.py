"""Files written whole or not at all: every file vitprof writes goes through here.

A file is first written to a temporary file beside its target (same folder, so same file
system: ``.NAME.RANDOM.tmp``), flushed and fsynced, and only then renamed over the target with
``os.replace``, which is atomic. A full disk, an error or an interrupt (Ctrl-C) while writing
leaves the target as it was and removes the temporary file. A target that is a symbolic link
is written through it (the file it points to is replaced), as ``Path.write_text`` does; a new
file gets the permissions ``Path.write_text`` would give it (``0o666`` less the umask), a
replaced one keeps its own. A target that is no regular file (``/dev/null``, ``/dev/stdout``,
a FIFO) is written in place: it holds nothing to keep, and must never be replaced by a file.

Several files are one unit with :func:`staged_files`: each is written to its temporary file,
and they are renamed, in the order they were added, only once every one was written. Add the
files that others link (figures) before those that link them (pages): an interrupt during the
renames then leaves every file either as it was or complete, and no new page without its
figures.

Failures are ``OSError`` (the caller names the file in its own ``UserError``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

# What a file holds: text (written as UTF-8), bytes, or a function that writes into the open
# binary file it is given (matplotlib's ``savefig``).
Content = str | bytes | Callable[[BinaryIO], None]


def _write(handle: BinaryIO, content: Content) -> None:
    if isinstance(content, str):
        handle.write(content.encode("utf-8"))
    elif isinstance(content, bytes):
        handle.write(content)
    else:
        content(handle)


def _special(target: Path) -> bool:
    """Whether ``target`` exists and is no regular file (``/dev/null``, ``/dev/stdout``'s pipe,
    a FIFO): it is written in place, never replaced, and holds no file to keep."""
    try:
        return not stat.S_ISREG(os.stat(target).st_mode)
    except FileNotFoundError:
        return False


@dataclass(frozen=True)
class _Staged:
    """A file of :class:`StagedFiles`: its target and the temporary file beside it, or, for a
    target that is no regular file, what is written in place on commit."""

    target: Path
    temporary: Path | None
    in_place: Content = b""


class StagedFiles:
    """Files written to temporary files beside their targets, renamed over them on
    :meth:`commit` (see the module). A target that is no regular file (:func:`_special`) is
    written in place, in its turn, on :meth:`commit`."""

    def __init__(self) -> None:
        self._staged: list[_Staged] = []  # in the order added

    def add(self, path: str | Path, content: Content) -> None:
        """Write ``content`` to a temporary file beside ``path`` (fsynced); raises OSError."""
        if _special(Path(path)):  # before resolving: /dev/stdout resolves to no path
            self._staged.append(_Staged(Path(path), None, content))
            return
        target = Path(os.path.realpath(path))
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        self._staged.append(_Staged(target, temporary))
        with os.fdopen(fd, "wb") as handle:
            _write(handle, content)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))

    def commit(self) -> None:
        """Rename every temporary file over its target, in the order they were added."""
        while self._staged:
            staged = self._staged[0]
            if staged.temporary is None:
                with open(staged.target, "wb") as handle:
                    _write(handle, staged.in_place)
            else:
                os.replace(staged.temporary, staged.target)
            self._staged.pop(0)

    def discard(self) -> None:
        """Remove the temporary files not renamed yet; their targets stay as they were."""
        for staged in self._staged:
            if staged.temporary is not None:
                with contextlib.suppress(OSError):
                    staged.temporary.unlink()
        self._staged.clear()


@contextlib.contextmanager
def staged_files() -> Iterator[StagedFiles]:
    """Files added in the block are renamed over their targets when it ends without an
    exception; with one (an interrupt included) none is, and every temporary file is removed."""
    staged = StagedFiles()
    try:
        yield staged
        staged.commit()
    finally:
        staged.discard()


def write_atomically(path: str | Path, content: Content) -> None:
    """Write ``content`` to ``path`` whole or not at all (see the module); raises OSError."""
    with staged_files() as staged:
        staged.add(path, content)
