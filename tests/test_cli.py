"""The command line: exit codes, formats, and one-line errors for user mistakes."""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import (
    BUDGET_MODELS_PY,
    NO_FORMULA_WARNING,
    NOT_A_VIT_WARNING,
    not_root,
    run_commands_in_one_interpreter,
)
from test_readme import subparsers

from vitprof import analyze
from vitprof.cli import main as cli_main
from vitprof.cli.main import build_parser, main
from vitprof.core.records import COMPONENTS, Counts
from vitprof.core.vocab import View
from vitprof.models.zoo import ZOO
from vitprof.render.formats import choices

FACTORY_FILE = '''
import sys
import time

import torch
from torch import nn

def good(image_size=32, num_classes=10):
    from vitprof.models.notes.note002 import build_cifar_vit
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


# The factory file's `good` model (note 002 layout, depth 1, width 64, 4 heads, MLP 256, patch 4
# at 32 px: 64 patches + the class token = 65 tokens, 10 classes):
# params 12*64^2 + 13*64 in the block + 127*64 + 10 outside = 58_122;
# MACs 64*48*64 patches + 65*64*192 qkv + 2*65^2*64 core + 65*64*64 proj + 2*65*64*256 MLP
#   + 64*10 head = 3_932_928
GOOD_PARAMS = 12 * 64**2 + 13 * 64 + 127 * 64 + 10
GOOD_MACS = (64 * 48 * 64 + 65 * 64 * 192 + 2 * 65**2 * 64 + 65 * 64 * 64 + 2 * 65 * 64 * 256
             + 64 * 10)
TOTAL_KEYS = ("params", "macs", "flops", "vector_flops")


def _ints(cells: list[str]) -> dict[str, int]:
    """The four counts of a total row (params, MACs, FLOPs, vector FLOPs) before its % MACs."""
    assert cells[-1] == "100.00%"
    return {key: int(c.replace(",", "")) for key, c in zip(TOTAL_KEYS, cells[-5:-1], strict=True)}


def view_totals(text: str, fmt: str, by: str) -> dict[str, int]:
    """Parse one analyze output and return its view's totals (the first table's total row)."""
    if fmt == "table":
        row = next(line for line in text.splitlines() if line.split()[:1] == ["total"])
        return _ints(row.split())
    if fmt == "markdown":
        row = next(line for line in text.splitlines() if line.startswith("| total |"))
        return _ints([c.strip() for c in row.strip("|").split("|")])
    if fmt == "csv":
        lines = [line for line in text.splitlines() if not line.startswith("#")]
        rows = list(csv.DictReader(lines))
        return {key: sum(int(r[key]) for r in rows) for key in TOTAL_KEYS}
    data = json.loads(text)
    for row in data.get(f"by_{by}", []):  # the module and op views' rows add up to the totals
        assert set(TOTAL_KEYS) <= set(row)
    if f"by_{by}" in data:
        rows = data[f"by_{by}"]
        assert {key: sum(r[key] for r in rows) for key in TOTAL_KEYS} == data["totals"]
    return data["totals"]


@pytest.mark.parametrize("mode", ["inference", "train"])
@pytest.mark.parametrize("fmt", choices("analyze"))
@pytest.mark.parametrize("by", list(View))
def test_every_view_in_every_format_adds_up(factory_file: Path, by: str, fmt: str, mode: str,
                                            capsys) -> None:
    """Each view parses in each format and its total row is the component total."""
    model = f"{factory_file}:good"
    code, out, err = run(["analyze", model, "--image-size", "32", "--by", by, "--format", fmt,
                          "--mode", mode], capsys)
    assert code == 0 and err == ""
    components = analyze(model, image_size=32, mode=mode).totals
    assert view_totals(out, fmt, by) == components.as_dict()
    if mode == "inference":
        assert components == Counts(GOOD_PARAMS, GOOD_MACS, components.vector_flops)


# ------------------------------------------------------------------ every command x every format
# Each command's output, in every format its --format offers, is parsed (json.loads, csv, XML,
# the rows of a text or markdown table) and its numbers compared with arithmetic.

# vit_b_32 (params: torchvision num_params): 49 patches + the class token = 50 tokens
VIT_B_32_PARAMS = 88_224_232
VIT_B_32_MACS = 49 * 768 * 3072 + 12 * (
    50 * 768 * 2304 + 2 * 50**2 * 768 + 50 * 768**2 + 2 * 50 * 768 * 3072
) + 768_000


def vit_b_16_macs(size: int) -> int:
    """torchvision vit_b_16 at ``size`` px: (N - 1) C P^2 D patches + L (N (4 D^2 + 2 D M)
    + 2 N^2 D) + D K, with N = (size / 16)^2 + 1, D = 768, M = 3072, L = 12, K = 1000."""
    n = (size // 16) ** 2 + 1
    return (n - 1) * 3 * 16**2 * 768 + 12 * (n * (4 * 768**2 + 2 * 768 * 3072)
                                              + 2 * n**2 * 768) + 768 * 1000


def _number(cell: str) -> int:
    return int(cell.replace(",", ""))


def table_rows(text: str, fmt: str) -> list[list[str]]:
    """The cells of every line of a text table (split at two spaces or more) or of every row
    of a markdown table."""
    if fmt == "markdown":
        return [[c.strip() for c in line.strip().strip("|").split("|")]
                for line in text.splitlines() if line.startswith("|")]
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.strip()]


def _after(text: str, marker: str) -> str:
    return text[text.index(marker):]


def read_formula(out: str, fmt: str) -> dict[str, int]:
    totals = view_totals(out, fmt, "component")
    return {key: totals[key] for key in ("params", "macs", "flops")}


def read_diff(out: str, fmt: str) -> dict[str, int]:
    """A and B's total params and MACs and the change of each."""
    if fmt == "json":
        total = next(c for c in json.loads(out)["changes"] if c["scope"] == "total")
        return {f"{m}_{k}": (total[k][m] if k != "change" else total["change"][m])
                for m in ("params", "macs") for k in ("a", "b", "change")}
    read = {}
    for metric, title in (("params", "params"), ("macs", "MACs")):
        marker = f"**{title}**" if fmt == "markdown" else f"\n{title}:"
        row = next(r for r in table_rows(_after(out, marker), fmt) if r[0] == "total")
        read |= {f"{metric}_a": _number(row[1]), f"{metric}_b": _number(row[2]),
                 f"{metric}_change": _number(row[3])}
    return read


def read_crosscheck(out: str, fmt: str) -> dict[str, int]:
    """vitprof's params and MACs, and the closed form's MACs, delta and residual."""
    if fmt == "json":
        data = json.loads(out)
        row = next(r for r in data["rows"] if r["peer"] == "closed-form")
        return {"params": data["vitprof"]["params"], "macs": data["vitprof"]["macs"],
                "peer_macs": row["macs"], "delta": row["delta_macs"],
                "residual": row["residual_macs"]}
    found = re.search(r"vitprof \(meta device\): ([\d,]+) params, ([\d,]+) MACs", out)
    assert found is not None
    row = next(r for r in table_rows(out, fmt) if r[0] == "closed-form")
    return {"params": _number(found[1]), "macs": _number(found[2]), "peer_macs": _number(row[3]),
            "delta": _number(row[4]), "residual": _number(row[5])}


def read_check(out: str, fmt: str) -> dict[str, int]:
    """The checks, the failed ones, and the actual params and MACs (JUnit: from the failure)."""
    if fmt == "junit":
        root = ET.fromstring(out)
        text = root.find("testsuite/testcase/failure").text  # type: ignore[union-attr]
        found = re.search(r"actual ([\d,]+)", text or "")
        assert found is not None
        return {"checks": int(root.get("tests", "")), "failed": int(root.get("failures", "")),
                "macs": _number(found[1])}
    if fmt == "json":
        checks = json.loads(out)["budgets"][0]["checks"]
        actual = {c["key"]: c["actual"] for c in checks}
        return {"checks": len(checks), "failed": sum(c["verdict"] == "fail" for c in checks),
                "params": actual["max_params"], "macs": actual["max_macs"]}
    rows = {r[0]: r for r in table_rows(out, fmt) if r[0].startswith("good.")}
    return {"checks": len(rows), "failed": sum(r[-1] == "fail" for r in rows.values()),
            "params": _number(rows["good.max_params"][2]),
            "macs": _number(rows["good.max_macs"][2])}


def read_sweep(out: str, fmt: str) -> dict[str, int]:
    """Total MACs per swept size (a row's attn_core, MLP and other MACs add up to it)."""
    if fmt == "json":
        return {str(p["value"]): p["totals"]["macs"] for p in json.loads(out)["points"]}
    rows = [r for r in table_rows(out, fmt) if r[0] in ("224", "384")]
    for row in rows:  # size, patches, params, attn_core, MLP, other, total, ratio
        assert sum(_number(c) for c in row[3:6]) == _number(row[6])
    return {row[0]: _number(row[6]) for row in rows}


def read_profile(out: str, fmt: str) -> dict[str, object]:
    """The counted work: total FLOPs (JSON: exact; tables: the total row's GFLOPs)."""
    if fmt == "json":
        flops = sum(c["flops"] for c in json.loads(out)["components"].values())
        return {"gflops": f"{flops / 1e9:.3f}"}
    row = next(r for r in table_rows(out, fmt) if r[0] == "total")
    return {"gflops": row[3]}  # component, time ms, % time, GFLOPs, ...


def read_memory(out: str, fmt: str) -> dict[str, int]:
    """The total row's parameter, gradient and optimizer-state bytes."""
    if fmt == "json":
        total = json.loads(out)["total"]
        return {"params_bytes": total["params"], "grads_bytes": total["grads"],
                "state_bytes": total["optimizer_state"]}
    row = next(r for r in table_rows(out, fmt) if r[0] == "total")  # component, params, ...
    return {"params_bytes": _number(row[1]), "grads_bytes": _number(row[2]),
            "state_bytes": _number(row[3])}


BUDGET = """[good]
model = "{factory}:good"
max_params = {params}
max_macs = {macs_limit}
"""
# every command with the arithmetic its output must show, {factory} standing for the file
COMMANDS = {
    "formula": (["formula", "--image-size", "32", "--patch-size", "4", "--width", "64",
                 "--depth", "1", "--heads", "4", "--mlp-width", "256", "--num-classes", "10"],
                read_formula, {"params": GOOD_PARAMS, "macs": GOOD_MACS, "flops": 2 * GOOD_MACS}),
    "diff": (["diff", "{factory}:good", "vit_b_32"], read_diff,
             {"params_a": GOOD_PARAMS, "params_b": VIT_B_32_PARAMS,
              "params_change": VIT_B_32_PARAMS - GOOD_PARAMS, "macs_a": GOOD_MACS,
              "macs_b": VIT_B_32_MACS, "macs_change": VIT_B_32_MACS - GOOD_MACS}),
    "crosscheck": (["crosscheck", "{factory}:good", "--peers", "closed-form"], read_crosscheck,
                   {"params": GOOD_PARAMS, "macs": GOOD_MACS, "peer_macs": GOOD_MACS,
                    "delta": 0, "residual": 0}),
    # max_params holds, max_macs is one MAC short; the third and fourth checks are the
    # implicit max_unsupported_ops = 0 and max_self_checks = 0
    "check": (["check", "{budget}"], read_check,
              {"checks": 4, "failed": 1, "params": GOOD_PARAMS, "macs": GOOD_MACS}),
    "sweep": (["sweep", "vit_b_16", "--image-size", "224,384"], read_sweep,
              {"224": vit_b_16_macs(224), "384": vit_b_16_macs(384)}),
    "profile": (["profile", "{factory}:good", "--image-size", "32", "--warmup", "0", "--iters",
                 "1", "--threads", "1", "--peak-tflops", "0.05", "--no-progress"], read_profile,
                {"gflops": f"{2 * GOOD_MACS / 1e9:.3f}"}),
    # float32: 4 bytes a parameter, its gradient, and SGD's one momentum buffer (no step count)
    "memory": (["memory", "{factory}:good", "--image-size", "32", "--target", "cpu",
                "--optimizer", "sgd-momentum"], read_memory,
               {"params_bytes": 4 * GOOD_PARAMS, "grads_bytes": 4 * GOOD_PARAMS,
                "state_bytes": 4 * GOOD_PARAMS}),
}


@pytest.mark.parametrize(("command", "fmt"), [
    pytest.param(command, fmt, id=f"{command}-{fmt}")
    for command in COMMANDS for fmt in choices(command)
])
def test_every_command_in_every_format_adds_up(factory_file: Path, tmp_path: Path, command: str,
                                               fmt: str, capsys) -> None:
    argv, read, expected = COMMANDS[command]
    budget = tmp_path / "budgets.toml"
    budget.write_text(BUDGET.format(factory=factory_file, params=GOOD_PARAMS,
                                    macs_limit=GOOD_MACS - 1))
    argv = [a.format(factory=factory_file, budget=budget) for a in argv]
    code, out, _ = run([*argv, "--format", fmt], capsys)
    assert code == (1 if command == "check" else 0)
    read_out = read(out, fmt)
    assert read_out == {key: expected[key] for key in read_out}
    # every reader reads the MACs (memory: the bytes)
    assert set(read_out) & {"macs", "macs_a", "224", "gflops", "params_bytes"}


def test_every_command_offers_the_formats_of_the_registry() -> None:
    """Each command's --format choices are the registry's entries naming it, in its order."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        formats = [a for a in sub._actions if "--format" in a.option_strings]
        assert [tuple(a.choices) for a in formats] == ([choices(name)] if formats else []), name
    assert choices("analyze") == ("table", "markdown", "json", "csv")
    assert choices("check") == ("table", "json", "junit")


def _sub_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


@pytest.mark.parametrize("name", cli_main.COMMANDS)
def test_one_commands_parser_is_its_part_of_the_full_parser(name: str) -> None:
    """``build_parser(name)`` holds that sub-command alone, its parser as in the full one."""
    alone = _sub_parsers(build_parser(name))
    assert list(alone) == [name]
    assert alone[name].format_help() == _sub_parsers(build_parser())[name].format_help()


@pytest.mark.parametrize(("argv", "built"), [
    pytest.param(["models", "--format", "json"], "models", id="command"),
    pytest.param(["--help"], None, id="help"),
    pytest.param(["no-such-command"], None, id="unknown-command"),
    pytest.param([], None, id="no-command"),
])
def test_main_builds_the_parser_of_the_named_command_only(
    argv: list[str], built: str | None, monkeypatch, capsys
) -> None:
    """The other commands' modules are not imported to run one (start-up time); help and usage
    errors of vitprof itself list every command."""
    asked = []
    full = cli_main.build_parser
    monkeypatch.setattr(cli_main, "build_parser",
                        lambda command=None: asked.append(command) or full(command))
    with contextlib.suppress(SystemExit):
        main(argv)
    assert asked == [built]


def test_models_in_every_format(capsys) -> None:
    """One line starting with each zoo model's name in the table, one row each in the JSON."""
    tables = {fmt: run(["models", "--format", fmt], capsys)[1] for fmt in choices("models")}
    assert len(json.loads(tables["json"])) == len(ZOO)
    starts = [line.split(" ", 1)[0] for line in tables["table"].splitlines()[2:]]
    assert [name for name in starts if name] == [*ZOO, "also:"]


def _described(table: str) -> dict[str, str]:
    """Each model's description read back from the table: its wrapped lines joined."""
    lines = table.splitlines()
    column = lines[0].index("description")
    described: dict[str, list[str]] = {}
    for line in lines[2:]:
        if line.startswith("also:"):
            break
        if line[:column].strip():
            name = line.split(" ", 1)[0]
            described[name] = []
        described[name].append(line[column:])
    return {name: " ".join(parts) for name, parts in described.items()}


@pytest.mark.parametrize(("columns", "width"), [(None, 80), ("100", 100), ("200", 200)])
def test_models_fits_the_terminal_and_keeps_every_word(
    capsys, monkeypatch: pytest.MonkeyPatch, columns: str | None, width: int
) -> None:
    """Main wrote lines of up to 356 characters. Each line fits COLUMNS, else the terminal, else
    (not a TTY) 80; every name is whole on the line it starts and every description reads back
    whole from its wrapped lines, the other kinds of names too."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
        monkeypatch.setattr(os, "get_terminal_size", _not_a_tty)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = run(["models"], capsys)
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= width
    assert _described(out) == {name: entry.description for name, entry in ZOO.items()}
    also = out[out.index("also:"):].split()
    assert also[:2] == ["also:", "timm:NAME,"] and also[-1] == "package.module:factory"


def _not_a_tty(*args: object) -> os.terminal_size:
    raise OSError("not a terminal")


def test_table_total_is_exact_at_a_huge_batch(capsys) -> None:
    """Every format keeps Python ints: no int64 wraps at batch 10**11 (the sum exceeds 2**63)."""
    batch = 10**11
    # vit_b_16, per image: per block 2 LayerNorms 2*197*768*7 + qkv bias 197*2304
    #   + softmax and scale 12*197^2*6 + proj bias and residual 2*197*768 + fc1 bias 197*3072
    #   + GELU 197*3072*5 + fc2 bias and residual 2*197*768; outside: patch bias 196*768,
    #   position add 197*768, final LayerNorm 197*768*7, head bias 1000 -> 116_592_712
    block = (2 * 197 * 768 * 7 + 197 * 2304 + 12 * 197**2 * 6 + 2 * 197 * 768 + 197 * 3072
             + 197 * 3072 * 5 + 2 * 197 * 768)
    vector = batch * (12 * block + 196 * 768 + 197 * 768 + 197 * 768 * 7 + 1000)
    macs = batch * (196 * 768 * 768 + 12 * 1_453_954_560 + 768 * 1000)
    assert vector > 2**63
    argv = ["analyze", "vit_b_16", "--batch-size", str(batch)]
    totals = {fmt: view_totals(run([*argv, "--format", fmt], capsys)[1], fmt, "component")
              for fmt in choices("analyze")}
    expected = {"params": 86_567_656, "macs": macs, "flops": 2 * macs, "vector_flops": vector}
    assert all(t == expected for t in totals.values()), totals


def test_module_view_keeps_each_module_and_its_children_together(factory_file: Path,
                                                                  capsys) -> None:
    code, out, _ = run(["analyze", f"{factory_file}:good", "--image-size", "32", "--by",
                        "module", "--format", "csv"], capsys)
    modules = [row["module"] for row in csv.DictReader(io.StringIO(out))]
    assert code == 0 and len(modules) > len(set(modules))  # some modules have several rows
    for module in set(modules) - {"(root)"}:
        own = [i for i, m in enumerate(modules) if m == module]
        subtree = [i for i, m in enumerate(modules) if m == module or m.startswith(module + ".")]
        assert own == list(range(own[0], own[-1] + 1)), module  # its rows together
        assert subtree == list(range(own[0], subtree[-1] + 1)), module  # then its children


def test_csv_reports_a_fallback_in_a_comment_and_on_stderr(tmp_path: Path, capsys) -> None:
    """The data-dependent model cannot run on meta: the CSV's first line and stderr say so."""
    path = tmp_path / "models.py"
    path.write_text(BUDGET_MODELS_PY)
    code, out, err = run(["analyze", f"{path}:make", "--format", "csv"], capsys)
    first, *rest = out.splitlines()
    assert code == 0 and first.startswith("# fallback: meta device failed (")
    assert first.endswith("counted on cpu with real tensors")
    assert f"vitprof: warning: {first.removeprefix('# fallback: ')}" in err.splitlines()
    # the rows still parse and add up: conv 8*3*4*4 + 8, head 8*2 + 2 = 410 params
    assert sum(int(r["params"]) for r in csv.DictReader(rest)) == 8 * 3 * 4 * 4 + 8 + 8 * 2 + 2


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
    code, out, _ = run(
        ["analyze", "vitprof.models.notes.note002:build_cifar_vit", "--format", "json"],
                       capsys)
    data = json.loads(out)
    assert code == 0 and data["input_shape"] == [1, 3, 32, 32]
    # the note 002 CIFAR-ViT: 6 blocks of 12*512^2 + 13*512, plus 127*512 + 10 outside
    assert data["totals"]["params"] == 6 * (12 * 512**2 + 13 * 512) + 127 * 512 + 10


def test_map_option(capsys) -> None:
    code, out, err = run(["analyze", "vit_b_32", "--map", "^heads=other", "--format", "json"],
                         capsys)
    assert code == 0 and err == ""
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
    assert code == 0 and data["family"] == "graph (huggingface table agrees)"
    assert data["input_shape"] == [1, 3, 32, 32]
    # 2 blocks x 2 x 17^2 x 64 = 73_984
    assert data["components"]["attn_core"]["macs"] == 73_984


def test_hf_heads_that_do_not_divide_the_width_are_named(tmp_path: Path, capsys) -> None:
    """transformers builds it (heads of 100 // 3 = 33); say why ``formula`` refuses it."""
    config = {"model_type": "vit", "hidden_size": 100, "num_hidden_layers": 1,
              "num_attention_heads": 3, "intermediate_size": 64, "image_size": 32,
              "patch_size": 8, "num_labels": 10}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, _, err = run(["analyze", f"hf:{path}", "--format", "json"], capsys)
    assert code == 0
    assert err == ("vitprof: warning: width 100 is not divisible by 3 heads (vitprof formula "
                   "refuses this shape); the model ran with heads of 33, 99 of the 100 "
                   "channels in q, k and v\n")
    code, _, err = run(["formula", f"hf:{path}"], capsys)
    assert code == 2 and "width 100 is not divisible by 3 heads" in err


def test_timm_name_with_a_pretrained_tag_takes_its_architecture(capsys) -> None:
    code, out, _ = run(["analyze", "timm:vit_tiny_patch16_224.augreg_in21k", "--format", "json"],
                       capsys)
    assert code == 0
    # the in21k checkpoint's head: 192 * 21_843 + 21_843 = 4_215_699 params
    assert json.loads(out)["components"]["head"]["params"] == 192 * 21_843 + 21_843


def test_a_map_rule_that_matches_nothing_warns(capsys) -> None:
    code, _, err = run(["analyze", "vit_b_32", "--map", "^heds=other", "--map", "^heads=other"],
                       capsys)
    assert code == 0
    assert err == "vitprof: warning: --map rule '^heds=other' matched no module or parameter\n"


@pytest.mark.parametrize("argv", [
    pytest.param(["profile", "--iters", "1", "--warmup", "0", "--peak-tflops", "1"], id="profile"),
    pytest.param(["crosscheck", "--peers", "fvcore"], id="crosscheck"),
])
def test_every_warning_of_the_breakdown_is_shown(argv: list[str], odd_models: Path,
                                                 capsys) -> None:
    command, *options = argv
    code, out, err = run([command, f"{odd_models}:odd", "--image-size", "16", *options,
                          "--format", "json", "--map", "^nothing_here=other"], capsys)
    assert code == 0
    assert json.loads(out)["warnings"] == [line.removeprefix("vitprof: warning: ")
                                           for line in err.splitlines()]
    for expected in (NOT_A_VIT_WARNING, NO_FORMULA_WARNING,
                     "--map rule '^nothing_here=other' matched no module or parameter"):
        assert expected in err


def test_models_lists_the_zoo(capsys) -> None:
    code, out, _ = run(["models"], capsys)
    assert code == 0
    for name in ("vit_b_16", "vit_h_14", "note001_vit_b16", "note002_cifar_vit_large",
                 "note004_vit_b16", "hf:vit-base-patch16-224", "vit_22b", "vit_22b_parallel"):
        assert name in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["analyze", "vit_b_61"], "unknown model 'vit_b_61'; did you mean",
                     id="unknown-model"),
        pytest.param(["analyze", "vit_b_16", "--image-size", "225"],
                     "building vit_b_16 at image size 225 failed: AssertionError: Input shape "
                     "indivisible by patch size!", id="size-the-model-refuses"),
        pytest.param(["analyze", "timm:vit_tiny_patch16_22"], "unknown timm model",
                     id="unknown-timm"),
        pytest.param(["analyze", "timm:vit_tiny_patch16_22.augreg_in21k"],
                     "did you mean timm:vit_tiny_patch16_224", id="unknown-timm-with-tag"),
        pytest.param(["analyze", "no/such/file.py:make"], "no such file", id="missing-file"),
        pytest.param(["analyze", "no_such_package_xyz:make"], "cannot import no_such_package_xyz",
                     id="missing-module"),
        pytest.param(["analyze", "hf:missing.json"], "no such file", id="missing-hf-config"),
        pytest.param(["analyze", "torch.nn:Flatten", "--num-classes", "5"],
                     "torch.nn:Flatten takes no num_classes parameter", id="classes-not-taken"),
        # the attention scores overflow int64 bytes on any device (12 heads x (62,500² + 1)²
        # elements): the line says so, not what a CPU fallback would need
        pytest.param(["analyze", "vit_b_16", "--image-size", "1000000"],
                     f"Storage size calculation overflowed with sizes=[12, {62_500**2 + 1}",
                     id="absurd-size-says-why-it-overflows"),
        pytest.param(["diff", "vit_b_16", "vit_b_61"], "unknown model 'vit_b_61'",
                     id="diff-unknown-model"),
        pytest.param(["sweep", "vit_b_16", "--image-size=-16,224"],
                     "sweep values must be positive, got -16", id="negative-sweep-size"),
        pytest.param(["analyze", "vit_b_32", "--frames", "16"],
                     "running vit_b_32 failed: ValueError: too many values to unpack (expected 4) "
                     "(input of shape 1x3x16x224x224, on meta)", id="shape-the-model-rejects"),
        pytest.param(["analyze", "note002_cifar_vit_tiny", "--in-chans", "1"],
                     "(input of shape 1x1x32x32, on meta)", id="channels-the-model-rejects"),
        pytest.param(["analyze", "vit_b_16", "--image-size", "224x320"],
                     "vit_b_16 takes a square image size only (its builder takes one int); got "
                     "224x320", id="non-square-for-a-square-only-model"),
    ],
)
def test_user_errors_are_one_line(argv: list[str], message: str, capsys) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("vitprof: error: ")
    assert message in err


# Every output option, and what kind of place it takes. The model is a factory that raises: the
# place must be refused before any model is built.
OUTPUT_OPTIONS = [
    (["analyze", "{model}", "--output", "{place}"], "file", "analyze"),
    (["formula", "{model}", "--output", "{place}"], "file", "formula"),
    (["check", "{budget}", "--output", "{place}"], "file", "check"),
    (["crosscheck", "{model}", "--output", "{place}"], "file", "crosscheck"),
    (["profile", "{model}", "--output", "{place}"], "file", "profile"),
    (["profile", "{model}", "--roofline", "{place}"], "figure", "profile-roofline"),
    (["report", "{model}", "--out", "{place}"], "folder", "report"),
    (["sweep", "{model}", "--image-size", "32", "--out", "{place}"], "folder", "sweep-out"),
    (["sweep", "{model}", "--image-size", "32", "--figure", "{place}"], "png", "sweep-figure"),
    (["diff", "{model}", "{model}", "--output", "{place}"], "file", "diff"),
    (["memory", "{model}", "--output", "{place}"], "file", "memory"),
    (["memory", "{model}", "--figure", "{place}"], "png", "memory-figure"),
]
# Places relative to a folder holding a file "afile", a folder "adir" and a read-only folder
# "ro" (chmod 0o555; root writes there anyway, so those rows are skipped for root).
UNDER_A_FILE = ("under-a-file", "afile/out.png", "afile is not a folder")
READ_ONLY = ("read-only-folder", "ro/out.png", "ro is not writable")
BAD_PLACES = {
    "file": [UNDER_A_FILE, READ_ONLY, ("a-folder", "adir", "adir: it is a folder"),
             ("missing-folder", "none/out.png", "no such folder")],
    "figure": [UNDER_A_FILE, READ_ONLY, ("bad-extension", "fig.xyz", "extension '.xyz' is not "
                                         "one of avif, eps")],
    "png": [UNDER_A_FILE, ("not-png", "fig.pdf", "extension '.pdf' is not one of png")],
    "folder": [("under-a-file", "afile/reports", "afile is not a folder"),
               ("a-file", "afile", "afile is not a folder"),
               ("read-only-folder", "ro", "ro is not writable")],
}
OUTPUT_PLACES = [
    pytest.param(argv, place, message, id=f"{command}-{place_id}")
    for argv, kind, command in OUTPUT_OPTIONS for place_id, place, message in BAD_PLACES[kind]
]


@pytest.mark.parametrize(("argv", "place", "message"), OUTPUT_PLACES)
def test_output_place_is_refused_before_any_model_is_built(
    argv: list[str], place: str, message: str, tmp_path: Path, odd_models: Path, capsys
) -> None:
    (tmp_path / "afile").write_text("a file, not a folder\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "ro").mkdir(mode=0o555)
    if place.startswith("ro") and os.access(tmp_path / "ro", os.W_OK):
        pytest.skip("this user writes into read-only folders (root)")
    budget = tmp_path / "budget.toml"
    budget.write_text(f'[exploding]\nmodel = "{odd_models}:explodes"\nmax_params = 1\n')
    filled = [a.format(model=f"{odd_models}:explodes", budget=budget, place=tmp_path / place)
              for a in argv]
    code, out, err = run(filled, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("vitprof: error: cannot write")
    assert message in err and "factory ran" not in err


# A link "out.png" to a place that cannot be written: vitprof writes through the link, and
# creates its temporary file beside the file linked, so that place is refused before any work.
LINKED_PLACES = [
    pytest.param("afile/out.png", "afile is not a folder", id="under-a-file"),
    pytest.param("none/out.png", "no such folder", id="missing-folder"),
    pytest.param("ro/out.png", "ro is not writable", id="read-only-folder"),
]


@pytest.mark.parametrize(("linked", "message"), LINKED_PLACES)
@pytest.mark.parametrize("argv", [
    pytest.param(argv, id=command) for argv, kind, command in OUTPUT_OPTIONS if kind != "folder"
])
def test_an_output_that_is_a_link_is_checked_where_it_points(
    argv: list[str], linked: str, message: str, tmp_path: Path, odd_models: Path,
    monkeypatch: pytest.MonkeyPatch, capsys,
) -> None:
    """main checked the link's own folder, ran the model, then failed to write: a link to a
    writable file in a read-only folder (written through by Path.write_text before the
    atomic writes) ended after the work in 'Permission denied'."""
    (tmp_path / "afile").write_text("a file, not a folder\n")
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "out.png").write_text("the file linked\n")
    not_root(monkeypatch, {tmp_path / "ro"})
    (tmp_path / "out.png").symlink_to(tmp_path / linked)
    budget = tmp_path / "budget.toml"
    budget.write_text(f'[exploding]\nmodel = "{odd_models}:explodes"\nmax_params = 1\n')
    filled = [a.format(model=f"{odd_models}:explodes", budget=budget,
                       place=tmp_path / "out.png") for a in argv]
    code, out, err = run(filled, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"vitprof: error: cannot write "
                                                    f"{tmp_path / 'out.png'} (a link to ")
    assert message in err and "factory ran" not in err


def test_a_device_is_written_where_its_folder_is_not_writable(
    monkeypatch: pytest.MonkeyPatch, capsys,
) -> None:
    """/dev/null is written in place (vitprof.core.atomic_write), so /dev, which no user but
    root can create files in, does not matter; main refused it: 'the folder /dev is not
    writable'."""
    not_root(monkeypatch, {Path("/dev")})
    code, out, err = run(["formula", "vit_b_16", "--output", "/dev/null"], capsys)
    assert (code, out, err) == (0, "", "")


# Long commands and the description of their bar; "{model}" is a small non-ViT factory.
PROGRESS_RUNS = [
    pytest.param(["sweep", "{model}", "--image-size", "16,32"], "{model} image_size", id="sweep"),
    pytest.param(["crosscheck", "{model}", "--peers", "closed-form"], "crosscheck {model}",
                 id="crosscheck"),
    pytest.param(["check", "{budget}"], "check", id="check"),
    pytest.param(["report", "{model}", "--out", "{tmp}"], "report", id="report"),
]


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "redirected"])
@pytest.mark.parametrize(("argv", "bar"), PROGRESS_RUNS)
def test_progress_bars_only_on_a_terminal(
    argv: list[str], bar: str, terminal: bool, tmp_path: Path, odd_models: Path,
    monkeypatch: pytest.MonkeyPatch, capsys,
) -> None:
    monkeypatch.setattr("vitprof.core.progress.DELAY_S", 0)  # draw at once, however fast the run
    monkeypatch.setattr("vitprof.core.progress.on_terminal", lambda: terminal)
    budget = tmp_path / "budget.toml"
    budget.write_text(f'[odd]\nmodel = "{odd_models}:odd"\nmax_unsupported_ops = 1\n')
    model = f"{odd_models}:odd"
    code, _, err = run([a.format(model=model, budget=budget, tmp=tmp_path) for a in argv],
                       capsys)
    assert code == 0
    # a bar's frames (its description, redrawn after carriage returns) are noise in a log file
    assert (f"{bar.format(model=model)}: " in err) == terminal
    assert ("\r" in err) == terminal


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


FAILING_FORWARDS_PY = """
from torch import nn


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, y):
        return self.proj(x) + y


def two_inputs():
    return TwoInputs()


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(32, 10))
"""


# Every sub-command that runs a model (``formula`` only builds one, to read its spec).
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["analyze", "{tmp}/models.py:make_broken"], "forward is broken",
                     id="analyze"),
        pytest.param(["analyze", "{tmp}/models.py:make_broken", "--device", "cpu"],
                     "forward is broken", id="analyze-cpu"),
        pytest.param(["check", "{tmp}/budget.toml"], "forward is broken", id="check"),
        pytest.param(["crosscheck", "{tmp}/models.py:make_broken"], "forward is broken",
                     id="crosscheck"),
        pytest.param(["profile", "{tmp}/models.py:make_broken"], "forward is broken",
                     id="profile"),
        pytest.param(["profile", "{tmp}/odd.py:two_inputs"], "missing 1 required positional",
                     id="profile-two-inputs"),
        pytest.param(["profile", "{tmp}/odd.py:mlp"], "must have same reduction dim",
                     id="profile-mlp-at-224"),
        pytest.param(["report", "{tmp}/models.py:make_broken", "--out", "{tmp}/report"],
                     "forward is broken", id="report"),
        pytest.param(["sweep", "{tmp}/models.py:make_broken", "--image-size", "32,64"],
                     "forward is broken", id="sweep"),
        pytest.param(["diff", "vit_b_32", "{tmp}/models.py:make_broken"], "forward is broken",
                     id="diff"),
        pytest.param(["memory", "{tmp}/models.py:make_broken"], "forward is broken",
                     id="memory"),
    ],
)
def test_a_failing_forward_is_one_line_in_every_command(
    tmp_path: Path, argv: list[str], message: str, capsys
) -> None:
    (tmp_path / "models.py").write_text(BUDGET_MODELS_PY)
    (tmp_path / "odd.py").write_text(FAILING_FORWARDS_PY)
    (tmp_path / "budget.toml").write_text(
        f'[m]\nmodel = "{tmp_path}/models.py:make_broken"\nmax_params = 1\n'
    )
    code, out, err = run([arg.format(tmp=tmp_path) for arg in argv], capsys)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("vitprof: error: ") and message in line
    assert "(input of shape 1x3x" in line


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
        pytest.param(["analyze", "vit_b_16", "--recognizer", "names"], "invalid choice",
                     id="bad-recognizer"),
        pytest.param(["crosscheck", "vit_b_16", "--recognizer", "x"], "", id="bad-recognizer-cc"),
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
        pytest.param(["analyze", "vit_b_16", "--image-size", "224x"],
                     "expected N or HxW of positive integers, got '224x'", id="size-without-width"),
        pytest.param(["analyze", "vit_b_16", "--image-size", "0x224"],
                     "expected N or HxW of positive integers, got '0x224'", id="zero-height"),
        pytest.param(["analyze", "vit_b_16", "--image-size", "2x3x4"], "expected N or HxW",
                     id="three-sizes"),
        pytest.param(["analyze", "vit_b_16", "--frames", "0"],
                     "argument --frames: expected a positive integer, got 0", id="zero-frames"),
        pytest.param(["analyze", "vit_b_16", "--in-chans", "0"],
                     "argument --in-chans: expected a positive integer, got 0", id="zero-channels"),
        pytest.param(["analyze", "vit_b_16", "--dtype", "float64"],
                     "argument --dtype: invalid choice: 'float64'", id="unknown-dtype"),
        pytest.param(["analyze", "vit_b_16", "--input-shape", "1,3"],
                     "expected batch, channels and at least one size", id="short-input-shape"),
        pytest.param(["analyze", "vit_b_16", "--input-shape", "1,3,a,4"],
                     "expected positive integers B,C,SIZE[,SIZE...], got '1,3,a,4'",
                     id="input-shape-not-ints"),
        pytest.param(["analyze", "vit_b_16", "--input-shape", "2,3,32,32", "--image-size", "32",
                      "--batch-size", "2"],
                     "--input-shape excludes --image-size, --batch-size",
                     id="input-shape-conflict"),
        pytest.param(["crosscheck", "vit_b_16", "--input-shape", "1,3,32,32", "--frames", "2"],
                     "--input-shape excludes --frames", id="crosscheck-input-shape-conflict"),
        pytest.param(["profile", "vit_b_16", "--input-shape", "1,3,32,32", "--in-chans", "1"],
                     "--input-shape excludes --in-chans", id="profile-input-shape-conflict"),
        pytest.param(["diff", "vit_b_16", "vit_b_32", "--input-shape", "1,3,32,32",
                      "--image-size", "32"],
                     "--input-shape excludes --image-size", id="diff-input-shape-conflict"),
        pytest.param(["report", "vit_b_16", "--input-shape", "1,3,32,32", "--image-size", "32"],
                     "--input-shape excludes --image-size", id="report-input-shape-conflict"),
        pytest.param(["report", "--all", "--image-size", "32"],
                     "--image-size sets how model pages are counted; --all writes or checks the "
                     "pages at each model's own input, recognizer auto",
                     id="report-input-with-all"),
        pytest.param(["report", "--check", "--dtype", "bfloat16", "--frames", "2"],
                     "--frames, --dtype set how model pages are counted; --check writes",
                     id="report-input-with-check"),
        pytest.param(["report", "--all", "--recognizer", "graph"],
                     "--recognizer sets how model pages are counted; --all writes",
                     id="report-recognizer-with-all"),
        pytest.param(["report", "vit_b_16", "--check", "--recognizer", "tables"],
                     "--recognizer sets how model pages are counted; --check writes",
                     id="report-recognizer-with-check"),
        pytest.param(["report", "vit_b_16", "--recognizer", "names"], "invalid choice: 'names'",
                     id="report-bad-recognizer"),
        pytest.param(["analyze"], "", id="no-model"),
        pytest.param(["diff", "vit_b_16"], "", id="diff-one-side"),
        pytest.param(["diff", "vit_b_16", "vit_b_32", "--fail-above", "lots"], "",
                     id="diff-bad-fail-above"),
        pytest.param(["memory", "vit_b_16", "--fit", "lots"], "", id="memory-bad-fit"),
        pytest.param(["memory", "vit_b_16", "--optimizer", "lion"], "invalid choice: 'lion'",
                     id="memory-bad-optimizer"),
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
        pytest.param(["diff", "mymodels.py:loud", "mymodels.py:loud", "--format", "json"],
                     json.loads, BOTH_PRINTS, id="diff-json"),
        pytest.param(["memory", "mymodels.py:loud", "--image-size", "32", "--format", "json"],
                     json.loads, BOTH_PRINTS, id="memory-json"),
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
    """Importing ``vitprof.cli.main`` (what the console script does before calling main) leaves
    torch to main's own imports, so an interrupt during those ends in main's one line too."""
    code = "import sys, vitprof.cli.main; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout == "False\n"


HELP_COMMANDS = ("analyze", "models", "check", "formula", "crosscheck", "profile", "report",
                 "sweep", "diff", "memory")
# In the order they run: every command that must import no torch first, so that each one's
# "heavy" (what the interpreter holds after it) is its own imports and those before it.
IMPORT_CASES = [
    pytest.param(["--help"], 0, [], id="help"),
    pytest.param(["models"], 0, [], id="models"),
    pytest.param(["models", "--format", "json"], 0, [], id="models-json"),
    *(pytest.param([name, "--help"], 0, [], id=f"{name}-help") for name in HELP_COMMANDS),
    pytest.param(["analyze"], 2, [], id="usage-error-missing-model"),
    pytest.param(["analyze", "vit_b_16", "--format", "yaml"], 2, [], id="usage-error-choice"),
    pytest.param(["no-such-command"], 2, [], id="usage-error-command"),
    # counting needs torch, but tables and JSON need neither matplotlib nor pandas
    pytest.param(["analyze", "vit_b_16", "--format", "json"], 0, ["torch"], id="analyze-json"),
    pytest.param(["analyze", "vit_b_16"], 0, ["torch"], id="analyze-table"),
    pytest.param(["check", "one.toml", "--format", "json"], 0, ["torch"], id="check-json"),
    pytest.param(["check", "one.toml"], 0, ["torch"], id="check-table"),
]


@pytest.fixture(scope="module")
def imports_after(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Every argv of IMPORT_CASES run in one fresh interpreter (one import of torch, not one per
    command): ``" ".join(argv)`` -> its exit code and the heavy packages imported by it or by the
    commands before it. Packages are never unloaded, so a command that imports one shows it."""
    folder = tmp_path_factory.mktemp("imports")
    # vit_b_16: 86,567,656 params (torchvision's published num_params) <= 86,600,000
    (folder / "one.toml").write_text("[vit_b_16]\nmax_params = 86_600_000\n")
    argvs = [case.values[0] for case in IMPORT_CASES]
    done = run_commands_in_one_interpreter(argvs, cwd=folder)
    return {" ".join(argv): {"status": d["code"], "heavy": d["heavy"]}
            for argv, d in zip(argvs, done, strict=True)}


@pytest.mark.parametrize(("argv", "status", "heavy"), IMPORT_CASES)
def test_command_imports_only_what_it_uses(argv: list[str], status: int, heavy: list[str],
                                           imports_after: dict[str, dict[str, object]]) -> None:
    """Parsers, help and usage errors import no torch; analyze and check import neither
    matplotlib nor pandas for table or JSON output."""
    assert imports_after[" ".join(argv)] == {"status": status, "heavy": heavy}


BFLOAT16_FACTORY = '''
import torch
from torchvision.models import VisionTransformer


def build():
    return VisionTransformer(32, 8, 2, 2, 64, 128).to(torch.bfloat16)
'''


@pytest.mark.parametrize(("argv", "runs_in"), [
    (["analyze"], "bfloat16"),  # the model's own
    (["memory", "--target", "cpu"], "float32"),  # converted, as its --dtype help says
    (["profile", "--iters", "1", "--warmup", "0"], "float32"),
])
def test_each_command_runs_a_factory_model_in_the_dtype_its_help_names(
        argv: list[str], runs_in: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A factory's bfloat16 model: analyze keeps its dtype; profile and memory run in float32
    unless --dtype says otherwise (their help said 'the model's own' too)."""
    command = argv[0]
    dtype_help = subparsers()[command]._option_string_actions["--dtype"].help
    assert ("the model's own" in str(dtype_help)) == (runs_in == "bfloat16")
    (tmp_path / "bf16.py").write_text(BFLOAT16_FACTORY)
    assert main([*argv, f"{tmp_path / 'bf16.py'}:build", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    dtype = {"analyze": lambda: shown["inputs"][0]["dtype"],
             "memory": lambda: shown["settings"]["dtype"],
             "profile": lambda: shown["dtype"]}[command]()
    assert dtype == runs_in
