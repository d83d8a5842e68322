"""benchmarks/distributed_measured.py, the independent measurement of per-rank memory (issue 36),
run as the command it is: its harness reads a known allocation exactly, and a real two-rank DDP
run over gloo on a tiny timm ViT gives every rank the same state and a peak above it. Skipped
when torch has no gloo or the ranks cannot join a group on this machine.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "distributed_measured.py"
HARNESS = ROOT / "benchmarks" / "rank_memory.py"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)


def test_the_harness_reads_a_known_allocation_exactly() -> None:
    """1,000,000 float32 kept (and a view of them): the live storages rise by 4,000,000 B,
    counted once. 250,000 float32 more whose storage is then resized to nothing (FSDP2's way of
    freeing a gathered parameter) count 0 B after and 1,000,000 B at the peak, before: the
    harness reads a storage's size when it sums, not when the storage was made. The heap's peak
    is the storages' and malloc's headers, under a page more."""
    done = run_script("probe")
    assert done.returncode == 0, done.stderr
    reading = json.loads(done.stdout)
    assert reading["nbytes"] == 4_000_000  # 1_000_000 * 4
    assert reading["view_nbytes"] == 3_999_996  # (1_000_000 - 1) * 4, the same storage
    assert reading["resized_nbytes"] == 0
    assert reading["live_rise"] == 4_000_000  # the resized storage: 0 B now
    # at the peak, before the resize: 4_000_000 + 250_000 * 4 = 5_000_000
    assert reading["storage_peak_rise"] == 5_000_000
    assert 5_000_000 <= reading["heap_rise"] < 5_000_000 + 4096


@pytest.mark.parametrize("path", [SCRIPT, HARNESS], ids=lambda p: p.name)
def test_the_measuring_harness_imports_no_vitprof(path: Path) -> None:
    """Only the CSV writer is vitprof's (files go through its atomic writer); no measuring code
    is: the one import naming vitprof is vitprof.core.atomic_write."""
    tree = ast.parse(path.read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert [name for name in imported if name.split(".")[0] == "vitprof"] in (
        [], ["vitprof.core.atomic_write"])


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_gloo_available(), reason="torch built without gloo")
def test_a_two_rank_ddp_run_gives_every_rank_the_same_state(tmp_path: Path) -> None:
    """DDP over gloo at world size 2 on timm's VisionTransformer (32 x 32, two blocks of width
    32, ten classes), batch 2 per rank: both ranks start the step with the same state, the
    parameters, AdamW's two moments, DDP's bucket of every gradient, and the batch; the peak,
    in the backward or a collective, is above it."""
    out = tmp_path / "measured.csv"
    done = run_script("--models", "tiny", "--strategies", "ddp", "--world-sizes", "2",
                      "--batch", "2", "--out", str(out))
    if done.returncode != 0 and "gloo" in done.stderr.lower():
        pytest.skip(f"gloo could not start here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(out.open()))
    assert [(r["strategy"], r["world_size"], r["rank"]) for r in rows] == [
        ("ddp", "2", "0"), ("ddp", "2", "1")]
    # parameters of the tiny ViT (embed 32, 2 blocks, mlp 128, 10 classes, 16 patches):
    patch = 3 * 8 * 8 * 32 + 32  # 6_176
    tokens = 32 + 17 * 32  # cls token + position table of 16 + 1 tokens: 576
    block = (2 * 32) + (32 * 96 + 96) + (32 * 32 + 32) + (2 * 32) + (32 * 128 + 128) + (
        128 * 32 + 32)  # 12_704
    head = 2 * 32 + 32 * 10 + 10  # final norm and head: 394
    params = patch + tokens + 2 * block + head  # 32_554
    # params, AdamW's exp_avg and exp_avg_sq, DDP's flat gradient bucket: 4 copies in float32;
    # AdamW's step counts (one float32 scalar per parameter tensor, 4 B each); the batch.
    n_tensors = 2 + 2 + 2 * 12 + 2 + 2  # patch w/b, cls/pos, 12 per block, norm w/b, head w/b
    batch = 2 * 3 * 32 * 32 * 4 + 2 * 8  # images float32 and int64 labels: 24_592
    state = 4 * params * 4 + n_tensors * 4 + batch
    for row in rows:
        assert int(row["baseline_bytes"]) == state
        assert int(row["peak_bytes"]) > state
        assert row["phase"] in ("forward", "backward", "optimizer", "collective")


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_gloo_available(), reason="torch built without gloo")
def test_checkpointed_blocks_start_from_the_same_state_and_hold_less(tmp_path: Path) -> None:
    """--checkpoint blocks wraps each block in torch's checkpoint_wrapper before FSDP2 shards
    it: a real two-rank run starts its step from the same state (checkpointing keeps no tensor
    between steps), its rows say so, and its live storages peak lower."""
    found = {}
    for checkpoint in ("none", "blocks"):
        out = tmp_path / f"{checkpoint}.csv"
        done = run_script("--models", "tiny", "--strategies", "fsdp", "--world-sizes", "2",
                          "--batch", "2", "--checkpoint", checkpoint, "--out", str(out))
        if done.returncode != 0 and "gloo" in done.stderr.lower():
            pytest.skip(f"gloo could not start here: {done.stderr.strip().splitlines()[-1]}")
        assert done.returncode == 0, done.stderr
        found[checkpoint] = list(csv.DictReader(out.open()))
    for plain, checkpointed in zip(found["none"], found["blocks"], strict=True):
        assert (plain["checkpoint"], checkpointed["checkpoint"]) == ("none", "blocks")
        assert plain["baseline_bytes"] == checkpointed["baseline_bytes"]
        assert int(checkpointed["storage_peak_bytes"]) < int(plain["storage_peak_bytes"])


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_gloo_available(), reason="torch built without gloo")
def test_the_peers_figures_on_a_tiny_fsdp_row(tmp_path: Path) -> None:
    """benchmarks/distributed_peers.py on the tiny ViT, FSDP2 at world size 2, batch 8: DeepSpeed's
    ZeRO-3 formula and accelerate's float32 Adam figure, derived from the parameters; torch's
    FSDPMemTracker sees at least the rank's shards, their AdamW moments and the batch."""
    out = tmp_path / "peers.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "distributed_peers.py"), "--models", "tiny",
         "--strategies", "fsdp", "--world-sizes", "2", "--measured", str(tmp_path / "none.csv"),
         "--out", str(out)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    figures = {row["peer"]: row["peer_bytes"] for row in csv.DictReader(out.open())}
    params = 32_554  # as in the DDP test above
    largest = 3 * 8 * 8 * 32 + 32  # the patch projection, 6_176: the most one module holds
    assert int(figures["deepspeed zero3"]) == 4 * largest + 18 * params // 2  # 317_690
    assert int(figures["accelerate estimate-memory"]) == 4 * 4 * params  # 4 x float32: 520_864
    shards = 3 * 4 * params // 2  # parameters and two moments, half each: 195_324
    batch = 8 * 3 * 32 * 32 * 4 + 8 * 8  # 98_368
    assert int(figures["torch FSDPMemTracker"]) > shards + batch


@pytest.mark.slow
def test_the_harness_builds_models_of_other_packages_and_shards_their_own_blocks() -> None:
    """``--models`` spells torchvision's and transformers' models, and a ``FILE.py:FACTORY``,
    each built by the harness from its package; the blocks it shards under zero2/fsdp are read
    from each model's structure: torchvision's ``encoder.layers.encoder_layer_N``,
    transformers' ``vit.layers.N``, vit-pytorch's ``transformer.layers.N`` (12 each, the
    base and DeiT-Ti shapes' depth), the same paths vitprof's breakdown shards
    (benchmarks/distributed_memory.py sets both side by side on its page)."""
    done = run_script("blocks", "--models", "torchvision:vit_b_16", "hf:vit-base-patch16-224",
                      "benchmarks/stranger_models.py:vit_pytorch_tiny")
    assert done.returncode == 0, done.stderr
    blocks = json.loads(done.stdout.strip().splitlines()[-1])
    assert blocks == {
        "torchvision:vit_b_16": [f"encoder.layers.encoder_layer_{i}" for i in range(12)],
        "hf:vit-base-patch16-224": [f"vit.layers.{i}" for i in range(12)],
        "benchmarks/stranger_models.py:vit_pytorch_tiny": [
            f"transformer.layers.{i}" for i in range(12)],
    }
