"""The zoo sweep's bookkeeping (benchmarks/zoo_sweep.py): resuming and the summary page.

The sweep itself runs hundreds of models in child processes; here its rows are made by hand and
rendered by the package's page (:mod:`vitprof.study.pages.zoo_sweep`); the script itself runs
as a command.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from strangers.parallel import Net as Tiny

from vitprof import analyze
from vitprof.models.libraries import zoo_sweeps
from vitprof.recognize.graph.roles import NO_EVIDENCE
from vitprof.study.pages.zoo_sweep import moves, read_reasons, summary
from vitprof.study.zoo_sweep_rows import (
    FIELDS,
    breakdown,
    failure_status,
    neutral_changes,
    neutral_fields,
    placements,
    read_rows,
)
from vitprof.testing import neutral_names, oracle_macs, unique_params

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "zoo_sweep.py"


def row(model: str, **fields: str) -> dict[str, str]:
    base = dict.fromkeys(FIELDS, "")
    base.update(source="timm", module="m", model=model, status="ok", input="1x3x224x224",
                params="10", oracle_params="10", macs="100", oracle_macs="100", other_macs="0",
                other_params="0", self_checks="0")
    base.update(fields)
    return base


def test_summary_counts_each_kind_of_shortfall() -> None:
    rows = [
        row("exact"),
        row("other_heavy", other_macs="75", other_params="4", self_checks="1"),
        row("macs_off", macs="90", unsupported="aten.foo x2"),
        row("wrong_input", input="1x3x1024x1024", declared_input="3x1024x768"),
        row("broken", status="failed", error="ValueError: x"),
    ]
    page = summary(rows)
    # 5 models, 4 ok, 1 failed; exact: 3 of the 4 ok rows (macs_off is not);
    # params outside other: (10 + 6 + 10 + 10) / 40 = 36 / 40 = 90.0%;
    # MACs outside other: (100 + 25 + 90 + 100) / (100 + 100 + 90 + 100) = 315 / 390 = 80.76..%,
    # rounded down to 80.7%; unsupported ops: macs_off; failed self-checks: other_heavy
    assert "| timm | m | 5 | 4 | 1 | 3 | 90.0% | 80.7% | 1 | 1 | 0 | 1 |" in page
    assert "## Models with unsupported ops\n\n- timm:macs_off: aten.foo x2\n" in page
    assert "- timm:macs_off: MACs 90 vs oracle 100" in page
    assert "- timm:wrong_input: counted at 1x3x1024x1024, the model declares 3x1024x768" in page
    assert "- timm:broken: failed: ValueError: x" in page
    assert "- timm:other_heavy: other holds 4 params, 75 MACs; 1 failed self-check(s)" in page
    assert "timm:exact" not in page


def test_a_model_that_runs_no_attention_may_keep_its_parts_in_other() -> None:
    plain = row("poolformer", other_macs="100", other_params="10", attention="none seen")
    missed = row("missed", other_macs="100", other_params="10", attention="none seen",
                 self_checks="1")  # attention ran (a self-check says so) and was not found
    placed = row("swiftformer", attention="none seen")  # nothing in other: not listed
    page = summary([plain, missed, placed])
    # 0 of 100 MACs outside other: 0.0%
    assert "## Models that run no attention" in page and "- timm:poolformer: 0.0% of MACs" in page
    assert "- timm:poolformer: other" not in page and "swiftformer" not in page
    assert "- timm:missed: other holds 10 params, 100 MACs; 1 failed self-check(s)" in page
    # MobileNetV1 and PP-LCNet are convolutional networks, plain ones without residual blocks
    assert "neither ViTs nor convolutional networks" not in page
    assert "plain convolutional networks without residual blocks" in page


def test_the_committed_summary_is_the_csv_rendered_again() -> None:
    # `--summary --baseline benchmarks/zoo_sweep_f40b197.csv.gz --baseline-label f40b197` rewrites
    # zoo_sweep.md from the two CSVs and the reasons file alone (no re-sweep); the baseline is
    # issue 35's "today's main", swept with its placements
    reports = ROOT / "reports"
    baseline = read_rows(ROOT / "benchmarks" / "zoo_sweep_f40b197.csv.gz")
    assert {row["commit"] for row in baseline} == {"f40b197"}
    reasons = read_reasons("f40b197", ROOT / "benchmarks" / "zoo_sweep_reasons.toml")
    page = summary(read_rows(reports / "zoo_sweep.csv"), (baseline, "f40b197"), reasons)
    assert page == (reports / "zoo_sweep.md").read_text()
    assert ", 0 of them without a reason." in page
    assert "NO REASON in the reasons file" not in page


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """The script in a process of its own, importing this tree's vitprof."""
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600, check=False)


@pytest.mark.slow
def test_a_rerun_skips_the_rows_already_written_and_a_redo_replaces_its_row(
        tmp_path: Path) -> None:
    # the sources offered are the registry's, in its order
    assert f"--source {{{','.join(zoo_sweeps())}}}" in run_script("--help").stdout
    (_, _, first), (_, _, second) = zoo_sweeps()["timm"].listed(1)[:2]
    out = tmp_path / "zoo_sweep.csv"
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, FIELDS)
        writer.writeheader()
        writer.writerow(row(first, macs="90"))
    # --limit-s 0: no child is given time to finish, so each row run is a timeout, in seconds
    common = ("--source", "timm", "--limit-s", "0", "--jobs", "1", "--out", str(tmp_path))
    rerun = run_script(*common, "--models", f"{first},{second}")
    assert rerun.returncode == 0, rerun.stderr
    assert f"1 models to run, 1 already in {out}" in rerun.stderr
    # the row already written is kept, the new one appended under the one header
    assert [(r["model"], r["status"], r["macs"]) for r in read_rows(out)] == [
        (first, "ok", "90"), (second, "timeout", "")]
    assert out.read_text().count("source,module,model") == 1
    redo = run_script(*common, "--models", first, "--redo")
    assert redo.returncode == 0, redo.stderr
    assert [(r["model"], r["status"]) for r in read_rows(out)] == [
        (first, "timeout"), (second, "timeout")]  # the redone row replaced the old one
    page = summary(read_rows(out))
    assert (tmp_path / "zoo_sweep.md").read_text() == page and redo.stdout == page


def test_a_share_is_100_percent_only_when_nothing_is_in_other() -> None:
    page = summary([row("almost", macs="10000", oracle_macs="10000", other_macs="1")])
    # 9,999 of 10,000 MACs outside other is 99.99%, shown rounded down: 99.9%, never 100%
    assert "| 100% | 99.9% |" in page
    assert "## Models with unsupported ops\n\nNone." in page


def test_a_csv_written_before_the_breakdown_fields_reads_them_as_empty(tmp_path: Path) -> None:
    old = tmp_path / "zoo_sweep.csv"
    fields = FIELDS[:FIELDS.index("other_params")]
    old.write_text(",".join(fields) + "\n" + ",".join(row("a")[f] for f in fields) + "\n")
    (read,) = read_rows(old)
    assert (read["model"], read["other_params"], read["unsupported"]) == ("a", "", "")
    assert "| timm | m | 1 | 1 | 0 | 1 | 100% | 100% | 0 | 0 | 0 | 0 |" in summary([read])


class TokenIntoChild(torch.nn.Module):
    """CaiT's pattern: a view of a parameter (an expanded class token) passed to a child."""

    def __init__(self) -> None:
        super().__init__()
        self.token = torch.nn.Parameter(torch.zeros(1, 1, 4))
        self.child = torch.nn.Linear(4, 3, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.child(self.token.expand(x.shape[0], -1, -1))


def test_the_mac_oracle_takes_a_view_of_a_parameter_into_a_child() -> None:
    with torch.device("meta"):
        model = TokenIntoChild()
    # one token of width 4 through a 4 -> 3 linear, batch 2: 2 * 4 * 3 = 24 MACs
    assert oracle_macs(model, (2, 4)) == 24
    assert unique_params(model) == 4 + 4 * 3


def test_the_sweep_asks_each_library_for_its_models_and_builds(monkeypatch) -> None:
    """A library joins the sweep by its own file: the script reads the registry's ZooSweeps
    (``zoo_sweeps``; that the script offers their sources is held by the command test)."""
    import vitprof.models.libraries as registry
    from vitprof.models.libraries.base import ModelLibrary, ZooSweep

    def toy_models(per_group: int | None) -> Iterator[tuple[str, str]]:
        names = {"linear": ["wide", "narrow"], "conv": ["small"]}
        for group, models in names.items():
            yield from ((group, name) for name in models[:per_group])

    def toy_build(name: str) -> tuple[torch.nn.Module, tuple[int, ...] | None]:
        return torch.nn.Linear(4, 8 if name == "wide" else 2), (4,) if name == "wide" else None

    toy_sweep = ZooSweep("toy", toy_models, toy_build)
    toy = ModelLibrary(name="toy", tables=(), inferrers=(), known="", zoo_sweep=toy_sweep)
    monkeypatch.setattr(registry, "LIBRARIES", (*registry.LIBRARIES, toy))
    assert list(registry.zoo_sweeps()) == ["timm", "hf", "toy"]  # the registry's order
    assert toy_sweep.listed(1) == [("toy", "linear", "wide"), ("toy", "conv", "small")]
    model, declared = toy_sweep.build_on("wide")
    # built on meta by default: 4 * 8 + 8 = 40 parameters, none with data
    assert declared == (4,) and unique_params(model) == 40
    assert {p.device.type for p in model.parameters()} == {"meta"}


def test_a_child_error_is_skipped_refused_or_failed_by_its_text() -> None:
    natten = ("ImportError: DinatForImageClassification requires the natten library but it was "
              "not found in your environment.\nPlease note that you may need to restart")
    assert failure_status(natten) == "skipped"  # the telling line is not the last one
    assert failure_status("ModuleNotFoundError: No module named 'natten'") == "skipped"
    assert failure_status("UserError: X is a vision-language model: its forward wants "
                              "a prompt") == "refused"
    assert failure_status("RuntimeError: is a vision-language model") == "failed"
    assert failure_status("RuntimeError: shapes differ") == "failed"


# ---- --neutral-names: the breakdown of a renamed build against the real one (issue 24) --------

# block 0's feed-forward (u.0.f, renamed m1.0.m2), moved as a misplacement would move it
MOVED = [("^(u|m1)\\.0\\.(f|m2)\\.", "attn_proj")]


def _analyze_at_16(*moves: tuple[str, str], warn: str = "") -> Callable[..., Any]:
    """vitprof.analyze at 16 px (the strangers' size), ``moves`` as --map rules, ``warn`` added
    to the warnings: how a renamed run that moved something looks."""
    import dataclasses

    def analyzed(model: torch.nn.Module, **_: object) -> object:
        profile = analyze(model, image_size=16, overrides=moves)
        return dataclasses.replace(profile, warnings=(*profile.warnings, warn)) if warn else profile
    return analyzed


def test_neutral_changes_names_what_moved_and_its_share() -> None:
    real, moved = _analyze_at_16()(Tiny()), _analyze_at_16(*MOVED)(Tiny())
    assert neutral_changes(real, real) == ""
    # block 0's feed-forward: 2*32*64 + 64 + 32 = 4_192 params, 2*16*32*64 = 65_536 MACs, of
    # 24_576 + 2*(3*16*32*32 + 2*16*16*32 + 16*32*32 + 2*16*32*64) + 320 = 319_808: 20.49%
    assert neutral_changes(real, moved) == (
        "attn_proj +4,192 params +65,536 MACs; mlp -4,192 params -65,536 MACs; "
        "20.5% of MACs moved")


def test_a_renamed_build_is_identical_warned_changed_or_failed() -> None:
    real = _analyze_at_16()(Tiny())

    def verdict(analyzed: Callable[..., Any]) -> dict[str, str]:
        return neutral_fields(real, lambda: analyzed(neutral_names(Tiny())))

    assert verdict(_analyze_at_16()) == {"neutral": "identical", "neutral_changes": ""}
    assert verdict(_analyze_at_16(*MOVED))["neutral"] == "CHANGED"
    assert verdict(_analyze_at_16(*MOVED, warn=f"m1.0.m3: {NO_EVIDENCE}"))[
        "neutral"] == "warned"

    def fails(model: torch.nn.Module, **_: object) -> None:
        raise ValueError("no such attribute")
    assert verdict(fails) == {"neutral": "failed",
                              "neutral_changes": "ValueError: no such attribute"}


def test_the_page_counts_the_neutral_verdicts_only_after_a_neutral_sweep() -> None:
    rows = [row("same", neutral="identical"), row("same2", neutral="identical"),
            row("excused", neutral="warned", neutral_changes="mlp +1 params +0 MACs"),
            row("silent", neutral="CHANGED", neutral_changes="mlp +0 params +5 MACs; 5.0% of "
                                                             "MACs moved")]
    page = summary(rows)
    # 2 identical, 1 warned, 1 changed, after the 12 columns of the plain page
    assert "| timm | m | 4 | 4 | 0 | 4 | 100% | 100% | 0 | 0 | 0 | 0 | 2 / 1 / 1 |" in page
    assert "4 models compared: 2 identical, 1 warned, 1 CHANGED, 0 failed." in page
    assert "- timm:silent: CHANGED: mlp +0 params +5 MACs; 5.0% of MACs moved" in page
    assert "- timm:excused: warned: mlp +1 params +0 MACs" in page and "timm:same:" not in page
    plain = summary([row("same")])
    assert "neutral" not in plain.lower()


def test_the_page_lists_the_models_whose_table_differs_from_the_graph() -> None:
    rows = [row("agrees", recognizer="graph (timm table agrees)"),
            row("differs", recognizer="graph (timm table differs)"),
            row("untabled", recognizer="graph")]
    page = summary(rows)
    # 2 rows name a table (agrees, differs), 1 of them differs; the untabled one is not counted
    assert "2 models detected by a table, 1 agree, 1 differ." in page
    assert "- timm:differs: graph (timm table differs)" in page and "timm:agrees:" not in page
    assert "Library tables" not in summary([row("old")])  # a CSV without the column


def test_an_own_classes_pass_gets_its_column_and_section() -> None:
    rows = [row("same", own_classes="identical"),
            row("split", own_classes="CHANGED", own_classes_changes="mlp +0 params +7 MACs")]
    page = summary(rows)
    # 1 identical, 0 warned, 1 changed; no neutral-names pass ran, so one extra column only
    assert "| timm | m | 2 | 2 | 0 | 2 | 100% | 100% | 0 | 0 | 0 | 0 | 1 / 0 / 1 |" in page
    assert "## A class per module" in page and "## Neutral names" not in page
    assert "- timm:split: CHANGED: mlp +0 params +7 MACs" in page


def test_placements_that_moved_against_a_baseline_sweep_are_listed() -> None:
    old = [row("kept", components='{"mlp":[10,100]}'),
           row("moved", components='{"mlp":[10,100]}'),
           row("new_only")]  # no components in the baseline: not compared
    new = [row("kept", components='{"mlp":[10,100]}'),
           row("moved", components='{"mlp":[6,60],"norm":[4,40]}'),
           row("new_only", components='{"mlp":[10,100]}')]
    page = summary(new, (old, "abc1234"), reasons={})
    # moved: mlp 6 - 10 = -4 params, 60 - 100 = -40 MACs; norm +4, +40 (absent before)
    assert "- timm:moved: mlp -4 params -40 MACs; norm +4 params +40 MACs" in page
    # rows of a sweep made before placements and commits: no rule to give a reason for
    assert ("2 models compared with the same sweep run at abc1234 (`--baseline`; vitprof "
            "unrecorded there, unrecorded here); 1 moved, 1 of them without a reason.") in page
    assert "### No placements recorded\n\n- NO REASON: the rows record no placements" in page
    assert "timm:kept:" not in page


# ---- what placed each component, and why a placement moved against another sweep -------------

def test_placements_say_which_rule_placed_what_in_each_component() -> None:
    profile = _analyze_at_16()(Tiny())
    placed = placements(profile)
    # two blocks' feed-forwards: 2 * 4_192 = 8_384 params, 2 * 16 tokens * 4_096 = 131_072 MACs
    assert placed["mlp"] == {"weighted-in-block": [8_384, 131_072]}
    # the stem: 48 * 32 + 32 = 1_568 params, 16 tiles * 48 * 32 = 24_576 MACs; its table 16 * 32
    assert placed["patch_embed"] == {"weighted-before-blocks": [1_568, 24_576]}
    assert placed["tokens"] == {"token-parameter": [512, 0]}
    # each component's rules add up to its share of the breakdown
    assert {component: tuple(sum(cell[i] for cell in rules.values()) for i in (0, 1))
            for component, rules in placed.items()} == breakdown(profile)


def test_a_move_names_the_rule_that_places_the_moved_records_now() -> None:
    before = '{"mlp":{"weighted-in-block":[10,100]},"head":{"after-last-block-head":[3,3]}}'
    after = ('{"mlp":{"weighted-in-block":[6,60]},"norm":{"norm-by-vector-norm":[4,40]},'
             '"head":{"after-last-block-head":[3,3]}}')
    # norm grew, by the vector-norm rule; mlp only lost; head did not move
    assert moves(before, after, {"mlp", "norm"}) == ("norm-by-vector-norm -> norm",)
    # nothing grew (a component only lost): the rule whose placements changed
    assert moves(before, '{"mlp":{"weighted-in-block":[6,60]}}', {"mlp"}) == (
        "weighted-in-block -> mlp",)
    assert moves("", after, {"norm"}) == ("norm-by-vector-norm -> norm",)


def test_the_page_groups_moved_placements_by_reason_and_flags_one_without() -> None:
    old = [row("gain", components='{"mlp":[10,100]}', commit="f40b197",
               placements='{"mlp":{"weighted-in-block":[10,100]}}'),
           row("ff", components='{"conv":[8,80]}', commit="f40b197",
               placements='{"conv":{"map-conv":[8,80]}}'),
           row("same", components='{"mlp":[1,1]}', commit="f40b197")]
    new = [row("gain", components='{"mlp":[6,60],"norm":[4,40]}', commit="abc1234",
               placements='{"mlp":{"weighted-in-block":[6,60]},'
                          '"norm":{"norm-by-vector-norm":[4,40]}}'),
           row("ff", components='{"mlp":[8,80]}', commit="abc1234",
               placements='{"mlp":{"weighted-in-block":[8,80]}}'),
           row("same", components='{"mlp":[1,1]}', commit="abc1234")]
    reasons = {"norm-by-vector-norm -> norm": "a vector norm times a gain is a norm"}
    page = summary(new, (old, "f40b197"), reasons)
    assert "Run at vitprof abc1234." in page
    # gain and ff moved; ff's move (weighted-in-block -> mlp) has no reason in the file
    assert ("3 models compared with the same sweep run at f40b197 (`--baseline`; vitprof "
            "f40b197 there, abc1234 here); 2 moved, 1 of them without a reason.") in page
    # gain: mlp 6 - 10 = -4 params, 60 - 100 = -40 MACs; norm +4, +40
    assert ("### `norm-by-vector-norm -> norm`\n\n"
            "- `norm-by-vector-norm -> norm`: a vector norm times a gain is a norm\n\n"
            "- timm:gain: mlp -4 params -40 MACs; norm +4 params +40 MACs\n") in page
    # ff: conv -8 params -80 MACs, mlp +8, +80
    assert ("### `weighted-in-block -> mlp`\n\n"
            "- `weighted-in-block -> mlp`: NO REASON in the reasons file\n\n"
            "- timm:ff: conv -8 params -80 MACs; mlp +8 params +80 MACs") in page
    assert "timm:same:" not in page


def test_every_reason_names_a_recognition_rule_and_a_component() -> None:
    from vitprof import Component
    from vitprof.recognize.rules.registry import RULES

    reasons_file = ROOT / "benchmarks" / "zoo_sweep_reasons.toml"
    reasons = read_reasons("f40b197", reasons_file)
    assert reasons  # the reasons of the moves against f40b197 (issue 35)
    assert read_reasons("another sweep", reasons_file) == {}  # none against any other baseline
    for move, sentence in reasons.items():
        rule, _, component = move.partition(" -> ")
        assert rule in RULES and component in {str(c) for c in Component} and sentence, move
