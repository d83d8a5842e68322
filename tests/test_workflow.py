"""The CI workflow and its documented copy: valid YAML with the structure GitHub Actions needs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from vitprof.cli.main import build_parser

ROOT = Path(__file__).parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "vitprof.yml"


def _documented() -> dict[str, Any]:
    (block,) = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "ci.md").read_text(), re.S)
    return yaml.safe_load(block)


WORKFLOWS = [pytest.param(lambda: yaml.safe_load(WORKFLOW.read_text()), id="repository"),
             pytest.param(_documented, id="docs-ci")]


@pytest.mark.parametrize("load", WORKFLOWS)
def test_workflow_structure(load) -> None:
    workflow = load()
    # PyYAML reads the bare key `on` as the boolean true
    assert "pull_request" in workflow[True]
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    for step in job["steps"]:
        assert ("uses" in step) != ("run" in step), step
        if "uses" in step:
            assert re.fullmatch(r"[\w-]+/[\w-]+@v\d+", step["uses"]), step["uses"]
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "vitprof check budgets.toml" in runs
    assert "gh pr comment" in runs and "--body-file vitprof-diff.md" in runs
    comment = next(s for s in job["steps"] if "gh pr comment" in s.get("run", ""))
    assert comment["env"]["GH_TOKEN"] == "${{ github.token }}"


@pytest.mark.parametrize("load", WORKFLOWS)
def test_workflow_vitprof_commands_parse(load) -> None:
    """Every vitprof command line of the workflow is one the CLI accepts."""
    job = next(iter(load()["jobs"].values()))
    lines = [line.strip() for step in job["steps"] for line in step.get("run", "").splitlines()]
    commands = [shlex.split(line.split("vitprof ", 1)[1]) for line in lines
                if re.match(r"(\S*/)?vitprof ", line)]
    assert {c[0] for c in commands} >= {"analyze", "diff", "check"}
    for argv in commands:
        build_parser().parse_args(argv)  # a usage error exits 2
