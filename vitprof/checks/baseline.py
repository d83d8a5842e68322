"""Baselines in budget files: limits relative to a saved profile of the same model.

An entry names ``baseline = "profiles/vit_b_16.json"`` (a profile saved by ``vitprof analyze
--format json``, relative to the budget file) and ``max_increase = "1%"``. Every total, component
and block may then grow by at most that much over the baseline, in params, MACs and vector FLOPs
(FLOPs = 2 x MACs grow as MACs do): ``actual <= floor(baseline * (1 + pct / 100))``, exactly. A
count that was 0 in the baseline may not appear. For each scope and metric the row that grew the
most binds.

Fail closed: a baseline that is missing, unreadable, of another schema version, in other units,
or counted on another input shape or mode is a :class:`~vitprof.core.errors.UserError`, never a
pass.
``vitprof check --update-baselines`` rewrites the snapshots from the current analyses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from math import floor
from pathlib import Path

from vitprof.checks.diff import Change, Snapshot, compare, read_profile
from vitprof.core.errors import UserError
from vitprof.core.schema import versioned
from vitprof.count.result import Profile

METRICS = ("params", "macs", "vector_flops")
SCOPES = ("total", "component", "block")


@dataclass(frozen=True)
class Baseline:
    """Where an entry's baseline profile lives and how much the model may grow over it."""

    path: Path
    max_increase: Fraction  # percent


@dataclass(frozen=True)
class Limit:
    """The binding row of one scope and metric: ``actual`` may not exceed ``limit``."""

    scope: str  # total, component or block
    name: str  # "total", the component, or the block index
    metric: str
    before: int  # the baseline's count
    limit: int
    actual: int


def load(baseline: Baseline, current: Snapshot) -> Snapshot:
    """The baseline profile, refused when it cannot be compared with ``current``."""
    if not baseline.path.exists():
        raise UserError(f"baseline {baseline.path}: no such profile file; write it with "
                        "'vitprof check --update-baselines'")
    try:
        saved = read_profile(baseline.path)
    except UserError as error:
        raise UserError(f"baseline {error}") from None
    for what, before, now in (("input", saved.shape, current.shape),
                              ("mode", saved.mode, current.mode)):
        if before != now:
            raise UserError(f"baseline {baseline.path}: counted with {what} {before}, the model "
                            f"now runs with {now}; rewrite it with 'vitprof check "
                            "--update-baselines'")
    return saved


def save_baseline(baseline: Baseline, profile: Profile) -> None:
    """Write ``profile`` as the new baseline (folders created as needed)."""
    try:
        baseline.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(versioned(profile.to_dict(), "profile"), indent=2)
        baseline.path.write_text(text + "\n", encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot write baseline {baseline.path}: {error.strerror}") from None


def baseline_limits(baseline: Baseline, current: Snapshot) -> list[Limit]:
    """For each scope and metric, the row that grew the most against the baseline, with its
    limit; rows zero on both sides are left out."""
    saved = load(baseline, current)
    try:
        diff = compare(saved, current)
    except UserError as error:
        raise UserError(f"baseline {error}") from None
    binding = []
    for scope in SCOPES:
        for metric in METRICS:
            rows = [c for c in diff.rows(scope) if c.value("a", metric) or c.value("b", metric)]
            if rows:
                binding.append(_limit(max(rows, key=lambda c: _growth(c, metric)), metric,
                                      baseline.max_increase))
    return binding


def _growth(change: Change, metric: str) -> Fraction | float:
    relative = change.relative(metric)
    return float("inf") if relative is None else relative


def _limit(change: Change, metric: str, percent: Fraction) -> Limit:
    before = change.value("a", metric)
    return Limit(change.scope, change.name, metric, before,
                 floor(before * (1 + percent / 100)), change.value("b", metric))
