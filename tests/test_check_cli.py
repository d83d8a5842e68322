"""``vitprof check``: every exit code and every fail-closed case, through ``main([...])`` and
through a subprocess run of the installed console script; table, JSON and JUnit output; the
repository's own ``budgets.toml``.

The model of the small budgets is the note-002 CIFAR-ViT "tiny" row (N = 65 tokens, D = 192,
L = 12, M = 768, 10 classes); its closed forms are derived in tests/test_budget.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import BUDGET_MODELS_PY, MARKING_FACTORY_PY

from vitprof.cli.main import main
from vitprof.models.zoo import TORCHVISION_VITS, ZOO

REPO = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "vitprof"

TINY = "note002_cifar_vit_tiny"
TINY_PARAMS = 5_362_762  # closed form, tests/test_budget.py
TINY_MACS = 365_107_584  # closed form, tests/test_budget.py
TINY_ATTN_CORE_MACS = 19_468_800  # 12 x 2 x 65^2 x 192

# timm's vit_tiny_patch16_224 (D = 192, L = 12, M = 768, patch 16, 1000 classes) at 224 x 320:
# 14 x 20 = 280 patches, N = 281 tokens. Patches 280 x (3*16*16) x 192 = 41,287,680; one block
# 281 x (4*192^2 + 2*192*768) + 2 x 281^2 x 192 = 124,305,408 + 30,321,024 = 154,626,432, x 12
# = 1,855,517,184; head 192 x 1000 = 192,000: 41,287,680 + 1,855,517,184 + 192,000
WIDE_MACS = 1_896_996_864
# at its own 224 x 224 (196 patches, N = 197): 196 x 147,456 = 28,901,376; one block
# 197 x 442,368 + 2 x 197^2 x 192 = 87,146,496 + 14,902,656 = 102,049,152, x 12 = 1,224,589,824;
# + 192,000 = 1,253,683,200, which the wide entry's min_macs refuses
SQUARE_MACS = 1_253_683_200
OVERRIDE_WARNING = ("vitprof: warning: --image-size: every entry is checked at the command "
                    "line's input, not at the input its budget names, so its limits may not "
                    "have been written for it")


# Five explicit checks and the implicit max_unsupported_ops = 0 and max_self_checks = 0.
OK_CHECKS = ["max_params", "max_macs", "components.attn_core.min_macs",
             "components.attn_core.max_share", "blocks.min_count", "max_unsupported_ops",
             "max_self_checks"]

FILES = {
    "models.py": BUDGET_MODELS_PY,
    "marking.py": MARKING_FACTORY_PY,
    "ok.toml": f"""\
        [{TINY}]
        max_params = {TINY_PARAMS}
        max_macs = {TINY_MACS}
        [{TINY}.components]
        attn_core = {{ min_macs = {TINY_ATTN_CORE_MACS}, max_share = 0.054 }}
        [{TINY}.blocks]
        min_count = 12
        """,
    "over.toml": f"""\
        [within]
        model = "{TINY}"
        max_params = {TINY_PARAMS}

        [over]
        model = "{TINY}"
        max_params = {TINY_PARAMS - 1}
        [over.components]
        attn_core = {{ min_macs = {TINY_ATTN_CORE_MACS + 1} }}
        """,
    "fallback.toml": """\
        [data_dependent]
        model = "models.py:make"
        image_size = 16
        max_params = 410  # conv 3*4*4*8 + 8 = 392, head 8*2 + 2 = 18
        """,
    "typo.toml": """\
        [vit_b_16]
        image_size = 224
        max_parms = 86_600_000
        """,
    "bool.toml": "[vit_b_16]\nmax_params = true\n",
    "float.toml": "[vit_b_16]\nmax_macs = 1.5\n",
    "component.toml": "[vit_b_16]\nmax_params = 1\n[vit_b_16.components]\n"
                      "attn_cor = { max_share = 0.1 }\n",
    "component_key.toml": "[vit_b_16.components]\nattn_core = { min_macs = 1, max_shar = 0.1 }\n",
    "share.toml": "[vit_b_16.components]\nattn_core = { max_share = 1.5 }\n",
    "empty.toml": "",
    "malformed.toml": "[vit_b_16]\nmax_params = 1\n\n[vit_b_32]\nmax_params =\n",
    "no_limits.toml": "[vit_b_16]\nimage_size = 224\n",
    "build.toml": '[m]\nmax_params = 1\nmodel = "models.py:make_failing"\n',
    "analyze.toml": '[m]\nmax_params = 1\nmodel = "models.py:make_broken"\n',
    "unknown_model.toml": '[m]\nmax_params = 1\nmodel = "vit_b_17"\n',
    "late_bad_name.toml": '[first]\nmodel = "marking.py:make"\nimage_size = 8\n'
                          'max_params = 386\n[last]\nmax_params = 1\nmodel = "vit_b_17"\n',
    "image_size.toml": "[vit_b_16]\nimage_size = 225\nmax_params = 1\n",
    "huge.toml": "[vit_b_16]\nmax_params = 100_000_000_000_000_000_000_000_000_000\n",
    # limits written for 224 x 320: they hold there only
    "wide.toml": f"""\
        [wide]
        model = "timm:vit_tiny_patch16_224"
        max_macs = {WIDE_MACS}
        min_macs = {WIDE_MACS}
        """,
}

# (argv, exit code, what stdout / stderr must hold)
CASES = [
    pytest.param(["check", "ok.toml"], 0, "PASS: all 7 checks of 1 budget hold", id="all-hold"),
    pytest.param(["check", "over.toml"], 1, "FAIL: 2 of 7 checks failed: over.max_params, "
                 "over.components.attn_core.min_macs", id="limit-exceeded"),
    pytest.param(["check", "over.toml", "--entry", "within"], 0, "PASS: all 3 checks",
                 id="entry-selected"),
    pytest.param(["check", "fallback.toml"], 0, "counted on cpu with real tensors",
                 id="fallback-still-checks"),
    pytest.param(["check"], 2, "the following arguments are required: BUDGETS.toml",
                 id="usage-no-file"),
    pytest.param(["check", "ok.toml", "--format", "xml"], 2, "invalid choice: 'xml'",
                 id="usage-bad-format"),
    pytest.param(["check", "over.toml", "--entry", "nope"], 2,
                 "vitprof: error: over.toml: no entry named nope; entries: within, over",
                 id="unknown-entry"),
    pytest.param(["check", "missing.toml"], 2, "vitprof: error: missing.toml: no such budget file",
                 id="missing-file"),
    pytest.param(["check", "typo.toml"], 2, "vitprof: error: typo.toml:3: entry 'vit_b_16', key "
                 "'max_parms': unknown key 'max_parms'; did you mean 'max_params'?",
                 id="unknown-key"),
    pytest.param(["check", "bool.toml"], 2, "bool.toml:2: entry 'vit_b_16', key 'max_params': "
                 "expected a whole number >= 0, got true (a boolean)", id="bool-for-int"),
    pytest.param(["check", "float.toml"], 2, "float.toml:2: entry 'vit_b_16', key 'max_macs': "
                 "expected a whole number >= 0, got 1.5", id="float-for-int"),
    pytest.param(["check", "component.toml"], 2, "component.toml:4: entry 'vit_b_16', key "
                 "'components.attn_cor': unknown component 'attn_cor'", id="unknown-component"),
    pytest.param(["check", "component_key.toml"], 2, "component_key.toml:2: entry 'vit_b_16', "
                 "key 'components.attn_core.max_shar'", id="unknown-key-in-component-table"),
    pytest.param(["check", "share.toml"], 2, "share.toml:2: entry 'vit_b_16', key "
                 "'components.attn_core.max_share': expected a share in [0, 1], got 1.5",
                 id="share-out-of-range"),
    pytest.param(["check", "empty.toml"], 2, "empty.toml: no budget entries", id="empty-file"),
    pytest.param(["check", "malformed.toml"], 2, "malformed.toml:5: malformed TOML in entry "
                 "'vit_b_32': Invalid value (at line 5", id="malformed-toml"),
    pytest.param(["check", "no_limits.toml"], 2, "no_limits.toml:1: entry 'vit_b_16': sets no "
                 "limit", id="entry-without-limits"),
    pytest.param(["check", "build.toml"], 2, "build.toml:3: entry 'm', key 'model': building "
                 "models.py:make_failing failed: ValueError: cannot build this model",
                 id="model-fails-to-build"),
    pytest.param(["check", "analyze.toml"], 2, "analyze.toml:3: entry 'm', key 'model': running "
                 "models.py:make_broken failed: RuntimeError: forward is broken",
                 id="model-fails-to-analyze"),
    pytest.param(["check", "unknown_model.toml"], 2, "unknown_model.toml:3: entry 'm', key "
                 "'model': unknown model 'vit_b_17'", id="unknown-model"),
    pytest.param(["check", "late_bad_name.toml"], 2, "late_bad_name.toml:7: entry 'last', key "
                 "'model': unknown model 'vit_b_17'", id="bad-name-in-the-last-entry"),
    pytest.param(["check", "image_size.toml"], 2, "image_size.toml:2: entry 'vit_b_16', key "
                 "'image_size': building vit_b_16 at image size 225 failed: AssertionError: "
                 "Input shape indivisible by patch size!", id="image-size-the-model-refuses"),
    pytest.param(["check", "huge.toml"], 2, "huge.toml:2: entry 'vit_b_16', key 'max_params': "
                 "100000000000000000000000000000 is outside TOML's 64-bit integer range",
                 id="integer-out-of-toml-range"),
    pytest.param(["check", "wide.toml", "--image-size", "224x320"], 0,
                 "PASS: all 4 checks of 1 budget hold", id="input-override"),
    pytest.param(["check", "wide.toml"], 1, "FAIL: 1 of 4 checks failed: wide.min_macs",
                 id="input-of-the-entry"),
    pytest.param(["check", "ok.toml", "--image-size", "224x"], 2,
                 "expected N or HxW of positive integers, got '224x'", id="override-no-width"),
    pytest.param(["check", "ok.toml", "--image-size", "0x224"], 2,
                 "expected N or HxW of positive integers, got '0x224'", id="override-zero-height"),
    pytest.param(["check", "ok.toml", "--frames", "0"], 2,
                 "argument --frames: expected a positive integer, got 0",
                 id="override-zero-frames"),
    pytest.param(["check", "ok.toml", "--dtype", "float64"], 2,
                 "argument --dtype: invalid choice: 'float64'", id="override-unknown-dtype"),
    pytest.param(["check", "ok.toml", "--input-shape", "1,3,32,32", "--frames", "2"], 2,
                 "--input-shape excludes --frames", id="override-input-shape-conflict"),
    pytest.param(["check", "ok.toml", "--update-baselines", "--dtype", "bfloat16"], 2,
                 "--update-baselines records each baseline at the entry's own input, not at the "
                 "input of --dtype", id="override-with-update-baselines"),
    # 34 = 8 x 4 + 2: the patch convolution floors it to the 8 x 8 grid of 32, every limit holds
    pytest.param(["check", "ok.toml", "--image-size", "34"], 0,
                 f"{TINY}: warning: patch_embed.proj (stride 4) floors its 34x34 input to 8x8, "
                 "leaving the last 2 rows and 2 columns unread", id="override-floored"),
    pytest.param(["check", "ok.toml", "--frames", "4"], 2,
                 f"ok.toml:1: entry '{TINY}': running {TINY} failed: RuntimeError: ",
                 id="override-the-model-rejects"),
]
# Through the console script, these run in every test run (exit codes 0 and 1 through the
# shell); the rest are left to -m exhaustive (each subprocess imports torch: about 3 s of CPU,
# 100 s for all), their twins being test_main's cases, the same argv, code and message in
# process. Exit code 2 through the console script:
# tests/test_cli.py::test_console_script_and_module_entry_point.
SCRIPT_FAST = {"all-hold", "limit-exceeded"}


@pytest.fixture
def budgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding FILES, made the working directory."""
    for name, text in FILES.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_script(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.is_file(), f"console script not installed at {SCRIPT}"
    return subprocess.run([str(SCRIPT), *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def assert_outcome(argv: list[str], code: int, out: str, err: str, expected_code: int,
                   expected: str) -> None:
    """The exit code, no traceback, and: ONE error line (a usage error of the check command, or
    one that starts with the budget file's name), or the expected text in the report."""
    assert code == expected_code, out + err
    assert "Traceback" not in err
    if expected_code == 2:
        (line,) = err.strip().splitlines()
        usage_error = line.endswith("(see 'vitprof check --help')")
        assert line.startswith("vitprof: error: " if usage_error else f"vitprof: error: {argv[1]}")
        assert expected in line
    else:
        assert expected in out


@pytest.mark.parametrize(("argv", "code", "expected"), CASES)
def test_main(budgets: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int,
              expected: str) -> None:
    try:
        result = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        result = exit_.code
    captured = capsys.readouterr()
    assert_outcome(argv, result, captured.out, captured.err, code, expected)


SCRIPT_CASES = [
    pytest.param(*case.values, id=case.id,
                 marks=() if case.id in SCRIPT_FAST else (pytest.mark.slow,
                                                          pytest.mark.exhaustive))
    for case in CASES
]


@pytest.mark.parametrize(("argv", "code", "expected"), SCRIPT_CASES)
def test_console_script(budgets: Path, argv: list[str], code: int, expected: str) -> None:
    proc = run_script(argv, budgets)
    assert_outcome(argv, proc.returncode, proc.stdout, proc.stderr, code, expected)


def test_file_is_validated_before_any_model_runs(budgets: Path) -> None:
    assert main(["check", "late_bad_name.toml"]) == 2  # its last entry names no model
    assert not (budgets / "factory_was_called").exists()
    assert main(["check", "late_bad_name.toml", "--entry", "first"]) == 2  # the file is broken
    assert not (budgets / "factory_was_called").exists()


def test_fallback_is_reported(budgets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "fallback.toml", "--format", "json"]) == 0
    captured = capsys.readouterr()
    (entry,) = json.loads(captured.out)["budgets"]
    assert entry["device"] == "cpu"
    assert entry["fallback"].startswith("meta device failed (RuntimeError")
    assert [c["verdict"] for c in entry["checks"]] == ["pass", "pass", "pass"]
    assert "vitprof: warning: entry 'data_dependent': meta device failed" in captured.err


# --------------------------------------------------------------------------- formats


def test_table_columns(budgets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "over.toml"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("convention: MACs = multiply-accumulates")
    header = next(line for line in lines if line.startswith("check"))
    assert header.split() == ["check", "limit", "actual", "headroom", "verdict"]
    row = next(line for line in lines if line.startswith("over.max_params"))
    # limit TINY_PARAMS - 1, actual TINY_PARAMS: one over, -1 / 5,362,761 = -0.0000186% (two
    # significant digits; never "-0.00%")
    assert row.split() == ["over.max_params", "<=", "5,362,761", "5,362,762", "-1",
                           "(-0.000019%)", "fail"]


def test_json(budgets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "over.toml", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False
    assert data["convention"].startswith("MACs = multiply-accumulates")
    within, over = data["budgets"]
    assert (within["entry"], within["passed"], over["entry"], over["passed"]) == (
        "within", True, "over", False)
    failed = {c["key"]: (c["limit"], c["actual"], c["headroom"])
              for c in over["checks"] if c["verdict"] == "fail"}
    assert failed == {
        "max_params": (TINY_PARAMS - 1, TINY_PARAMS, -1),
        "components.attn_core.min_macs": (TINY_ATTN_CORE_MACS + 1, TINY_ATTN_CORE_MACS, -1),
    }


def test_junit_one_testcase_per_check(budgets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "ok.toml", "--format", "junit"]) == 0
    root = ET.fromstring(capsys.readouterr().out)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == OK_CHECKS
    assert {c.get("classname") for c in cases} == {TINY}
    assert root.get("tests") == str(len(OK_CHECKS))  # 7
    assert root.get("failures") == "0"
    assert all(c.find("failure") is None for c in cases)


def test_junit_failures_to_a_file(budgets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "over.toml", "--format", "junit", "--output", "report.xml"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("vitprof: FAIL: 2 of 7 checks failed")
    root = ET.parse(budgets / "report.xml").getroot()
    # within: max_params + 2 implicit; over: max_params, attn_core.min_macs + 2 implicit
    assert (root.get("tests"), root.get("failures")) == ("7", "2")
    failing = [(s.get("name"), c.get("name")) for s in root.iter("testsuite")
               for c in s.findall("testcase") if c.find("failure") is not None]
    assert failing == [("over", "max_params"), ("over", "components.attn_core.min_macs")]


def test_junit_fallback_property(budgets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "fallback.toml", "--format", "junit"]) == 0
    suite = ET.fromstring(capsys.readouterr().out).find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["device"] == "cpu"
    assert properties["fallback"].startswith("meta device failed")
    assert "fallback: meta device failed" in suite.find("system-out").text


# --------------------------------------------------------------------------- repo budgets


@pytest.mark.slow
def test_repo_budgets_pass() -> None:
    proc = run_script(["check", "budgets.toml", "--format", "json"], REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["passed"] is True
    entries = {b["entry"] for b in data["budgets"]}
    notes = {name for name, entry in ZOO.items() if entry.family == "notes"}
    assert entries == {*TORCHVISION_VITS, "vit_22b", "hf:vit-base-patch16-224", *notes}
    for budget in data["budgets"]:
        keys = {c["key"] for c in budget["checks"]}
        assert {"max_params", "max_macs", "components.attn_core.min_macs"} <= keys


def test_tightened_repo_budgets_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the repo's vit_b_16 entry (test_repo_budgets_pass checks every other entry as it is)
    text = (REPO / "budgets.toml").read_text()
    text = text[:text.index("\n[vit_b_32]\n")]
    # vit_b_16 has 86,567,656 params (published): a limit of 86,500,000 is exceeded
    tightened = text.replace("max_params = 86_600_000  # published 86,567,656",
                             "max_params = 86_500_000  # published 86,567,656", 1)
    assert tightened != text
    (tmp_path / "budgets.toml").write_text(tightened)
    assert main(["check", str(tmp_path / "budgets.toml"), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [b["entry"] for b in data["budgets"]] == ["vit_b_16"]
    failed = [c["check"] for b in data["budgets"] for c in b["checks"] if c["verdict"] == "fail"]
    assert failed == ["vit_b_16.max_params"]


def test_help_says_an_input_override_replaces_each_entrys_input(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("The input options below put another input in place of every entry's for this run"
            in help_text)
    assert "--image-size N|HxW" in help_text and "--input-shape B,C,..." in help_text


def test_input_override_is_warned_and_named_in_every_format(
    budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check", "wide.toml", "--image-size", "224x320"]
    assert main([*argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert OVERRIDE_WARNING in captured.err.splitlines()
    (entry,) = json.loads(captured.out)["budgets"]
    assert entry["input_shape"] == [1, 3, 224, 320]
    assert entry["input_override"] == "image_size 224x320"
    assert {c["key"]: c["actual"] for c in entry["checks"]}["max_macs"] == WIDE_MACS
    assert main(argv) == 0
    assert ("wide: model timm:vit_tiny_patch16_224, input 1x3x224x320, on meta (input override: "
            "image_size 224x320)") in capsys.readouterr().out
    assert main([*argv, "--format", "junit"]) == 0
    suite = ET.fromstring(capsys.readouterr().out).find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert (properties["input_shape"], properties["input_override"]) == (
        "1x3x224x320", "image_size 224x320")


def test_entry_at_its_own_input_names_no_override(
    budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "wide.toml", "--format", "json"]) == 1
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    (entry,) = json.loads(captured.out)["budgets"]
    assert (entry["input_shape"], entry["input_override"]) == ([1, 3, 224, 224], None)
    assert {c["key"]: c["actual"] for c in entry["checks"]}["min_macs"] == SQUARE_MACS


def test_input_shape_override_replaces_the_whole_input(
    budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the entry's own 32 x 32 image at batch 2 in bfloat16: twice the MACs of one image
    assert main(["check", "ok.toml", "--input-shape", "2,3,32,32", "--dtype", "bfloat16",
                 "--format", "json"]) == 1
    (entry,) = json.loads(capsys.readouterr().out)["budgets"]
    assert entry["input_override"] == "dtype bfloat16, input_shape 2x3x32x32"
    assert entry["inputs"] == [{"name": "args[0]", "shape": [2, 3, 32, 32], "dtype": "bfloat16"}]
    assert {c["key"]: c["actual"] for c in entry["checks"]}["max_macs"] == 2 * TINY_MACS
