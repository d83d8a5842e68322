"""The training-memory benchmark's scripts, each run as a command (none is loaded as a
module): the published estimators (benchmarks/memory_baselines.py), the planned rows (--list),
the CUDA script's plan, dry run, refusal without CUDA and saved-file table (device_memory.py),
the page written from hand-made saved results (memory_accuracy.py --from-results,
--cuda-only), Mesa's section (mesa_memory.py), a section replaced (sections.py) and the
independent harness (independent_memory.py --check-heap, --from-results). Expected numbers
are derived by the arithmetic beside them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def script(name: str, *args: str, stdin: str | None = None,
           **env: str) -> subprocess.CompletedProcess[str]:
    """A benchmark script run as a command from the repository root, ``stdin`` its input,
    ``env`` added to the environment (its own process: what it prints, writes and exits
    with)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, str(BENCH / f"{name}.py"), *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": path, **env})


MIB = 2**20


# ------------------------------------------------------------------------------- baselines


MODELS = """\
from torch import nn


class Block(nn.Module):  # torchvision's layout: num_heads around an nn.MultiheadAttention

    def __init__(self):
        super().__init__()
        self.num_heads = 2
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return x + self.attn(x, x, x, need_weights=False)[0]


def blocks():
    return nn.Sequential(nn.Linear(4, 8), Block(), Block())


def linear():
    return nn.Linear(10, 10)  # 100 + 10 = 110 float32 parameters: T = 440 bytes


def shared():
    shared = nn.Linear(4, 4)  # 16 + 4 = 20
    return nn.Sequential(shared, nn.ReLU(), shared, nn.Linear(4, 2))  # + 8 + 2 = 10
"""


@pytest.fixture(scope="module")
def estimated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """memory_baselines.py's lines per model, one run for all: three small models of
    ``MODELS`` and timm's DeiT-Ti at batch 128 and Swin-T at batch 2."""
    pytest.importorskip("timm")
    models = tmp_path_factory.mktemp("baselines") / "models.py"
    models.write_text(MODELS)
    done = script("memory_baselines", f"{models}:blocks=3,5,4", f"{models}:linear=1,10",
                  f"{models}:shared=1,4", "timm:deit_tiny_patch16_224=128,3,224,224",
                  "timm:swin_tiny_patch4_window7_224=2,3,224,224")
    assert done.returncode == 0, done.stderr
    found: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("== "):
            found[line[3:].rpartition(":")[2]] = lines = []
        else:
            lines.append(line)
    return found


def test_the_formula_is_34sbh_plus_5as2b(estimated: dict[str, list[str]]) -> None:
    # DeiT-Ti at batch 128: s = 196 + 1 = 197, h = 192, a = 3, 12 layers
    # 34 * 197 * 128 * 192 = 164,610,048; 5 * 3 * 197**2 * 128 = 74,513,280
    deit = estimated["deit_tiny_patch16_224"]
    assert [x for x in deit if x.startswith("layer: ")] == ["layer: s=197 b=128 h=192 a=3"] * 12
    assert f"34sbh + 5as2b: {12 * (164_610_048 + 74_513_280)}" in deit


def test_attention_layers_are_the_innermost_modules_with_heads(
        estimated: dict[str, list[str]]) -> None:
    # two blocks, each read once at its attention's input: batch 3, 5 tokens, width 8, 2 heads
    assert [x for x in estimated["blocks"] if x.startswith("layer: ")] == [
        "layer: s=5 b=3 h=8 a=2"] * 2


def test_a_swin_window_is_one_sequence(estimated: dict[str, list[str]]) -> None:
    shapes = [x for x in estimated["swin_tiny_patch4_window7_224"] if x.startswith("layer: ")]
    # 2 + 2 + 6 + 2 = 12 blocks; stage 1: 56 x 56 tokens in 7 x 7 windows: 64 windows of 49
    # per image, 2 x 64 = 128 sequences, width 96, 3 heads; stage 4: one 7 x 7 window of 768
    assert len(shapes) == 12
    assert shapes[0] == "layer: s=49 b=128 h=96 a=3"
    assert shapes[-1] == "layer: s=49 b=2 h=768 a=24"


def test_accelerate_is_its_own_functions_result(estimated: dict[str, list[str]]) -> None:
    pytest.importorskip("accelerate")
    # nn.Linear(10, 10): T = 440 bytes
    assert f"accelerate float32: {4 * 440}" in estimated["linear"]  # the step: 4T
    assert f"accelerate bfloat16: {2 * 440}" in estimated["linear"]  # Adam's state: 2T


def test_deepspeed_counts_a_shared_parameter_once(estimated: dict[str, list[str]]) -> None:
    lines = estimated["shared"]
    assert "deepspeed params: 30 (largest layer 20)" in lines  # 20 + 10, shared once
    assert f"zero2: {4 * 30 + 16 * 30}" in lines  # 600
    assert f"zero3: {4 * 20 + 18 * 30}" in lines  # 620


# ------------------------------------------------------------------------------- rows


@cache
def planned(name: str, *args: str) -> list[str]:
    """The row keys a script plans (``--list``: printed, nothing run)."""
    done = script(name, "--list", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


DEIT_TI, DEIT_S = "deit_tiny_patch16_224", "deit_small_patch16_224"


def on_cuda(key: str) -> str:
    """A CPU row's key as CUDA measures it: float32 has no flash kernel there, the fused path
    is the memory-efficient one."""
    return key.replace("/float32/none/flash", "/float32/none/efficient").replace(
        "/float32/blocks/flash", "/float32/blocks/efficient")


def test_the_acceptance_grid_is_two_models_two_batches_two_precisions_two_checkpoints() -> None:
    keys = planned("device_memory")
    # every (model, batch, precision, checkpoint) of DeiT-Ti/S x 8/32 x fp32/bf16 x none/blocks
    # with the fused attention: 2 * 2 * 2 * 2 = 16 rows, all planned on CUDA
    grid = {on_cuda(f"{m}/b{b}/{p}/{c}/flash") for m in (DEIT_TI, DEIT_S) for b in (8, 32)
            for p in ("float32", "bfloat16") for c in ("none", "blocks")}
    assert len(grid) == 16 and grid <= set(keys)
    # the CPU holds its float32 half: 2 * 2 * 2 = 8 rows
    assert {k for k in grid if "/float32/" in k} == {
        on_cuda(k) for k in planned("memory_accuracy") if k.split("/")[0] in (DEIT_TI, DEIT_S)
        and k.endswith("/flash") and "/float32/" in k}


def test_cuda_rows_hold_the_grid_vit_b_16_at_64_fused_and_mesa() -> None:
    keys = planned("device_memory")
    assert len(keys) == len(set(keys))
    # float32 has no flash kernel on CUDA: the fused path is the memory-efficient one
    assert f"{DEIT_TI}/b8/float32/none/efficient" in keys
    assert f"{DEIT_TI}/b8/bfloat16/blocks/flash" in keys
    assert {"vit_b_16/b64/float32/none/efficient", "vit_b_16/b64/bfloat16/none/flash"} <= set(keys)
    assert "deit_base_patch16_224/b128/float16/none/explicit" in keys  # Mesa's
    # every CPU row is measured on CUDA too
    assert {on_cuda(k) for k in planned("memory_accuracy")} <= set(keys)


def test_quick_rows_are_deit_tiny_at_batch_8_in_float32() -> None:
    quick = planned("memory_accuracy", "--quick")
    # flash and math without checkpointing, flash with it
    assert quick == [f"{DEIT_TI}/b8/float32/none/flash", f"{DEIT_TI}/b8/float32/blocks/flash",
                     f"{DEIT_TI}/b8/float32/none/math"]


# ------------------------------------------------------------------------------- device script


def test_the_device_script_lists_its_plan() -> None:
    done = script("device_memory", "--list", "--rows", "vit_b_16")
    assert done.returncode == 0, done.stderr
    # vit_b_16 at batch 64, float32 (efficient) and bfloat16 (flash)
    assert done.stdout.split() == [
        "vit_b_16/b64/float32/none/efficient", "vit_b_16/b64/bfloat16/none/flash"]


def test_the_device_script_refuses_in_one_line_without_cuda(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = script("device_memory", "--out", str(out), CUDA_VISIBLE_DEVICES="")  # no GPU seen
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no CUDA device" in done.stderr
    assert not out.exists()


@pytest.mark.slow
def test_the_dry_run_builds_each_row_as_a_run_would_and_holds_its_json_to_the_schema() -> None:
    pytest.importorskip("jsonschema")
    pytest.importorskip("timm")
    done = script("device_memory", "--dry-run", "--rows", DEIT_TI, CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 0, done.stderr
    *built, schema = done.stdout.splitlines()
    # DeiT-Ti: 12 blocks, one attention module each; the explicit path (Mesa's row) turns
    # timm's fused attention off in all of them, every other path leaves it on
    assert f"{DEIT_TI}/b128/float16/none/explicit: fused attention in 0 of 12 attention " \
           "modules, block checkpointing off" in built
    assert f"{DEIT_TI}/b8/float32/blocks/efficient: fused attention in 12 of 12 attention " \
           "modules, block checkpointing on" in built
    assert [line for line in built if "explicit" not in line and "12 of 12" not in line] == []
    assert len(built) == len(planned("device_memory", "--rows", DEIT_TI))
    # the JSON a run writes: its version and convention, valid under the schema
    assert schema.startswith("the JSON a run writes: schema_version 2, valid under "
                             "memory_cuda.schema.json; convention: bytes; peak_bytes = "
                             "torch.cuda.max_memory_allocated")


def test_the_device_markdown_lists_each_row(tmp_path: Path) -> None:
    pytest.importorskip("jsonschema")
    data = {"schema_version": 2, "convention": "bytes", "device": "GPU", "torch": "2", "rows": [
        {"row": "a", "peak_bytes": 3 * MIB, "allocated_before": MIB, "seconds": 0.5},
        {"row": "b", "error": "CUDA out of memory."}]}
    saved = tmp_path / "memory_cuda.json"
    saved.write_text(json.dumps(data))
    done = script("device_memory", "--markdown", str(saved))
    assert done.returncode == 0, done.stderr
    assert f"| a | {3 * MIB:,} | 3.0 | {MIB:,} |" in done.stdout  # 3 MiB = 3 * 2**20 bytes
    assert "| b | failed: CUDA out of memory. | | |" in done.stdout
    # a file its schema refuses (a peak must be an integer): one line, exit code 2
    data["rows"][0]["peak_bytes"] = 1.5
    saved.write_text(json.dumps(data))
    done = script("device_memory", "--markdown", str(saved))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{saved}: not a device_memory.py measurement: 1.5 is not of type 'integer'" in (
        done.stderr)


# ------------------------------------------------------------------------------- Mesa's rows


# DeiT-Ti: 12 layers of 3 heads, 196 + 1 tokens, width 192, 5,717,416 parameters
TI_SHAPE = {"blocks": 12, "heads": 3, "tokens": 197, "width": 192, "params": 5_717_416}


def mesa_ti(predicted: int, published_mib: int = 4171, formula: int = 12 * 239_123_328,
            **changed: object) -> dict[str, object]:
    """DeiT-Ti's Mesa row as the results file holds it (bytes)."""
    return {"row": {"model": DEIT_TI, "batch": 128, "amp": "float16", "checkpoint": "none",
                    "attention": "explicit"}, "published_mib": published_mib,
            "predicted": predicted, "states": 87 * MIB, "saved": 3000 * MIB, "formula": formula,
            "shape": TI_SHAPE, "grads_at_peak": 774_144, "grads": 4 * 5_717_416,
            "evaluation": 600 * MIB, "workspace": 2 * 32 * MIB, **changed}  # 2 handles


def mesa_section(tmp_path: Path, *rows: dict[str, object], page: Path | None = None) -> str:
    """The section mesa_memory.py prints for ``rows`` (saved as a results file), or with
    ``page`` what it leaves in that page."""
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps({"mesa": list(rows)}))
    done = script("mesa_memory", str(saved), *(["--page", str(page)] if page else []))
    assert done.returncode == 0, done.stderr
    return page.read_text() if page else done.stdout


def test_the_mesa_table_compares_with_the_published_mib(tmp_path: Path) -> None:
    table = mesa_section(tmp_path, mesa_ti(4000 * MIB))
    # 4,000 / 4,171 - 1 = -4.1%; the formula: 12 x 239,123,328 = 2,869,479,936 bytes
    # = 2,736.5 MiB, 2,736.5 / 4,171 - 1 = -34.4%
    assert f"| {DEIT_TI} | 4,171 | 4,000 | -4.1% | 87 | 3,000 | 2,737 | -34.4% |" in table


def test_the_2021_runs_causes_are_arithmetic_on_the_model(tmp_path: Path) -> None:
    section = mesa_section(tmp_path, mesa_ti(3000 * MIB))
    # softmax's float32 input per layer: 128 x 3 x 197**2 x 4 = 59,610,624 bytes; 12 layers
    softmax = 12 * 59_610_624
    workspace = -2 * 32 * MIB  # what vitprof charges: 2 handles, -64 MiB
    ddp = 4 * 5_717_416  # a float32 copy of every gradient
    kept = 4 * 5_717_416 - 774_144  # all gradients, less those alive at the peak
    # 3,000 MiB + 715,327,488 - 67,108,864 + 22,869,664 + 22,095,520 = 3,000 MiB + 693,183,808
    explained = 3000 * MIB + softmax + workspace + ddp + kept
    assert explained == 3000 * MIB + 693_183_808
    residual = 4171 * MIB - explained  # 534,698,688
    # per token-channel-block: 128 x 197 x 192 x 12 = 58,097,664; per parameter: 5,717,416
    assert (f"| {DEIT_TI} | 3,000 | {softmax / MIB:,.0f} | -64 | {ddp / MIB:,.0f} | "
            f"{kept / MIB:,.0f} | {explained / MIB:,.0f} | "
            f"{-100 * residual / (4171 * MIB):+.1f}% | {residual / MIB:,.0f} | "
            f"{residual / 58_097_664:.1f} | {residual / 5_717_416:.1f} |") in section
    # per score: 128 x 3 x 197**2 x 12 = 178,831,872
    per_score = residual / 178_831_872
    assert f"it is also {per_score:.2f} to {per_score:.2f} bytes per attention score" in section


def test_the_residual_is_fitted_to_what_it_scales_with(tmp_path: Path) -> None:
    small = {"blocks": 12, "heads": 6, "tokens": 197, "width": 384, "params": 22_050_664}
    # vitprof 0 and the workspaces -64 MiB: published = residual + explained; a residual of
    # 3 bytes per token-channel-block in both (58,097,664 and 116,195,328 of them), so the
    # published figures are softmax + DDP - 64 MiB + 3 x that (rounded up to a MiB)
    ti = 12 * 59_610_624 + 4 * 5_717_416 - 64 * MIB + 3 * 58_097_664
    s = 2 * 12 * 59_610_624 + 4 * 22_050_664 - 64 * MIB + 3 * 116_195_328
    section = mesa_section(
        tmp_path, mesa_ti(0, -(-ti // MIB), grads_at_peak=0, grads=0),
        mesa_ti(0, -(-s // MIB), shape=small, grads_at_peak=0, grads=0))
    assert "it scales with the activations, not with the model's size" in section


def test_the_mesa_verdict_follows_the_numbers(tmp_path: Path) -> None:
    def mesa(predicted_mib: int) -> dict[str, object]:
        return mesa_ti(predicted_mib * MIB, published_mib=1000, formula=600 * MIB)

    # 1,040 / 1,000 - 1 = +4.0% and 970 / 1,000 - 1 = -3.0%: within 5%
    assert ("Reproduced: vitprof's predictions are within 4.0% of Mesa's figures."
            in mesa_section(tmp_path, mesa(1040), mesa(970)))
    # 620 / 1,000 - 1 = -38.0%; the formula: 600 / 1,000 - 1 = -40.0%
    verdict = next(line for line in mesa_section(tmp_path, mesa(620), mesa(1000)).splitlines()
                   if line.startswith("Not reproduced"))
    assert verdict.startswith("Not reproduced as today's step: vitprof's predictions of it are "
                              "-38.0% to +0.0% off")
    assert verdict.endswith("The 34sbh + 5as²b formula alone is -40.0% to -40.0% off them.")


def test_the_mesa_section_replaces_itself_alone(tmp_path: Path) -> None:
    """What memory_accuracy.py --mesa-only writes: that section of the page, up to the next
    ``## `` heading, the rest kept."""
    page = tmp_path / "memory.md"
    page.write_text("# Page\n\nintro\n\n## Mesa's DeiT figures\n\nSTALE\n\n### sub\n\nSTALE\n\n"
                    "## Training memory: x\n\nkept\n")
    text = mesa_section(tmp_path, mesa_ti(4000 * MIB), page=page)
    assert "STALE" not in text and text.startswith("# Page\n\nintro\n\n## Mesa's DeiT figures")
    assert text.endswith("\n\n## Training memory: x\n\nkept\n")
    assert "### A hypothesis: what the 2021 run may have held that today's step does not" in text


# ------------------------------------------------------------------------------- the page


def result(row: dict[str, object], measured: int, predicted: int) -> dict[str, object]:
    """One CPU row as the results file holds it (bytes; AdamW's 16 B x 10 Mi params)."""
    return {"row": {"model": DEIT_TI, "batch": 8, "amp": None, "checkpoint": "none",
                    "attention": "flash", **row},
            "predicted": predicted, "measured": measured, "predicted_saved": 50 * MIB,
            "measured_saved": 50 * MIB, "seconds": 1.5,
            "baselines": {"params": 10 * MIB, "formula": 100 * MIB, "accelerate": 40 * MIB,
                          "zero2": 200 * MIB, "zero3": 190 * MIB}}


SAVED = {
    "run": {"flags": " --quick", "cpu": "a test CPU", "python": "Python 3", "torch": "2",
            "threads": 2, "seconds": 12.0},
    # 1,000 MiB measured: predicted 1,020 (+2.0%) and 950 (-5.0%); 500 MiB: 500 (+0.0%)
    "cpu": [result({}, 1000 * MIB, 1020 * MIB), result({"checkpoint": "blocks"}, 1000 * MIB,
                                                        950 * MIB),
            result({"attention": "math"}, 500 * MIB, 500 * MIB)],
    "mesa": [mesa_ti(4000 * MIB)],
}
INDEPENDENT = "## CPU, default settings: an independent measurement\n\nrows\n"
LOOPS = ("## The loops people write\n\nrows\n\n"
         "## `--fit` against a search over real steps\n\nsearch\n")


@pytest.fixture(scope="module")
def page_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """memory_accuracy.py --from-results on :data:`SAVED` (nothing measured; the shown
    estimate predicted), over a page whose independent and loop sections it keeps, with no
    CUDA measurement; saving what it read again. Its folder."""
    pytest.importorskip("timm")
    out = tmp_path_factory.mktemp("page")
    (out / "results.json").write_text(json.dumps(SAVED))
    (out / "memory.md").write_text(f"# Old page\n\n## CPU: x\n\nSTALE\n\n{INDEPENDENT}\n"
                                   f"## CUDA\n\nSTALE\n\n{LOOPS}")
    done = script("memory_accuracy", "--out", str(out), "--from-results",
                  str(out / "results.json"), "--save-results", str(out / "again.json"))
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.slow
def test_the_accuracy_table_and_summary(page_run: Path) -> None:
    page = (page_run / "memory.md").read_text()
    # the error is in percent of the measurement: 1,020 / 1,000 - 1 = +2.0%, 950: -5.0%
    assert (f"| {DEIT_TI} | 8 | float32 | none | flash | {1000 * MIB:,} | {1020 * MIB:,} "
            f"| +2.0% | {50 * MIB:,} | +0 | 1.5 |") in page
    assert (f"| {DEIT_TI} | 8 | float32 | blocks | flash | {1000 * MIB:,} | {950 * MIB:,} "
            "| -5.0% |") in page
    assert ("2 of 3 rows within 3% of the measured peak (largest error 5.00%); "
            "saved-for-backward bytes equal to the byte on 3 of 3. This holds on the CPU "
            "(measured), for the stylised step above, at 2 threads") in page  # the run's threads
    assert "error depends on the thread count; CUDA: modelled, not measured." in page


@pytest.mark.slow
def test_the_baselines_table_puts_each_estimate_against_the_measurement(page_run: Path) -> None:
    page = (page_run / "memory.md").read_text()
    # formula 100 MiB: -90.0%; + 16 B x 10 Mi params = 100 + 160 = 260 MiB: -74.0%;
    # accelerate 40 MiB: -96.0%; ZeRO-2 200 MiB: -80.0%; ZeRO-3 190 MiB: -81.0%
    assert ("| 1,020 MiB (+2.0%) | 100 MiB (-90.0%) | 260 MiB (-74.0%) | 40 MiB (-96.0%) | "
            "200 MiB (-80.0%) | 190 MiB (-81.0%) |") in page
    # the formula: 100 / 1,000 -> -90.0% (twice), 100 / 500 -> -80.0%
    assert "**34sbh + 5as²b** (-90.0% to -80.0%)" in page


@pytest.mark.slow
def test_the_page_from_saved_results_and_its_figure(page_run: Path) -> None:
    from vitprof.render import figures

    page = (page_run / "memory.md").read_text()
    headings = [line for line in page.splitlines() if line.startswith("#")]
    assert headings == [
        "# Training memory: predicted against measured",
        "## CPU: vitprof against the measured peak",
        "## CPU, default settings: an independent measurement", "## CUDA",
        "## The other estimates on the same rows", "## Mesa's DeiT figures",
        "### A hypothesis: what the 2021 run may have held that today's step does not",
        f"## Training memory: {DEIT_S}",  # the shown row's model, not the estimate's
        "## The loops people write", "## `--fit` against a search over real steps"]
    # the run's flags, machine and time, not those of the process that wrote the page
    assert ("Generated by `python benchmarks/memory_accuracy.py --quick` on a test CPU "
            "(2 cores, Python 3, torch 2): 3 real CPU training steps in 12 s") in page
    assert "Not measured: no GPU was lent" in page  # no memory_cuda.json beside it
    assert f"| {DEIT_TI} | 4,171 | 4,000 | -4.1% |" in page  # Mesa's row, as saved
    assert f"![memory over one training step of {DEIT_S}](memory_timeline.png)" in page
    assert figures.read_digest(page_run / "memory_timeline.png") is not None
    # the sections of independent_memory.py and independent_loops.py come back as they were
    assert "STALE" not in page and "# Old page" not in page
    assert f"{INDEPENDENT}\n## CUDA" in page and page.endswith(LOOPS)
    assert json.loads((page_run / "again.json").read_text()) == SAVED  # saved as read


ON_CUDA = f"{DEIT_TI}/b8/float32/none/efficient"  # a planned CUDA row


@pytest.mark.slow
def test_the_cuda_section_puts_each_measured_row_beside_its_prediction(tmp_path: Path) -> None:
    pytest.importorskip("jsonschema")
    pytest.importorskip("timm")
    data = {"schema_version": 2, "convention": "bytes", "device": "H100", "torch": "2", "rows": [
        {"row": ON_CUDA, "peak_bytes": 100 * MIB, "allocated_before": 0, "seconds": 0},
        {"row": "s", "error": "CUDA out of memory."}]}
    (tmp_path / "memory_cuda.json").write_text(json.dumps(data))
    (tmp_path / "memory.md").write_text("# T\n\n## CUDA\n\nSTALE\n\n## Next\n\nkept\n")
    done = script("memory_accuracy", "--out", str(tmp_path), "--cuda-only")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "memory.md").read_text()
    assert page.startswith("# T\n\n## CUDA\n\nMeasured on H100 (torch 2)")
    assert "STALE" not in page and page.endswith("\n\n## Next\n\nkept\n")
    # the row read back into its plan, predicted for CUDA: error in percent of the measurement
    cells = next(line for line in page.splitlines() if line.startswith(f"| {ON_CUDA} |"))
    measured, predicted, error = (cell.strip() for cell in cells.split("|")[2:5])
    assert measured == f"{100 * MIB:,}"
    assert error == f"{100 * (int(predicted.replace(',', '')) - 100 * MIB) / (100 * MIB):+.1f}%"
    assert "| s | failed: CUDA out of memory. | | |" in page
    # a file of the schema before (version 1): refused in one line, the page left as it was
    (tmp_path / "memory_cuda.json").write_text(json.dumps({**data, "schema_version": 1}))
    refused = script("memory_accuracy", "--out", str(tmp_path), "--cuda-only")
    assert refused.returncode == 2 and refused.stderr.splitlines()[-1] == (
        f"memory_accuracy.py: error: {tmp_path / 'memory_cuda.json'}: not a device_memory.py "
        "measurement: 2 was expected")
    assert (tmp_path / "memory.md").read_text() == page
    # a file that is no JSON at all (a truncated copy): the same one line, no traceback
    (tmp_path / "memory_cuda.json").write_text('{"schema_version": 2, "rows": [')
    refused = script("memory_accuracy", "--out", str(tmp_path), "--cuda-only")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert refused.stderr.startswith(
        f"memory_accuracy.py: error: {tmp_path / 'memory_cuda.json'}: not a device_memory.py "
        "measurement: not JSON")
    # a measured row the plan no longer holds: shown, said so, no KeyError
    (tmp_path / "memory_cuda.json").write_text(json.dumps({**data, "rows": [
        {"row": "gone", "peak_bytes": MIB, "allocated_before": 0, "seconds": 0}]}))
    done = script("memory_accuracy", "--out", str(tmp_path), "--cuda-only")
    assert done.returncode == 0, done.stderr
    assert f"| gone | {MIB:,} | not in this plan | |" in (tmp_path / "memory.md").read_text()


def test_main_refuses_a_filter_no_row_matches() -> None:
    done = script("memory_accuracy", "--rows", "no_such_model")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "memory_accuracy.py: error: no row's key contains no_such_model")


def test_a_section_ends_at_the_next_heading_of_its_level(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A\n\n## B\n\nb\n\n### B1\n\nb1\n\n## C\n\nc\n")

    def replace(heading: str, text: str, *level: str) -> str:
        done = script("sections", str(page), heading, *level, stdin=text)
        assert done.returncode == 0, done.stderr
        return page.read_text()

    assert replace("## B", "## B\n\nnew\n", "--level", "2") == "# A\n\n## B\n\nnew\n\n## C\n\nc\n"
    # level 1 (the default): up to the next "# "
    assert replace("# A", "# A\n\nall\n") == "# A\n\nall\n"


def test_the_independent_harness_shares_no_code_with_vitprof() -> None:
    """benchmarks/independent_memory.py imports nothing of vitprof (it runs `vitprof memory`
    as a command): no import statement names it."""
    import ast

    tree = ast.parse((BENCH / "independent_memory.py").read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert imported and not [name for name in imported if name.split(".")[0] == "vitprof"]


def test_the_heap_reading_sees_a_tensor_made_under_it() -> None:
    """The harness's own check: HeapPeak's peak rises by at least a tensor's bytes made and
    kept under it."""
    done = script("independent_memory", "--check-heap")
    assert done.returncode == 0, done.stderr
    found = re.fullmatch(r"heap reading: rose ([\d,]+) bytes while a ([\d,]+)-byte tensor was "
                         r"made and kept under it\n", done.stdout)
    assert found, done.stdout
    rose, made = (int(n.replace(",", "")) for n in found.groups())
    assert made == 4 * 2**20 and rose >= made  # 2**20 float32 elements: 4,194,304 bytes


def test_the_independent_section_replaces_itself_in_the_page(tmp_path: Path) -> None:
    """independent_memory.py --from-results writes its section from a saved run (nothing
    measured), where memory_accuracy.py's page keeps it after the CPU's section."""
    saved = {"run": {"argv": ["--threads", "2"], "cpu": "a test CPU", "threads": 2,
                     "torch": "2", "seconds": 1.0},
             "rows": [{"model": DEIT_TI, "batch": 8, "amp": None, "predicted": 103,
                       "measured": 100, "attention": "flash (auto: ...)"}]}
    (tmp_path / "results.json").write_text(json.dumps(saved))
    page = tmp_path / "memory.md"
    page.write_text("# T\n\n## CPU: x\n\nkept\n\n"
                    "## CPU, default settings: an independent measurement\n\nSTALE\n\n"
                    "## CUDA\n\nc\n")
    done = script("independent_memory", "--from-results", str(tmp_path / "results.json"),
                  "--out", str(page), "--save-results", str(tmp_path / "again.json"))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert text.startswith("# T\n\n## CPU: x\n\nkept\n\n"
                           "## CPU, default settings: an independent measurement\n\n"
                           "Generated by `python benchmarks/independent_memory.py --threads 2` "
                           "(CPU, measured) on a test CPU with 2 threads")
    assert "STALE" not in text and text.endswith("\n\n## CUDA\n\nc\n")
    # (103 - 100) / 100 = +3.00%, within the 3% bound
    assert f"| {DEIT_TI} b8 float32 | flash (auto: ...) | 103 | 100 | +3.00% |" in text
    assert "1 of 1 rows within 3%" in text
    assert json.loads((tmp_path / "again.json").read_text()) == saved  # saved as read


def test_a_results_file_that_is_not_one_is_refused_in_one_line(tmp_path: Path) -> None:
    """Each page written again from a saved run (--from-results, mesa_memory.py's RESULTS)
    refuses a file that is missing, no JSON, or lacks a part it reads: one line naming the
    script, exit code 2 (before: a JSONDecodeError, FileNotFoundError or KeyError traceback)."""
    (tmp_path / "text.json").write_text("not json\n")
    (tmp_path / "other.json").write_text('{"run": {}}\n')
    cases = [
        (("memory_accuracy", "--out", str(tmp_path), "--from-results",
          str(tmp_path / "missing.json")), "No such file or directory"),
        (("independent_memory", "--no-page", "--from-results", str(tmp_path / "text.json")),
         "Expecting value"),
        (("mesa_memory", str(tmp_path / "other.json")), 'no "mesa"'),
    ]
    for args, why in cases:
        refused = script(*args)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1, refused.stderr
        assert lines[0].startswith(f"{args[0]}.py: error: ") and why in lines[0]
