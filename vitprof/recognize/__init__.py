"""Recognition, a layer above the count and the models: what the records and parameters of a
counted run are (their components and blocks, the rule that placed each), read from the data flow;
the self-checks of that meaning.

The count is neutral (:mod:`vitprof.count`); :func:`breakdown` places a run's records once, by
the graph recognizer (:mod:`.graph`, its rules in :mod:`.rules`), with the component tables the
model libraries declare read as facts (:mod:`.tables`) and compared with it. Nothing registers
at import.
"""

from vitprof.recognize.breakdown import Found, breakdown

__all__ = ["Found", "breakdown"]
