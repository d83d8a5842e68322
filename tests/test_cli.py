"""The command line: exit codes, formats, and one-line errors for user mistakes."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vitprof.cli import main
from vitprof.records import COMPONENTS

FACTORY_FILE = '''
import sys
import time

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

def loud(image_size=32, num_classes=10):
    """good() whose building and whose every forward print to stdout."""
    print("factory prints")
    model = good(image_size, num_classes)
    model.register_forward_pre_hook(lambda module, args: print("forward prints"))
    return model

def exits_3():
    sys.exit(3)

def exits_bye():
    sys.exit("bye")

def sleeps():
    print("building", file=sys.stderr, flush=True)
    time.sleep(60)

def slow(image_size=32, num_classes=10):
    time.sleep(2.5)
    return good(image_size, num_classes)
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
        pytest.param(["sweep", "vit_b_16", "--image-size=-16,224"],
                     "sweep values must be positive, got -16", id="negative-sweep-size"),
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
     ("absent", "has no callable named 'absent'"),
     ("exits_3", "error: the model's code called sys.exit(3) while vitprof ran it"),
     ("exits_bye", "error: the model's code called sys.exit('bye') while vitprof ran it")],
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
    ("argv", "message"),
    [
        pytest.param(["analyze", "vit_b_16", "--batch-size", "0"], "", id="batch-zero"),
        pytest.param(["analyze", "vit_b_16", "--device", "tpu"], "", id="bad-device"),
        pytest.param(["analyze", "vit_b_16", "--format", "xml"], "", id="bad-format"),
        pytest.param(["analyze", "vit_b_16", "--map", "heads=nowhere"], "", id="bad-component"),
        pytest.param(["analyze", "vit_b_16", "--map", "(=attn_core"], "", id="bad-regex"),
        pytest.param(["analyze", "vit_b_16", "--mode", "eval"], "", id="bad-mode"),
        pytest.param(["profile", "vit_b_16", "--device", "meta"], "", id="meta-is-not-measurable"),
        pytest.param(["profile", "vit_b_16", "--dtype", "float64"], "", id="bad-dtype"),
        pytest.param(["profile", "vit_b_16", "--iters", "0"], "", id="zero-iters"),
        pytest.param(["profile", "vit_b_16", "--warmup", "-1"], "", id="negative-warmup"),
        pytest.param(["profile", "vit_b_16", "--peak-tflops", "0"], "", id="zero-peak"),
        pytest.param(["profile", "vit_b_16", "--peak-tflops", "inf"],
                     "expected a finite positive number, got inf", id="infinite-peak"),
        pytest.param(["profile", "vit_b_16", "--peak-tflops", "nan"],
                     "expected a finite positive number, got nan", id="nan-peak"),
        pytest.param(["sweep", "vit_b_16", "--image-size", "-16,224"],
                     "expected one argument; a value that starts with '-' is written OPTION=VALUE",
                     id="dash-value-needs-equals"),
        pytest.param(["analyze"], "", id="no-model"),
        pytest.param([], "", id="no-command"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], message: str, capsys) -> None:
    """One line on stderr with the prefix of user errors, naming the sub-command's help, not
    argparse's usage block."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    prog = " ".join(["vitprof", *argv[:1]])
    assert line.startswith("vitprof: error: ") and line.endswith(f"(see '{prog} --help')")
    assert message in line


def test_console_script_and_module_entry_point() -> None:
    script = Path(sys.executable).with_name("vitprof")
    result = subprocess.run([str(script), "analyze", "nope"], capture_output=True, text=True)
    assert result.returncode == 2 and "unknown model 'nope'" in result.stderr
    result = subprocess.run([sys.executable, "-m", "vitprof", "analyze", "vit_b_32",
                             "--format", "json"], capture_output=True, text=True)
    assert result.returncode == 0 and json.loads(result.stdout)["model"] == "vit_b_32"


def _csv_table(out: str) -> list[dict[str, str]]:
    """The rows of a component CSV; its header must be the first line."""
    reader = csv.DictReader(io.StringIO(out))
    assert reader.fieldnames is not None and reader.fieldnames[0] == "component"
    return list(reader)


def _written_files(out: str) -> list[Path]:
    """``report``'s result: one written file per line."""
    paths = [Path(line) for line in out.splitlines()]
    assert paths and all(path.is_file() for path in paths)
    return paths


PROFILE_ONCE = ["--iters", "1", "--warmup", "0", "--peak-tflops", "0.05", "--no-progress"]
BOTH_PRINTS = ("factory prints", "forward prints")


# Every sub-command that builds a model, with mymodels.py:loud, which prints at build and in
# every forward; formula infers the spec from the built model and runs no forward.
@pytest.mark.parametrize(
    ("argv", "parse", "prints"),
    [
        pytest.param(["analyze", "mymodels.py:loud", "--format", "json"], json.loads, BOTH_PRINTS,
                     id="analyze-json"),
        pytest.param(["analyze", "mymodels.py:loud", "--format", "csv"], _csv_table, BOTH_PRINTS,
                     id="analyze-csv"),
        pytest.param(["check", "loud.toml", "--format", "json"], json.loads, BOTH_PRINTS,
                     id="check-json"),
        pytest.param(["crosscheck", "mymodels.py:loud", "--format", "json", "--peers",
                      "closed-form,flopcounter-meta"], json.loads, BOTH_PRINTS,
                     id="crosscheck-json"),
        pytest.param(["profile", "mymodels.py:loud", *PROFILE_ONCE, "--format", "json"],
                     json.loads, BOTH_PRINTS, id="profile-json"),
        pytest.param(["report", "mymodels.py:loud", "--out", "reports"], _written_files,
                     BOTH_PRINTS, id="report"),
        pytest.param(["sweep", "mymodels.py:loud", "--image-size", "16,32", "--format", "json"],
                     json.loads, BOTH_PRINTS, id="sweep-json"),
        pytest.param(["formula", "mymodels.py:loud", "--format", "json"], json.loads,
                     ("factory prints",), id="formula-json"),
    ],
)
def test_model_prints_go_to_stderr(factory_file: Path, monkeypatch, capsys, argv: list[str],
                                   parse, prints: tuple[str, ...]) -> None:
    """stdout carries only the result, whatever the model prints; its prints reach stderr."""
    monkeypatch.chdir(factory_file.parent)
    Path("loud.toml").write_text('[loud]\nmodel = "mymodels.py:loud"\nmax_params = 10_000_000\n')
    code, out, err = run(argv, capsys)
    assert code == 0, err
    parse(out)
    assert "prints" not in out
    for text in prints:
        assert text in err


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown"])
def test_output_file_holds_what_stdout_gets(fmt: str, tmp_path: Path, capsys) -> None:
    """--output FILE writes the same text as stdout, final newline included."""
    argv = ["analyze", "vit_b_32", "--format", fmt]
    _, printed, _ = run(argv, capsys)
    target = tmp_path / f"out.{fmt}"
    code, out, _ = run([*argv, "--output", str(target)], capsys)
    assert code == 0 and out == ""
    assert target.read_text() == printed and printed.endswith("\n")


@pytest.mark.parametrize(("terminal", "notices"), [(True, 1), (False, 0)])
def test_slow_build_says_so_once_on_a_terminal(factory_file: Path, monkeypatch, capsys,
                                                terminal: bool, notices: int) -> None:
    """A factory that takes 2.5 s: one notice line after 2 s when stderr is a terminal."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    code, out, err = run(["analyze", f"{factory_file}:slow", "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["model"] == f"{factory_file}:slow"
    assert err.count(f"vitprof: building {factory_file}:slow ...\n") == notices


def test_help_still_exits_0(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "--help"])
    assert exit_info.value.code == 0 and "usage: vitprof analyze" in capsys.readouterr().out


def test_interrupt_is_one_line(factory_file: Path) -> None:
    """SIGINT while a factory runs, then a second one while vitprof exits (a second Ctrl-C used
    to interrupt torch's exit hooks with a traceback): exactly one line and exit code 130."""
    process = subprocess.Popen(
        [sys.executable, "-m", "vitprof", "analyze", f"{factory_file}:sleeps"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Python keeps SIGINT ignored if its parent ignores it (a background job): restore it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr.readline() == "building\n"
    process.send_signal(signal.SIGINT)
    time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    assert process.stderr.read() == "vitprof: interrupted\n"
    assert process.stdout.read() == ""


def test_cli_module_imports_no_torch() -> None:
    """Importing ``vitprof.cli`` (what the console script does before calling main) leaves torch
    to main's own imports, so an interrupt during those ends in main's one line too."""
    code = "import sys, vitprof.cli; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout == "False\n"
