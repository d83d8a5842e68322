"""The JSON schemas: shipped, valid, and every command's JSON output inside its own."""

from __future__ import annotations

import json
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from vitprof.cli.main import main
from vitprof.core import schema
from vitprof.core.schema import SCHEMA_VERSION, SCHEMAS, load_schema, schema_errors, versioned


@pytest.mark.parametrize("name", SCHEMAS)
def test_schemas_ship_in_the_package_and_are_valid(name: str) -> None:
    assert resources.files("vitprof").joinpath("schemas", f"{name}.json").is_file()
    Draft202012Validator.check_schema(load_schema(name))
    assert load_schema(name)["properties"]["schema_version"] == {"const": SCHEMA_VERSION}


def test_pyproject_ships_the_schemas() -> None:
    text = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert "schemas/*.json" in tomllib.loads(text)["tool"]["setuptools"]["package-data"]["vitprof"]


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        pytest.param(["analyze", "vit_b_32", "--format", "json"], "profile", id="analyze"),
        pytest.param(["analyze", "vit_b_32", "--format", "json", "--by", "op"], "profile",
                     id="analyze-by-op"),
        pytest.param(["analyze", "note002_cifar_vit_tiny", "--format", "json", "--mode", "train"],
                     "profile", id="analyze-train"),
        pytest.param(["diff", "vit_b_32", "vit_b_32", "--format", "json"], "diff", id="diff"),
        pytest.param(["crosscheck", "note002_cifar_vit_tiny", "--peers", "flopcounter-meta",
                      "--format", "json"], "crosscheck", id="crosscheck"),
        pytest.param(["formula", "vit_b_32", "--format", "json"], "formula", id="formula"),
        pytest.param(["sweep", "vit_b_32", "--image-size", "224,256", "--format", "json"],
                     "sweep", id="sweep"),
    ],
)
def test_command_json_validates(argv: list[str], name: str, capsys) -> None:
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == SCHEMA_VERSION
    assert schema_errors(data, name) == []


def test_check_json_validates(tmp_path: Path, capsys) -> None:
    budgets = tmp_path / "budgets.toml"
    budgets.write_text("[vit_b_32]\nmax_macs = 1\n")
    assert main(["check", str(budgets), "--format", "json"]) == 1  # 1 MAC: fails, still JSON
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == SCHEMA_VERSION and schema_errors(data, "check") == []


def test_an_output_outside_its_schema_is_caught() -> None:
    """The suite-wide check (conftest turns it on) fails on a malformed output."""
    assert schema.CHECK_OUTPUTS
    with pytest.raises(AssertionError, match="profile output outside its schema: at the top: "
                       "'model' is a required property"):
        versioned({"totals": {}}, "profile")
    errors = schema_errors({"schema_version": 1, "passed": "yes"}, "check")
    assert "at passed: 'yes' is not of type 'boolean'" in errors
