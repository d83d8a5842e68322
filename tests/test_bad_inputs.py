"""Bad inputs, unusual layouts and hostile surroundings, one row per case (issue 28, items 6-9).

Every refusal ends in exactly one non-empty line on stderr, ``vitprof: error: ...``, no traceback,
and its exit code. Factory files laid out as Python projects are (siblings imported, dataclasses,
packages) load. Whatever user code writes below Python (``os.write(1, ...)``, a child process)
stays off stdout. Cases that hinge on file descriptors or on the console script's ``sys.path``
run ``vitprof`` as a subprocess; the others run ``main`` in-process, as tests/test_cli.py does.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from vitprof.cli.main import main

# A model of one linear layer on an 8 x 8 RGB image; the factories below build it.
TINY = '''
from torch import nn


def tiny(num_classes=10):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, num_classes))
'''
# tiny: 3*8*8 inputs x 10 outputs + 10 biases
TINY_PARAMS = 3 * 8 * 8 * 10 + 10

# Each layout: its files (relative to tmp_path, "{tmp}" in a spec) and the spec that names it.
LAYOUTS = [
    pytest.param({"sub/helpers_top.py": TINY, "sub/model.py": (
        "from helpers_top import tiny\n\n\ndef make(num_classes=10):\n"
        "    return tiny(num_classes)\n")}, "{tmp}/sub/model.py:make", id="sibling-import"),
    pytest.param({"sub/helpers_lazy.py": TINY, "sub/model.py": (
        "def make(num_classes=10):\n    from helpers_lazy import tiny\n"
        "    return tiny(num_classes)\n")}, "{tmp}/sub/model.py:make",
        id="sibling-imported-by-the-factory"),
    pytest.param({"sub/helpers_forward.py": "def flat(x):\n    return x.flatten(1)\n",
                  "sub/model.py": '''
from torch import nn


class Net(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.fc = nn.Linear(3 * 8 * 8, num_classes)

    def forward(self, x):
        from helpers_forward import flat
        return self.fc(flat(x))


def make(num_classes=10):
    return Net(num_classes)
'''}, "{tmp}/sub/model.py:make", id="sibling-imported-by-the-forward"),
    pytest.param({"sub/model.py": '''
from __future__ import annotations

from dataclasses import dataclass

from torch import nn


@dataclass
class Config:
    side: int = 8
    classes: int = 10


def make(num_classes=10):
    config = Config(classes=num_classes)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * config.side**2, config.classes))
'''}, "{tmp}/sub/model.py:make", id="dataclass-with-future-annotations"),
    pytest.param({"layout_pkg/__init__.py": "", "layout_pkg/nets.py": TINY},
                 "layout_pkg.nets:tiny", id="package-module-in-the-current-directory"),
]


def _write(files: dict[str, str], root: Path) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.mark.parametrize(("files", "spec"), LAYOUTS)
def test_factory_layouts_load(files: dict[str, str], spec: str, tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A factory file that imports its siblings (at import, in the factory, in the forward),
    defines a dataclass under ``from __future__ import annotations``, or a package in the
    current directory: each loads as Python would run or import it. The console script's
    ``sys.path`` has no current directory: neither has this one."""
    _write(files, tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    code = main(["analyze", spec.format(tmp=tmp_path), "--image-size", "8", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["totals"]["params"] == TINY_PARAMS
