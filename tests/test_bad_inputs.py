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
import subprocess
import sys
from pathlib import Path

import pytest

from vitprof.cli.main import main

VITPROF = Path(sys.executable).with_name("vitprof")
BIG = 2**63 - 1  # 9223372036854775807: a batch whose input size in bytes overflows int64

# note 002's CIFAR-ViT, importable from any directory: a ViT that analyzes without warnings
CIFAR_VIT = "vitprof.models.notes.note002:build_cifar_vit"

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


# Factories that write below Python: to file descriptor 1 in the factory and in the forward,
# and through a child process; `all_three` does all of it.
WRITERS = '''
import os
import subprocess

from torch import nn


class Net(nn.Module):
    def __init__(self, num_classes, forward_writes):
        super().__init__()
        self.fc = nn.Linear(3 * 8 * 8, num_classes)
        self.forward_writes = forward_writes

    def forward(self, x):
        if self.forward_writes:
            os.write(1, b"forward wrote to fd 1\\n")
        return self.fc(x.flatten(1))


def factory_writes(num_classes=10):
    os.write(1, b"factory wrote to fd 1\\n")
    return Net(num_classes, False)


def forward_writes(num_classes=10):
    return Net(num_classes, True)


def child_echoes(num_classes=10):
    subprocess.run(["echo", "a child echoed"], check=True)
    return Net(num_classes, False)


def all_three(num_classes=10):
    os.write(1, b"factory wrote to fd 1\\n")
    subprocess.run(["echo", "a child echoed"], check=True)
    return Net(num_classes, True)
'''


def _console(argv: list[str], cwd: Path, stdout: str = "pipe") -> tuple[int, str, str]:
    """The exit code, stdout and stderr of the ``vitprof`` console script run on ``argv`` in
    ``cwd``, its stdout a pipe, ``/dev/full`` or closed."""
    command = [str(VITPROF), *argv]
    if stdout == "/dev/full":
        with open("/dev/full", "wb") as full:
            result = subprocess.run(command, cwd=cwd, stdout=full, stderr=subprocess.PIPE,
                                    text=True, timeout=300)
    elif stdout == "closed":
        result = subprocess.run(command, cwd=cwd, stderr=subprocess.PIPE, text=True,
                                timeout=300, preexec_fn=lambda: os.close(1))
    else:
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout or "", result.stderr


@pytest.mark.parametrize(("factory", "written"), [
    pytest.param("factory_writes", ("factory wrote to fd 1",), id="factory-os-write"),
    pytest.param("forward_writes", ("forward wrote to fd 1",), id="forward-os-write"),
    pytest.param("child_echoes", ("a child echoed",), id="child-process-echo"),
    pytest.param("all_three", ("factory wrote to fd 1", "forward wrote to fd 1",
                               "a child echoed"), id="console-script-all-three",
                 marks=pytest.mark.slow),
])
def test_writes_below_python_stay_off_stdout(factory: str, written: tuple[str, ...],
                                             tmp_path: Path, capfd) -> None:
    """``--format json`` stays JSON whatever the model writes to file descriptor 1; what it
    writes reaches stderr. In-process under capfd (file descriptors 1 and 2 are captured), and
    once through the console script, whose stdout is the process's file descriptor 1."""
    (tmp_path / "writers.py").write_text(WRITERS)
    argv = ["analyze", f"{tmp_path}/writers.py:{factory}", "--image-size", "8", "--format",
            "json"]
    if factory == "all_three":
        code, out, err = _console(argv, tmp_path)
    else:
        code = main(argv)
        out, err = capfd.readouterr()
    assert code == 0, err
    assert json.loads(out)["totals"]["params"] == TINY_PARAMS
    for text in written:
        assert text in err


# Each refusal: the command, how it runs (in-process, or the console script with its stdout a
# pipe, /dev/full or closed), the exit code and a fragment of the one line on stderr.
REFUSALS = [
    pytest.param(["analyze", "vit_b_16", "--batch-size", str(BIG)], "in-process", 2,
                 f"cannot make an input of shape {BIG}x3x224x224 on meta",
                 id="analyze-batch-overflows"),
    pytest.param(["profile", CIFAR_VIT, "--batch-size", str(BIG)], "in-process", 2,
                 f"cannot make an input of shape {BIG}x3x32x32 on meta",
                 id="profile-batch-overflows"),
    pytest.param(["crosscheck", CIFAR_VIT, "--batch-size", str(BIG)], "in-process", 2,
                 f"cannot make an input of shape {BIG}x3x32x32 on meta",
                 id="crosscheck-batch-overflows"),
    # a batch of 2^63 is past int64 itself: torch raised a TypeError of C++ frames (a traceback)
    pytest.param(["analyze", CIFAR_VIT, "--batch-size", str(BIG + 1)], "in-process", 2,
                 f"the input (batch) has {BIG + 1:,} elements ({BIG + 1:,}), more than the 2^63 - "
                 f"1 that torch's int64 sizes hold", id="analyze-batch-past-int64"),
    # the attention scores of a 10^6 x 10^6 image, 12 heads x (62,500^2 + 1)^2 of them, overflow
    # int64 bytes on any device: the line says so, where it said a CPU run would need 1.27 PiB
    pytest.param(["analyze", "vit_b_16", "--image-size", "1000000"], "in-process", 2,
                 f"Storage size calculation overflowed with sizes=[12, {62_500**2 + 1}, "
                 f"{62_500**2 + 1}]", id="analyze-scores-past-int64"),
    # threads far above the core count abort in libgomp, killing the process: a subprocess
    pytest.param(["profile", CIFAR_VIT, "--threads", "100000"], "pipe", 2,
                 f"threads must be at most {os.cpu_count()}, this machine's CPU count",
                 id="profile-threads-above-the-cores", marks=pytest.mark.slow),
    pytest.param(["models"], "/dev/full", 2,
                 "cannot write the result to stdout: No space left on device",
                 id="models-stdout-full"),
    pytest.param(["analyze", CIFAR_VIT], "/dev/full", 2,
                 "cannot write the result to stdout: No space left on device",
                 id="analyze-stdout-full", marks=pytest.mark.slow),
    pytest.param(["models"], "closed", 2, "cannot write the result: stdout is closed",
                 id="models-stdout-closed"),
    pytest.param(["analyze", CIFAR_VIT], "closed", 2,
                 "cannot write the result: stdout is closed", id="analyze-stdout-closed",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("argv", "how", "code", "fragment"), REFUSALS)
def test_refusals_are_one_line(argv: list[str], how: str, code: int, fragment: str,
                               tmp_path: Path, capsys) -> None:
    if how == "/dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    if how == "in-process":
        status = main(argv)
        _, err = capsys.readouterr()
    else:
        status, _, err = _console(argv, tmp_path, stdout=how)
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == code, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert len(lines) == 1 and lines[0].startswith("vitprof: error: "), err
    assert fragment in lines[0]


@pytest.mark.parametrize(("keywords", "message"), [
    pytest.param({"batch_size": 2**63}, "the input (batch) has 9,223,372,036,854,775,808 elements",
                 id="batch"),
    pytest.param({"image_size": 2**32}, "the input (batch, height, width) has "
                 f"{2**64:,} elements (1 x {2**32:,} x {2**32:,})", id="image-size"),
])
def test_sizes_past_int64_are_one_user_error_in_python(keywords: dict, message: str) -> None:
    from torch import nn

    from vitprof import UserError, analyze

    with pytest.raises(UserError) as raised:
        analyze(nn.Sequential(nn.Flatten(), nn.Linear(3, 2)), **keywords)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
