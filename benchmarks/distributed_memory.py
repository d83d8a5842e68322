"""``reports/distributed_memory.md``: each rank's predicted peak (``vitprof memory --strategy S
--world-size N --target cpu``) beside the largest rank's peak measured in real multi-process
gloo runs, the peers on the same rows, and the per-rank peak against world size of ViT-g/14
and ViT-22B.

    python benchmarks/distributed_memory.py [--measured CSV] [--peers CSV]
        [--figure-models timm:vit_giant_patch14_224 ...] [--figure-world-sizes 8 64 1024]

``--figure-models`` naming none keeps the page's figure section as it is (the default
figure, ViT-g/14 and ViT-22B at three world sizes and four strategies, takes minutes).

The measured rows and the peers' figures are read, not made, here: they come from
``benchmarks/distributed_measured.py`` (real ``torch.multiprocessing`` runs, one process and one
thread a rank, gloo, a harness sharing no code with vitprof) and
``benchmarks/distributed_peers.py`` (FSDPMemTracker / MemTracker, DeepSpeed's estimators,
accelerate), written by the issue's measuring side and copied into ``reports/``. Each
prediction is the second step of the measured loop: ``--loss cross-entropy`` (the measurement
takes cross-entropy of random labels), the row's ``--checkpoint`` (``none``, or ``blocks``:
each transformer block under ``torch.utils.checkpoint``) and ``--amp`` (the forward under CPU
autocast); a measured file without those columns is ``none``.

The measured models are spelled as the harness builds them: a timm name (predicted as
``timm:NAME``), ``torchvision:NAME`` (predicted as ``NAME``, the zoo's torchvision entry),
``hf:NAME`` (the zoo's transformers config of that name) or ``FILE.py:FACTORY`` (the same file
for both). For each model with a zero2 or fsdp row, the blocks the harness shards (picked from
the model's own structure by ``distributed_measured.block_paths``) are set beside those the
prediction shards (``RankMemory.sharded_blocks``): both printed and tabled; the script exits
1 after writing the page where they differ.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
MEASURED = REPORTS / "distributed_memory_measured.csv"
PEERS = REPORTS / "distributed_memory_peers.csv"
PAGE = REPORTS / "distributed_memory.md"
FIGURE = REPORTS / "distributed_memory_world_size.png"
FIGURE_STRATEGIES = ("ddp", "zero1", "zero2", "fsdp")
LIMIT = 80 * 10**9  # an 80 GB accelerator
TOLERANCE = 0.03
FIGURE_HEADING = "## Per-rank peak against world size"


Key = tuple[str, str, int, int]  # model, strategy, world size, batch per rank
Row = tuple[str, str, int, int, str, str]  # a Key, the checkpointing (none, blocks), the amp


def largest_ranks(path: Path) -> dict[Row, dict[str, str]]:
    """The measured row of the rank with the largest peak, per model, strategy, world size,
    batch and checkpointing."""
    found: dict[Row, dict[str, str]] = {}
    with path.open() as handle:
        for row in csv.DictReader(handle):
            key = (row["model"], row["strategy"], int(row["world_size"]), int(row["batch"]),
                   row.get("checkpoint") or "none", row.get("amp") or "none")
            if key not in found or int(row["peak_bytes"]) > int(found[key]["peak_bytes"]):
                found[key] = row
    return found


def peers(path: Path) -> dict[Key, list[dict[str, str]]]:
    """The peers' figures per row."""
    found: dict[Key, list[dict[str, str]]] = defaultdict(list)
    if path.exists():
        with path.open() as handle:
            for row in csv.DictReader(handle):
                found[(row["model"], row["strategy"], int(row["world_size"]),
                       int(row["batch"]))].append(row)
    return found


def vitprof_name(model: str) -> str:
    """The name vitprof takes for a model the harness spells ``model`` (see the module)."""
    if model.startswith("torchvision:"):
        return model.removeprefix("torchvision:")
    return model if ":" in model else f"timm:{model}"


def predicted(key: Row) -> tuple[int, str, float, tuple[str, ...]]:
    """vitprof's per-rank peak of a measured row, its phase, the seconds it took, and the
    blocks it sharded."""
    import vitprof
    from vitprof.measure.distributed.estimate import RankMemory
    from vitprof.workload import InputRequest

    model, strategy, world, batch, checkpoint, amp = key
    start = time.perf_counter()
    found = vitprof.memory(vitprof_name(model), InputRequest(batch_size=batch), target="cpu",
                           strategy=strategy, world_size=world, loss="cross-entropy",
                           checkpoint=checkpoint, amp=None if amp == "none" else amp)
    sharded = found.sharded_blocks if isinstance(found, RankMemory) else ()  # none: one process
    return found.peak_bytes, found.peak_phase, time.perf_counter() - start, sharded


def harness_blocks(model: str) -> list[str]:
    """The blocks benchmarks/distributed_measured.py shards in ``model``, read by its own code
    from the model's structure."""
    from distributed_measured import block_paths, build

    return block_paths(build(model)[0])


def blocks_section(sharded: dict[str, tuple[str, ...]]) -> tuple[list[str], bool]:
    """Per model, the blocks the harness and the prediction shard; and whether all agree."""
    lines = ["| model | blocks the harness shards | blocks the prediction shards | same |",
             "|---|---|---|---|"]
    agree = True
    for model, predicted_blocks in sorted(sharded.items()):
        measured_blocks = harness_blocks(model)
        same = list(predicted_blocks) == measured_blocks
        agree &= same
        print(f"{model}: harness shards {measured_blocks}\n"
              f"{' ' * len(model)}  prediction shards {list(predicted_blocks)}", flush=True)
        lines.append(f"| {model} | {_blocks_text(measured_blocks)} | "
                     f"{_blocks_text(predicted_blocks)} | {'yes' if same else 'NO'} |")
    return lines, agree


def _blocks_text(paths: Sequence[str]) -> str:
    return f"{len(paths)}: `{paths[0]}` ... `{paths[-1]}`" if paths else "none"


def _pct(a: int, b: int) -> str:
    return f"{(a - b) / b:+.2%}"


def rows_section(measured: dict[Row, dict[str, str]], peer_rows: dict[Key, list[dict[str, str]]],
                 sharded: dict[str, tuple[str, ...]]) -> list[str]:
    """The table of predicted against measured rows and the peers'; ``sharded`` is filled with
    the blocks each model's zero2/fsdp prediction sharded."""
    out = ["| model | checkpoint | amp | strategy | world size | batch / rank | predicted B "
           "(phase) | measured B, largest rank (phase) | difference | within 3% | measured live "
           "storages B | prediction s |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    peer_lines = ["| model | strategy | world size | peer | peer B | vs measured | counts | "
                  "leaves out |", "|---|---|---:|---|---:|---:|---|---|"]
    within = 0
    for key in sorted(measured, key=lambda k: (k[0], k[4] != "none", k[5] != "none",
                                               FIGURE_STRATEGIES.index(k[1])
                                               if k[1] in FIGURE_STRATEGIES else -1, k[2])):
        row = measured[key]
        peak, phase, seconds, blocks = predicted(key)
        if blocks:
            sharded[key[0]] = blocks
        real = int(row["peak_bytes"])
        ok = abs(peak - real) <= TOLERANCE * real
        within += ok
        out.append(f"| {key[0]} | {key[4]} | {key[5]} | {key[1]} | {key[2]} | {key[3]} | "
                   f"{peak:,} ({phase}) | "
                   f"{real:,} ({row['phase']}) | {_pct(peak, real)} | {'yes' if ok else 'NO'} | "
                   f"{int(row['storage_peak_bytes']):,} | {seconds:.0f} |")
        print(out[-1], flush=True)
        for peer in peer_rows.get(key[:4], []) if key[4:] == ("none", "none") else []:
            value = int(peer["peer_bytes"]) if peer["peer_bytes"] else None
            peer_lines.append(
                f"| {key[0]} | {key[1]} | {key[2]} | {peer['peer']} | "
                f"{'' if value is None else f'{value:,}'} | "
                f"{'' if value is None else _pct(value, real)} | {peer['counts']} | "
                f"{peer['leaves_out']} |")
    summary = f"{within} of {len(measured)} rows within 3% of the largest measured rank's peak."
    return [summary, "", *out, "", "## The peers on the same rows", "", *peer_lines]


def figure_section(models: Sequence[str], world_sizes: Sequence[int]) -> list[str]:
    """The per-rank peak against world size (target cuda, batch 1 per rank), drawn and
    tabled."""
    import vitprof
    from vitprof.render import figures
    from vitprof.render.world_size_figure import world_size_figure
    from vitprof.workload import InputRequest

    out = []
    for model in models:
        out += ["| model | strategy | world size | per-rank peak B (phase) | fits 80 GB | s |",
                "|---|---|---:|---:|---|---:|"]
        found: dict[str, list[Any]] = {}
        for strategy in FIGURE_STRATEGIES:
            found[strategy] = []
            for world in world_sizes:
                start = time.perf_counter()
                estimate = vitprof.memory(model, InputRequest(batch_size=1), target="cuda",
                                          strategy=strategy, world_size=world)
                found[strategy].append(estimate)
                out.append(f"| {model} | {strategy} | {world:,} | {estimate.peak_bytes:,} "
                           f"({estimate.peak_phase}) | "
                           f"{'yes' if estimate.peak_bytes <= LIMIT else 'no'} | "
                           f"{time.perf_counter() - start:.0f} |")
                print(out[-1], flush=True)
        path = FIGURE.with_name(f"{FIGURE.stem}_{figures.file_stem(model)}.png")
        figures.save(world_size_figure(model, found, LIMIT), path)
        out.append(f"\n![{model}]({path.name})\n")
    return out


def kept_figure_section(page: Path) -> list[str]:
    """The figure section of the page as it is (``--figure-models`` naming none: the ViT-g and
    ViT-22B sweep takes minutes), or none where the page has none."""
    text = page.read_text() if page.exists() else ""
    start = text.find(FIGURE_HEADING)
    return text[start:].rstrip("\n").split("\n") if start >= 0 else []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measured", type=Path, default=MEASURED)
    parser.add_argument("--peers", type=Path, default=PEERS)
    parser.add_argument("--figure-models", nargs="*",
                        default=["timm:vit_giant_patch14_224", "vit_22b"])
    parser.add_argument("--figure-world-sizes", nargs="+", type=int, default=[8, 64, 1024])
    args = parser.parse_args(argv)
    from vitprof.core.atomic_write import write_atomically

    measured = largest_ranks(args.measured)
    sharded: dict[str, tuple[str, ...]] = {}
    rows = rows_section(measured, peers(args.peers), sharded)
    blocks, agree = blocks_section(sharded)
    page = [
        "# Per-rank training memory under DDP, ZeRO-1 and FSDP2: predicted and measured", "",
        "Made by `python benchmarks/distributed_memory.py` (prediction: `vitprof memory MODEL "
        "--strategy S --world-size N --batch-size B --target cpu --loss cross-entropy "
        "--checkpoint C --amp A`, AdamW, the second step). "
        "Measured: `reports/distributed_memory_measured.csv`, made by `python "
        "benchmarks/distributed_measured.py` (issue 36's measuring side: real "
        "`torch.multiprocessing` runs over gloo on the CPU, one process and one thread a rank, "
        "each rank's glibc heap after every aten op, a harness that shares no code with "
        "vitprof; the checkpointed rows with `--checkpoint blocks`: each block in torch's "
        "`checkpoint_wrapper` before the strategy wraps the model, the amp rows with `--amp "
        "bfloat16`: the forward under `torch.autocast`); the largest rank's peak is "
        "the one compared. Peers (rows without checkpointing): "
        "`reports/distributed_memory_peers.csv`, made by `python "
        "benchmarks/distributed_peers.py`.", "",
        "The loss: the prediction runs the measured loop, `--loss cross-entropy` of random "
        "labels, as the measurement does (the default, `--loss ones`, a ones gradient on the "
        "logits, holds the labels and the loss's own tensors less). The prediction's target is "
        "`--target cpu` (sizes as asked); the default, `--target cuda` "
        "(each allocation rounded to 512 B, the cuBLAS workspaces), cannot be measured on this "
        "machine.", "",
        "Models: a timm name is predicted as `timm:NAME`, `torchvision:NAME` as `NAME` (the "
        "zoo's torchvision entry), `hf:NAME` and `FILE.py:FACTORY` as they are; the harness "
        "builds each from its package itself.", "",
        "Out of scope: tensor and pipeline parallelism. CUDA: one row, FSDP2 at world size 1 "
        "against `max_memory_allocated`, is in `benchmarks/device_checks.py` (fsdp); multi-GPU "
        "rows stay unmeasured until a multi-GPU machine is lent.", "",
        "## Predicted against measured (CPU, gloo)", "",
        *rows,
        "", "## The blocks FSDP2 shards (zero2, fsdp)", "",
        "The harness picks them from each model's own structure "
        "(`distributed_measured.block_paths`); the prediction's are the breakdown's "
        "(`sharded_blocks` of `vitprof memory --strategy fsdp --format json`).", "",
        *blocks,
    ]
    if not args.figure_models:
        page += ["", *kept_figure_section(PAGE)]
    else:
        page += ["", f"{FIGURE_HEADING} (target cuda, batch 1 per rank, AdamW, float32)", "",
                 "Each strategy's first world size whose per-rank peak fits 80 GB is starred.",
                 "", *figure_section(args.figure_models, args.figure_world_sizes)]
    write_atomically(PAGE, "\n".join(page) + "\n")
    print(f"wrote {PAGE}")
    if not agree:
        print("distributed_memory: the harness and the prediction shard different blocks",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
