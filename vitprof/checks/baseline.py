"""Baselines in budget files: limits relative to a saved profile of the same model.

An entry names ``baseline = "profiles/vit_b_16.json"`` (a profile saved by ``vitprof analyze
--format json``, relative to the budget file) and ``max_increase = "1%"``. Every total, component
and block may then grow by at most that much over the baseline, in params, MACs and vector FLOPs
(FLOPs = 2 x MACs grow as MACs do): ``actual <= floor(baseline * (1 + pct / 100))``, exactly. A
count that was 0 in the baseline may not appear. For each scope and metric the row that grew the
most binds.

Fail closed: a baseline that is missing, unreadable, of another schema version, in other units,
counted on another input shape or mode, or saved from another model is a
:class:`~vitprof.core.errors.UserError`, never a pass.
``vitprof check --update-baselines`` rewrites the snapshots from the current analyses, all or none,
once the report is written (:func:`updated_baselines`), and never a file that is not a profile
(:func:`refuse_to_overwrite`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from math import floor
from pathlib import Path

from vitprof.checks.diff import Change, Snapshot, compare, read_profile
from vitprof.core.atomic_write import StagedFiles
from vitprof.core.errors import UserError
from vitprof.core.schema import versioned
from vitprof.core.vocab import DiffScope
from vitprof.count.result import Profile
from vitprof.models.libraries import model_file

METRICS = ("params", "macs", "vector_flops")


@dataclass(frozen=True)
class Baseline:
    """Where an entry's baseline profile lives and how much the model may grow over it."""

    path: Path
    max_increase: Fraction  # percent


@dataclass(frozen=True)
class Limit:
    """The binding row of one scope and metric: ``actual`` may not exceed ``limit``."""

    scope: DiffScope  # total, component or block
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
    rewrite = "rewrite it with 'vitprof check --update-baselines'"
    if not same_model(saved.model, current.model):
        raise UserError(f"baseline {baseline.path}: saved from model {saved.model}, not "
                        f"{current.model}; {rewrite}")
    for what, before, now in (("input", saved.shape, current.shape),
                              ("mode", saved.mode, current.mode)):
        if before != now:
            raise UserError(f"baseline {baseline.path}: counted with {what} {before}, the model "
                            f"now runs with {now}; {rewrite}")
    return saved


def same_model(saved: str, current: str) -> bool:
    """Whether ``saved`` and ``current`` name the same model. A name that holds a path
    (:func:`vitprof.models.libraries.model_file`) holds it as vitprof was given it, relative to
    the folder it ran in: two such names with the same factory are the same model when one path
    ends with the other (``sub/models.py:build`` and ``/work/sub/models.py:build``). Other names
    are equal."""
    ours, theirs = model_file(saved), model_file(current)
    if ours is None or theirs is None:
        return saved == current
    if (ours[0], ours[2]) != (theirs[0], theirs[2]):
        return False
    shorter, longer = sorted((Path(ours[1]).parts, Path(theirs[1]).parts), key=len)
    return longer[len(longer) - len(shorter):] == shorter


@contextmanager
def updated_baselines(baselines: Sequence[tuple[Baseline, Profile]]) -> Iterator[None]:
    """Write each profile as its baseline (folders created as needed), all or none, and only
    if the block succeeds: every profile goes to a temporary file beside its baseline first
    (:class:`~vitprof.core.atomic_write.StagedFiles`), the block runs (the report is written),
    and only then are they renamed over the baselines. A failure (or an interrupt) before that,
    in the block included, leaves every baseline as it was; the temporary files are removed
    either way."""
    staged = StagedFiles()
    target = Path()
    try:
        try:
            for baseline, profile in baselines:
                target = baseline.path
                target.parent.mkdir(parents=True, exist_ok=True)
                text = json.dumps(versioned(profile.to_dict(), "profile"), indent=2)
                staged.add(target, text + "\n")
        except OSError as error:
            raise UserError(f"cannot write baseline {target}: {error.strerror}") from None
        yield
        try:
            staged.commit()
        except OSError as error:
            raise UserError(f"cannot write baseline {error.filename2 or error.filename}: "
                            f"{error.strerror}") from None
    finally:
        staged.discard()


def refuse_to_overwrite(path: Path) -> None:
    """Refuse a baseline ``path`` that ``--update-baselines`` must not overwrite: one that
    exists and is not a vitprof profile (a JSON object with a ``schema_version``, of any
    version or model), such as a model's ``.py`` file named by mistake. A missing file is
    written."""
    if not path.exists():
        return
    if not path.is_file():
        raise UserError(f"{path} is not a file; --update-baselines writes a profile there")
    try:
        data = json.loads(path.read_bytes())
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror}") from None
    except ValueError:  # not JSON, or not text
        data = None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise UserError(f"{path} is not a vitprof profile (a JSON object with a "
                        "'schema_version'); --update-baselines overwrites only a profile, "
                        "never another file")


def baseline_limits(saved: Snapshot, current: Snapshot, percent: Fraction) -> list[Limit]:
    """For each scope and metric, the row of ``current`` that grew the most over ``saved``, the
    baseline, with its limit: ``percent`` more; rows zero on both sides are left out."""
    try:
        diff = compare(saved, current)
    except UserError as error:
        raise UserError(f"baseline {error}") from None
    binding = []
    for scope in (DiffScope.TOTAL, DiffScope.COMPONENT, DiffScope.BLOCK):
        for metric in METRICS:
            rows = [c for c in diff.rows(scope) if c.value("a", metric) or c.value("b", metric)]
            if rows:
                binding.append(_limit(max(rows, key=lambda c: _growth(c, metric)), metric,
                                      percent))
    return binding


def _growth(change: Change, metric: str) -> Fraction | float:
    relative = change.relative(metric)
    return float("inf") if relative is None else relative


def _limit(change: Change, metric: str, percent: Fraction) -> Limit:
    before = change.value("a", metric)
    return Limit(change.scope, change.name, metric, before,
                 floor(before * (1 + percent / 100)), change.value("b", metric))
