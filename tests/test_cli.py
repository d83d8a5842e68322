"""The command line: exit codes, formats, and one-line errors for user mistakes."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vitprof.cli import main
from vitprof.records import COMPONENTS

FACTORY_FILE = '''
import torch
from torch import nn

def good(image_size=32, num_classes=10):
    from vitprof.models.note002 import build_cifar_vit
    return build_cifar_vit(image_size=image_size, num_classes=num_classes, depth=1,
                           embed_dim=64, num_heads=4)

def not_a_module():
    return 42

def crashes():
    raise RuntimeError("factory exploded")
'''


@pytest.fixture
def factory_file(tmp_path: Path) -> Path:
    path = tmp_path / "mymodels.py"
    path.write_text(FACTORY_FILE)
    return path


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_table(capsys) -> None:
    code, out, err = run(["analyze", "vit_b_16"], capsys)
    assert code == 0 and err == ""
    assert "17,563,828,224" in out and "FLOPs = 2 x MACs" in out
    for component in COMPONENTS:
        assert component.value in out


def test_analyze_json_shape(capsys) -> None:
    code, out, _ = run(["analyze", "vit_b_32", "--format", "json", "--batch-size", "2"], capsys)
    data = json.loads(out)
    assert code == 0
    assert data["input_shape"] == [2, 3, 224, 224]
    assert data["device"] == "meta" and data["fallback"] is None
    assert set(data["components"]) == {c.value for c in COMPONENTS}
    assert set(data["totals"]) == {"params", "macs", "flops", "vector_flops"}
    assert data["totals"]["flops"] == 2 * data["totals"]["macs"]
    assert len(data["blocks"]) == 12 and data["blocks"][0]["index"] == 0
    assert "macs" in data["units"] and data["unsupported_ops"] == {}
    assert data["totals"]["macs"] == sum(c["macs"] for c in data["components"].values())


@pytest.mark.parametrize("by", ["component", "block", "module", "op"])
def test_csv_rows_sum_to_totals(by: str, capsys) -> None:
    code, out, _ = run(["analyze", "vit_b_32", "--by", by, "--format", "csv"], capsys)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0
    # vit_b_32: 88,224,232 params (torchvision num_params)
    assert sum(int(r["params"]) for r in rows) == 88_224_232
    # 49 patches: 49*768*3072 + 12*(50*768*2304 + 2*50^2*768 + 50*768^2 + 2*50*768*3072) + 768000
    expected_macs = 49 * 768 * 3072 + 12 * (
        50 * 768 * 2304 + 2 * 50**2 * 768 + 50 * 768**2 + 2 * 50 * 768 * 3072
    ) + 768_000
    assert sum(int(r["macs"]) for r in rows) == expected_macs


def test_markdown_and_output_file(tmp_path: Path, capsys) -> None:
    target = tmp_path / "out.md"
    code, out, _ = run(["analyze", "vit_b_32", "--format", "markdown", "--by", "block",
                        "--output", str(target)], capsys)
    assert code == 0 and out == ""
    text = target.read_text()
    assert text.count("| outside |") >= 4 and "| total |" in text


def test_factory_file(factory_file: Path, capsys) -> None:
    code, out, _ = run(["analyze", f"{factory_file}:good", "--image-size", "32",
                        "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["components"]["other"]["macs"] == 0


def test_package_module_factory(capsys) -> None:
    code, out, _ = run(["analyze", "vitprof.models.note002:build_cifar_vit", "--format", "json"],
                       capsys)
    data = json.loads(out)
    assert code == 0 and data["input_shape"] == [1, 3, 32, 32]
    # the note 002 CIFAR-ViT: 6 blocks of 12*512^2 + 13*512, plus 127*512 + 10 outside
    assert data["totals"]["params"] == 6 * (12 * 512**2 + 13 * 512) + 127 * 512 + 10


def test_map_option(capsys) -> None:
    code, out, _ = run(["analyze", "vit_b_32", "--map", "^heads=other", "--format", "json"],
                       capsys)
    assert code == 0
    # the head: 768 * 1000 + 1000 params, 768 * 1000 MACs
    assert json.loads(out)["components"]["other"]["params"] == 769_000


@pytest.mark.parametrize("given", ["file", "directory"])
def test_hf_config_file(tmp_path: Path, given: str, capsys) -> None:
    config = {"model_type": "vit", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 128, "image_size": 32,
              "patch_size": 8, "num_labels": 10}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    target = path if given == "file" else tmp_path
    code, out, _ = run(["analyze", f"hf:{target}", "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["family"] == "huggingface"
    assert data["input_shape"] == [1, 3, 32, 32]
    # 2 blocks x 2 x 17^2 x 64 = 73_984
    assert data["components"]["attn_core"]["macs"] == 73_984


def test_timm_name_with_a_pretrained_tag_takes_its_architecture(capsys) -> None:
    code, out, _ = run(["analyze", "timm:vit_tiny_patch16_224.augreg_in21k", "--format", "json"],
                       capsys)
    assert code == 0
    # the in21k checkpoint's head: 192 * 21_843 + 21_843 = 4_215_699 params
    assert json.loads(out)["components"]["head"]["params"] == 192 * 21_843 + 21_843


def test_models_lists_the_zoo(capsys) -> None:
    code, out, _ = run(["models"], capsys)
    assert code == 0
    for name in ("vit_b_16", "vit_h_14", "note001_vit_b16", "note002_cifar_vit_large",
                 "note004_vit_b16", "hf:vit-base-patch16-224", "vit_22b"):
        assert name in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["analyze", "vit_b_61"], "unknown model 'vit_b_61'; did you mean",
                     id="unknown-model"),
        pytest.param(["analyze", "vit_b_16", "--image-size", "225"],
                     "image size 225 is not divisible by the patch size 16", id="bad-size"),
        pytest.param(["analyze", "timm:vit_tiny_patch16_22"], "unknown timm model",
                     id="unknown-timm"),
        pytest.param(["analyze", "timm:vit_tiny_patch16_22.augreg_in21k"],
                     "did you mean timm:vit_tiny_patch16_224", id="unknown-timm-with-tag"),
        pytest.param(["analyze", "no/such/file.py:make"], "no such file", id="missing-file"),
        pytest.param(["analyze", "no_such_package_xyz:make"], "cannot import no_such_package_xyz",
                     id="missing-module"),
        pytest.param(["analyze", "hf:missing.json"], "no such file", id="missing-hf-config"),
        pytest.param(["diff", "vit_b_16", "vit_b_61"], "unknown model 'vit_b_61'",
                     id="diff-unknown-model"),
    ],
)
def test_user_errors_are_one_line(argv: list[str], message: str, capsys) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("vitprof: error: ")
    assert message in err


@pytest.mark.parametrize(
    ("attribute", "message"),
    [("not_a_module", "returned int, not an nn.Module"), ("crashes", "factory exploded"),
     ("absent", "has no callable named 'absent'")],
)
def test_bad_factories(factory_file: Path, attribute: str, message: str, capsys) -> None:
    code, _, err = run(["analyze", f"{factory_file}:{attribute}"], capsys)
    assert code == 2 and message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{not json", "JSONDecodeError", id="not-json"),
        pytest.param("[1, 2]", "no 'model_type' key", id="not-an-object"),
        pytest.param('{"hidden_size": 64}', "no 'model_type' key", id="no-model-type"),
        pytest.param('{"model_type": "vit", "hidden_size": "wide"}', "'hidden_size'",
                     id="field-of-wrong-type"),
    ],
)
def test_malformed_hf_config(tmp_path: Path, text: str, message: str, capsys) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    code, _, err = run(["analyze", f"hf:{path}"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"vitprof: error: malformed Hugging Face config {path}: ")
    assert message in err


def test_missing_optional_package_names_the_extra(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "timm", None)
    code, _, err = run(["analyze", "timm:vit_tiny_patch16_224"], capsys)
    assert code == 2 and "pip install 'vitprof[timm]'" in err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["analyze", "vit_b_16", "--batch-size", "0"], id="batch-zero"),
        pytest.param(["analyze", "vit_b_16", "--device", "tpu"], id="bad-device"),
        pytest.param(["analyze", "vit_b_16", "--format", "xml"], id="bad-format"),
        pytest.param(["analyze", "vit_b_16", "--map", "heads=nowhere"], id="bad-component"),
        pytest.param(["analyze", "vit_b_16", "--map", "(=attn_core"], id="bad-regex"),
        pytest.param(["analyze", "vit_b_16", "--mode", "eval"], id="bad-mode"),
        pytest.param(["profile", "vit_b_16", "--device", "meta"], id="meta-is-not-measurable"),
        pytest.param(["profile", "vit_b_16", "--dtype", "float64"], id="bad-dtype"),
        pytest.param(["profile", "vit_b_16", "--iters", "0"], id="zero-iters"),
        pytest.param(["profile", "vit_b_16", "--warmup", "-1"], id="negative-warmup"),
        pytest.param(["profile", "vit_b_16", "--peak-tflops", "0"], id="zero-peak"),
        pytest.param(["analyze"], id="no-model"),
        pytest.param(["diff", "vit_b_16"], id="diff-one-side"),
        pytest.param(["diff", "vit_b_16", "vit_b_32", "--fail-above", "lots"],
                     id="diff-bad-fail-above"),
        pytest.param([], id="no-command"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys) -> None:
    """One line on stderr, naming the sub-command and its help, not argparse's usage block."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    prog = " ".join(["vitprof", *argv[:1]])
    assert line.startswith(f"{prog}: error: ") and line.endswith(f"(see '{prog} --help')")


def test_console_script_and_module_entry_point() -> None:
    script = Path(sys.executable).with_name("vitprof")
    result = subprocess.run([str(script), "analyze", "nope"], capture_output=True, text=True)
    assert result.returncode == 2 and "unknown model 'nope'" in result.stderr
    result = subprocess.run([sys.executable, "-m", "vitprof", "analyze", "vit_b_32",
                             "--format", "json"], capture_output=True, text=True)
    assert result.returncode == 0 and json.loads(result.stdout)["model"] == "vit_b_32"
