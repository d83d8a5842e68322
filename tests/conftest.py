"""What several test files share."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from vitprof.checks.crosscheck import CrossCheck, run_crosscheck
from vitprof.core import schema

# Models for budget files to name as FILE.py:factory: one with a data-dependent shape (it cannot
# run on meta and falls back to CPU), one whose forward raises, one factory that raises.
BUDGET_MODELS_PY = '''
import torch
from torch import nn


class DataDependent(nn.Module):
    """Keeps int(x.sum()) + 1 tokens: a data-dependent shape, impossible on meta."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 8, kernel_size=4, stride=4)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        keep = int(x.sum()) + 1
        tokens = self.patch(x).flatten(2).transpose(1, 2)[:, :keep]
        return self.head(tokens.mean(1))


class Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        raise RuntimeError("forward is broken")


def make():
    return DataDependent()


def make_broken():
    return Broken()


def make_failing():
    raise ValueError("cannot build this model")
'''

# A factory that leaves a mark beside its file when it is called (validating a budget file must
# never call it): a conv of 3*8*8*2 + 2 = 386 params, for an 8 x 8 input.
MARKING_FACTORY_PY = """
from pathlib import Path

from torch import nn


def make():
    Path(__file__).with_name("factory_was_called").touch()
    return nn.Conv2d(3, 2, kernel_size=8, stride=8)
"""


# A model that is no ViT and runs an op with no formula (a Fourier transform, whose cost depends
# on its algorithm): every analysis of it warns.
# And a factory that raises, for commands that must fail before they build any model.
ODD_MODELS_PY = '''
import torch
from torch import nn


class ConvFourier(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(3, 8, kernel_size=8, stride=8)

    def forward(self, x):
        return torch.fft.rfft(self.proj(x).flatten(1)).abs()


def odd():
    return ConvFourier()


def explodes():
    raise RuntimeError("the factory ran although it should not have")
'''
NO_FORMULA_WARNING = "ops without a formula, not counted: aten._fft_r2c x1"
NOT_A_VIT_WARNING = "no transformer blocks recognized"


# Runs main(argv) for each argv of a JSON list (its first argument), in order, in one fresh
# interpreter. After each, a line of stdout (after the command's own output): COMMAND_DONE, then
# as JSON the exit code, what the command wrote to sys.stderr, which heavy packages the
# interpreter holds so far, and its high-water mark so far in bytes (VmHWM; getrusage's
# ru_maxrss survives exec and would report the forking pytest process's peak).
COMMAND_DONE = "vitprof command done: "
_COMMANDS_SCRIPT = f"""
import contextlib, io, json, re, sys
from pathlib import Path
from vitprof.cli.main import main
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's --help and usage errors
            code = exit_.code
    heavy = [m for m in ("torch", "matplotlib", "pandas") if m in sys.modules]
    peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1])
    print({COMMAND_DONE!r} + json.dumps({{"code": code, "stderr": err.getvalue(),
                                         "heavy": heavy, "peak_rss": peak * 1024}}), flush=True)
"""


def run_commands_in_one_interpreter(argvs: Sequence[Sequence[str]],
                                    **options: Any) -> list[dict[str, Any]]:
    """What each command of ``argvs`` did, run one after another in one fresh interpreter (torch
    is imported once, not once per command); ``options`` go to ``subprocess.run`` (cwd, env).
    Everything the commands write to stderr goes through ``sys.stderr``: the process's own
    stderr stays empty."""
    result = subprocess.run([sys.executable, "-c", _COMMANDS_SCRIPT, json.dumps(argvs)],
                            capture_output=True, text=True, timeout=600, **options)
    assert (result.returncode, result.stderr) == (0, "")
    done = [json.loads(line.removeprefix(COMMAND_DONE))
            for line in result.stdout.splitlines() if line.startswith(COMMAND_DONE)]
    assert len(done) == len(argvs)
    return done


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``exhaustive`` are left out unless the ``-m`` expression names the marker
    (``-m exhaustive``, ``-m "slow or exhaustive"``). Not an ``-m`` in ``addopts``: an ``-m`` on
    the command line replaces it, and ``-m "not slow"`` ran every exhaustive test."""
    if "exhaustive" in config.option.markexpr:
        return
    left_out = [item for item in items if item.get_closest_marker("exhaustive")]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker("exhaustive")]


def not_root(monkeypatch: pytest.MonkeyPatch, unwritable: set[Path]) -> None:
    """``os.access`` as for a user who is not root: no file can be created in the folders
    ``unwritable``, which root could write into whatever their mode."""
    real = os.access

    def access(path: str | Path, mode: int, **keywords: bool) -> bool:
        if mode & os.W_OK and Path(path) in unwritable:
            return False
        return real(path, mode, **keywords)

    monkeypatch.setattr(os, "access", access)


@pytest.fixture
def odd_models(tmp_path: Path) -> Path:
    """ODD_MODELS_PY written to a file, for ``FILE.py:odd`` and ``FILE.py:explodes``."""
    path = tmp_path / "odd_models.py"
    path.write_text(ODD_MODELS_PY)
    return path


@pytest.fixture(autouse=True)
def _json_outputs_follow_their_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every JSON output any test makes is validated against its schema as it is made."""
    monkeypatch.setattr(schema, "CHECK_OUTPUTS", True)


@pytest.fixture(scope="session")
def crosscheck_of() -> Callable[[str], CrossCheck]:
    """``run_crosscheck(name)`` with every peer, computed once per session for each name: a
    full cross-check of a torchvision ViT runs every peer's CPU forward (about a minute for
    vit_h_14 at 518 px), and the acceptance tests, the causes of vit_b_16 and the committed
    model pages all read the same one."""
    return functools.cache(run_crosscheck)


@pytest.fixture
def pages_reuse_crosschecks(
    monkeypatch: pytest.MonkeyPatch, crosscheck_of: Callable[[str], CrossCheck]
) -> None:
    """Model pages take their cross-check from :func:`crosscheck_of` (its rows of the page's
    peers), not from a run of their own. Equivalent: ``run_crosscheck(name)`` is ``analyze(name)``
    and :func:`check_subject` on the same subject, and each peer's row is made on its own."""
    from vitprof.study import page_inputs

    def shared(subject: page_inputs.Subject, peers: Sequence[str] | None = None) -> CrossCheck:
        assert isinstance(subject.source, str) and (subject.grad, subject.deploy) == (True, False)
        full = crosscheck_of(subject.source)
        assert full.input_shape == subject.profile.input_shape
        return dataclasses.replace(full, rows=[r for r in full.rows if peers is None
                                               or r.peer in peers])

    monkeypatch.setattr(page_inputs, "check_subject", shared)
