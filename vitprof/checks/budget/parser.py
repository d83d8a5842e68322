"""Reading budget files: TOML parsed, every key and value checked against the closed schema
(:mod:`.schema`), errors placed at their file, line, entry and key; :func:`at_input` moves an
entry to another input."""

from __future__ import annotations

import difflib
import re
import tomllib
from argparse import ArgumentTypeError
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vitprof.checks.baseline import Baseline, model_file
from vitprof.checks.budget.schema import (
    _EXACT_FLOAT,
    LIMITS,
    MEMORY_SETTINGS,
    RANK_SETTINGS,
    SETTINGS,
    SHARES,
    TOML_INTEGERS,
    Budget,
    Check,
)
from vitprof.checks.diff import parse_percent
from vitprof.checks.toml_lines import key_line, table_at
from vitprof.core.errors import UserError, read_user_file
from vitprof.core.overrides import Override
from vitprof.core.parse import image_size
from vitprof.core.records import Component
from vitprof.core.vocab import (
    Bound,
    Dtype,
    Metric,
    Recognizer,
    Scope,
    Strategy,
    ValueKind,
)
from vitprof.measure.distributed.estimate import check_rank_settings
from vitprof.measure.memory.settings import MemorySettings
from vitprof.measure.memory.spelling import TABLE_KEYS, SettingError
from vitprof.models.zoo import check_zoo_size, validate_name
from vitprof.workload import InputRequest, dtype_name


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


def _setting(kind: ValueKind, value: Any, path: tuple[str, ...], where: _Source) -> Any:
    if kind is ValueKind.TEXT:
        if not isinstance(value, str) or not value:
            raise where.error(path, f"expected a non-empty string, got {_describe(value)}")
        return value
    if kind is ValueKind.POSITIVE:
        return _positive(value, path, where)
    if kind is ValueKind.IMAGE_SIZE:
        return _image_size(value, path, where)
    if kind is ValueKind.DTYPE:
        if value not in list(Dtype):
            raise where.error(path, f"expected a {ValueKind.DTYPE}, got {_describe(value)}")
        return value
    if kind is ValueKind.PERCENT:
        return _percent(value, path, where)
    if kind is ValueKind.MEMORY:
        return _memory_settings(_table(value, path, where), path, where)
    if kind is ValueKind.RECOGNIZER:
        if value not in list(Recognizer):
            raise where.error(path, _unknown("recognizer", str(value), list(Recognizer)))
        return value
    return _rules(_table(value, path, where), path, where)


def _memory_settings(table: dict[str, Any], path: tuple[str, ...], where: _Source
                     ) -> tuple[tuple[str, Any], ...]:
    """The ``memory`` table: keys of :data:`MEMORY_SETTINGS`, values among theirs (strings,
    ``set_to_none`` a boolean, ``gradient_accumulation`` an integer), that
    :class:`~vitprof.measure.memory.settings.MemorySettings` accepts together."""
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
    try:  # together: a checkpoint's N, an optimizer or checkpoint with mode inference, a
        # world size with a strategy
        MemorySettings(**{k: v for k, v in table.items() if k not in RANK_SETTINGS})
        check_rank_settings(table.get("strategy", Strategy.NONE), table.get("world_size", 1))
    except UserError as error:
        raise where.error(path, str(_in_table_keys(error))) from None
    return tuple(table.items())


def _in_table_keys(error: UserError) -> UserError:
    """``error``, where it is about the memory settings, in the words of a budget file (its
    keys, ``mode = "inference"``) instead of ``vitprof.memory``'s keywords."""
    return error.spelled(TABLE_KEYS) if isinstance(error, SettingError) else error


def _positive(value: Any, path: tuple[str, ...], where: _Source,
              expected: ValueKind = ValueKind.POSITIVE) -> int:
    number = _count(value, path, where, expected)
    if number < 1:
        raise where.error(path, f"expected a {expected}, got {number}")
    return number


def _image_size(value: Any, path: tuple[str, ...], where: _Source) -> int | tuple[int, int]:
    """A positive integer (a square), ``[height, width]``, or a string as ``--image-size``
    takes it: ``"224"`` or ``"224x320"``."""
    if isinstance(value, list | tuple):
        if len(value) != 2:
            raise where.error(path, f"expected a {ValueKind.IMAGE_SIZE}, got {len(value)} sizes")
        return (_positive(value[0], path, where), _positive(value[1], path, where))
    if isinstance(value, str):
        try:
            return image_size(value)
        except ArgumentTypeError:
            raise where.error(path, f"expected a {ValueKind.IMAGE_SIZE}, got {_describe(value)}") \
                from None
    return _positive(value, path, where, ValueKind.IMAGE_SIZE)


def _rules(table: dict[str, Any], path: tuple[str, ...], where: _Source) -> tuple[Override, ...]:
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


def _count(value: Any, path: tuple[str, ...], where: _Source,
           expected: ValueKind = ValueKind.COUNT) -> int:
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
        raise where.error(path, f"expected a {ValueKind.PERCENT}, got {_describe(value)}")
    try:
        return parse_percent(str(value))
    except ValueError as error:
        raise where.error(path, str(error)) from None


def _share(value: Any, path: tuple[str, ...], where: _Source) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise where.error(path, f"expected a {ValueKind.SHARE}, got {_describe(value)}")
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
