"""A model library is one file of vitprof/models/libraries: its component table, its spec inferrers,
its zoo entries and the names it builds, listed once in the registry."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import vitprof.models.libraries as registry
from vitprof.core.errors import UserError
from vitprof.core.records import Component
from vitprof.models.libraries.base import ModelLibrary
from vitprof.models.libraries.hugging_face import HF_CONFIGS
from vitprof.models.libraries.torchvision import HIERARCHICAL
from vitprof.models.spec_inference import spec_from_model
from vitprof.models.zoo import ZOO, build
from vitprof.recognize.tables import NO_TABLE, recognize

BY_NAME = {family.name: family for family in registry.LIBRARIES}


def _family_files() -> dict[str, ModelLibrary]:
    """Every module of the package that declares a ``LIBRARY``, by module name."""
    found = {}
    for info in pkgutil.iter_modules(registry.__path__):
        module = importlib.import_module(f"{registry.__name__}.{info.name}")
        if isinstance(getattr(module, "LIBRARY", None), ModelLibrary):
            found[info.name] = module.LIBRARY
    return found


def test_the_registry_lists_each_family_file_once() -> None:
    files = _family_files()
    # a library file without its registry line, or a line without its file, fails here
    assert sorted(files) == sorted(registry.FILES)
    assert {"factory", "hugging_face", "notes", "timm", "torchvision"} <= set(files)
    listed = [family.name for family in registry.LIBRARIES]
    assert len(listed) == len(set(listed))  # a library name names one library
    assert sorted(listed) == sorted(family.name for family in files.values())
    assert all(family in registry.LIBRARIES for family in files.values())


def test_the_zoo_is_the_families_entries_in_registry_order() -> None:
    expected = [entry.name for family in registry.LIBRARIES for entry in family.entries]
    assert list(ZOO) == expected
    # 5 torchvision ViTs + 3 Swin + 3 Swin V2 + MaxViT + vit_22b, 5 note models + 4 scaling
    # sizes + vit_22b_parallel, 4 Hugging Face configs
    assert len(ZOO) == 13 + 10 + 4 == 27


def _family_of_module(family: ModelLibrary) -> str:
    """The recognizer name a model of ``family`` gets: its tables', else no table's."""
    return family.tables[0].name if family.tables else NO_TABLE


# The entries a ViTSpec cannot describe, and what their inferrer says it lacks.
NO_SPEC = {"vit_22b_parallel": "parallel attention/MLP blocks"}


@pytest.mark.parametrize("name", [name for name in ZOO if name not in HIERARCHICAL])
def test_each_zoo_entry_family_file_gives_table_inferrer_and_factory(name: str) -> None:
    entry = ZOO[name]
    family = BY_NAME[entry.family]
    assert entry in family.entries  # the factory lives in the family file the entry names
    model = build(name, device="meta").module
    assert recognize(model).family == _family_of_module(family)
    assert any(detect(model) for detect, _ in family.inferrers)
    if name in NO_SPEC:
        with pytest.raises(UserError, match=NO_SPEC[name]):
            spec_from_model(model)
        return
    spec = spec_from_model(model)
    assert (spec.image_size, spec.patch_size, spec.num_classes) == (
        entry.image_size, entry.patch_size, entry.num_classes)


@pytest.mark.parametrize("name", list(HIERARCHICAL))
def test_torchvision_hierarchical_entries_are_built_by_their_family_file(name: str) -> None:
    """Swin and MaxViT: torchvision's own builders, no ViTSpec (no closed form describes them),
    placed by torchvision's Swin and MaxViT tables."""
    entry = ZOO[name]
    assert entry in BY_NAME["torchvision"].entries and entry.non_square
    model = build(f"torchvision:{name}", device="meta").module
    assert type(model).__module__.startswith("torchvision.models.")
    assert recognize(model).family == "torchvision"
    with pytest.raises(UserError, match="cannot infer a ViTSpec"):
        spec_from_model(model)


def test_a_timm_model_is_read_by_the_timm_family_file() -> None:
    family = BY_NAME["timm"]
    model = build("timm:vit_tiny_patch16_224", device="meta").module
    assert recognize(model).family == family.tables[0].name == "timm"
    assert any(detect(model) for detect, _ in family.inferrers)
    # ViT-Ti/16: width 192, depth 12, 3 heads, MLP 4 * 192 = 768
    spec = spec_from_model(model)
    assert (spec.width, spec.depth, spec.heads, spec.mlp_width) == (192, 12, 3, 768)


@pytest.mark.parametrize("name", list(HF_CONFIGS))
def test_hugging_face_configs_are_built_field_by_field(name: str) -> None:
    config = HF_CONFIGS[name]
    spec = spec_from_model(build(f"hf:{name}", device="meta").module)
    assert (spec.width, spec.depth, spec.heads, spec.mlp_width, spec.patch_size) == (
        config.width, config.depth, config.heads, config.mlp_width, config.patch_size)


def test_vit_large_config_names_its_fields() -> None:
    # ViT-L/16 (Dosovitskiy et al., table 1): D=1024, 24 layers, 16 heads, MLP 4096
    config = HF_CONFIGS["vit-large-patch16-224"]
    assert (config.width, config.depth, config.heads, config.mlp_width, config.patch_size) == (
        1024, 24, 16, 4096, 16)


def test_table_blocks_are_numbered_across_stages() -> None:
    """Swin's blocks are features.{1,3,5,7}.i, i from 0 in each stage: the table numbers them
    on, in order, across stages (the graph recognizer's numbering), not i."""
    mapping = recognize(build("torchvision:swin_t", device="meta").module)
    depths = (2, 2, 6, 2)  # swin_t's stages
    paths = [f"features.{2 * stage + 1}.{i}" for stage, depth in enumerate(depths)
             for i in range(depth)]
    assert mapping.family == "torchvision"  # its table, not the generic recognizer
    assert mapping.blocks == {path: index for index, path in enumerate(paths)}
    assert mapping.blocks["features.7.1"] == 2 + 2 + 6 + 2 - 1


def test_swin_v2_position_mlp_is_attention_core_in_the_table() -> None:
    params = recognize(build("torchvision:swin_v2_t", device="meta").module).params
    assert params["features.1.0.attn.cpb_mlp.0.weight"] is Component.ATTN_CORE
    assert params["features.1.0.attn.logit_scale"] is Component.ATTN_CORE
    assert params["features.2.reduction.weight"] is Component.PATCH_EMBED  # patch merging


def test_maxvit_table_blocks_are_its_attention_layers_and_its_mbconv_is_conv() -> None:
    mapping = recognize(build("torchvision:maxvit_t", device="meta").module)
    # stages of 2, 2, 5, 2 MaxVitLayers, each an MBConv then a window and a grid block
    assert len(mapping.blocks) == 2 * (2 + 2 + 5 + 2) == 22
    assert mapping.blocks["blocks.3.layers.1.layers.grid_attention"] == 21
    mbconv = {name: component for name, component in mapping.params.items() if ".MBconv." in name}
    assert {c for n, c in mbconv.items() if ".conv_" in n and n.endswith(".0.weight")} == {
        Component.CONV}
    assert mapping.params["blocks.0.layers.0.layers.MBconv.layers.pre_norm.weight"] is (
        Component.NORM)
    assert mapping.block_of("blocks.0.layers.0.layers.MBconv.layers.conv_a.0.weight") is None
