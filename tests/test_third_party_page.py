"""The third-party benchmark's own bookkeeping (benchmarks/third_party.py, closed_forms.py):
the closed-form helpers and verdict (closed_forms.py run as a command checks them), the
class-per-module renaming (vitprof.testing.own_classes), and a missing package on the page (the
script run as a command). The packages themselves are optional and not needed here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
from strangers.parallel import Net

from vitprof.testing import own_classes

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def test_the_closed_form_helpers_and_verdict_check_themselves() -> None:
    """closed_forms.py as a command: linear, times and plus against the arithmetic they name,
    the verdict of the parallel-block stranger's own breakdown (it matches) and of that
    breakdown with 5 params moved from mlp to attn_proj (it names the two); exit code 1 when
    one fails."""
    tests = Path(__file__).resolve().parent  # the stranger imports strangers.parts
    path = os.pathsep.join(filter(None, [str(ROOT), str(tests), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(BENCHMARKS / "closed_forms.py"), "--model",
                           str(tests / "strangers" / "parallel.py") + ":Net", "--image-size",
                           "16"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "6 of 6 checks hold"  # 4 of the helpers, 2 of the verdict
    assert [line.split(":")[0] for line in lines[:-1]] == ["holds"] * 6


def test_a_class_per_module_keeps_the_forward_and_shares_no_class() -> None:
    torch.manual_seed(0)
    model = Net()
    torch.manual_seed(0)
    renamed = own_classes(Net())
    classes = [type(module) for module in renamed.modules()]
    assert len(set(classes)) == len(classes) == len(list(model.modules()))
    assert all(isinstance(module, nn_type) for module, nn_type in
               zip(renamed.modules(), map(type, model.modules()), strict=True))
    image = torch.randn(1, 3, 16, 16)
    assert torch.equal(renamed(image), model(image))


def test_a_missing_package_is_one_line_skipped(tmp_path: Path) -> None:
    # a vformer that cannot be imported stands first on the path, whether vformer is installed
    (tmp_path / "vformer").mkdir()
    (tmp_path / "vformer" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'vformer'\")\n")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(BENCHMARKS / "third_party.py"), "--packages",
                           "vformer", "--out", str(tmp_path / "page.md")], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": path}, timeout=300)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "page.md").read_text()
    assert "- skipped: vformer (No module named 'vformer')" in text.splitlines()
