"""The third-party benchmark's own bookkeeping (benchmarks/third_party.py, closed_forms.py):
the closed-form verdict, the class-per-module renaming, and a missing package on the page.
The packages themselves are optional and not needed here."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from strangers.parallel import Net

from vitprof import analyze
from vitprof.core.records import Component as C

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import third_party
from closed_forms import closed_form_verdict, linear, plus, times


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
    renamed = third_party.own_classes(Net())
    classes = [type(module) for module in renamed.modules()]
    assert len(set(classes)) == len(classes) == len(list(model.modules()))
    assert all(isinstance(module, nn_type) for module, nn_type in
               zip(renamed.modules(), map(type, model.modules()), strict=True))
    image = torch.randn(1, 3, 16, 16)
    assert torch.equal(renamed(image), model(image))


def test_a_missing_package_is_one_line_skipped() -> None:
    text = third_party.page([], ["vformer (No module named 'vformer')"])
    assert "- skipped: vformer (No module named 'vformer')" in text.splitlines()
