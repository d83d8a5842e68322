"""Baselines in budget files: limits relative to a saved profile, failing closed."""

from __future__ import annotations

import json
from math import ceil
from pathlib import Path
from typing import Any

import pytest

from vitprof.cli.main import main
from vitprof.core.schema import SCHEMA_VERSION

MODEL = "vit_b_32"
COUNTS = ("params", "macs", "vector_flops")


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _budget(folder: Path, max_increase: str = '"1%"', extra: str = "") -> Path:
    path = folder / "budgets.toml"
    path.write_text(f'[{MODEL}]\nbaseline = "profiles/{MODEL}.json"\nmax_increase = '
                    f"{max_increase}\n{extra}")
    return path


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Any]:
    """The model's profile as ``--update-baselines`` writes it."""
    folder = tmp_path_factory.mktemp("baseline")
    assert main(["check", str(_budget(folder)), "--update-baselines"]) == 0
    return json.loads((folder / "profiles" / f"{MODEL}.json").read_text())


def _write_baseline(folder: Path, data: dict[str, Any] | str) -> None:
    (folder / "profiles").mkdir(exist_ok=True)
    text = data if isinstance(data, str) else json.dumps(data)
    (folder / "profiles" / f"{MODEL}.json").write_text(text)


def _summed(parts: list[dict[str, int]]) -> dict[str, int]:
    """The counts of ``parts`` added up, FLOPs = 2 x MACs."""
    summed = {key: sum(part[key] for part in parts) for key in COUNTS}
    return {**summed, "flops": 2 * summed["macs"]}


def _shrunk(data: dict[str, Any]) -> dict[str, Any]:
    """Every count c of the blocks and outside them as ceil(c * 1000 / 1011), the components
    and the totals their sums (a profile's invariants kept): the model is then up to 1.1% above
    it (the totals, near 1.1%: above 1%)."""
    data = json.loads(json.dumps(data))
    places = [data["outside"], *(block["components"] for block in data["blocks"])]
    for counts in (c for place in places for c in place.values()):
        counts.update({key: ceil(counts[key] * 1000 / 1011) for key in COUNTS})
        counts["flops"] = 2 * counts["macs"]
    data["components"] = {name: _summed([place[name] for place in places])
                          for name in data["components"]}
    data["totals"] = _summed(list(data["components"].values()))
    return data


def test_update_writes_a_profile_that_then_passes_at_zero_growth(
    saved: dict[str, Any], tmp_path: Path, capsys
) -> None:
    _write_baseline(tmp_path, saved)
    code, out, _ = run(["check", str(_budget(tmp_path, '"0%"')), "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["passed"]
    # 3 metrics x (total, components, blocks) + the defaults max_unsupported_ops, max_self_checks
    assert len(data["budgets"][0]["checks"]) == 3 * 3 + 2
    assert saved["model"] == MODEL and saved["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize(
    ("max_increase", "code"),
    [
        pytest.param('"1%"', 1, id="fails-at-1.1-with-1"),
        pytest.param('"1.1%"', 0, id="passes-with-1.1"),
        pytest.param("2", 0, id="a-number-is-percent"),
    ],
)
def test_growth_of_1_1_percent(
    saved: dict[str, Any], tmp_path: Path, max_increase: str, code: int, capsys
) -> None:
    _write_baseline(tmp_path, _shrunk(saved))
    got, out, _ = run(["check", str(_budget(tmp_path, max_increase))], capsys)
    assert got == code
    if code:
        # params: 88_224_232 now; the baseline's total is near 88_224_232 * 1000 / 1011
        before = _shrunk(saved)["totals"]["params"]
        assert 1.01 < 88_224_232 / before <= 1.011
        line = next(x for x in out.splitlines() if x.startswith(f"{MODEL}.max_increase.params "))
        assert line.split()[-1] == "fail" and f"<= {before * 101 // 100:,}" in line
        assert f"baseline {tmp_path}/profiles/{MODEL}.json: {before:,} + 1%" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "no such profile file; write it with 'vitprof check "
                     "--update-baselines'", id="missing"),
        pytest.param('{"schema_version": 2, "model": "vit', "not valid JSON (truncated?)",
                     id="truncated"),
        pytest.param("[]", "not a vitprof profile", id="not-a-profile"),
        pytest.param({"schema_version": 1}, "profile of schema version 1", id="older-version"),
        pytest.param("other-input", "counted with input 1x3x384x384, the model now runs with "
                     "1x3x224x224", id="other-input"),
        pytest.param("other-units", "count in other units (macs differ)", id="other-units"),
    ],
)
def test_an_unusable_baseline_fails_closed(
    saved: dict[str, Any], tmp_path: Path, content: Any, message: str, capsys
) -> None:
    if content == "other-input":
        content = {**saved, "input_shape": [1, 3, 384, 384]}
    elif content == "other-units":
        content = {**saved, "units": {**saved["units"], "macs": "fused multiply-adds"}}
    if content is not None:
        _write_baseline(tmp_path, content)
    code, out, err = run(["check", str(_budget(tmp_path))], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"vitprof: error: {tmp_path}/budgets.toml:1: entry '{MODEL}': "
                          "baseline ")
    assert message in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param('[m]\nmodel = "vit_b_32"\nbaseline = "a.json"\n',
                     "key 'baseline': needs 'max_increase' as well", id="no-max-increase"),
        pytest.param('[m]\nmodel = "vit_b_32"\nmax_increase = "1%"\n',
                     "key 'max_increase': needs 'baseline' as well", id="no-baseline"),
        pytest.param('[m]\nbaseline = "a.json"\nmax_increase = "lots"\n',
                     "expected a percentage such as 5 or 1.5%, got 'lots'", id="bad-percent"),
        pytest.param('[m]\nbaseline = "a.json"\nmax_increase = "-1%"\n',
                     "expected a percentage >= 0", id="negative-percent"),
        pytest.param('[m]\nbaseline = "a.json"\nmax_increase = true\n',
                     "expected a percentage such as \"1%\", got true (a boolean)", id="boolean"),
    ],
)
def test_baseline_keys_are_validated(tmp_path: Path, text: str, message: str, capsys) -> None:
    path = tmp_path / "budgets.toml"
    path.write_text(text)
    code, _, err = run(["check", str(path)], capsys)
    assert code == 2 and err.count("\n") == 1 and message in err


def test_update_without_any_baseline_warns(tmp_path: Path, capsys) -> None:
    path = tmp_path / "budgets.toml"
    path.write_text(f"[{MODEL}]\nmax_unsupported_ops = 0\n")
    code, _, err = run(["check", str(path), "--update-baselines"], capsys)
    assert code == 0
    assert err == ("vitprof: warning: --update-baselines: no entry names a baseline; nothing "
                   "to update\n")
