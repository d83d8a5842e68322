"""Errors about the settings of :func:`vitprof.memory`, in the words of whoever set them.

The settings reach the prediction from three surfaces, each with its own spelling: the keywords
of ``vitprof.memory`` (``optimizer``, ``mode='inference'``), the options of ``vitprof memory``
(``--optimizer``, ``--mode inference``) and the keys of a budget's ``memory`` table
(``optimizer``, ``mode = "inference"``). A :class:`SettingError` is raised in the keywords'
words (its ``str``); a surface that passes settings on in other words re-raises it with
:meth:`SettingError.spelled`, so that an error names what the user wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vitprof.core.errors import UserError


@dataclass(frozen=True)
class Spelling:
    """How one surface writes a setting: its name alone (``name(key)``) and with a value
    (``setting(key, value)``)."""

    name: Callable[[str], str]
    setting: Callable[[str, object], str]


KEYWORDS = Spelling(lambda key: key, lambda key, value: f"{key}={value!r}")
OPTIONS = Spelling(lambda key: f"--{key.replace('_', '-')}",
                   lambda key, value: f"--{key.replace('_', '-')} {value}")
TABLE_KEYS = Spelling(lambda key: key, lambda key, value: f"{key} = {toml_value(value)}")


def toml_value(value: object) -> str:
    """``value`` as a TOML file writes it: a boolean ``true``/``false``, an integer bare, any
    other value a quoted string."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, int) else f'"{value}"'


class SettingError(UserError):
    """A :class:`UserError` about the settings, its text a function of the spelling; ``str``:
    the keywords' (:data:`KEYWORDS`)."""

    def __init__(self, text: Callable[[Spelling], str]) -> None:
        super().__init__(text(KEYWORDS))
        self.text = text

    def spelled(self, spelling: Spelling) -> UserError:
        """The same error in the words of ``spelling``."""
        return UserError(self.text(spelling))
