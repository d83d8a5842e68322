"""Checks that an output place can be written, made before anything is computed.

Every command with an output option (``--output``, ``--out``, ``--figure``, ``--roofline``)
calls one of these first, so that a read-only folder or a figure format matplotlib cannot write
ends in one line and exit code 2 at once, not after minutes of counting. Permissions are those
``os.access`` reports for the user running vitprof (root may write into a read-only folder).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from vitprof.core.errors import UserError


def _usable_folder(folder: Path, target: Path | str) -> None:
    """``folder``, an existing path, must be a folder where files can be created."""
    if not folder.is_dir():
        raise UserError(f"cannot write {target}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {target}: the folder {folder} is not writable")


def check_writable(path: str | Path) -> Path:
    """``path`` as a file to write, checked where :mod:`vitprof.core.atomic_write` writes it: a
    target that is no regular file (``/dev/null``, a FIFO) is written in place, so it must be
    writable itself; any other is written through a symbolic link, if it is one, and replaced
    by a file created beside it, so the folder it is in (the link's target's) must exist and be
    writable, and the file, if it exists, writable. Returns the path."""
    target = Path(path)
    if target.is_dir():
        raise UserError(f"cannot write {target}: it is a folder")
    if target.exists() and not target.is_file():
        if not os.access(target, os.W_OK):
            raise UserError(f"cannot write {target}: it is not writable")
        return target
    written = Path(os.path.realpath(target)) if target.is_symlink() else target
    named = target if written is target else f"{target} (a link to {written})"
    folder = written.parent
    if not folder.exists():
        raise UserError(f"cannot write {named}: no such folder {folder}")
    _usable_folder(folder, named)
    if written.exists() and not os.access(written, os.W_OK):
        raise UserError(f"cannot write {named}: the file is read-only")
    return target


def check_folder(path: str | Path) -> Path:
    """``path`` as a folder to write files into: a writable folder, or one that can be created
    (its nearest existing ancestor is a writable folder). Returns the path."""
    target = Path(path)
    existing = next(p for p in (target, *target.parents) if p.exists())
    _usable_folder(existing, target)
    return target


def figure_formats() -> list[str]:
    """The file extensions matplotlib can write (its canvas's supported file types)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(FigureCanvasBase.get_supported_filetypes())


def check_figure_path(path: str | Path, formats: Iterable[str] | None = None) -> Path:
    """``path`` as a figure file: its extension one of ``formats`` (default: every format
    matplotlib writes), and writable (:func:`check_writable`). Returns the path."""
    target = Path(path)
    allowed = list(formats) if formats is not None else figure_formats()
    extension = target.suffix.lower().removeprefix(".")
    if extension not in allowed:
        given = f"'.{extension}'" if extension else "none"
        raise UserError(f"cannot write the figure {target}: extension {given} is not one of "
                        f"{', '.join(allowed)}")
    return check_writable(target)
