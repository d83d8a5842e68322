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
* ``max_self_checks`` (the breakdown's failed self-checks, :mod:`vitprof.count.self_checks`)
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

import difflib
import re
import tomllib
from argparse import ArgumentTypeError
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vitprof.analysis import analyze
from vitprof.checks.baseline import Baseline, Limit, baseline_limits, load, model_file
from vitprof.checks.diff import Snapshot, parse_percent
from vitprof.checks.toml_lines import key_line, table_at
from vitprof.core.choices import (
    AMP_DTYPES,
    ATTENTION_PATHS,
    FREEZES,
    LOSSES,
    MEMORY_MODES,
    MEMORY_TARGETS,
    OPTIMIZERS,
    PROFILE_DTYPES,
    RECOGNIZERS,
    STRATEGIES,
    ZERO_GRAD_PLACES,
)
from vitprof.core.errors import UserError, one_line, read_user_file
from vitprof.core.parse import image_size
from vitprof.core.records import Component, Counts
from vitprof.count.families import Rule
from vitprof.count.result import Profile
from vitprof.measure.memory_spelling import TABLE_KEYS, SettingError
from vitprof.measure.training_memory import memory, step_settings
from vitprof.models.zoo import check_zoo_size, validate_name
from vitprof.workload import InputRequest, dtype_name


class Scope(StrEnum):
    """What a limit measures: the whole model, one component, or every block."""

    MODEL = "model"
    COMPONENT = "component"
    BLOCKS = "blocks"


class Bound(StrEnum):
    MAX = "max"
    MIN = "min"


class Metric(StrEnum):
    PARAMS = "params"
    MACS = "macs"
    FLOPS = "flops"
    VECTOR_FLOPS = "vector_flops"
    SHARE = "share"  # share of the model's total MACs
    PARAMS_SHARE = "params_share"  # share of the model's total params
    COUNT = "count"  # number of blocks
    UNSUPPORTED_OPS = "unsupported_ops"  # op calls without a formula
    SELF_CHECKS = "self_checks"  # failed self-checks of the breakdown
    PEAK_BYTES = "peak_bytes"  # a training step's predicted peak (vitprof.memory), bytes


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"


class Kind(StrEnum):
    """Type of a budget value."""

    TEXT = "text"
    POSITIVE = "positive integer"
    IMAGE_SIZE = 'positive integer, "HxW" or [height, width]'
    DTYPE = f"dtype ({', '.join(PROFILE_DTYPES)})"
    COUNT = "whole number >= 0"
    SHARE = "share in [0, 1]"
    RULES = "table of REGEX = COMPONENT"
    TABLE = "table"
    PERCENT = "percentage such as \"1%\""
    RECOGNIZER = "recognizer"  # one of vitprof.core.choices.RECOGNIZERS
    MEMORY = ("table of memory settings (optimizer, amp, checkpoint, target, attention, mode, "
              "loss, zero_grad, set_to_none, gradient_accumulation, freeze)")


SHARES = frozenset({Metric.SHARE, Metric.PARAMS_SHARE})
_COMPONENTS: dict[str, Component] = {c.value: c for c in Component}
_COUNTS = (Metric.PARAMS, Metric.MACS, Metric.FLOPS, Metric.VECTOR_FLOPS)
_EXACT_FLOAT = 2**53
TOML_INTEGERS = (-(2**63), 2**63 - 1)  # the range of a TOML integer


def _limit_keys(*metrics: Metric) -> dict[str, tuple[Bound, Metric]]:
    return {f"{bound}_{metric}": (bound, metric) for metric in metrics for bound in Bound}


# The closed schema: every key an entry may use, once, with its type. A limit key's value is a
# Kind.SHARE for the SHARES metrics and a Kind.COUNT for the others.
SETTINGS: dict[str, Kind] = {
    "model": Kind.TEXT,
    "image_size": Kind.IMAGE_SIZE,
    "frames": Kind.POSITIVE,
    "in_chans": Kind.POSITIVE,
    "dtype": Kind.DTYPE,
    "batch_size": Kind.POSITIVE,
    "num_classes": Kind.POSITIVE,
    "map": Kind.RULES,
    "recognizer": Kind.RECOGNIZER,
    "components": Kind.TABLE,
    "blocks": Kind.TABLE,
    "baseline": Kind.TEXT,  # a saved profile (vitprof.checks.baseline), with max_increase
    "max_increase": Kind.PERCENT,
    "memory": Kind.MEMORY,  # the settings of vitprof.memory, for max_peak_bytes
}
# the settings a budget's memory table may hold, and the values each takes (None: any string,
# checked by vitprof.memory itself; bool and int: a TOML boolean, a TOML integer)
MEMORY_SETTINGS: dict[str, tuple[str, ...] | type | None] = {
    "optimizer": OPTIMIZERS, "amp": AMP_DTYPES, "checkpoint": None, "target": MEMORY_TARGETS,
    "attention": ATTENTION_PATHS, "mode": MEMORY_MODES, "loss": LOSSES,
    "zero_grad": ZERO_GRAD_PLACES, "set_to_none": bool, "gradient_accumulation": int,
    "freeze": FREEZES, "strategy": STRATEGIES, "world_size": int,
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
    overrides: tuple[Rule, ...] = ()
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


# ---------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class _Source:
    """The file being parsed, to place errors."""

    name: str
    text: str | None = None
    base_dir: Path | None = None

    def line(self, path: tuple[str, ...]) -> int | None:
        return key_line(self.text, path) if self.text is not None else None

    def place(self, path: tuple[str, ...]) -> str:
        """``file:line: entry 'name', key 'a.b'`` for the key ``path`` (entry name first)."""
        line = self.line(path)
        location = f"{self.name}:{line}" if line else self.name
        key = ".".join(path[1:])
        return f"{location}: entry '{path[0]}'" + (f", key '{key}'" if key else "")

    def error(self, path: tuple[str, ...], problem: str) -> UserError:
        return UserError(f"{self.place(path)}: {problem}")


def load_budgets(path: str | Path) -> list[Budget]:
    """Every budget of the TOML file ``path``, validated; relative model paths are relative to
    the file's folder."""
    name = str(path)
    text = read_user_file(path, "budget")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UserError(_syntax_message(name, text, error)) from None
    _check_integer_range(data, _Source(name, text))
    budgets = parse_budgets(data, source=name, text=text, base_dir=Path(path).parent)
    _refuse_the_file_as_baseline(budgets, Path(path), _Source(name, text))
    return budgets


def _refuse_the_file_as_baseline(budgets: list[Budget], path: Path, where: _Source) -> None:
    """A baseline that is the budget file itself: ``--update-baselines`` would overwrite it."""
    for budget in budgets:
        if budget.baseline is not None and budget.baseline.path.resolve() == path.resolve():
            raise where.error((budget.name, "baseline"), f"{budget.baseline.path} is this budget "
                              "file; a baseline is a profile that 'vitprof check "
                              "--update-baselines' writes")


def _integers(value: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], int]]:
    """Every integer in a parsed TOML value with the key that holds it (an array's key for its
    items)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _integers(item, (*path, key))
    elif isinstance(value, list):
        for item in value:
            yield from _integers(item, path)
    elif isinstance(value, int) and not isinstance(value, bool):
        yield path, value


def _check_integer_range(data: Mapping[str, Any], where: _Source) -> None:
    """TOML integers are 64-bit; ``tomllib`` returns any Python int, so refuse the others as a
    valid TOML reader must."""
    for path, value in _integers(data, ()):
        if not TOML_INTEGERS[0] <= value <= TOML_INTEGERS[1]:
            raise where.error(path, f"{value} is outside TOML's 64-bit integer range "
                                    "[-2**63, 2**63 - 1]")


def _syntax_message(name: str, text: str, error: tomllib.TOMLDecodeError) -> str:
    match = re.search(r"at line (\d+)", str(error))
    if match is None:
        return f"{name}: malformed TOML: {error}"
    line = int(match[1])
    table = table_at(text, line)
    inside = f" in entry '{table[0]}'" if table else ""
    return f"{name}:{line}: malformed TOML{inside}: {error}"


def parse_budgets(
    data: Mapping[str, Any], *, source: str = "<budget>", text: str | None = None,
    base_dir: Path | None = None,
) -> list[Budget]:
    """Budgets from a parsed TOML document (``text`` only places errors on lines)."""
    where = _Source(source, text, base_dir)
    if not data:
        raise UserError(f"{source}: no budget entries; an empty budget would pass any model")
    budgets = []
    for name, table in data.items():
        if not isinstance(table, dict):
            line = where.line((name,))
            location = f"{source}:{line}" if line else source
            raise UserError(
                f"{location}: key '{name}': expected an entry table such as [vit_b_16] at the "
                f"top level, got {_describe(table)}"
            )
        budgets.append(_parse_entry(name, table, where))
    _refuse_shared_baselines(budgets, where)
    return budgets


def _refuse_shared_baselines(budgets: list[Budget], where: _Source) -> None:
    """Two entries with one baseline file: each would be compared with the profile of the one
    written last."""
    owners: dict[Path, str] = {}
    for budget in budgets:
        if budget.baseline is None:
            continue
        path = budget.baseline.path.resolve()
        if path in owners:
            raise where.error((budget.name, "baseline"), f"{budget.baseline.path} is also the "
                              f"baseline of entry '{owners[path]}'; each entry needs its own")
        owners[path] = budget.name


def parse_budget(
    name: str, table: Mapping[str, Any], *, model: str | nn.Module | None = None,
    source: str = "<budget>",
) -> Budget:
    """One budget from one entry's table; ``model`` (a name or a module) stands for its
    ``model`` key."""
    if model is not None and "model" in table:
        raise UserError(f"{source}: entry '{name}', key 'model': the model is given twice")
    return _parse_entry(name, table, _Source(source), model)


def _parse_entry(
    name: str, table: Mapping[str, Any], where: _Source, model: str | nn.Module | None = None
) -> Budget:
    settings: dict[str, Any] = {}
    checks: list[Check] = []
    for key, value in table.items():
        path = (name, key)
        if key in LIMITS[Scope.MODEL]:
            checks.append(_check(key, Scope.MODEL, LIMITS[Scope.MODEL][key], value, path, where))
        elif key == "components":
            checks += _components(_table(value, path, where), path, where)
        elif key == "blocks":
            checks += _limits(_table(value, path, where), Scope.BLOCKS, path, where)
        elif key in SETTINGS:
            settings[key] = _setting(SETTINGS[key], value, path, where)
        else:
            raise where.error(path, _unknown("key", key, [*SETTINGS, *LIMITS[Scope.MODEL]]))
    baseline = _baseline(settings, name, where)
    if not checks and baseline is None:
        raise where.error((name,), "sets no limit; a budget without max_ or min_ keys would "
                          "pass any model")
    _check_ranges(checks, name, where)
    for key, metric in (("max_unsupported_ops", Metric.UNSUPPORTED_OPS),
                        ("max_self_checks", Metric.SELF_CHECKS)):
        if key not in table:
            checks.append(Check(key, Scope.MODEL, Bound.MAX, metric, 0, implicit=True))
    return Budget(
        name=name,
        model=model if model is not None else _model(name, settings, where),
        checks=tuple(checks),
        request=_request(settings),
        overrides=settings.get("map", ()),
        recognizer=settings.get("recognizer", "auto"),
        origin=where.place((name, "model") if "model" in table else (name,)),
        baseline=baseline,
        memory=settings.get("memory", ()),
    )


REQUEST_KEYS = ("image_size", "frames", "in_chans", "dtype", "batch_size", "num_classes")
"""The keys of an entry that make its :class:`vitprof.workload.InputRequest`."""


def _request(settings: dict[str, Any]) -> InputRequest:
    """The request of an entry's input keys, each checked against its kind already (placed on
    its line), none of which excludes another."""
    return InputRequest(**{key: settings[key] for key in REQUEST_KEYS if key in settings})


def _baseline(settings: dict[str, Any], name: str, where: _Source) -> Baseline | None:
    """``baseline`` and ``max_increase`` go together; a relative path is the file's folder's."""
    given = [key for key in ("baseline", "max_increase") if key in settings]
    if not given:
        return None
    if len(given) == 1:
        other = "max_increase" if given[0] == "baseline" else "baseline"
        raise where.error((name, given[0]), f"needs '{other}' as well: a baseline limits "
                          "growth by max_increase over a saved profile")
    path = Path(settings["baseline"])
    if not path.is_absolute() and where.base_dir is not None:
        path = where.base_dir / path
    return Baseline(path, settings["max_increase"])


def _components(table: dict[str, Any], path: tuple[str, ...], where: _Source) -> list[Check]:
    checks = []
    for name, limits in table.items():
        sub = (*path, name)
        try:
            component = Component(name)
        except ValueError:
            raise where.error(
                sub, _unknown("component", name, [c.value for c in Component])
            ) from None
        checks += _limits(_table(limits, sub, where), Scope.COMPONENT, sub, where, component)
    return checks


def _limits(
    table: dict[str, Any], scope: Scope, path: tuple[str, ...], where: _Source,
    component: Component | None = None,
) -> list[Check]:
    if not table:
        raise where.error(path, "sets no limit; an empty table would pass any model")
    checks = []
    for key, value in table.items():
        if key not in LIMITS[scope]:
            raise where.error((*path, key), _unknown(f"{scope} limit", key, list(LIMITS[scope])))
        checks.append(_check(key, scope, LIMITS[scope][key], value, (*path, key), where,
                             component))
    return checks


def _check(
    key: str, scope: Scope, kind: tuple[Bound, Metric], value: Any, path: tuple[str, ...],
    where: _Source, component: Component | None = None,
) -> Check:
    bound, metric = kind
    limit = (_share(value, path, where) if metric in SHARES else _count(value, path, where))
    return Check(".".join(path[1:]), scope, bound, metric, limit, component)


def _check_ranges(checks: list[Check], name: str, where: _Source) -> None:
    """A min above its max can never pass: reject it as the typo it is."""
    maxima = {(c.scope, c.component, c.metric): c for c in checks if c.bound is Bound.MAX}
    for low in checks:
        high = maxima.get((low.scope, low.component, low.metric))
        if low.bound is Bound.MIN and high is not None and low.limit > high.limit:
            raise where.error(
                (name, *low.key.split(".")),
                f"{low.limit} is above {high.key} = {high.limit}; this budget can never pass",
            )


def _table(value: Any, path: tuple[str, ...], where: _Source) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.error(path, f"expected a table, got {_describe(value)}")
    return value


def _setting(kind: Kind, value: Any, path: tuple[str, ...], where: _Source) -> Any:
    if kind is Kind.TEXT:
        if not isinstance(value, str) or not value:
            raise where.error(path, f"expected a non-empty string, got {_describe(value)}")
        return value
    if kind is Kind.POSITIVE:
        return _positive(value, path, where)
    if kind is Kind.IMAGE_SIZE:
        return _image_size(value, path, where)
    if kind is Kind.DTYPE:
        if value not in PROFILE_DTYPES:
            raise where.error(path, f"expected a {Kind.DTYPE}, got {_describe(value)}")
        return value
    if kind is Kind.PERCENT:
        return _percent(value, path, where)
    if kind is Kind.MEMORY:
        return _memory_settings(_table(value, path, where), path, where)
    if kind is Kind.RECOGNIZER:
        if value not in RECOGNIZERS:
            raise where.error(path, _unknown("recognizer", str(value), list(RECOGNIZERS)))
        return value
    return _rules(_table(value, path, where), path, where)


def _memory_settings(table: dict[str, Any], path: tuple[str, ...], where: _Source
                     ) -> tuple[tuple[str, Any], ...]:
    """The ``memory`` table: keys of :data:`MEMORY_SETTINGS`, values among theirs (strings,
    ``set_to_none`` a boolean, ``gradient_accumulation`` an integer), that
    :func:`vitprof.measure.training_memory.step_settings` accepts together."""
    for key, value in table.items():
        if key not in MEMORY_SETTINGS:
            raise where.error((*path, key), _unknown("memory setting", key, MEMORY_SETTINGS))
        allowed = MEMORY_SETTINGS[key]
        if isinstance(allowed, type):
            if type(value) is not allowed:
                expected = "true or false" if allowed is bool else "an integer"
                raise where.error((*path, key), f"expected {expected}, got {_describe(value)}")
            continue
        if not isinstance(value, str) or (allowed is not None and value not in allowed):
            expected = f"one of {', '.join(allowed)}" if allowed else "a string"
            raise where.error((*path, key), f"expected {expected}, got {_describe(value)}")
    try:  # together: a checkpoint's N, an optimizer or checkpoint with mode inference
        step_settings(**{k: v for k, v in table.items() if k not in RANK_SETTINGS})
    except UserError as error:
        raise where.error(path, str(_in_table_keys(error))) from None
    return tuple(table.items())


def _in_table_keys(error: UserError) -> UserError:
    """``error``, where it is about the memory settings, in the words of a budget file (its
    keys, ``mode = "inference"``) instead of ``vitprof.memory``'s keywords."""
    return error.spelled(TABLE_KEYS) if isinstance(error, SettingError) else error


def _positive(value: Any, path: tuple[str, ...], where: _Source,
              expected: Kind = Kind.POSITIVE) -> int:
    number = _count(value, path, where, expected)
    if number < 1:
        raise where.error(path, f"expected a {expected}, got {number}")
    return number


def _image_size(value: Any, path: tuple[str, ...], where: _Source) -> int | tuple[int, int]:
    """A positive integer (a square), ``[height, width]``, or a string as ``--image-size``
    takes it: ``"224"`` or ``"224x320"``."""
    if isinstance(value, list | tuple):
        if len(value) != 2:
            raise where.error(path, f"expected a {Kind.IMAGE_SIZE}, got {len(value)} sizes")
        return (_positive(value[0], path, where), _positive(value[1], path, where))
    if isinstance(value, str):
        try:
            return image_size(value)
        except ArgumentTypeError:
            raise where.error(path, f"expected a {Kind.IMAGE_SIZE}, got {_describe(value)}") \
                from None
    return _positive(value, path, where, Kind.IMAGE_SIZE)


def _rules(table: dict[str, Any], path: tuple[str, ...], where: _Source) -> tuple[Rule, ...]:
    rules = []
    for regex, name in table.items():
        try:
            re.compile(regex)
        except re.error as error:
            raise where.error((*path, regex), f"invalid regex: {error}") from None
        try:
            rules.append((regex, Component(name)))
        except ValueError:
            raise where.error(
                (*path, regex), _unknown("component", str(name), [c.value for c in Component])
            ) from None
    return tuple(rules)


def _count(value: Any, path: tuple[str, ...], where: _Source, expected: Kind = Kind.COUNT) -> int:
    """A whole number >= 0; an integral float below 2**53 is exact and accepted. ``expected``
    names the value's kind in the messages."""
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_FLOAT:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        hint = ""
        if isinstance(value, float):
            hint = ("; counts are exact integers" if not value.is_integer() else
                    "; a float this large is not exact, write it as an integer")
        raise where.error(path, f"expected a {expected}, got {_describe(value)}{hint}")
    if value < 0:
        raise where.error(path, f"expected a {expected}, got {value}")
    return value


def _percent(value: Any, path: tuple[str, ...], where: _Source) -> Fraction:
    """``"1%"`` or a number of percent >= 0, exact."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise where.error(path, f"expected a {Kind.PERCENT}, got {_describe(value)}")
    try:
        return parse_percent(str(value))
    except ValueError as error:
        raise where.error(path, str(error)) from None


def _share(value: Any, path: tuple[str, ...], where: _Source) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise where.error(path, f"expected a {Kind.SHARE}, got {_describe(value)}")
    return value


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return f"'{value}' (a string)"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def _unknown(what: str, key: str, allowed: Iterable[str]) -> str:
    allowed = list(allowed)
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"allowed: {', '.join(allowed)}"
    return f"unknown {what} '{key}'; {hint}"


def _model(name: str, settings: Mapping[str, Any], where: _Source) -> str:
    """The entry's model name, resolved and checked without building it (see
    :func:`vitprof.models.zoo.validate_name`), and a zoo model built at its image size on meta
    (:func:`vitprof.models.zoo.check_zoo_size`: a size the model refuses is refused, with its
    reason): the file is validated completely before any model is analysed."""
    model = _resolve(settings.get("model", name), where)
    path = (name, "model") if "model" in settings else (name,)
    try:
        entry = validate_name(model)
    except UserError as error:
        defaulted = "" if "model" in settings else "no model key, and the entry name is no model: "
        raise where.error(path, f"{defaulted}{error}") from None
    if entry is not None and "image_size" in settings:
        try:
            check_zoo_size(entry, settings["image_size"])
        except UserError as error:
            raise where.error((name, "image_size"), str(error)) from None
    return model


def _resolve(model: str, where: _Source) -> str:
    """``file.py:factory`` and ``hf:config.json`` relative to the budget file's folder."""
    named = model_file(model)
    if where.base_dir is None or named is None or Path(named[1]).is_absolute():
        return model
    prefix, path, suffix = named
    return f"{prefix}{where.base_dir / path}{suffix}"


# ---------------------------------------------------------------------------- input override


def at_input(budget: Budget, inputs: InputRequest) -> Budget:
    """``budget`` checked at another input: each field ``inputs`` gives
    (:meth:`~vitprof.workload.InputRequest.given`) replaces the entry's own, the others stay
    the entry's; ``input_shape``, the whole tensor, also replaces its image size, frames,
    channels and batch size. ``input_override`` says what was replaced (``"image_size
    224x320"``); ``budget`` itself when nothing is given. A zoo model's image size is checked
    here, before any model runs, as the file's own is when it is read."""
    given = {key: getattr(inputs, key) for key in inputs.given()}
    if not given:
        return budget
    if "image_size" in given:
        _check_override_size(budget, given["image_size"])
    whole: dict[str, Any] = ({"image_size": None, "frames": None, "in_chans": None,
                              "batch_size": 1} if "input_shape" in given else {})
    text = ", ".join(f"{key} {_input_text(value)}" for key, value in given.items())
    request = replace(budget.request, **whole, **given)
    return replace(budget, request=request, input_override=text)


def _input_text(value: Any) -> str:
    """An input keyword's value as the command line writes it: sizes joined by ``x``, several
    shapes by spaces, a dtype by its name."""
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, tuple | list) and value and isinstance(value[0], tuple | list):
        return " ".join(map(_input_text, value))
    return "x".join(map(str, value)) if isinstance(value, tuple | list) else str(value)


def _check_override_size(budget: Budget, image_size: int | tuple[int, int]) -> None:
    """Refuse an image size the entry's zoo model refuses (:func:`check_zoo_size`)."""
    entry = validate_name(budget.model) if isinstance(budget.model, str) else None
    if entry is None:
        return
    try:
        check_zoo_size(entry, image_size)
    except UserError as error:
        raise UserError(f"{budget.where}: {error}") from None


# ---------------------------------------------------------------------------- checking


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
                                   int(limit.name) if limit.scope == "block" else None,
                                   note if verdict is Verdict.FAIL else ""))
    return tuple(results)


def _baseline_check(limit: Limit) -> Check:
    """``max_increase.macs``, ``max_increase.components.mlp.macs``, ``max_increase.blocks.macs``."""
    if limit.scope == "total":
        return Check(f"max_increase.{limit.metric}", Scope.MODEL, Bound.MAX,
                     Metric(limit.metric), limit.limit)
    if limit.scope == "block":
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
