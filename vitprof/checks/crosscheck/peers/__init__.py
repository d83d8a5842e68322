"""The peers of ``vitprof crosscheck``, one module each: a new peer is one file here.

Each module declares ``RANK``, an integer that places its rows in the cross-check (ascending),
and ``PEERS``, a tuple of :class:`vitprof.checks.crosscheck.subject.Peer` calls, each naming its
row with a string literal and holding its unit, its adapter (the function that builds its row)
and the extras of vitprof that install its package; the module holds the peer's rules, read from
its installed sources, and the causes that follow from them. The shared machinery stays
outside: :mod:`~vitprof.checks.crosscheck.harness` (running a peer quietly, with logs of what
ran) and :mod:`~vitprof.checks.crosscheck.causes` (pricing what a peer left uncounted).

:func:`names` reads the names from the modules' sources without importing them, so that the
command line lists them without importing torch; :func:`load` imports the modules, in the same
order, for their peers.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vitprof.checks.crosscheck.subject import Peer

HERE = Path(__file__).parent


def declared(source: str) -> tuple[int, tuple[str, ...]]:
    """The ``RANK`` and the row names of ``PEERS`` a peer module's ``source`` declares; a
    ValueError when it declares them otherwise than as literals."""
    values = {target.id: node.value for node in ast.parse(source).body
              if isinstance(node, ast.Assign) for target in node.targets
              if isinstance(target, ast.Name)}
    if "RANK" not in values or not isinstance(values.get("PEERS"), ast.Tuple):
        raise ValueError("a peer module declares RANK = <int> and PEERS = (Peer(...), ...)")
    rows = values["PEERS"].elts  # type: ignore[attr-defined]
    names = [row.args[0].value for row in rows
             if isinstance(row, ast.Call) and row.args and isinstance(row.args[0], ast.Constant)
             and isinstance(row.args[0].value, str)]
    if len(names) != len(rows):
        raise ValueError("each Peer(...) of PEERS names its row with a string literal first")
    return ast.literal_eval(values["RANK"]), tuple(str(name) for name in names)


@cache
def _modules() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(module name, its row names) of every peer module, in the order of their ranks."""
    found = []
    for module in pkgutil.iter_modules([str(HERE)]):
        rank, rows = declared((HERE / f"{module.name}.py").read_text())
        found.append((rank, module.name, rows))
    return tuple((module, rows) for _, module, rows in sorted(found))


def names() -> tuple[str, ...]:
    """Every peer's name, in the order of the cross-check's rows; imports no peer."""
    return tuple(name for _, rows in _modules() for name in rows)


@cache
def load() -> tuple[Peer, ...]:
    """Every peer, in the order of :func:`names`: each module's ``PEERS``, imported."""
    return tuple(peer for module, _ in _modules()
                 for peer in importlib.import_module(f"{__name__}.{module}").PEERS)
