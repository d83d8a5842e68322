"""The model families vitprof knows by name, each one file, listed once in :data:`FAMILIES`.

A family file (:mod:`.torchvision`, :mod:`.timm`, :mod:`.hugging_face`, :mod:`.notes`) declares
a :class:`~vitprof.models.family.base.ModelFamily`: its component table (read by
:func:`vitprof.count.families.recognize`), its spec inferrers (read by
:func:`vitprof.models.spec_inference.spec_from_model`) and its zoo entries (read by
:mod:`vitprof.models.zoo`). Adding a family is a new file here and one line below.

The order of :data:`FAMILIES` is the order of ``vitprof models``; the detectors of different
families accept disjoint sets of models, so it decides nothing else.
"""

from __future__ import annotations

from vitprof.count.families import register_tables
from vitprof.count.families.base import ComponentTable
from vitprof.models.family import hugging_face, notes, timm, torchvision
from vitprof.models.family.base import Inferrer, ModelFamily, ZooEntry

FAMILIES: tuple[ModelFamily, ...] = (
    torchvision.FAMILY, notes.FAMILY, timm.FAMILY, hugging_face.FAMILY,
)
TABLES: tuple[ComponentTable, ...] = tuple(t for f in FAMILIES for t in f.tables)
INFERRERS: tuple[Inferrer, ...] = tuple(i for f in FAMILIES for i in f.inferrers)
ENTRIES: tuple[ZooEntry, ...] = tuple(e for f in FAMILIES for e in f.entries)
KNOWN = "; ".join(f.known for f in FAMILIES)

register_tables(TABLES)
