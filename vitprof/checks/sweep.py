"""The sweeps' former home, kept so that ``from vitprof.checks.sweep import sweep`` still works:
a sweep is an analysis along one axis, not a check, so it lives beside ``analyze`` in
:mod:`vitprof.sweep` (the analysis layer)."""

from vitprof.sweep import (
    AXES,
    Crossover,
    Sweep,
    SweepPoint,
    parse_values,
    size_marks,
    sweep,
    sweep_from,
    variant_factory,
)

__all__ = ["AXES", "Crossover", "Sweep", "SweepPoint", "parse_values", "size_marks", "sweep",
           "sweep_from", "variant_factory"]
