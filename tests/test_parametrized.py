"""Weights read through a parametrization (issue 35, class 1): ``weight_norm`` as
``torch.nn.utils.parametrizations`` registers it, on every weighted layer of the standard fixture
net; ``parametrize`` with a normalising module is the ``parametrized-weight`` rule's fixture
(tests/recognition_fixtures.py)."""

from __future__ import annotations

from recognition_fixtures import HID, IMAGE, D, L, Net, _sum, _times, net
from torch.nn.utils.parametrizations import weight_norm

from vitprof import analyze
from vitprof.core.records import Component as C

# weight_norm splits each weight into a direction v (the weight's size) and a magnitude g of
# one element per output channel: the net's breakdown plus each layer's g with its layer
MAGNITUDES = _sum(
    {C.PATCH_EMBED: (D, 0)},  # the patch conv's D output channels
    _times(L, {C.ATTN_QKV: (3 * D, 0), C.ATTN_PROJ: (D, 0), C.MLP: (HID + D, 0)}),
)


def _weight_normed() -> Net:
    model = Net()
    for module in (model.a, *(getattr(b, name) for b in model.m for name in "degh")):
        weight_norm(module)
    return model


def test_weight_norm_magnitudes_and_directions_stay_with_their_layers() -> None:
    profile = analyze(_weight_normed(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == _sum(net(), MAGNITUDES)
    assert profile.warnings == ()  # _weight_norm_interface is priced, nothing uncounted
