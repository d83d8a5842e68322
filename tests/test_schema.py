"""The JSON schemas: shipped, valid, and every command's JSON output inside its own."""

from __future__ import annotations

import json
import tomllib
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

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


SCHEMA_FOLDER = Path(__file__).parents[1] / "vitprof" / "schemas"


def _folder_registry() -> Registry:
    """A registry that reads a reference (``profile.json``) from the schemas' folder: nothing
    of vitprof, nothing from the network."""

    def retrieve(uri: str) -> Resource:
        text = (SCHEMA_FOLDER / uri).read_text(encoding="utf-8")  # a web address: no such file
        return Resource.from_contents(json.loads(text))

    return Registry(retrieve=retrieve)  # type: ignore[call-arg]  # attrs keyword


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        # formula.json and diff.json refer to profile.json: the reference leaves the file
        pytest.param(["formula", "vit_b_32", "--format", "json"], "formula", id="formula"),
        pytest.param(["diff", "vit_b_32", "vit_b_32", "--format", "json"], "diff", id="diff"),
    ],
)
def test_schema_files_validate_alone_offline(argv: list[str], name: str, capsys) -> None:
    """A schema file read from disk validates a real output with plain jsonschema: its
    references resolve from the folder it lies in (an ``$id`` on a web address sent them
    there: unresolvable offline)."""
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    shipped = json.loads((SCHEMA_FOLDER / f"{name}.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, shipped, registry=_folder_registry())
    with pytest.raises(jsonschema.ValidationError):  # the schema is read, not ignored
        jsonschema.validate({**data, "schema_version": 0}, shipped, registry=_folder_registry())


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
    errors = schema_errors({"schema_version": 2, "passed": "yes"}, "check")
    assert "at passed: 'yes' is not of type 'boolean'" in errors
