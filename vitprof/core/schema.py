"""The JSON outputs' schemas (JSON Schema 2020-12), shipped in ``vitprof/schemas/``.

A schema refers to another by its file name (``profile.json#/$defs/counts``) and has no ``$id``:
the files validate on their own, offline, wherever they are read from (a reference resolves
against the file's own location).

Every JSON output of vitprof (``analyze``, ``diff``, ``check``, ``crosscheck``, ``formula``,
``sweep``, ``profile`` as ``speed``) carries
``"schema_version": SCHEMA_VERSION``. The version changes when a field is removed or changes
meaning; a new field leaves it as it is. A saved profile of another version is refused, never
guessed at.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from referencing import Registry

SCHEMA_VERSION = 2
SCHEMAS = ("profile", "diff", "check", "crosscheck", "formula", "sweep", "speed", "memory",
           "distributed_memory", "distributed_memory_world_sizes")
CHECK_OUTPUTS = False  # validate every output against its schema as it is made (tests set it)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The schema of one output (one of :data:`SCHEMAS`)."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown schema {name}; one of {', '.join(SCHEMAS)}")
    text = resources.files("vitprof").joinpath("schemas", f"{name}.json").read_text("utf-8")
    return json.loads(text)


@cache
def _registry() -> Registry:
    """Every schema under its file name, where one schema's reference to another
    (``profile.json#/$defs/counts``) resolves: the schemas have no ``$id``, so a reference is
    relative to where its schema was read from (the package here, a folder or a file URI for
    anyone validating with the files alone).

    jsonschema is imported here, on first validation, not by every command that writes JSON."""
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resources(
        (f"{n}.json", DRAFT202012.create_resource(load_schema(n))) for n in SCHEMAS)


def schema_errors(data: Any, name: str) -> list[str]:
    """Where ``data`` departs from the schema ``name``: ``at totals.macs: ...``, first by path."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(load_schema(name), registry=_registry())
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.path])
    return [f"at {'.'.join(str(p) for p in e.path) or 'the top'}: {e.message}" for e in errors]


def versioned(data: dict[str, Any], name: str) -> dict[str, Any]:
    """``data`` with ``schema_version`` first: what every JSON output is made of.

    With :data:`CHECK_OUTPUTS` set (the test suite sets it), the result is validated against
    the schema ``name`` and an output outside it raises ``AssertionError``.
    """
    out = {"schema_version": SCHEMA_VERSION, **data}
    if CHECK_OUTPUTS:
        errors = schema_errors(out, name)
        if errors:
            raise AssertionError(f"{name} output outside its schema: {errors[0]}")
    return out
