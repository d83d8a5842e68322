"""Budgets: limits on a model's counts, read from TOML, validated closed, checked exactly.

A budget file holds one table per entry (the format, with a complete example, is in
``docs/budgets.md``)::

    [vit_b_16]                      # entry name; the model defaults to it
    image_size = 224                # or "HxW", [height, width]; frames, in_chans, dtype too
    max_params = 86_600_000
    max_macs = 17_600_000_000
    [vit_b_16.components]
    attn_core = { min_macs = 715_000_000, max_share = 0.041 }
    [vit_b_16.blocks]
    max_macs = 1_460_000_000
    min_count = 12

Conventions:

* Limits are ``max_<metric>`` (actual <= limit) or ``min_<metric>`` (actual >= limit).
* ``params``, ``macs``, ``flops`` (= 2 x MACs) and ``vector_flops`` are exact integers. A limit on
  them is a whole number >= 0; a float is accepted only when it is integral and exact
  (``1.8e10``), so ``1.5`` or a boolean is an error, never rounded.
* ``share`` is a component's share of the model's total MACs, ``params_share`` its share of the
  total params: numbers in [0, 1], compared exactly against the decimal as written.
* ``[entry.blocks]`` limits hold for every block: ``max_`` binds the largest block, ``min_`` the
  smallest; ``min_count``/``max_count`` bound the number of blocks.
* ``max_unsupported_ops`` (op calls without a formula) defaults to 0: an uncounted op would make
  every ``max_`` limit too easy to meet.
* ``max_self_checks`` (the breakdown's failed self-checks, :mod:`vitprof.recognize.self_checks`)
  defaults to 0: a component limit means nothing on a breakdown that puts attention in the MLP.

Fail closed: an empty file, a key outside the schema, a value of the wrong type, an integer
outside TOML's 64-bit range, a component outside the taxonomy, a table without limits, a ``min``
above its ``max``, a model name that does not resolve, an image size a built-in model cannot take,
and a model that fails to build or to run are :class:`~vitprof.core.errors.UserError` naming
the file, the entry, the key and, where it can be found, the line. Everything but building and
running is checked for every entry when the file is read, before any model is analysed. A limit with
nothing to measure (no blocks, a zero total under a share) fails its check.

:func:`at_input` checks an entry at another input than the one it names (``vitprof check
--image-size ...``); the result says so (``input_override``), since its limits were written for
the entry's own input.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from torch import nn

from vitprof.checks.baseline import Baseline
from vitprof.core.overrides import Override
from vitprof.core.records import Component
from vitprof.core.vocab import (
    Bound,
    Metric,
    Scope,
    Strategy,
    ValueKind,
    Verdict,
    Word,
)
from vitprof.count.result import Profile
from vitprof.measure.memory.settings import MemorySettings, kind_of
from vitprof.workload import InputRequest

SHARES = frozenset({Metric.SHARE, Metric.PARAMS_SHARE})
_COMPONENTS: dict[str, Component] = {c.value: c for c in Component}
_COUNTS = (Metric.PARAMS, Metric.MACS, Metric.FLOPS, Metric.VECTOR_FLOPS)
_EXACT_FLOAT = 2**53
TOML_INTEGERS = (-(2**63), 2**63 - 1)  # the range of a TOML integer


def _limit_keys(*metrics: Metric) -> dict[str, tuple[Bound, Metric]]:
    return {f"{bound}_{metric}": (bound, metric) for metric in metrics for bound in Bound}


# The closed schema: every key an entry may use, once, with its type. A limit key's value is a
# ValueKind.SHARE for the SHARES metrics and a ValueKind.COUNT for the others.
SETTINGS: dict[str, ValueKind] = {
    "model": ValueKind.TEXT,
    "image_size": ValueKind.IMAGE_SIZE,
    "frames": ValueKind.POSITIVE,
    "in_chans": ValueKind.POSITIVE,
    "dtype": ValueKind.DTYPE,
    "batch_size": ValueKind.POSITIVE,
    "num_classes": ValueKind.POSITIVE,
    "map": ValueKind.RULES,
    "recognizer": ValueKind.RECOGNIZER,
    "components": ValueKind.TABLE,
    "blocks": ValueKind.TABLE,
    "baseline": ValueKind.TEXT,  # a saved profile (vitprof.checks.baseline), with max_increase
    "max_increase": ValueKind.PERCENT,
    "memory": ValueKind.MEMORY,  # the settings of vitprof.memory, for max_peak_bytes
}
# the settings a budget's memory table may hold, and the values each takes (None: any string,
# checked by vitprof.memory itself; bool and int: a TOML boolean, a TOML integer)
# (the fields of MemorySettings, then how the step is spread over ranks)
MEMORY_SETTINGS: dict[str, tuple[str, ...] | type | None] = {
    **{each.name: tuple(kind) if issubclass(kind := kind_of(each), Word)
       else None if kind is str else kind for each in fields(MemorySettings)},
    "strategy": tuple(Strategy), "world_size": int,
}
# the keys of the memory table that say how the step is spread over ranks, not how it runs
RANK_SETTINGS = ("strategy", "world_size")
LIMITS: dict[Scope, dict[str, tuple[Bound, Metric]]] = {
    Scope.MODEL: {
        **_limit_keys(*_COUNTS),
        "max_unsupported_ops": (Bound.MAX, Metric.UNSUPPORTED_OPS),
        "max_self_checks": (Bound.MAX, Metric.SELF_CHECKS),
        **_limit_keys(Metric.PEAK_BYTES),
    },
    Scope.COMPONENT: _limit_keys(*_COUNTS, Metric.SHARE, Metric.PARAMS_SHARE),
    Scope.BLOCKS: _limit_keys(*_COUNTS, Metric.COUNT),
}


@dataclass(frozen=True)
class Check:
    """One limit of one entry. ``key`` is its dotted key inside the entry, as written."""

    key: str
    scope: Scope
    bound: Bound
    metric: Metric
    limit: int | float
    component: Component | None = None
    implicit: bool = False  # the defaults max_unsupported_ops = 0 and max_self_checks = 0


@dataclass(frozen=True)
class Budget:
    """One entry: which model, on which input, and its checks."""

    name: str
    model: str | nn.Module
    checks: tuple[Check, ...]
    request: InputRequest = field(default_factory=InputRequest)  # the input it is checked at
    overrides: tuple[Override, ...] = ()
    recognizer: str = "auto"
    origin: str = ""  # "file:line: entry 'name', key 'model'": where errors about the model point
    baseline: Baseline | None = None
    input_override: str = ""  # what at_input put in place of the entry's input, "" if nothing
    memory: tuple[tuple[str, Any], ...] = ()  # the settings of vitprof.memory (peak_bytes)

    @property
    def where(self) -> str:
        """Where errors about this entry's model point: its origin, else its name."""
        return self.origin or f"entry '{self.name}'"


@dataclass(frozen=True)
class CheckResult:
    """A check against an analysis. ``actual`` is None when there was nothing to measure."""

    check: Check
    actual: int | float | None
    verdict: Verdict
    block: int | None = None  # the block that binds a per-block limit
    note: str = ""

    @property
    def headroom(self) -> int | float | None:
        """How far ``actual`` is inside the limit (negative: past it)."""
        if self.actual is None:
            return None
        if self.check.bound is Bound.MAX:
            return self.check.limit - self.actual
        return self.actual - self.check.limit


@dataclass(frozen=True)
class BudgetResult:
    """Every check of one budget against one analysis of its model."""

    budget: Budget
    profile: Profile
    results: tuple[CheckResult, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return all(r.verdict is Verdict.PASS for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.verdict is Verdict.FAIL]
