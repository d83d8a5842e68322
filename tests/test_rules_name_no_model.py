"""A recognition rule is stated in terms of the data flow: the code and the prose of
``vitprof/recognize/graph`` and ``vitprof/recognize/rules`` name no model family, library class
or model package. The models that showed a rule are told in the docstrings of its fixture
(``tests/recognition_fixtures.py``), beside the tiny model that shows it.

The names looked for are read from the libraries themselves, not written here: timm's model
modules and the stems of its model names, transformers' model types, torchvision's model
stems, the classes of timm's and torchvision's model modules, and the installed packages built
on torch. :data:`GENERIC` lists the few of them that are words of this prose, with why.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import sys
from functools import cache
from pathlib import Path

import pytest
from torch import nn

RECOGNIZE = Path(__file__).resolve().parents[1] / "vitprof" / "recognize"
SCANNED = sorted([*RECOGNIZE.glob("graph/*.py"), *RECOGNIZE.glob("rules/*.py")])

# names of models or packages that are also words of the rules' prose, and why they may stay
GENERIC = {
    "vit": "the architecture vitprof profiles, and vitprof's own name",
    "vits": "ViTs, the plural of the architecture (transformers' text-to-speech model type)",
    "phi": "the feature map of kernelised attention, phi(Q) (transformers' model type)",
    "lambda": "Python's keyword (timm's lambda_resnet)",
    "mixer": "a token mixer, the part of a block that mixes tokens (timm's mlp_mixer stem)",
}
_STEM_SUFFIX = re.compile(r"\d+[a-z]*$")  # resnet50d -> resnet


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _stems(names: list[str]) -> set[str]:
    """The first part of each model name, with and without its size suffix, of 5 letters or
    more (shorter stems are sizes and variants: ``tf``, ``dm``, ``tiny``)."""
    found = set()
    for name in names:
        first = _normal(name.split("_")[0])
        found |= {stem for stem in (first, _STEM_SUFFIX.sub("", first)) if len(stem) >= 5}
    return found


@cache
def model_names() -> frozenset[str]:
    """Model families and packages, normalised (lower case, letters and digits only)."""
    timm = pytest.importorskip("timm")
    torchvision_models = pytest.importorskip("torchvision.models")
    auto = pytest.importorskip("transformers.models.auto.configuration_auto")
    names = {_normal(module) for module in timm.list_modules()}
    names |= _stems(timm.list_models()) | _stems(torchvision_models.list_models())
    names |= {_normal(model_type) for model_type in auto.CONFIG_MAPPING_NAMES}
    for dist in importlib.metadata.distributions():  # the packages built on torch
        if any(re.match(r"torch\b", r) for r in dist.requires or []):
            names.add(_normal(dist.metadata["Name"]))
    names.discard("vitprof")  # itself
    return frozenset(names - GENERIC.keys())


@cache
def model_classes() -> frozenset[str]:
    """The module classes of timm's and torchvision's model modules named in CamelCase (two
    capitals or more: ``ParallelThingsBlock``, ``MaxVitLayer``; ``Attention`` is a word)."""
    model_names()  # imports the libraries
    found = set()
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if not name.startswith(("timm.models.", "torchvision.models.")):
            continue
        for cls_name, cls in vars(module).items():
            if (inspect.isclass(cls) and issubclass(cls, nn.Module) and cls.__module__ == name
                    and sum(c.isupper() for c in cls_name) >= 2):
                found.add(cls_name)
    return frozenset(found)


def named_models(text: str) -> list[str]:
    """The words of ``text`` that name a model family, a library class or a model package."""
    names, classes = model_names(), model_classes()
    return [word for word in re.findall(r"[A-Za-z][A-Za-z0-9]*", text)
            if _normal(word) in names or word in classes]


def test_the_names_are_read_from_the_libraries() -> None:
    # a reader finding nothing would pass the test below on any text; the packages named are
    # ones the test extra installs (lightning is built on torch), not ones this machine has
    found = named_models("MViTv2's adds, timm's ParallelThingsBlock, CaiT and SwiftFormer; "
                         "Lightning's TinyViT, HF LeViT, torchvision's MaxVitLayer, a BiT StdConv")
    assert found == ["MViTv2", "timm", "ParallelThingsBlock", "CaiT", "SwiftFormer", "Lightning",
                     "TinyViT", "LeViT", "torchvision", "MaxVitLayer", "BiT"]
    assert named_models("a residual add of the stream, its attention block, a ViT's mixer") == []


@pytest.mark.parametrize("path", SCANNED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_rule_names_no_model(path: Path) -> None:
    found = [f"{path.name}:{number}: {word}"
             for number, line in enumerate(path.read_text().splitlines(), 1)
             for word in named_models(line)]
    assert not found, ("the rules speak of the data flow; tell the model's story in the "
                       "fixture's docstring (tests/recognition_fixtures.py): " + ", ".join(found))
