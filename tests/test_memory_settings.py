"""The settings of ``vitprof.memory`` are one typed value (:class:`MemorySettings`), declared
once: the keywords, the options of ``vitprof memory``, the keys of a budget's ``memory`` table
and the settings an estimate lists are its fields."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest
from test_memory import tiny

from vitprof import memory
from vitprof.checks.budget.schema import MEMORY_SETTINGS
from vitprof.cli.main import build_parser
from vitprof.core.vocab import Loss, MemoryTarget, Optimizer
from vitprof.measure.memory.settings import MemorySettings
from vitprof.measure.memory.spelling import SettingError
from vitprof.workload import InputRequest

NAMES = [each.name for each in fields(MemorySettings)]


def test_every_setting_is_an_option_a_table_key_and_a_listed_setting() -> None:
    commands = next(action for action in build_parser("memory")._actions
                    if isinstance(action, argparse._SubParsersAction))
    options = {action.dest for action in commands.choices["memory"]._actions}
    assert set(NAMES) <= options and set(NAMES) <= set(MEMORY_SETTINGS)
    listed = MemorySettings().names("float32")
    # every setting, and the request's dtype second, where the reports list it
    assert list(listed) == [NAMES[0], "dtype", *NAMES[1:]]
    assert listed["optimizer"] == "adamw" and listed["set_to_none"] == "true"


def test_settings_as_a_value_are_the_keywords() -> None:
    request = InputRequest(batch_size=2)
    settings = MemorySettings(optimizer=Optimizer.SGD, target=MemoryTarget.CPU, loss=Loss.SUM)
    by_value = memory(tiny(), request, settings=settings)
    by_keywords = memory(tiny(), request, optimizer="sgd", target="cpu", loss="sum")
    assert by_value.settings == by_keywords.settings
    assert by_value.peak_bytes == by_keywords.peak_bytes
    # a keyword over the value: the value's other settings kept
    over = memory(tiny(), request, settings=settings, optimizer="adam")
    assert (over.settings["optimizer"], over.settings["loss"]) == ("adam", "sum")


def test_a_setting_is_checked_when_the_value_is_made() -> None:
    assert MemorySettings(optimizer="sgd").optimizer is Optimizer.SGD  # type: ignore[arg-type]
    with pytest.raises(SettingError, match="optimizer does not apply"):
        MemorySettings(mode="inference", optimizer="sgd")  # type: ignore[arg-type]
