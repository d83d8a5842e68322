"""Recognition, a layer above the count and the models: which component and block each counted
record and each parameter belongs to.

The count is neutral (:mod:`vitprof.count`); :func:`breakdown` places a run's records once, by
the graph recognizer, with the component tables the model libraries declare read as facts
(:mod:`.tables`) and compared with it. Nothing registers at import.
"""

from vitprof.recognize.breakdown import Found, breakdown

__all__ = ["Found", "breakdown"]
