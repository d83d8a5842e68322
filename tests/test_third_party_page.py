"""The third-party benchmark's own bookkeeping (benchmarks/third_party.py, closed_forms.py):
the closed-form verdict, the class-per-module renaming (vitprof.testing.own_classes), and a
missing package on the page (the script run as a command). The packages themselves are optional
and not needed here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
from strangers.parallel import Net

from vitprof import analyze
from vitprof.core.records import Component as C
from vitprof.testing import own_classes

# closed_forms.py: the script's closed forms, arithmetic only (no command line prints them)
sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from closed_forms import closed_form_verdict, linear, plus, times

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def test_the_closed_form_helpers_are_the_arithmetic_they_name() -> None:
    assert linear(17, 32, 96) == (32 * 96 + 96, 17 * 32 * 96)  # 3_168 params, 52_224 MACs
    assert linear(17, 32, 96, bias=False) == (32 * 96, 17 * 32 * 96)
    assert times(2, (3, 5)) == (6, 10)
    assert plus((1, 2), (3, 4), (5, 6)) == (9, 12)


def test_a_closed_form_matches_or_names_the_components_that_differ() -> None:
    profile = analyze(Net(), image_size=16)
    found = {c: (n.params, n.macs) for c, n in profile.components.items() if n.params or n.macs}
    assert closed_form_verdict(found, profile) == {}
    mlp, proj = found[C.MLP], found.get(C.ATTN_PROJ, (0, 0))
    moved = {**found, C.MLP: (mlp[0] - 5, mlp[1]), C.ATTN_PROJ: (proj[0] + 5, proj[1])}
    assert closed_form_verdict(moved, profile) == {
        "attn_proj": (*proj, proj[0] + 5, proj[1]), "mlp": (*mlp, mlp[0] - 5, mlp[1])}


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
