"""vitprof: exact parameter and MAC accounting for Vision Transformers, per component.

MACs are the primary unit (one multiply-accumulate of a matmul, linear, convolution or
attention product); FLOPs = 2 x MACs; element-wise work is counted apart as vector FLOPs.
"""

from __future__ import annotations

import importlib
from typing import Any

from vitprof.core.display import on_first_display

# public name -> the module defining it, imported on first use: ``vitprof.cli.main`` then starts
# without torch, so that an interrupt during the long imports ends in main's one line
_EXPORTS = {
    "Component": "vitprof.core.vocab", "Counts": "vitprof.core.records",
    "Profile": "vitprof.count.result",
    "memory": "vitprof.measure.memory.estimate",
    "MemoryEstimate": "vitprof.measure.memory.estimate",
    "UserError": "vitprof.core.errors", "analyze": "vitprof.analysis",
    "track": "vitprof.measure.mfu.tracker",
    "InputRequest": "vitprof.workload",
}

__all__ = ["Component", "Counts", "InputRequest", "MemoryEstimate", "Profile", "UserError",
           "analyze", "memory", "track"]
__version__ = "0.1.0"


def _register_displays() -> None:
    """The renderer's displays of the results (:mod:`vitprof.core.display`), registered when
    the first result is shown: the renderer imports torch."""
    from vitprof.render.display import register_displays

    register_displays()


on_first_display(_register_displays)


def __getattr__(name: str) -> Any:
    if name == "formulas":  # the public formula registry, a module
        return importlib.import_module("vitprof.formulas")
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'vitprof' has no attribute {name!r}")
