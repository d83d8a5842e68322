"""Budgets: the closed schema (every fail-closed case), exact checks, and the pytest helper.

Expected counts are closed forms written beside them. The analysed model is the note-002
CIFAR-ViT "tiny" row (fast on meta): S = 32, P = 4, N = (32/4)^2 + 1 = 65 tokens, D = 192,
L = 12 blocks, 3 heads, M = 768, K = 10 classes.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import BUDGET_MODELS_PY, MARKING_FACTORY_PY
from torch import nn

from vitprof import UserError, analyze
from vitprof.checks.budget import check_profile, evaluate, load_budgets, parse_budget
from vitprof.checks.toml_lines import key_line, table_at
from vitprof.core.records import Component, OpRecord, ParamRecord
from vitprof.core.vocab import Bound, Metric, Scope, Verdict
from vitprof.count.result import Profile
from vitprof.render.budget import budget_document
from vitprof.render.formats import render
from vitprof.testing import assert_budget, assert_budget_file

TINY = "note002_cifar_vit_tiny"
# patch 3*4*4*192 + 192 = 9,408; class token 192; positions 65*192 = 12,480;
# 12 blocks x (4*192^2 + 2*192*768 + 9*192 + 768 = 444,864) = 5,338,368; final norm 2*192 = 384;
# head 192*10 + 10 = 1,930: 9,408 + 192 + 12,480 + 5,338,368 + 384 + 1,930 = 5,362,762
TINY_PARAMS = 5_362_762
# one block: 65*(4*192^2 + 2*192*768) + 2*65^2*192 = 28,753,920 + 1,622,400 = 30,376,320
TINY_BLOCK_MACS = 30_376_320
# patches 64*48*192 = 589,824; blocks 12*30,376,320 = 364,515,840; head 192*10 = 1,920
TINY_MACS = 365_107_584
# 12 blocks x 2*65^2*192 = 12 x 1,622,400
TINY_ATTN_CORE_MACS = 19_468_800


def write(tmp_path: Path, text: str, name: str = "b.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load_error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_budgets(path)
    return str(info.value)


# --------------------------------------------------------------------------- fail closed

SCHEMA_ERRORS = [
    pytest.param(
        """\
        [vit_b_16]
        image_size = 224
        max_parms = 86_600_000
        """,
        ["b.toml:3: entry 'vit_b_16', key 'max_parms'", "did you mean 'max_params'?"],
        id="unknown-key-with-line",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = true
        """,
        ["b.toml:2: entry 'vit_b_16', key 'max_params'", "got true (a boolean)"],
        id="bool-for-int",
    ),
    pytest.param(
        """\
        [vit_b_16]
        image_size = true
        max_params = 1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'image_size'", "(a boolean)"],
        id="bool-for-image-size",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_macs = 1.5
        """,
        ["b.toml:2: entry 'vit_b_16', key 'max_macs'", "got 1.5; counts are exact integers"],
        id="fractional-float-for-int",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_macs = 1e17
        """,
        ["b.toml:2: entry 'vit_b_16', key 'max_macs'", "not exact, write it as an integer"],
        id="inexact-float-for-int",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = "86M"
        """,
        ["b.toml:2: entry 'vit_b_16', key 'max_params'", "got '86M' (a string)"],
        id="string-for-int",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = -1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'max_params'", "whole number >= 0, got -1"],
        id="negative-count",
    ),
    pytest.param(
        """\
        [vit_b_16]
        batch_size = 0
        max_params = 1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'batch_size'", "positive integer, got 0"],
        id="zero-batch",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1
        [vit_b_16.components]
        attn_cor = { max_share = 0.1 }
        """,
        ["b.toml:4: entry 'vit_b_16', key 'components.attn_cor'",
         "unknown component 'attn_cor'; did you mean 'attn_core'?"],
        id="unknown-component",
    ),
    pytest.param(
        """\
        [vit_b_16]
        recognizer = "graphs"
        max_params = 1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'recognizer'",
         "unknown recognizer 'graphs'; did you mean 'graph'?"],
        id="unknown-recognizer",
    ),
    pytest.param(
        """\
        [vit_b_16.components]
        mlp = { max_macs = 1 }
        attn_core = { min_macs = 1, max_shar = 0.1 }
        """,
        ["b.toml:3: entry 'vit_b_16', key 'components.attn_core.max_shar'",
         "unknown component limit 'max_shar'; did you mean 'max_share'?"],
        id="unknown-key-in-component-table",
    ),
    pytest.param(
        """\
        [vit_b_16.components.attn_core]
        min_macs = 1

        [vit_b_16.components.mlp]
        max_gmacs = 3
        """,
        ["b.toml:5: entry 'vit_b_16', key 'components.mlp.max_gmacs'"],
        id="unknown-key-in-component-header-table",
    ),
    pytest.param(
        """\
        [vit_b_16.components]
        attn_core = { max_share = 1.5 }
        """,
        ["b.toml:2: entry 'vit_b_16', key 'components.attn_core.max_share'",
         "share in [0, 1], got 1.5"],
        id="share-above-one",
    ),
    pytest.param(
        """\
        [vit_b_16.components]
        attn_core = { min_share = -0.1 }
        """,
        ["b.toml:2: entry 'vit_b_16', key 'components.attn_core.min_share'", "got -0.1"],
        id="share-below-zero",
    ),
    pytest.param(
        """\
        [vit_b_16.components]
        attn_core = { max_share = true }
        """,
        ["key 'components.attn_core.max_share'", "got true (a boolean)"],
        id="bool-for-share",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1
        [vit_b_16.blocks]
        min_cont = 12
        """,
        ["b.toml:4: entry 'vit_b_16', key 'blocks.min_cont'", "did you mean 'min_count'?"],
        id="unknown-key-in-blocks-table",
    ),
    pytest.param(
        """\
        [vit_b_16]
        image_size = 224
        """,
        ["b.toml:1: entry 'vit_b_16': sets no limit"],
        id="entry-without-limits",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1
        [vit_b_16.components]
        attn_core = {}
        """,
        ["b.toml:4: entry 'vit_b_16', key 'components.attn_core': sets no limit"],
        id="empty-component-table",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_macs = 5
        min_macs = 10
        """,
        ["b.toml:3: entry 'vit_b_16', key 'min_macs'", "above max_macs = 5; this budget can "
         "never pass"],
        id="min-above-max",
    ),
    pytest.param(
        """\
        max_params = 5
        """,
        ["b.toml:1: key 'max_params': expected an entry table"],
        id="top-level-value",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1
        components = 3
        """,
        ["b.toml:3: entry 'vit_b_16', key 'components': expected a table, got 3"],
        id="components-not-a-table",
    ),
    pytest.param(
        """\
        [x]
        model = "vit_b_16"
        map = { "^heads" = "headz" }
        max_params = 1
        """,
        ["b.toml:3: entry 'x', key 'map.^heads'", "did you mean 'head'?"],
        id="map-unknown-component",
    ),
    pytest.param(
        """\
        [x]
        model = 16
        max_params = 1
        """,
        ["b.toml:2: entry 'x', key 'model': expected a non-empty string, got 16"],
        id="model-not-a-string",
    ),
    pytest.param(
        """\
        ["hf:vit-base-patch16-224".components]
        attn_core = { min_macs = 1 }
        "mlp" = { max_macs = 1, maks = 2 }
        """,
        ["b.toml:3: entry 'hf:vit-base-patch16-224', key 'components.mlp.maks'"],
        id="quoted-keys-placed",
    ),
    pytest.param(
        """\
        [vit_b_16]
        image_size = 225
        max_params = 1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'image_size': building vit_b_16 at image size 225 "
         "failed: AssertionError: Input shape indivisible by patch size!"],
        id="image-size-the-model-refuses",
    ),
    pytest.param(
        """\
        [vit_b_16]
        image_size = [224, 320]
        max_params = 1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'image_size': vit_b_16 takes a square image size "
         "only (its builder takes one int); got 224x320"],
        id="non-square-for-a-square-only-model",
    ),
    pytest.param(
        """\
        [vit_b_16]
        image_size = [224, 224, 3]
        max_params = 1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'image_size'",
         'expected a positive integer, "HxW" or [height, width], got 3 sizes'],
        id="three-image-sizes",
    ),
    pytest.param(
        """\
        [vit_b_16]
        image_size = [224, 0]
        max_params = 1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'image_size'", "expected a positive integer, got 0"],
        id="zero-width",
    ),
    pytest.param(
        """\
        [vit_b_16]
        frames = 0
        max_params = 1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'frames'", "expected a positive integer, got 0"],
        id="zero-frames",
    ),
    pytest.param(
        """\
        [vit_b_16]
        dtype = "float64"
        max_params = 1
        """,
        ["b.toml:2: entry 'vit_b_16', key 'dtype'",
         "expected a dtype (float32, bfloat16, float16), got 'float64'"],
        id="unknown-dtype",
    ),
    pytest.param(
        """\
        [big]
        max_params = 1
        model = "vit_b_32"

        image_size = 240
        """,
        ["b.toml:5: entry 'big', key 'image_size'",
         "building vit_b_32 at image size 240 failed: AssertionError: Input shape indivisible"],
        id="image-size-after-the-model-key",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 100_000_000_000_000_000_000_000_000_000
        """,
        ["b.toml:2: entry 'vit_b_16', key 'max_params': 100000000000000000000000000000 is "
         "outside TOML's 64-bit integer range [-2**63, 2**63 - 1]"],
        id="integer-above-64-bit",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1
        max_macs = 9_223_372_036_854_775_808
        """,  # 2**63 = 9,223,372,036,854,775,808: one above the largest TOML integer
        ["b.toml:3: entry 'vit_b_16', key 'max_macs'", "outside TOML's 64-bit integer range"],
        id="integer-2-to-the-63",
    ),
    pytest.param(
        """\
        [vit_b_16.components]
        mlp = { max_macs = 1 }
        attn_core = { min_macs = 1, max_macs = -9_223_372_036_854_775_809 }
        """,  # -2**63 - 1: one below the smallest TOML integer
        ["b.toml:3: entry 'vit_b_16', key 'components.attn_core.max_macs'",
         "-9223372036854775809 is outside TOML's 64-bit integer range"],
        id="integer-below-64-bit-in-an-inline-table",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1
        components.attn_core.max_share = 2
        """,
        ["b.toml:3: entry 'vit_b_16', key 'components.attn_core.max_share'", "got 2"],
        id="dotted-key-in-the-entry",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1
        [vit_b_16.components]
        mlp = { max_macs = 1 }
        attn_core = { max_macs = 5, min_macs = 10 }
        """,
        ["b.toml:5: entry 'vit_b_16', key 'components.attn_core.min_macs': 10 is above "
         "components.attn_core.max_macs = 5"],
        id="min-above-max-in-a-component",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1
        [vit_b_16.blocks]
        """,
        ["b.toml:3: entry 'vit_b_16', key 'blocks': sets no limit"],
        id="empty-blocks-table",
    ),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1
        num_classes = 0
        """,
        ["b.toml:3: entry 'vit_b_16', key 'num_classes': expected a positive integer, got 0"],
        id="zero-classes",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = ""
        """,
        ["b.toml:3: entry 'x', key 'model': expected a non-empty string"],
        id="empty-model-name",
    ),
    pytest.param(
        """\
        [x]
        model = "vit_b_16"
        max_params = 1
        map = { "^encoder\\\\.layers" = "mlp", "^heads\\\\.head" = "headz" }
        """,  # the file holds "^heads\\.head", which TOML reads as the regex ^heads\.head
        ["b.toml:4: entry 'x', key 'map.^heads\\.head'", "did you mean 'head'?"],
        id="map-escaped-regex-placed",
    ),
    pytest.param(
        """\
        [x]
        model = "vit_b_16"
        max_params = 1
        map = { "(" = "mlp" }
        """,
        ["b.toml:4: entry 'x', key 'map.(': invalid regex"],
        id="map-invalid-regex",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = "vit_b_17"
        """,
        ["b.toml:3: entry 'x', key 'model': unknown model 'vit_b_17'; did you mean vit_b_16"],
        id="unknown-model",
    ),
    pytest.param(
        """\
        [vit_b_61]
        max_params = 1
        """,
        ["b.toml:1: entry 'vit_b_61': no model key, and the entry name is no model: unknown "
         "model 'vit_b_61'"],
        id="entry-name-is-no-model",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = "nowhere.py:make"
        """,
        ["b.toml:3: entry 'x', key 'model': no such file: ", "nowhere.py"],
        id="factory-file-missing",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = "models.py:mkae"
        """,
        ["b.toml:3: entry 'x', key 'model': ", "models.py has no callable named 'mkae'"],
        id="factory-not-defined",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = "not_python.py:make"
        """,
        ["b.toml:3: entry 'x', key 'model': cannot import ", "not_python.py: SyntaxError"],
        id="factory-file-does-not-parse",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = "no_such_package.sub:make"
        """,
        ["b.toml:3: entry 'x', key 'model': cannot import no_such_package.sub: "],
        id="factory-module-missing",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = "vitprof.models.zoo:no_such_factory"
        """,
        ["b.toml:3: entry 'x', key 'model': "
         "vitprof.models.zoo has no callable named 'no_such_factory'"],
        id="factory-not-in-the-module",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = "hf:missing/config.json"
        """,
        ["b.toml:3: entry 'x', key 'model': no such file: ", "config.json"],
        id="hf-config-missing",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = "hf:vit-base-patch61-224"
        """,
        ["b.toml:3: entry 'x', key 'model': unknown model 'hf:vit-base-patch61-224'"],
        id="hf-unknown-built-in",
    ),
    pytest.param(
        """\
        [x]
        max_params = 1
        model = "timm:vit_base_patch16_2244"
        """,
        ["b.toml:3: entry 'x', key 'model': unknown timm model 'vit_base_patch16_2244'"],
        id="timm-unknown-architecture",
    ),
    pytest.param("", ["b.toml: no budget entries"], id="empty-file"),
    pytest.param("# only a comment\n", ["b.toml: no budget entries"], id="comment-only-file"),
    pytest.param(
        """\
        [vit_b_16]
        max_params = 1

        [vit_b_32]
        max_params =
        """,
        ["b.toml:5: malformed TOML in entry 'vit_b_32': Invalid value (at line 5"],
        id="malformed-toml-with-line",
    ),
]


@pytest.mark.parametrize(("text", "expected"), SCHEMA_ERRORS)
def test_fail_closed_schema(tmp_path: Path, text: str, expected: list[str]) -> None:
    (tmp_path / "models.py").write_text(BUDGET_MODELS_PY)
    (tmp_path / "not_python.py").write_text("def make(:\n")
    message = load_error(tmp_path, text)
    for fragment in expected:
        assert fragment in message
    assert "\n" not in message
    assert message.startswith(str(tmp_path / "b.toml"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"missing\.toml: no such budget file"):
        load_budgets(tmp_path / "missing.toml")


def test_largest_toml_integers_are_accepted(tmp_path: Path) -> None:
    # 2**63 - 1 = 9,223,372,036,854,775,807, the largest TOML integer
    (budget,) = load_budgets(write(tmp_path, "[vit_b_16]\nmax_macs = 9_223_372_036_854_775_807\n"))
    assert budget.checks[0].limit == 2**63 - 1


def test_a_byte_order_mark_is_not_the_files_first_key(tmp_path: Path) -> None:
    """Issue 38: a budget saved by an editor that starts UTF-8 files with a byte-order mark
    was 'malformed TOML at line 1 column 1'; its lines stay where they are."""
    path = tmp_path / "b.toml"
    path.write_bytes(b"\xef\xbb\xbf[vit_b_16]\nmax_params = 86_600_000\nmax_maks = 1\n")
    with pytest.raises(UserError, match=r"b\.toml:3: entry 'vit_b_16', key 'max_maks'"):
        load_budgets(path)
    path.write_bytes(b"\xef\xbb\xbf[vit_b_16]\nmax_params = 86_600_000\n")
    (budget,) = load_budgets(path)
    assert budget.name == "vit_b_16" and budget.checks[0].limit == 86_600_000


def test_every_model_name_is_resolved_before_any_model_runs(tmp_path: Path) -> None:
    (tmp_path / "marking.py").write_text(MARKING_FACTORY_PY)
    path = write(tmp_path, """\
        [first]
        model = "marking.py:make"
        max_params = 386

        [last]
        model = "vit_b_17"
        max_params = 1
        """)
    with pytest.raises(UserError, match=r"b\.toml:6: entry 'last', key 'model': unknown model"):
        load_budgets(path)
    assert not (tmp_path / "factory_was_called").exists()
    (first, _) = load_budgets(write(tmp_path, '[first]\nmodel = "marking.py:make"\n'
                                              "image_size = 8\nmax_params = 386\n[last]\n"
                                              'max_params = 1\nmodel = "vit_b_16"\n'))
    assert not (tmp_path / "factory_was_called").exists()  # loaded, validated, not built
    assert evaluate(first).passed  # the conv: 3*8*8*2 + 2 = 386 params
    assert (tmp_path / "factory_was_called").exists()


@pytest.mark.parametrize(
    ("model", "package"),
    [pytest.param("hf:vit-base-patch16-224", "transformers", id="hf"),
     pytest.param("timm:vit_base_patch16_224", "timm", id="timm")],
)
def test_model_needing_a_missing_package_fails_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import fails: not installed
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == package else real_find_spec(name, *a))
    path = write(tmp_path, f'[x]\nmax_params = 1\nmodel = "{model}"\n')
    with pytest.raises(UserError) as info:
        load_budgets(path)
    assert str(info.value) == (f"{path}:3: entry 'x', key 'model': this model needs {package}: "
                               f"pip install 'vitprof[{package}]'")


def test_integral_float_is_an_exact_count(tmp_path: Path) -> None:
    (budget,) = load_budgets(write(tmp_path, "[vit_b_16]\nmax_macs = 1.8e10\n"))
    check = budget.checks[0]
    assert check.limit == 18_000_000_000  # 1.8 x 10^10
    assert isinstance(check.limit, int)


def test_schema_fields_and_implicit_unsupported_limit(tmp_path: Path) -> None:
    (budget,) = load_budgets(write(tmp_path, """\
        [small]
        model = "vit_b_16"
        image_size = 64
        batch_size = 2
        num_classes = 10
        map = { "^heads" = "other" }
        max_params = 100
        [small.components]
        attn_core = { min_macs = 1, max_share = 0.5 }
        [small.blocks]
        min_count = 12
        """))
    assert (budget.name, budget.model, budget.request.image_size, budget.request.batch_size) == (
        "small", "vit_b_16", 64, 2)
    assert budget.request.num_classes == 10
    assert budget.overrides == (("^heads", Component.OTHER),)
    described = [(c.key, c.scope, c.bound, c.metric, c.limit, c.component, c.implicit)
                 for c in budget.checks]
    assert described == [
        ("max_params", Scope.MODEL, Bound.MAX, Metric.PARAMS, 100, None, False),
        ("components.attn_core.min_macs", Scope.COMPONENT, Bound.MIN, Metric.MACS, 1,
         Component.ATTN_CORE, False),
        ("components.attn_core.max_share", Scope.COMPONENT, Bound.MAX, Metric.SHARE, 0.5,
         Component.ATTN_CORE, False),
        ("blocks.min_count", Scope.BLOCKS, Bound.MIN, Metric.COUNT, 12, None, False),
        ("max_unsupported_ops", Scope.MODEL, Bound.MAX, Metric.UNSUPPORTED_OPS, 0, None, True),
        ("max_self_checks", Scope.MODEL, Bound.MAX, Metric.SELF_CHECKS, 0, None, True),
    ]


def test_a_budget_takes_a_non_square_size_frames_and_a_dtype(tmp_path: Path) -> None:
    (tmp_path / "video.py").write_text(TUBELETS_PY)
    (budget,) = load_budgets(write(tmp_path, """\
        [clip]
        model = "video.py:make"
        image_size = [8, 12]
        frames = 4
        dtype = "bfloat16"
        max_macs = 1_000_000
        """))
    assert (budget.request.image_size, budget.request.frames, budget.request.dtype) == (
        (8, 12), 4, torch.bfloat16)
    outcome = evaluate(budget)
    assert outcome.passed
    assert outcome.profile.input_shape == (1, 3, 4, 8, 12)
    assert outcome.profile.inputs[0].dtype == "bfloat16"
    # (4 / 2) x (8 / 4) x (12 / 4) = 12 tubelets x 8 channels x (3 x 2 x 4 x 4 = 96 inputs)
    assert outcome.profile.totals.macs == 12 * 8 * 96


TUBELETS_PY = """
from torch import nn


def make():
    return nn.Conv3d(3, 8, kernel_size=(2, 4, 4), stride=(2, 4, 4))
"""


def test_model_path_is_relative_to_the_budget_file(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny.py").write_text(BUDGET_MODELS_PY)
    (budget,) = load_budgets(write(tmp_path, '[m]\nmodel = "models/tiny.py:make"\n'
                                             "max_params = 1\n"))
    assert budget.model == f"{tmp_path / 'models' / 'tiny.py'}:make"


# --------------------------------------------------------------------------- line finder

TOML = """\
[a]
x = 1
[a.components]
attn_core = { min_macs = 1, max_share = 0.5 }
"quoted.key" = { y = 2 }
[b.components.mlp]
max_macs = 3
c.d = 4
"""


@pytest.mark.parametrize(
    ("path", "line"),
    [
        pytest.param(("a",), 1, id="header"),
        pytest.param(("a", "x"), 2, id="plain-key"),
        pytest.param(("a", "components", "attn_core", "max_share"), 4, id="inline-table"),
        pytest.param(("a", "components", "quoted.key", "y"), 5, id="quoted-key"),
        pytest.param(("b",), 6, id="table-opened-by-a-longer-header"),
        pytest.param(("b", "components", "mlp", "max_macs"), 7, id="key-under-deep-header"),
        pytest.param(("b", "components", "mlp", "c", "d"), 8, id="dotted-key"),
        pytest.param(("a", "nowhere"), None, id="absent"),
    ],
)
def test_key_line(path: tuple[str, ...], line: int | None) -> None:
    assert key_line(TOML, path) == line


def test_table_at() -> None:
    assert table_at(TOML, 2) == ("a",)
    assert table_at(TOML, 5) == ("a", "components")
    assert table_at(TOML, 8) == ("b", "components", "mlp")
    assert table_at("x = 1\n[a]\n", 1) == ()


# --------------------------------------------------------------------------- exact checks


@pytest.fixture(scope="module")
def tiny() -> Profile:
    return analyze(TINY)


def verdicts(profile: Profile, table: dict) -> dict[str, tuple[Verdict, int | float | None]]:
    result = check_profile(parse_budget("tiny", table, model=TINY), profile)
    return {r.check.key: (r.verdict, r.actual) for r in result.results}


def test_tiny_closed_form(tiny: Profile) -> None:
    assert tiny.totals.params == TINY_PARAMS
    assert tiny.totals.macs == TINY_MACS
    assert tiny.components[Component.ATTN_CORE].macs == TINY_ATTN_CORE_MACS


def test_limits_are_inclusive_and_exact(tiny: Profile) -> None:
    table = {
        "max_params": TINY_PARAMS,  # equal: holds
        "min_params": TINY_PARAMS,
        "max_macs": TINY_MACS - 1,  # one MAC over: fails
        "min_flops": 2 * TINY_MACS + 1,  # FLOPs = 2 x MACs, one short: fails
        "components": {"attn_core": {"min_macs": TINY_ATTN_CORE_MACS - 1,
                                     "max_macs": TINY_ATTN_CORE_MACS - 1}},
        "blocks": {"max_macs": TINY_BLOCK_MACS, "min_macs": TINY_BLOCK_MACS,
                   "min_count": 11, "max_count": 11},
    }
    assert verdicts(tiny, table) == {
        "max_params": (Verdict.PASS, TINY_PARAMS),
        "min_params": (Verdict.PASS, TINY_PARAMS),
        "max_macs": (Verdict.FAIL, TINY_MACS),
        "min_flops": (Verdict.FAIL, 2 * TINY_MACS),
        "components.attn_core.min_macs": (Verdict.PASS, TINY_ATTN_CORE_MACS),
        "components.attn_core.max_macs": (Verdict.FAIL, TINY_ATTN_CORE_MACS),
        "blocks.max_macs": (Verdict.PASS, TINY_BLOCK_MACS),
        "blocks.min_macs": (Verdict.PASS, TINY_BLOCK_MACS),
        "blocks.min_count": (Verdict.PASS, 12),
        "blocks.max_count": (Verdict.FAIL, 12),
        "max_unsupported_ops": (Verdict.PASS, 0),
        "max_self_checks": (Verdict.PASS, 0),
    }


def test_headroom_sign(tiny: Profile) -> None:
    table = {"max_params": TINY_PARAMS + 10, "min_macs": TINY_MACS + 5}
    result = check_profile(parse_budget("tiny", table, model=TINY), tiny)
    assert [r.headroom for r in result.results[:2]] == [10, -5]


def hand_profile(attn_core_macs: int, mlp_macs: int, blocks: tuple[int | None, ...] = (0, 1),
                 unsupported: dict[str, int] | None = None) -> Profile:
    """A profile built by hand: one attention op and one MLP op per listed block."""
    ops = []
    for block in blocks:
        ops.append(OpRecord("aten.bmm", f"b{block}.attn", Component.ATTN_CORE, block,
                            attn_core_macs, 0))
        ops.append(OpRecord("aten.mm", f"b{block}.mlp", Component.MLP, block, mlp_macs, 0))
    params = (ParamRecord("w", 30, Component.MLP, None), ParamRecord("h", 10, Component.HEAD,
                                                                     None))
    return Profile("hand", (1, 3, 8, 8), "meta", torch.__version__, "hand", params, tuple(ops),
                   unsupported_ops=unsupported or {})


def test_share_is_compared_exactly() -> None:
    # 2 blocks x 100_000_000_000_000_001 of 2 x 10^18 MACs: one part in 10^18 above 0.1, which
    # a float division rounds to exactly 0.1
    profile = hand_profile(100_000_000_000_000_001, 899_999_999_999_999_999)
    assert profile.totals.macs == 2 * 10**18
    table = {"components": {"attn_core": {"max_share": 0.1}, "mlp": {"min_share": 0.9}}}
    assert verdicts(profile, table)["components.attn_core.max_share"][0] is Verdict.FAIL
    assert verdicts(profile, table)["components.mlp.min_share"][0] is Verdict.FAIL
    exact = hand_profile(1, 9)  # 1 of 10 MACs: exactly 0.1
    assert verdicts(exact, table)["components.attn_core.max_share"] == (Verdict.PASS, 0.1)


def test_params_share() -> None:
    profile = hand_profile(1, 9)  # params: mlp 30, head 10 of 40
    table = {"components": {"mlp": {"min_params_share": 0.75, "max_params_share": 0.75},
                            "head": {"max_params_share": 0.24}}}
    assert verdicts(profile, table) == {
        "components.mlp.min_params_share": (Verdict.PASS, 0.75),  # 30 / 40
        "components.mlp.max_params_share": (Verdict.PASS, 0.75),
        "components.head.max_params_share": (Verdict.FAIL, 0.25),  # 10 / 40
        "max_unsupported_ops": (Verdict.PASS, 0),
        "max_self_checks": (Verdict.PASS, 0),
    }


def test_per_block_limits_bind_the_worst_block() -> None:
    profile = hand_profile(1, 9, blocks=(0, 1))
    profile_uneven = Profile(
        "hand", (1, 3, 8, 8), "meta", torch.__version__, "hand", (),
        (*profile.ops, OpRecord("aten.mm", "b1.mlp", Component.MLP, 1, 5, 0)),
    )  # block 0: 1 + 9 = 10 MACs; block 1: 10 + 5 = 15 MACs
    budget = parse_budget("h", {"blocks": {"max_macs": 12, "min_macs": 11}}, model="hand")
    first, second, _, _ = check_profile(budget, profile_uneven).results
    assert (first.verdict, first.actual, first.block) == (Verdict.FAIL, 15, 1)
    assert (second.verdict, second.actual, second.block) == (Verdict.FAIL, 10, 0)


def test_nothing_to_measure_fails() -> None:
    no_blocks = hand_profile(0, 0, blocks=(None,))
    table = {"blocks": {"max_macs": 100}, "components": {"mlp": {"max_share": 1}}}
    result = check_profile(parse_budget("h", table, model="hand"), no_blocks)
    blocks, share, _, _ = result.results
    assert (blocks.verdict, blocks.actual, blocks.note) == (
        Verdict.FAIL, None, "no transformer blocks recognized")
    assert (share.verdict, share.note) == (Verdict.FAIL, "the model's total macs is 0")


def test_unsupported_ops_fail_by_default() -> None:
    profile = hand_profile(1, 9, unsupported={"aten.foo": 2, "aten.bar": 1})
    result = check_profile(parse_budget("h", {"max_macs": 100}, model="hand"), profile)
    assert [(r.check.key, r.verdict, r.actual) for r in result.results] == [
        ("max_macs", Verdict.PASS, 20),  # 2 blocks x (1 + 9)
        ("max_unsupported_ops", Verdict.FAIL, 3),  # 2 + 1 calls
        ("max_self_checks", Verdict.PASS, 0),
    ]
    allowed = parse_budget("h", {"max_macs": 100, "max_unsupported_ops": 3}, model="hand")
    assert check_profile(allowed, profile).passed


@pytest.mark.parametrize(
    ("mlp_macs", "table", "cells"),
    [
        pytest.param(9, {"components": {"attn_core": {"max_share": -0.0}}},
                     ["<= 0%", "10.00%", "-10.00 pp"],  # attn_core: 2 x 1 of 2 x (1 + 9) MACs
                     id="negative-zero-share-limit"),
        pytest.param(9, {"components": {"attn_core": {"min_share": 0.000001}}},
                     [">= 0.0001%", "10.00%", "10.00 pp"],  # 10% - 0.0001% = 9.9999 pp
                     id="small-share-limit-keeps-its-digits"),
        pytest.param(99_999, {"components": {"attn_core": {"min_share": 0}}},
                     [">= 0%", "0.001%", "0.001 pp"],  # 2 x 1 of 2 x 100,000 MACs = 0.001%
                     id="small-share-is-not-zero"),
        pytest.param(99_999, {"max_macs": 199_999},  # 2 x (1 + 99,999) = 200,000 MACs
                     ["<= 199,999", "200,000", "-1 (-0.0005%)"],  # -1 / 199,999 = -0.00050%
                     id="count-past-its-limit-by-a-hair"),
        pytest.param(99_999, {"max_macs": 200_000}, ["<= 200,000", "200,000", "0 (0.00%)"],
                     id="count-at-its-limit"),
    ],
)
def test_table_percentages_have_no_negative_zero(mlp_macs: int, table: dict,
                                                 cells: list[str]) -> None:
    result = check_profile(parse_budget("h", table, model="hand"), hand_profile(1, mlp_macs))
    text = render(budget_document([result]))
    row = next(line for line in text.splitlines() if line.startswith("h."))
    assert [cell.strip() for cell in row.split("  ") if cell.strip()][1:4] == cells


# --------------------------------------------------------------------------- evaluate

# DataDependent at 16 x 16: patch conv 3*4*4*8 + 8 = 392 params, head 8*2 + 2 = 18: 410 params;
# MACs 16 patches x 48*8 = 6,144 plus the head 8*2 = 16 on the one kept (mean) token: 6,160
DD_PARAMS = 410
DD_MACS = 6_160


def test_fallback_still_checks(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(BUDGET_MODELS_PY)
    path = write(tmp_path, f"""\
        [dd]
        model = "tiny.py:make"
        image_size = 16
        max_params = {DD_PARAMS}
        max_macs = {DD_MACS - 1}
        """)
    (budget,) = load_budgets(path)
    result = evaluate(budget)
    assert result.profile.device == "cpu"
    assert result.profile.fallback.startswith("meta device failed")
    assert [(r.check.key, r.verdict, r.actual) for r in result.results] == [
        ("max_params", Verdict.PASS, DD_PARAMS),
        ("max_macs", Verdict.FAIL, DD_MACS),
        ("max_unsupported_ops", Verdict.PASS, 0),
        ("max_self_checks", Verdict.PASS, 0),
    ]
    assert "(fallback: meta device failed" in render(budget_document([result]))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        pytest.param("tiny.py:make_failing", "building", id="fails-to-build"),
        pytest.param("tiny.py:make_broken", "running", id="fails-to-analyze"),
    ],
)
def test_model_failures_are_errors(tmp_path: Path, model: str, expected: str) -> None:
    (tmp_path / "tiny.py").write_text(BUDGET_MODELS_PY)
    path = write(tmp_path, f'[m]\nmax_params = 1\nmodel = "{model}"\n')
    (budget,) = load_budgets(path)
    with pytest.raises(UserError) as info:
        evaluate(budget)
    assert str(info.value).startswith(f"{path}:3: entry 'm', key 'model': ")
    assert expected in str(info.value)


# --------------------------------------------------------------------------- pytest helper


def test_assert_budget_passes_and_returns_the_result() -> None:
    result = assert_budget(TINY, max_params=TINY_PARAMS,
                           components={"attn_core": {"min_macs": TINY_ATTN_CORE_MACS}})
    assert result.passed
    assert [r.actual for r in result.results] == [TINY_PARAMS, TINY_ATTN_CORE_MACS, 0, 0]


def test_assert_budget_message_is_the_table(tiny: Profile) -> None:
    with pytest.raises(AssertionError) as info:
        assert_budget(tiny, name="tiny", max_params=TINY_PARAMS - 1)
    expected = check_profile(parse_budget("tiny", {"max_params": TINY_PARAMS - 1}, model=TINY),
                             tiny)
    assert str(info.value) == render(budget_document([expected]))
    assert "tiny.max_params" in str(info.value)
    # max_params and the implicit max_unsupported_ops and max_self_checks
    assert "FAIL: 1 of 3 checks failed: tiny.max_params" in str(info.value)


def test_assert_budget_on_a_module() -> None:
    with torch.device("meta"):
        model = nn.Sequential(nn.Conv2d(3, 4, kernel_size=2, stride=2), nn.Flatten(),
                              nn.Linear(4 * 4 * 4, 2))
    # conv 3*2*2*4 + 4 = 52, linear 64*2 + 2 = 130: 182 params; 8 x 8 input: conv 16 positions
    # x 12*4 = 768 MACs, linear 64*2 = 128: 896 MACs
    result = assert_budget(model, image_size=8, max_params=182, min_macs=896, max_macs=896)
    assert result.budget.name == "Sequential"
    with pytest.raises(AssertionError, match=r"Sequential\.max_params"):
        assert_budget(model, image_size=8, max_params=181)


def test_assert_budget_rejects_a_broken_budget(tiny: Profile) -> None:
    with pytest.raises(UserError, match="did you mean 'max_params'"):
        assert_budget(tiny, max_parms=1)
    with pytest.raises(UserError, match="no limit"):
        assert_budget(tiny)
    with pytest.raises(UserError, match="image_size cannot apply to a Profile"):
        assert_budget(tiny, image_size=32, max_params=1)


def test_assert_budget_file(tmp_path: Path) -> None:
    path = write(tmp_path, f"""\
        [ok]
        model = "{TINY}"
        max_params = {TINY_PARAMS}

        [over]
        model = "{TINY}"
        max_macs = {TINY_MACS - 1}
        """)
    (result,) = assert_budget_file(path, entries=["ok"])
    assert result.passed
    # two entries x (one explicit limit + the implicit max_unsupported_ops and max_self_checks)
    with pytest.raises(AssertionError, match=r"FAIL: 1 of 6 checks failed: over\.max_macs"):
        assert_budget_file(path)
    with pytest.raises(UserError, match="no entry named nope"):
        assert_budget_file(path, entries=["nope"])
