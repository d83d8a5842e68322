"""How each result is shown: ``repr()`` and a notebook's markdown and HTML, registered with
:mod:`vitprof.core.display` so that the results themselves import nothing from the renderer.

``repr()`` of a ``Profile`` or a ``SpeedProfile`` is its short text (:func:`profile_repr`,
:func:`speed_repr`); of a ``CrossCheck``, ``Sweep``, ``Diff`` or ``MemoryEstimate`` its table,
as the command prints it. The notebook's markdown and HTML are the result's document in that
format. A ``Tracker`` (not itself shown) is shown as its MFU summary: :meth:`Tracker.summary`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vitprof.checks.crosscheck.table import CrossCheck
from vitprof.checks.diff import Diff
from vitprof.core.display import ShowFunction, Shows, register_display
from vitprof.count.result import Profile
from vitprof.measure.memory.estimate import MemoryEstimate
from vitprof.measure.mfu.tracker import Tracker
from vitprof.measure.result import SpeedProfile
from vitprof.render.crosscheck import crosscheck_document
from vitprof.render.diff import diff_document
from vitprof.render.document import Document
from vitprof.render.formats import render
from vitprof.render.memory import memory_document
from vitprof.render.mfu_summary import tracker_summary
from vitprof.render.speed import speed_document, speed_repr
from vitprof.render.sweep import sweep_document
from vitprof.render.tables import profile_document, profile_repr
from vitprof.sweep import Sweep

_FORMATS: dict[Shows, str] = {"repr": "table", "markdown": "markdown", "html": "html"}


def _shown(
    document: Callable[[Any], Document], short: Callable[[Any], str] | None = None
) -> ShowFunction:
    """Show a result as ``document(result)`` in the format asked, its ``repr()`` as
    ``short(result)`` where given."""
    def show(result: Any, fmt: Shows) -> str:
        if fmt == "repr" and short is not None:
            return short(result)
        return render(document(result), _FORMATS[fmt])

    return show


def register_displays() -> None:
    """Register the display of every result type."""
    register_display(Profile, _shown(profile_document, profile_repr))
    register_display(SpeedProfile, _shown(speed_document, speed_repr))
    register_display(CrossCheck, _shown(crosscheck_document))
    register_display(Sweep, _shown(sweep_document))
    register_display(Diff, _shown(diff_document))
    register_display(MemoryEstimate, _shown(memory_document))
    register_display(Tracker, tracker_summary)
