"""Compare two analyses, A against B: totals, components and blocks. Compares; never renders.

A side is a live :class:`~vitprof.count.result.Profile` or a saved profile, the JSON that
``vitprof analyze --format json`` writes (:func:`read_profile`).

Conventions:

* ``change = B - A`` in the metric's own unit (params, MACs, FLOPs = 2 x MACs, vector FLOPs).
* ``relative = change / A``, exact (a fraction); ``None`` when A is 0 and B is not (the count
  appeared), 0 when both are 0.
* A side without a component or a block (a block added or removed, a component outside one
  side's taxonomy) counts as zeros there, and the difference is stated in :attr:`Diff.notes`.
* An increase is *above* ``PCT`` percent when ``B - A > A * PCT / 100``, compared exactly; an
  increase from 0 is above every threshold.
* Profiles in other units are refused: their numbers would not mean the same thing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vitprof.core.display import Shown
from vitprof.core.errors import UserError, read_user_file
from vitprof.core.records import COMPONENTS, Counts, op_calls
from vitprof.core.schema import SCHEMA_VERSION, schema_errors
from vitprof.core.vocab import DiffScope

if TYPE_CHECKING:  # a live profile is read, never built, here: `vitprof diff --help` needs no torch
    from vitprof.count.result import Profile

METRICS = ("params", "macs", "flops", "vector_flops")


@dataclass(frozen=True)
class Snapshot:
    """What a diff reads of one analysis: its input, convention and counts."""

    label: str  # how the side was named: a model name or a file
    model: str
    input_shape: tuple[int, ...]
    mode: str
    units: dict[str, str]
    totals: Counts
    components: dict[str, Counts]
    blocks: dict[int, dict[str, Counts]]
    unsupported_ops: dict[str, int]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], label: str) -> Snapshot:
        """From the shape of :meth:`Profile.to_dict` (a saved profile, already validated)."""
        return cls(
            label=label,
            model=data["model"],
            input_shape=tuple(data["input_shape"]),
            mode=data["mode"],
            units=dict(data["units"]),
            totals=_counts(data["totals"]),
            components={name: _counts(c) for name, c in data["components"].items()},
            blocks={b["index"]: {name: _counts(c) for name, c in b["components"].items()}
                    for b in data["blocks"]},
            unsupported_ops=dict(data["unsupported_ops"]),
        )

    @classmethod
    def from_profile(cls, profile: Profile) -> Snapshot:
        return cls.from_dict(profile.to_dict(), profile.model)

    @property
    def shape(self) -> str:
        return "x".join(str(n) for n in self.input_shape)


def _counts(data: Mapping[str, int]) -> Counts:
    return Counts(params=data["params"], macs=data["macs"], vector_flops=data["vector_flops"])


# ---------------------------------------------------------------------------- saved profiles


def read_profile(path: str | Path) -> Snapshot:
    """A saved profile, checked against the profile schema and then the invariants every
    profile vitprof writes satisfies (:func:`broken_invariant`); any defect is one
    :class:`UserError` naming the file and the first thing wrong."""
    name = str(path)
    text = read_user_file(path, "profile")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"{name}: not valid JSON (truncated?): {error}") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise UserError(f"{name}: not a vitprof profile (no 'schema_version'); save one with "
                        "'vitprof analyze MODEL --format json --output FILE'")
    if data["schema_version"] != SCHEMA_VERSION:
        raise UserError(f"{name}: profile of schema version {data['schema_version']!r}; this "
                        f"vitprof reads version {SCHEMA_VERSION}: analyze the model again")
    errors = schema_errors(data, "profile")
    broken = errors[0] if errors else broken_invariant(data)
    if broken:
        raise UserError(f"{name}: not a vitprof profile: {broken}")
    return Snapshot.from_dict(data, name)


def _component_counts(data: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Every mapping of component names to counts, with where it is: ``components``,
    ``outside`` and each block's ``blocks.I.components`` (I its position in the list)."""
    return [("components", data["components"]), ("outside", data["outside"]),
            *((f"blocks.{i}.components", b["components"]) for i, b in enumerate(data["blocks"]))]


def _unknown_components(data: Mapping[str, Any]) -> list[str]:
    """Component names outside the taxonomy (one missing is an older taxonomy's: allowed)."""
    known = [str(c) for c in COMPONENTS]
    return [f"unknown component '{name}' at {where} (one of {', '.join(known)})"
            for where, counts in _component_counts(data) for name in counts if name not in known]


def _flops_not_twice_macs(data: Mapping[str, Any]) -> list[str]:
    every = [("totals", data["totals"]), *((f"{where}.{name}", c)
                                           for where, counts in _component_counts(data)
                                           for name, c in counts.items())]
    return [f"at {where}: flops {c['flops']} is not 2 x macs {c['macs']}"
            for where, c in every if c["flops"] != 2 * c["macs"]]


def _totals_not_summed(data: Mapping[str, Any]) -> list[str]:
    errors = []
    for metric in METRICS:
        summed = sum(c[metric] for c in data["components"].values())
        if summed != data["totals"][metric]:
            errors.append(f"at totals.{metric}: {data['totals'][metric]} is not the sum of the "
                          f"components, {summed}")
    return errors


def _block_indices(data: Mapping[str, Any]) -> list[str]:
    """Blocks are numbered 0 to n - 1, each once (in any order)."""
    indices = [block["index"] for block in data["blocks"]]
    twice = sorted({i for i in indices if indices.count(i) > 1})
    if twice:
        return [f"at blocks: block index {i} appears twice" for i in twice]
    if sorted(indices) != list(range(len(indices))):
        return [f"at blocks: block indices {_ranges(sorted(indices))} are not "
                f"{_ranges(list(range(len(indices))))}"]
    return []


def _blocks_not_summed(data: Mapping[str, Any]) -> list[str]:
    """Each component's counts are its blocks' plus what lies outside them (a component
    absent from one of them is zeros there)."""
    places = _component_counts(data)
    errors = []
    for name in dict.fromkeys(n for _, counts in places for n in counts):
        total, *parts = (counts.get(name, {}) for _, counts in places)
        for metric in METRICS:
            summed = sum(part.get(metric, 0) for part in parts)
            if summed != total.get(metric, 0):
                errors.append(f"at components.{name}.{metric}: {total.get(metric, 0)} is not "
                              f"the sum of the blocks and outside, {summed}")
    return errors


_INVARIANTS = (_unknown_components, _flops_not_twice_macs, _totals_not_summed, _block_indices,
               _blocks_not_summed)


def broken_invariant(data: Mapping[str, Any]) -> str | None:
    """The first invariant a profile (valid against its schema) breaks, or None. In order:
    every component is known; flops = 2 x macs everywhere; the components sum to the totals;
    the blocks are numbered 0 to n - 1, each once; each component is its blocks plus outside.
    """
    return next((errors[0] for check in _INVARIANTS if (errors := check(data))), None)


# ---------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Change:
    """One row of a diff: A and B of a total, a component, a block or a block's component.

    ``name`` is ``total``, the component, the block index, or ``INDEX.component``.
    """

    scope: DiffScope
    name: str
    a: Counts
    b: Counts

    def value(self, side: str, metric: str) -> int:
        return int(getattr(self.a if side == "a" else self.b, metric))

    def delta(self, metric: str) -> int:
        return self.value("b", metric) - self.value("a", metric)

    def relative(self, metric: str) -> Fraction | None:
        """``(B - A) / A``; 0 when both are 0; None when only A is 0."""
        before = self.value("a", metric)
        if before == 0:
            return Fraction(0) if self.delta(metric) == 0 else None
        return Fraction(self.delta(metric), before)

    def above(self, metric: str, percent: Fraction) -> bool:
        """Whether the increase is above ``percent`` % of A (an increase from 0 always is)."""
        return self.delta(metric) * 100 > self.value("a", metric) * percent

    @property
    def unchanged(self) -> bool:
        return self.a == self.b


@dataclass(frozen=True)
class Exceeded:
    """An increase above its threshold."""

    change: Change
    metric: str
    percent: Fraction


@dataclass(frozen=True, repr=False)
class Diff(Shown):
    """Every row, A against B, with what else differs between the two sides."""

    a: Snapshot
    b: Snapshot
    changes: tuple[Change, ...]
    notes: tuple[str, ...]

    def rows(self, *scopes: str) -> list[Change]:
        return [c for c in self.changes if c.scope in scopes]

    @property
    def total(self) -> Change:
        return self.rows(DiffScope.TOTAL)[0]

    def exceeded(self, limits: Mapping[str, Fraction]) -> list[Exceeded]:
        """Every total, component and block whose increase in a metric of ``limits`` is above
        its percentage (blocks' components are not held to it: their blocks are)."""
        return [Exceeded(change, metric, percent)
                for change in self.rows(DiffScope.TOTAL, DiffScope.COMPONENT, DiffScope.BLOCK)
                for metric, percent in limits.items() if change.above(metric, percent)]


def compare(a: Snapshot, b: Snapshot) -> Diff:
    """A against B; refused when their units differ."""
    if a.units != b.units:
        differ = sorted(k for k in {*a.units, *b.units} if a.units.get(k) != b.units.get(k))
        raise UserError(f"{a.label} and {b.label} count in other units ({', '.join(differ)} "
                        "differ); comparing them would mislead")
    changes = [Change(DiffScope.TOTAL, "total", a.totals, b.totals)]
    changes += _keyed(DiffScope.COMPONENT, a.components, b.components)
    block_totals = {side: {i: sum(c.values(), Counts()) for i, c in s.blocks.items()}
                    for side, s in (("a", a), ("b", b))}
    changes += _keyed(DiffScope.BLOCK, block_totals["a"], block_totals["b"])
    for index in sorted({*a.blocks, *b.blocks}):
        changes += _keyed(DiffScope.BLOCK_COMPONENT, a.blocks.get(index, {}),
                          b.blocks.get(index, {}),
                          prefix=f"{index}.")
    return Diff(a, b, tuple(changes), tuple(_notes(a, b)))


def _keyed(
    scope: DiffScope, a: Mapping[Any, Counts], b: Mapping[Any, Counts], prefix: str = ""
) -> list[Change]:
    """A row per key of either side, in A's order then B's new keys; absent is zeros."""
    keys = [*a, *(k for k in b if k not in a)]
    return [Change(scope, f"{prefix}{k}", a.get(k, Counts()), b.get(k, Counts())) for k in keys]


def _notes(a: Snapshot, b: Snapshot) -> list[str]:
    """Everything besides the counts that differs: input, mode, taxonomy, blocks, ops."""
    notes = []
    if a.input_shape != b.input_shape:
        notes.append(f"input shape changed: {a.shape} in A, {b.shape} in B")
    if a.mode != b.mode:
        notes.append(f"mode changed: {a.mode} in A, {b.mode} in B")
    for label, mine, theirs in (("A", a, b), ("B", b, a)):
        only = [name for name in mine.components if name not in theirs.components]
        if only:
            notes.append(f"taxonomy: components only in {label} (zeros on the other side): "
                         f"{', '.join(only)}")
    removed = sorted(set(a.blocks) - set(b.blocks))
    added = sorted(set(b.blocks) - set(a.blocks))
    if removed:
        notes.append(f"blocks removed in B: {_ranges(removed)}")
    if added:
        notes.append(f"blocks added in B: {_ranges(added)}")
    appeared = {op: n for op, n in b.unsupported_ops.items() if op not in a.unsupported_ops}
    went = {op: n for op, n in a.unsupported_ops.items() if op not in b.unsupported_ops}
    if appeared:
        notes.append(f"unsupported ops appeared in B: {op_calls(appeared)}")
    if went:
        notes.append(f"unsupported ops gone in B: {op_calls(went)}")
    return notes


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5``."""
    runs: list[list[int]] = []
    for index in indices:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


# ---------------------------------------------------------------------------- thresholds


def parse_percent(text: str) -> Fraction:
    """``"1%"``, ``"1.5"`` or ``"0"`` as an exact fraction of percent points, >= 0 and at most
    the largest float (reports show it as one)."""
    number = text.strip().removesuffix("%").strip()
    try:
        value = Fraction(number)
    except ValueError:
        raise ValueError(f"expected a percentage such as 5 or 1.5%, got '{text}'") from None
    if value < 0:
        raise ValueError(f"expected a percentage >= 0, got '{text}'")
    if value > sys.float_info.max:
        raise ValueError(f"expected a percentage such as 5 or 1.5%, got '{text}', beyond the "
                         f"largest float ({sys.float_info.max:.3g})")
    return value


def parse_fail_above(texts: list[str]) -> dict[str, Fraction]:
    """``--fail-above`` values: ``PCT`` for every metric, ``METRIC=PCT`` for one (it wins)."""
    limits: dict[str, Fraction] = {}
    specific: dict[str, Fraction] = {}
    for text in texts:
        metric, sep, percent = text.rpartition("=")
        if sep and metric not in METRICS:
            raise ValueError(f"unknown metric '{metric}' in '{text}'; one of {', '.join(METRICS)}")
        if sep:
            specific[metric] = parse_percent(percent)
        else:
            limits = dict.fromkeys(METRICS, parse_percent(percent))
    return {**limits, **specific}
