"""The model libraries vitprof knows, each one file, listed once in :data:`LIBRARIES`.

A library file (:mod:`.torchvision`, :mod:`.timm`, :mod:`.hugging_face`, :mod:`.notes`,
:mod:`.factory`) declares a :class:`~vitprof.models.libraries.base.ModelLibrary`: its component
tables (facts, read by :func:`vitprof.recognize.tables.recognize`), its spec inferrers (read by
:func:`vitprof.models.spec_inference.spec_from_model`), its zoo entries and the names it builds
(read by :mod:`vitprof.models.zoo`, the dispatcher), the input its models declare
(:mod:`vitprof.models.declared_input`), its sweep variants, its deploy step, the names that
hold a file (:func:`model_file`) and its part of the zoo sweep (``benchmarks/zoo_sweep.py``).
Adding a library is a new file here and one line below.

The order of :data:`LIBRARIES` is the order of ``vitprof models``; a name goes to the first
library that claims it, so :mod:`.factory`, which claims any name with a ``:``, comes last. The
detectors of different libraries accept disjoint sets of models, so the order decides nothing
else.
"""

from __future__ import annotations

import importlib

from vitprof.models.libraries.base import (
    ComponentTable,
    Inferrer,
    ModelFile,
    ModelLibrary,
    ZooEntry,
    ZooSweep,
)

FILES = (  # the registry: one line per library file, each declaring a LIBRARY
    "torchvision",
    "notes",
    "timm",
    "hugging_face",
    "open_clip",
    "factory",
)
LIBRARIES: tuple[ModelLibrary, ...] = tuple(
    importlib.import_module(f"{__name__}.{file}").LIBRARY for file in FILES
)
TABLES: tuple[ComponentTable, ...] = tuple(t for f in LIBRARIES for t in f.tables)
INFERRERS: tuple[Inferrer, ...] = tuple(i for f in LIBRARIES for i in f.inferrers)
ENTRIES: tuple[ZooEntry, ...] = tuple(e for f in LIBRARIES for e in f.entries)
KNOWN = "; ".join(f.known for f in LIBRARIES if f.known)


def library_of(name: str) -> ModelLibrary | None:
    """The first registered library that claims ``name``; None for a plain zoo name."""
    return next((library for library in LIBRARIES if library.claims(name)), None)


def zoo_sweeps() -> dict[str, ZooSweep]:
    """Each registered library's part of the zoo sweep, by the source its rows carry, in
    :data:`LIBRARIES`' order: a library joins ``benchmarks/zoo_sweep.py`` by its own file."""
    return {library.zoo_sweep.source: library.zoo_sweep
            for library in LIBRARIES if library.zoo_sweep is not None}


def model_file(name: str) -> ModelFile | None:
    """The file a model name holds, as its library splits it (:data:`ModelFile`): ``hf:`` and
    ``FILE.py:factory`` names; None for any other name."""
    library = library_of(name)
    return library.model_file(name) if library is not None else None
