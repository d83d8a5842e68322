"""Checking budgets: an entry's model analysed (and its training step's memory predicted, where
a check bounds it), every check judged exactly, baselines compared."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from torch import nn

from vitprof.analysis import analyze
from vitprof.checks.baseline import Limit, baseline_limits, load
from vitprof.checks.budget.parser import _in_table_keys
from vitprof.checks.budget.schema import (
    _COMPONENTS,
    SHARES,
    Budget,
    BudgetResult,
    Check,
    CheckResult,
)
from vitprof.checks.diff import Snapshot
from vitprof.core.errors import UserError, one_line
from vitprof.core.records import Counts
from vitprof.core.vocab import (
    Bound,
    DiffScope,
    Metric,
    Scope,
    Verdict,
)
from vitprof.count.result import Profile
from vitprof.measure.memory.estimate import memory


def evaluate(budget: Budget, update_baseline: bool = False) -> BudgetResult:
    """Analyze the budget's model (meta device, CPU fallback) and run every check;
    ``update_baseline``: this analysis is the entry's baseline (see :func:`check_profile`)."""
    try:
        profile = analyze(
            budget.model, request=budget.request, overrides=budget.overrides,
            recognizer=budget.recognizer,
            name=budget.name if isinstance(budget.model, nn.Module) else None,
        )
    except UserError as error:
        raise UserError(f"{budget.where}: {error}") from None
    except Exception as error:  # fail closed: any failure to analyze is an error, never a pass
        raise UserError(f"{budget.where}: analysis failed: {one_line(error)}") from None
    return check_profile(budget, profile, update_baseline, _peak_bytes(budget))


def _peak_bytes(budget: Budget) -> int | None:
    """The predicted peak of a training step (:func:`vitprof.memory` with the entry's input and
    ``memory`` settings), when a check bounds it; else None."""
    if not any(check.metric is Metric.PEAK_BYTES for check in budget.checks):
        return None
    try:
        settings: dict[str, Any] = dict(budget.memory)
        return memory(budget.model, request=budget.request, **settings).peak_bytes
    except UserError as error:
        raise UserError(f"{budget.where}: {_in_table_keys(error)}") from None
    except Exception as error:  # fail closed, as evaluate() does for the analysis
        raise UserError(f"{budget.where}: memory prediction failed: {one_line(error)}"
                        ) from None


def check_profile(budget: Budget, profile: Profile, update_baseline: bool = False,
                  peak_bytes: int | None = None) -> BudgetResult:
    """Every check of ``budget`` against an existing analysis, its baseline's included.
    ``update_baseline``: the baseline is ``profile`` itself, as it is once the caller has
    written it (:func:`vitprof.checks.baseline.updated_baselines`), not the file. ``peak_bytes``:
    the predicted peak a ``max_peak_bytes`` check bounds (without it, such a check fails)."""
    results = tuple(_peak_check(check, peak_bytes) if check.metric is Metric.PEAK_BYTES
                    else _run(check, profile) for check in budget.checks)
    return BudgetResult(budget, profile,
                        results + _baseline_results(budget, profile, update_baseline))


def _baseline_results(budget: Budget, profile: Profile,
                      update_baseline: bool) -> tuple[CheckResult, ...]:
    """The binding row of each scope and metric against the baseline (the file, or
    ``profile`` itself when it is being updated), as a ``max_`` check; a failed one notes the
    baseline's count."""
    if budget.baseline is None:
        return ()
    current = Snapshot.from_profile(profile)
    try:
        saved = current if update_baseline else load(budget.baseline, current)
        binding = baseline_limits(saved, current, budget.baseline.max_increase)
    except UserError as error:
        raise UserError(f"{budget.origin or budget.name}: {error}") from None
    percent = f"{float(budget.baseline.max_increase):g}%"
    results = []
    for limit in binding:
        verdict = Verdict.PASS if limit.actual <= limit.limit else Verdict.FAIL
        note = f"baseline {budget.baseline.path}: {limit.before:,} + {percent}"
        results.append(CheckResult(_baseline_check(limit), limit.actual, verdict,
                                   int(limit.name) if limit.scope == DiffScope.BLOCK else None,
                                   note if verdict is Verdict.FAIL else ""))
    return tuple(results)


def _baseline_check(limit: Limit) -> Check:
    """``max_increase.macs``, ``max_increase.components.mlp.macs``, ``max_increase.blocks.macs``."""
    if limit.scope == DiffScope.TOTAL:
        return Check(f"max_increase.{limit.metric}", Scope.MODEL, Bound.MAX,
                     Metric(limit.metric), limit.limit)
    if limit.scope == DiffScope.BLOCK:
        return Check(f"max_increase.blocks.{limit.metric}", Scope.BLOCKS, Bound.MAX,
                     Metric(limit.metric), limit.limit)
    return Check(f"max_increase.components.{limit.name}.{limit.metric}", Scope.COMPONENT,
                 Bound.MAX, Metric(limit.metric), limit.limit, _COMPONENTS.get(limit.name))


def _peak_check(check: Check, peak_bytes: int | None) -> CheckResult:
    if peak_bytes is None:
        return CheckResult(check, None, Verdict.FAIL, note="no memory prediction was made")
    return _judge(check, peak_bytes)


def _run(check: Check, profile: Profile) -> CheckResult:
    if check.scope is Scope.BLOCKS:
        return _run_blocks(check, profile)
    if check.metric is Metric.UNSUPPORTED_OPS:
        return _judge(check, sum(profile.unsupported_ops.values()))
    if check.metric is Metric.SELF_CHECKS:
        return _judge(check, len(profile.self_checks))
    counts = profile.totals if check.component is None else profile.components[check.component]
    if check.metric in SHARES:
        key = "params" if check.metric is Metric.PARAMS_SHARE else "macs"
        total = getattr(profile.totals, key)
        if total == 0:
            return CheckResult(check, None, Verdict.FAIL, note=f"the model's total {key} is 0")
        return _judge(check, Fraction(getattr(counts, key), total))
    return _judge(check, _metric(counts, check.metric))


def _run_blocks(check: Check, profile: Profile) -> CheckResult:
    if check.metric is Metric.COUNT:
        return _judge(check, len(profile.blocks))
    if not profile.blocks:
        return CheckResult(check, None, Verdict.FAIL, note="no transformer blocks recognized")
    values = [(_metric(b.total, check.metric), b.index) for b in profile.blocks]
    value, index = (max if check.bound is Bound.MAX else min)(values, key=lambda v: v[0])
    return _judge(check, value, index)


def _metric(counts: Counts, metric: Metric) -> int:
    return int(getattr(counts, metric.value))


def _judge(check: Check, actual: int | Fraction, block: int | None = None) -> CheckResult:
    """Compare exactly: a share as a fraction against the limit's decimal as written."""
    limit = Fraction(repr(check.limit)) if isinstance(check.limit, float) else check.limit
    holds = actual <= limit if check.bound is Bound.MAX else actual >= limit
    shown = float(actual) if isinstance(actual, Fraction) else actual
    return CheckResult(check, shown, Verdict.PASS if holds else Verdict.FAIL, block)
