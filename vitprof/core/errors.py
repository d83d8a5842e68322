"""The one exception type that means "the user asked for something that cannot be done",
reading a user's file with that exception as its only failure, and vitprof's deprecation
warning."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """A bad model name, size, file or option: reported as one line and exit code 2."""


class VitprofDeprecationWarning(DeprecationWarning):
    """What vitprof warns of an old keyword or attribute that still works: its own category, so
    that the test suite can turn vitprof's deprecations (and no one else's) into errors."""


def one_line(error: BaseException) -> str:
    """``Type: first line of the message``: an error raised by others, told in a UserError."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def read_user_file(path: str | Path, kind: str) -> str:
    """The UTF-8 text of the user's ``kind`` file (``"budget"``, ``"profile"``), without the
    byte-order mark an editor may have put first: a missing or unreadable file is one
    :class:`UserError` naming it."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such {kind} file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: cannot read the {kind} file: {error}") from None
