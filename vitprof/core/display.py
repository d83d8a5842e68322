"""How a result is shown, registered by the renderer: results stay plain data.

A result (``Profile``, ``SpeedProfile``, ``CrossCheck``, ``Sweep``, ``Diff``) inherits
:class:`Shown` and imports nothing from :mod:`vitprof.render`: its ``__repr__`` and a
notebook's ``_repr_markdown_`` / ``_repr_html_`` ask the show function registered for its type
(:func:`register_display`) for the format ``"repr"``, ``"markdown"`` or ``"html"``. The renderer
registers them (:func:`vitprof.render.display.register_displays`); the package's ``__init__``
hands that registration to :func:`on_first_display`, so that it runs when the first result is
shown and importing vitprof imports neither the renderer nor torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

Shows = Literal["repr", "markdown", "html"]
ShowFunction = Callable[[Any, Shows], str]

_SHOW: dict[type, ShowFunction] = {}
_PENDING: list[Callable[[], None]] = []


def register_display(kind: type, show: ShowFunction) -> None:
    """Show instances of ``kind`` (and of its subclasses) with ``show(result, format)``."""
    _SHOW[kind] = show


def on_first_display(register: Callable[[], None]) -> None:
    """Run ``register`` (it calls :func:`register_display`) before the first result is shown."""
    _PENDING.append(register)


def show(result: object, fmt: Shows) -> str:
    """``result`` in ``fmt``, by the show function registered for the nearest of its types."""
    while _PENDING:
        _PENDING.pop(0)()
    for kind in type(result).__mro__:
        if kind in _SHOW:
            return _SHOW[kind](result, fmt)
    raise LookupError(f"no display registered for {type(result).__name__}")


class Shown:
    """A result shown as the renderer registered: ``repr()``, and a notebook's markdown and
    HTML. A dataclass inheriting it says ``repr=False`` (its generated ``__repr__`` would win)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return show(self, "repr")

    def _repr_markdown_(self) -> str:
        return show(self, "markdown")

    def _repr_html_(self) -> str:
        return show(self, "html")
