"""Issue 28, items 10 and 11: silent acceptances and smaller defects, each a command line.

Every case is a row of :data:`CASES`: the command (``{dir}`` is a folder of small models and saved
profiles, made once), the exit code, and a text the output must hold (``out``: stdout, ``err``:
stderr). A JSON stdout is compared re-written on one line (``json.dumps``), so that a row can
name a key and its value as ``"key": value``. The tests after the table check what no command
line shows alone: CSV's quoting, an empty block, the Python API's peak.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from vitprof.checks.diff import broken_invariant
from vitprof.cli.main import main
from vitprof.core.errors import UserError
from vitprof.core.records import Component, Counts, OpRecord
from vitprof.core.schema import versioned
from vitprof.count.result import Profile
from vitprof.measure.profile import profile_model

MODELS_PY = '''
import torch
from torch import nn
from torchvision.models.vision_transformer import VisionTransformer


def tiny_vit(image_size: int = 32, num_classes: int = 10):
    """12 blocks of width 16 (2 heads, MLP 32) on 16-px patches: counted in a blink."""
    return VisionTransformer(image_size=image_size, patch_size=16, num_layers=12, num_heads=2,
                             hidden_dim=16, mlp_dim=32, num_classes=num_classes)


def compiled():
    return torch.compile(tiny_vit())


def odd_names():
    """Modules named with a pipe and a newline: an 8-px patch conv, then a linear."""
    model = nn.Sequential()
    model.add_module("a|b", nn.Conv2d(3, 4, kernel_size=8, stride=8))
    model.add_module("flat", nn.Flatten())
    model.add_module("c\\nd", nn.Linear(4 * 4 * 4, 10))
    return model


class Video(nn.Module):
    """A 3-D patch embedding (2 frames x 8 x 8 px), declaring nothing of its input."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv3d(3, 16, kernel_size=(2, 8, 8), stride=(2, 8, 8))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.patch(x).flatten(2).mean(2))


def video():
    return Video()
'''

ODD = ["analyze", "{dir}/models.py:odd_names", "--image-size", "32", "--by", "module"]

CASES = [
    # 10. a torch.compile'd model warns on the command line as it does in the Python API
    pytest.param(["analyze", "{dir}/models.py:compiled"], 0, "err",
                 "vitprof: warning: a torch.compile'd model: counted its original module "
                 "VisionTransformer (_orig_mod), run eagerly", id="compiled-analyze"),
    pytest.param(["profile", "{dir}/models.py:compiled", "--iters", "1", "--warmup", "0",
                  "--threads", "1", "--peak-tflops", "0.05", "--no-progress"], 0, "err",
                 "vitprof: warning: a torch.compile'd model", id="compiled-profile"),
    # 10. a damaged saved profile is refused, naming the first broken invariant
    pytest.param(["diff", "{dir}/raised_macs.json", "{dir}/saved.json"], 2, "err",
                 "at blocks.3.components.mlp: flops", id="saved-block-macs-raised"),
    # MLP MACs: 12 blocks x 5 tokens ((32 / 16)^2 + 1) x 2 linears x 16 x 32 = 61_440
    pytest.param(["diff", "{dir}/raised_counts.json", "{dir}/saved.json"], 2, "err",
                 "at components.mlp.macs: 61440 is not the sum of the blocks and outside, "
                 "1000000061440", id="saved-block-counts-raised"),
    # qkv params: 16 x 48 + 48 = 816 a block, 12 * 816 = 9_792 in all, 3 * 816 = 2_448 kept
    pytest.param(["diff", "{dir}/saved.json", "{dir}/three_blocks.json"], 2, "err",
                 "at components.attn_qkv.params: 9792 is not the sum of the blocks and outside, "
                 "2448", id="saved-3-of-12-blocks"),
    pytest.param(["diff", "{dir}/saved.json", "{dir}/scattered_blocks.json"], 2, "err",
                 "block indices 0, 5, 11 are not 0-2", id="saved-blocks-not-contiguous"),
    pytest.param(["diff", "{dir}/saved.json", "{dir}/duplicate_block.json"], 2, "err",
                 "block index 4 appears twice", id="saved-duplicate-block"),
    pytest.param(["diff", "{dir}/saved.json", "{dir}/unknown_component.json"], 2, "err",
                 "unknown component 'mlp_x' at components", id="saved-unknown-component"),
    pytest.param(["diff", "{dir}/saved.json", "{dir}/unknown_block_component.json"], 2, "err",
                 "unknown component 'mlp_x' at blocks.0.components", id="saved-unknown-in-block"),
    pytest.param(["diff", "{dir}/saved.json", "{dir}/no_outside.json"], 2, "err",
                 "at the top: 'outside' is a required property", id="saved-without-outside"),
    pytest.param(["diff", "{dir}/saved.json", "{dir}/saved.json"], 0, "out", "no change",
                 id="saved-intact"),
    # 10. crosscheck states the dtype, sweep the batch, in every format
    *(pytest.param(["crosscheck", "{dir}/models.py:tiny_vit", "--dtype", "bfloat16", "--peers",
                    "closed-form", "--format", fmt], 0, "out", text, id=f"crosscheck-dtype-{fmt}")
      for fmt, text in (("table", "input: batch 1, 3x32x32, bfloat16;"),
                        ("markdown", "input: batch 1, 3x32x32, bfloat16;"),
                        ("json", '"input_dtype": "bfloat16"'))),
    *(pytest.param(["sweep", "{dir}/models.py:tiny_vit", "--image-size", "32,64", "--batch-size",
                    "2", "--format", fmt], 0, "out", text, id=f"sweep-batch-{fmt}")
      for fmt, text in (("table", "input: batch 2, float32; 3x32x32, 3x64x64 (one per value)"),
                        ("markdown", "input: batch 2, float32; 3x32x32, 3x64x64"),
                        ("json", '"input_shape": [2, 3, 64, 64], "input_dtype": "float32"'))),
    # 11. an empty output path is refused when the command line is read, before any work
    *(pytest.param([*argv, option, ""], 2, "err",
                   f"argument {option}: expected a path, got ''", id=f"empty-{argv[0]}{option}")
      for argv, option in (
          (["analyze", "vit_b_16"], "--output"),
          (["check", "{dir}/budgets.toml"], "--output"),
          (["crosscheck", "vit_b_16"], "--output"),
          (["diff", "vit_b_16", "vit_b_32"], "--output"),
          (["formula", "vit_b_16"], "--output"),
          (["profile", "vit_b_16"], "--output"),
          (["profile", "vit_b_16"], "--roofline"),
          (["report", "vit_b_16"], "--out"),
          (["sweep", "vit_b_16", "--image-size", "224"], "--out"),
          (["sweep", "vit_b_16", "--image-size", "224"], "--figure"),
      )),
    # 11. a folder without config.json says so
    pytest.param(["analyze", "hf:{dir}/empty"], 2, "err", "no config.json in ", id="hf-empty-dir"),
    # 11. a peak outside any device's range is refused
    pytest.param(["profile", "vit_b_16", "--peak-tflops", "1e-300"], 2, "err",
                 "argument --peak-tflops: expected a peak from 0.001 to 100000 TFLOP/s, got 1e-300",
                 id="peak-far-too-small"),
    pytest.param(["profile", "vit_b_16", "--peak-tflops", "1e300"], 2, "err",
                 "expected a peak from 0.001 to 100000 TFLOP/s", id="peak-far-too-large"),
    # 11. module names with a pipe or a newline are escaped in table rows: the conv has
    # 3 * 4 * 8 * 8 + 4 = 772 params and 4 * 4 positions * 4 * 3 * 8 * 8 = 12_288 MACs, the
    # linear 64 * 10 + 10 = 650 params and 64 * 10 = 640 MACs
    pytest.param([*ODD, "--format", "markdown"], 0, "out", "| a\\|b | other | 772 | 12,288 |",
                 id="pipe-in-markdown"),
    pytest.param([*ODD, "--format", "markdown"], 0, "out", "| c\\nd | other | 650 | 640 |",
                 id="newline-in-markdown"),
    pytest.param(ODD, 0, "out", "\nc\\nd    other ", id="newline-in-table"),
    # 11. a 3-D patch embedding: a video input, its channels from the Conv3d
    pytest.param(["analyze", "{dir}/models.py:video"], 0, "out",
                 "input: batch 1, 3x16x224x224;", id="conv3d-video-input"),
    pytest.param(["analyze", "{dir}/models.py:video"], 0, "out",
                 "guessed 16 frames (the first convolution is 3-D and nothing declares the "
                 "frames); guessed 3 channels from the first convolution the image reaches",
                 id="conv3d-input-line"),
    pytest.param(["analyze", "{dir}/models.py:video", "--frames", "4", "--image-size", "32"], 0,
                 "out", "input from: frames given; image size given; guessed 3 channels from the "
                 "first convolution the image reaches\n", id="conv3d-frames-given"),
]


def _damaged(saved: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Copies of ``saved`` (12 blocks), each damaged in one way."""

    def edited(edit) -> dict[str, Any]:
        data = json.loads(json.dumps(saved))
        edit(data)
        return data

    def raise_macs(data: dict[str, Any], flops_too: bool) -> None:
        mlp = data["blocks"][3]["components"]["mlp"]
        mlp["macs"] += 10**12
        if flops_too:
            mlp["flops"] += 2 * 10**12

    def rename(components: dict[str, Any]) -> None:
        components["mlp_x"] = components.pop("mlp")

    def duplicate(data: dict[str, Any]) -> None:
        data["blocks"][5]["index"] = 4

    return {
        "raised_macs": edited(lambda d: raise_macs(d, False)),
        "raised_counts": edited(lambda d: raise_macs(d, True)),
        "three_blocks": edited(lambda d: d.update(blocks=d["blocks"][:3])),
        "scattered_blocks": edited(lambda d: d.update(blocks=[d["blocks"][i]
                                                              for i in (0, 5, 11)])),
        "duplicate_block": edited(duplicate),
        "unknown_component": edited(lambda d: rename(d["components"])),
        "unknown_block_component": edited(lambda d: rename(d["blocks"][0]["components"])),
        "no_outside": edited(lambda d: d.pop("outside")),
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The models of :data:`MODELS_PY`, an empty folder, a saved profile and its damages."""
    root = tmp_path_factory.mktemp("silent")
    (root / "models.py").write_text(MODELS_PY)
    (root / "empty").mkdir()
    saved = root / "saved.json"
    assert main(["analyze", f"{root}/models.py:tiny_vit", "--format", "json", "--output",
                 str(saved)]) == 0
    for name, data in _damaged(json.loads(saved.read_text())).items():
        (root / f"{name}.json").write_text(json.dumps(data))
    return root


def _one_line_json(out: str) -> str:
    """A JSON stdout on one line (``json.dumps``); any other stdout as it is."""
    try:
        return json.dumps(json.loads(out))
    except json.JSONDecodeError:
        return out


def _exit_code(argv: list[str]) -> int:
    """``vitprof ARGV``'s exit code (a usage error exits from argparse, as on the command line)."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)


@pytest.mark.parametrize(("argv", "code", "stream", "text"), CASES)
def test_case(folder: Path, argv: list[str], code: int, stream: str, text: str,
              capsys) -> None:
    returned = _exit_code([arg.replace("{dir}", str(folder)) for arg in argv])
    out, err = capsys.readouterr()
    assert returned == code, err
    if code == 2:
        assert out == "" and err.count("\n") == 1 and err.startswith("vitprof: error: "), err
    shown = _one_line_json(out) if stream == "out" else err
    assert text in shown, shown


def test_csv_keeps_odd_module_names_whole(folder: Path, capsys) -> None:
    """CSV quotes a name with a newline (the csv module's rule): it reads back whole."""
    assert _exit_code([*(a.replace("{dir}", str(folder)) for a in ODD), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [row["module"] for row in rows] == ["a|b", "c\nd"]


def test_a_block_that_holds_nothing_is_saved_as_zeros() -> None:
    """Blocks 0 and 2 ran ops, block 1 none: the profile still lists blocks 0, 1, 2 (the saved
    form's indices are contiguous), block 1 at zero, and the saved form passes its checks."""
    ops = (OpRecord("aten.mm", "blocks.0", Component.MLP, 0, 6, 0),
           OpRecord("aten.mm", "blocks.2", Component.MLP, 2, 4, 0),
           OpRecord("aten.mm", "head", Component.HEAD, None, 3, 0))
    profile = Profile("hand", (1, 3, 8, 8), "meta", "x", "graph", (), ops)
    assert [(b.index, b.total) for b in profile.blocks] == [
        (0, Counts(macs=6)), (1, Counts()), (2, Counts(macs=4))]
    data = versioned(profile.to_dict(), "profile")
    assert broken_invariant(data) is None
    assert data["outside"]["head"]["macs"] == 3 and data["outside"]["mlp"]["macs"] == 0


def test_the_api_refuses_an_absurd_peak_before_building() -> None:
    message = "peak_tflops: expected a peak from 0.001 to 100000 TFLOP/s, got 1e-300"
    with pytest.raises(UserError, match=re.escape(message)):
        profile_model("no_such_model", peak_tflops=1e-300)
