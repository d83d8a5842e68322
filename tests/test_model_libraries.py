"""The zoo dispatches over the registered model libraries: each library file owns its prefix,
the check and build of its names, what its models declare of their input, its sweep variants,
its deploy step and its help text (``vitprof.models.libraries``)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import vitprof.models.libraries as registry
from vitprof.checks.baseline import same_model
from vitprof.checks.crosscheck.subject import Subject
from vitprof.cli.commands.diff import is_saved_profile
from vitprof.cli.commands.models import models_document
from vitprof.core.errors import UserError
from vitprof.models import declared_input as declared_module
from vitprof.models import deploy as deploy_module
from vitprof.models import zoo
from vitprof.models.declared_input import declared_input
from vitprof.models.deploy import reparameterized
from vitprof.models.libraries.base import BuildSizes, Declaration, ModelLibrary
from vitprof.render.formats import render
from vitprof.sweep import variant_factory


@pytest.mark.parametrize(("name", "library"), [
    ("timm:vit_tiny_patch16_224", "timm"),
    ("hf:vit-base-patch16-224", "huggingface"),
    ("hf:config.json", "huggingface"),
    ("torchvision:vit_b_16", "torchvision"),
    ("models.py:build", "factory"),
    ("package.module:build", "factory"),
])
def test_a_name_goes_to_the_library_that_claims_it(name: str, library: str) -> None:
    claimed = zoo.library_of(name)
    assert claimed is not None and claimed.name == library


def test_a_plain_zoo_name_is_claimed_by_no_library() -> None:
    assert zoo.library_of("vit_b_16") is None
    assert zoo.library_of("note002_cifar_vit") is None


def _toy_library(monkeypatch: pytest.MonkeyPatch, **fields: object) -> None:
    """A registry with a library ``toy:`` before the others (the zoo, the declared input and
    the deploy step read it; :func:`registry.library_of` answers which library claims a name)."""
    toy = ModelLibrary(name="toy", tables=(), inferrers=(), known="", prefix="toy:",
                       names=("toy:NAME",), **fields)  # type: ignore[arg-type]
    libraries = (toy, *registry.LIBRARIES)
    for module in (registry, declared_module, deploy_module):
        monkeypatch.setattr(module, "LIBRARIES", libraries)


def test_a_new_library_is_checked_and_built_by_its_own_functions(monkeypatch) -> None:
    built: list[tuple[str, BuildSizes, int | None]] = []

    def check(name: str) -> bool:
        if name != "toy:linear":
            raise UserError(f"unknown toy model '{name}'")
        return True

    def build(name: str, sizes: BuildSizes, classes: int | None):
        built.append((name, sizes, classes))
        return lambda: nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4))

    _toy_library(monkeypatch, check=check, build=build)
    assert zoo.validate_name("toy:linear") is None  # built by its library: no zoo entry
    with pytest.raises(UserError, match="unknown toy model 'toy:other'"):
        zoo.validate_name("toy:other")
    model = zoo.build("toy:linear", image_size=8, num_classes=4)
    assert built == [("toy:linear", BuildSizes(8), 4)]
    assert model.entry is None and model.image_size == 8
    # the factory ran on the device asked for (meta by default)
    assert next(model.module.parameters()).device.type == "meta"


def test_a_library_says_which_of_its_names_hold_a_file(monkeypatch) -> None:
    # a baseline and diff ask the library, not a prefix of their own: "toy:" names a file here
    _toy_library(monkeypatch, model_file=lambda name: ("toy:", name.removeprefix("toy:"), ""))
    assert registry.model_file("toy:sub/net.json") == ("toy:", "sub/net.json", "")
    # the same file, given relative to two folders, is the same model
    assert same_model("toy:sub/net.json", "toy:/work/sub/net.json")
    assert not same_model("toy:sub/net.json", "toy:/work/other/net.json")
    # a .json a library reads as a model is no saved profile
    assert not is_saved_profile("toy:net.json")
    assert is_saved_profile("profile.json") and not is_saved_profile("hf:config.json")


def test_a_library_whose_entries_go_without_its_prefix(monkeypatch) -> None:
    # "toy:" + a zoo entry's name names that entry, as torchvision:vit_b_16 does
    _toy_library(monkeypatch, prefixes_entries=True)
    assert zoo.lookup("toy:vit_b_16") is zoo.ZOO["vit_b_16"]
    assert zoo.zoo_entry("toy:vit_b_16") is zoo.ZOO["vit_b_16"]
    assert zoo.published_sizes("toy:vit_b_16") == zoo.published_sizes("vit_b_16") != ()
    # the crosscheck's published row reads the entry too, not a prefix of its own
    published = Subject(None, "toy:vit_b_16", None).published()  # type: ignore[arg-type]
    assert published == zoo.ZOO["vit_b_16"].published(224, 1000) is not None
    assert zoo.zoo_entry("timm:vit_tiny_patch16_224") is None


def test_a_library_declares_the_input_of_its_models(monkeypatch) -> None:
    class Declares(nn.Module):
        pass

    def declares(module: nn.Module) -> Declaration | None:
        return Declaration("toy card", 4, (40, 60), 5) if isinstance(module, Declares) else None

    _toy_library(monkeypatch, declares=declares)
    said = declared_input(Declares())
    assert (said.channels, said.size, said.frames, said.source) == (4, (40, 60), 5, "toy card")
    assert said.channel_axis == 2  # a declared frame count: the video layout (B, T, C, H, W)
    assert declared_input(nn.Linear(2, 2)).source == ""


def test_each_librarys_deploy_step_runs_on_a_copy(monkeypatch) -> None:
    seen: list[nn.Module] = []

    def deploy(model: nn.Module) -> None:
        seen.append(model)
        model.fused = True  # type: ignore[assignment]

    _toy_library(monkeypatch, deploy=deploy)
    model = nn.Linear(2, 2)
    deployed = reparameterized(model)
    assert seen == [deployed] and deployed is not model
    assert getattr(deployed, "fused", False) and not hasattr(model, "fused")


def test_the_sweep_asks_the_libraries_for_their_variants() -> None:
    # timm's ViT-Ti: width 192, 3 heads of 192 / 3 = 64; at width 384, 384 / 64 = 6 heads
    with torch.device("meta"):
        wider = variant_factory("timm:vit_tiny_patch16_224", "width")(384)
    assert wider.embed_dim == 384 and wider.blocks[0].attn.num_heads == 6
    deeper = variant_factory("vit_b_32", "depth")(2)
    assert len(deeper.encoder.layers) == 2


def test_a_model_no_library_rebuilds_names_those_that_do() -> None:
    rebuilders = [library.name for library in registry.LIBRARIES if library.variant is not None]
    assert rebuilders == ["torchvision", "timm"]
    with pytest.raises(UserError, match=r"--depth sweeps rebuild torchvision and timm ViTs; "
                                        r"note002_cifar_vit is neither"):
        variant_factory("note002_cifar_vit", "depth")


def test_vitprof_models_lists_the_names_of_every_library() -> None:
    text = render(models_document(), "table")
    for library in registry.LIBRARIES:
        for name in library.names:
            assert name in text
    assert "timm:NAME" in text and "package.module:factory" in text


def test_the_registry_ends_with_the_library_that_claims_any_colon() -> None:
    # a prefixed library listed after it would never see its names
    assert registry.LIBRARIES[-1].name == "factory"
    assert all(dataclasses.is_dataclass(library) for library in registry.LIBRARIES)
