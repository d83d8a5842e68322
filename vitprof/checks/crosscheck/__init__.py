"""``vitprof crosscheck``: every peer's count of a model next to vitprof's, differences explained.

The peers (counters such as fvcore, torchinfo, FlopCounterMode, and published figures) are one
module each in :mod:`vitprof.checks.crosscheck.peers`; :mod:`vitprof.render.crosscheck` writes
the result. See ``docs/crosscheck.md`` for each peer's rule and the causes.

This package imports its members when first asked for them, so that the command line reads the
peers' names (:func:`vitprof.checks.crosscheck.peers.names`) without importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vitprof.checks.crosscheck.run import PEERS, TABLE, check_subject, run_crosscheck
    from vitprof.checks.crosscheck.subject import Subject
    from vitprof.checks.crosscheck.table import CrossCheck

__all__ = ["PEERS", "TABLE", "CrossCheck", "Subject", "check_subject", "run_crosscheck"]
_HOMES = {"PEERS": "run", "TABLE": "run", "CrossCheck": "table", "Subject": "subject",
          "check_subject": "run", "run_crosscheck": "run"}


def __getattr__(name: str) -> Any:
    """A name of :data:`__all__`, imported now: ``run_crosscheck`` runs the peers on a model;
    ``check_subject`` on a :class:`Subject` (a model already counted, reused by the model
    pages); ``TABLE`` holds the peers themselves, ``PEERS`` their names."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
