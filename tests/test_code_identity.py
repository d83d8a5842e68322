"""Code identity, not class identity (issue 35, class 12): the rules that compare modules read
the code their forward runs and treat every ``nn.Sequential`` / ``nn.ModuleList`` as a
container, subclasses included; :func:`vitprof.testing.own_classes` gives every module a class
of its own, and the breakdown stays the same."""

from __future__ import annotations

import pytest
import torch
from recognition_fixtures import (
    FIXTURES,
    IMAGE,
    MAP_CONV,
    Breakdown,
    D,
    N,
    Net,
    Unit,
    Units,
    grid,
    net,
    tokens,
)
from torch import nn

from vitprof import analyze
from vitprof.core.records import Component as C
from vitprof.recognize.graph.blocks import kind
from vitprof.testing import (
    NAME_BLIND_MODELS,
    meta_builder,
    name_blindness,
    neutral_names,
    own_classes,
)


def _breakdown(model: nn.Module) -> Breakdown:
    profile = analyze(model, image_size=IMAGE, recognizer="graph")
    return {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)}


class Chained(nn.Sequential):
    """An ``nn.Sequential`` that adds nothing: still a container, not a unit of its own."""


class SequenceNet(Net):
    """A container ``s`` before the blocks: a 3x3 conv on the map (``conv``), then a pointwise
    conv that mixes the channels, in no unit with it (a container is none): ``patch_embed``."""

    def __init__(self, container: type[nn.Sequential]) -> None:
        super().__init__()
        self.s = container(nn.Conv2d(D, D, 3, padding=1), nn.Conv2d(D, D, 1))

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return tokens(self.s(grid(x)))


SEQUENCE = net(MAP_CONV, {C.PATCH_EMBED: (D * D + D, N * D * D)})  # the pointwise conv, D -> D


@pytest.mark.parametrize("container", [nn.Sequential, Chained])
def test_a_subclass_of_a_sequential_is_a_container(container: type[nn.Sequential]) -> None:
    assert _breakdown(SequenceNet(container)) == SEQUENCE


class Copied(nn.Module):
    """:class:`recognition_fixtures.Unit` copied under another name: the same forward code."""

    def __init__(self, skip: bool) -> None:
        super().__init__()
        self.skip = skip
        self.c = nn.Conv2d(D, D, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.c(x) if self.skip else self.c(x)


class CopiedUnits(Units):
    """``skipless_block``'s net whose unit run without its skip is of the copied class."""

    def __init__(self) -> None:
        super().__init__()
        self.r1 = Copied(False)


def test_a_copy_of_a_class_is_of_its_kind() -> None:
    assert kind(Copied(False)) == kind(Unit(False)) != kind(nn.Conv2d(D, D, 1))
    assert _breakdown(CopiedUnits()) == FIXTURES["skipless_block"].expected


def test_a_class_per_module_keeps_the_skipless_block() -> None:
    assert _breakdown(own_classes(Units())) == FIXTURES["skipless_block"].expected


def test_own_classes_gives_each_module_a_class_and_keeps_the_forward() -> None:
    torch.manual_seed(0)
    model, image = Units(), torch.randn(1, 3, IMAGE, IMAGE)
    expected = model(image)
    assert own_classes(model) is model
    modules = list(model.modules())
    assert len({type(m) for m in modules}) == len(modules)  # one class per module
    assert all(type(m).__name__ == f"C{k}" for k, m in enumerate(modules))
    assert isinstance(model.r0, Unit) and isinstance(model.m, nn.ModuleList)
    assert torch.equal(model(image), expected)
    # neutral_names keeps one class per original class
    renamed = neutral_names(Units())
    assert type(renamed.r0) is type(renamed.r1)


# timm hybrids whose breakdown moved under own_classes on main (up to 15.5% of the MACs:
# efficientvit_b1), by their skipless conv blocks and the classes of their blocks' children
HYBRIDS = ("timm:mobilevit_xxs", "timm:mobilevitv2_050", "timm:efficientvit_m0",
           "timm:efficientformerv2_s1", "timm:efficientvit_b1")


@pytest.mark.slow
@pytest.mark.parametrize("name", HYBRIDS)
def test_timm_hybrids_are_the_same_with_a_class_per_module(name: str) -> None:
    pytest.importorskip("timm")
    found = name_blindness(meta_builder(name), rename=own_classes,
                           image_size=dict(NAME_BLIND_MODELS)[name], in_chans=3)
    assert found.changes == ()
