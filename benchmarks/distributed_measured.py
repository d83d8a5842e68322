"""Each rank's peak memory in a real data-parallel training step on the CPU, measured by code
that shares none with vitprof (issue 36: what `vitprof memory --strategy S --world-size N`
predicts is held to these rows).

Every run is real: ``torch.multiprocessing`` starts one process per rank (forked, so that each
inherits torch and timm imported instead of importing them again: minutes on a busy machine),
each with one thread (``torch.set_num_threads(1)``), joined by a gloo process group on this
machine. Each rank
builds its model without weights, the same seed on every rank (``--models`` spellings: a timm
name; ``torchvision:NAME``, ``torchvision.models.get_model(NAME, weights=None)``;
``hf:NAME``, transformers' ``ViTForImageClassification`` of the config vitprof's zoo names so
(:data:`HF_SHAPES`, written here again: 224 x 224, 1,000 labels, SDPA); ``FILE.py:FACTORY``,
the factory of a file loaded by path, e.g. ``benchmarks/stranger_models.py:vit_pytorch_tiny``),
wraps it as its strategy says, makes ``torch.optim.AdamW`` (its defaults), and runs two steps
of: gradients set to None (``model.zero_grad(set_to_none=True)``), the forward of its own random
batch (``batch`` images of 224 x 224 and random labels, a seed per rank), cross-entropy on the
logits (a transformers output's ``logits``), the backward, the optimizer's step. The strategies:

* ``none``: one process, no process group, the plain model;
* ``ddp``: ``DistributedDataParallel`` with its defaults (25 MB buckets, gradients not bucket
  views);
* ``zero1``: the same DDP, with ``torch.distributed.optim.ZeroRedundancyOptimizer`` around
  AdamW, so each rank keeps the optimizer state of its own share of the parameters;
* ``zero2`` / ``fsdp``: FSDP2's ``fully_shard`` on every transformer block, then on the root,
  with ``reshard_after_forward`` False (ZeRO-2-like) / True (ZeRO-3-like). The blocks are read
  from each package's structure (:func:`block_paths`; ``python
  benchmarks/distributed_measured.py blocks --models ...`` prints them as JSON); a block that
  is a ``ModuleList`` running no forward (vit-pytorch's) is sharded as its children, one
  group (:func:`shard_unit`).

The second step runs under benchmarks/rank_memory.py's ``StepMemory`` (entered before the model
is built, so every storage of the state is counted), which reads glibc's heap and the live
tensor storages after every aten op. What each column is:

* ``peak_bytes``: ``baseline_bytes`` plus the heap's largest rise over its reading at the
  second step's start. It includes what the rank's process allocates through malloc during the
  step, whoever allocates it: tensors, the kernels' scratch kept between ops (oneDNN's, about
  2.4 MB per thread), gloo's own buffers and worker-thread allocations, malloc's chunk headers,
  large Python objects. It does not include what is made and freed inside one op or one
  collective between two readings, nor anything outside malloc (pymalloc's arenas);
* ``baseline_bytes``: the state the step starts from, exactly: the bytes of the tensor storages
  alive at the second step's start (parameters or the rank's shards of them, buffers, AdamW's
  moments and step counts or the rank's share of them, DDP's flat gradient buckets, the batch
  and its labels; the gradients were set to None and the garbage collected before);
* ``phase`` and ``op``: where the heap peaked: ``forward``, ``backward``, ``optimizer``, or
  ``collective`` when the op just run was a torch.distributed collective, and that op;
* ``storage_peak_bytes`` / ``storage_phase``: the largest sum of live tensor storages during
  the step, a second reading without the allocator's overhead and what C++ keeps out of sight
  (gloo's threads);
* ``seconds``: the second step's wall time under the harness (its dispatch mode slows it).

    python benchmarks/distributed_measured.py

made the first rows of reports/distributed_memory_measured.csv (DeiT-Ti and DeiT-S, batch 8
per rank, world sizes 2 and 4, every strategy, one repeat: about 25 minutes on two busy cores;
``--repeats 2`` runs the grid twice; ``--models``, ``--strategies``, ``--world-sizes``,
``--batch`` choose fewer; ``--out`` another file, ``--no-write`` none; ``--append`` keeps the
rows already in ``--out``, a run of the same model, strategy, world size, batch, repeat,
checkpoint and amp replaced). The rows of models from other packages, at the default batch 1
and at 8, were added by (about 30 minutes in all)::

    A="python benchmarks/distributed_measured.py --append"
    M=benchmarks/stranger_models.py:vit_pytorch_tiny
    $A --models $M --world-sizes 2 4 --batch 1
    $A --models $M --world-sizes 2 4 --batch 8
    $A --models torchvision:vit_b_16 --world-sizes 2 --batch 1
    $A --models torchvision:vit_b_16 --strategies ddp zero1 zero2 fsdp --world-sizes 4 --batch 1
    $A --models torchvision:vit_b_16 --strategies none ddp fsdp --world-sizes 2 --batch 8
    $A --models hf:vit-base-patch16-224 --world-sizes 2 --batch 1
 It prints the table, one row per
rank and repeat. ``python benchmarks/distributed_measured.py probe`` prints, as JSON, what the
harness reads for a known allocation (1,000,000 float32 kept: 4,000,000 B; 250,000 more whose
storage is then resized to nothing) and exits.
"""

from __future__ import annotations

import argparse
import csv
import gc
import io
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from rank_memory import StepMemory
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "distributed_memory_measured.csv"
MODELS = ("deit_tiny_patch16_224", "deit_small_patch16_224")
STRATEGIES = ("none", "ddp", "zero1", "zero2", "fsdp")
WORLD_SIZES = (2, 4)
IMAGE = 224
# A model small enough for the tests: timm's VisionTransformer at 32 x 32, two blocks.
TINY = "tiny"
TINY_IMAGE = 32
# the package a model spelling's build imports, imported once by the parent of the ranks
PACKAGES = {"torchvision": "torchvision", "hf": "transformers"}
# transformers' ViTForImageClassification configs as vitprof's zoo names them (hf:NAME): width,
# depth, heads, MLP width, patch; 224 x 224, 1,000 labels, SDPA attention.
HF_SHAPES = {
    "vit-base-patch16-224": (768, 12, 12, 3072, 16),
    "vit-base-patch32-224": (768, 12, 12, 3072, 32),
    "vit-large-patch16-224": (1024, 24, 16, 4096, 16),
}


@dataclass(frozen=True)
class Run:
    """One run: a model, a strategy, the ranks and the batch per rank."""

    model: str
    strategy: str
    world_size: int
    batch: int
    repeat: int = 1
    checkpoint: str = "none"
    amp: str = "none"


@dataclass(frozen=True)
class RankRow:
    """One rank's readings of one run (see the module for each column)."""

    model: str
    strategy: str
    world_size: int
    rank: int
    batch: int
    repeat: int
    peak_bytes: int
    phase: str
    op: str
    baseline_bytes: int
    heap_rise_bytes: int
    storage_peak_bytes: int
    storage_phase: str
    seconds: float
    threads: int
    torch: str
    checkpoint: str = "none"
    amp: str = "none"


def build(model_name: str) -> tuple[nn.Module, int]:
    """The model ``model_name`` spells, without weights, and its image size (see
    :data:`SPELLINGS`)."""
    if model_name == TINY:
        from timm.models.vision_transformer import VisionTransformer

        return VisionTransformer(img_size=TINY_IMAGE, patch_size=8, embed_dim=32, depth=2,
                                 num_heads=2, num_classes=10), TINY_IMAGE
    if model_name.startswith("torchvision:"):
        import torchvision

        return torchvision.models.get_model(model_name.removeprefix("torchvision:"),
                                            weights=None), IMAGE
    if model_name.startswith("hf:"):
        import transformers

        width, depth, heads, mlp, patch = HF_SHAPES[model_name.removeprefix("hf:")]
        # num_labels and attn_implementation are PretrainedConfig's keywords
        config_keywords: dict[str, Any] = dict(
            hidden_size=width, num_hidden_layers=depth, num_attention_heads=heads,
            intermediate_size=mlp, patch_size=patch, image_size=IMAGE, num_labels=1000,
            attn_implementation="sdpa")
        config = transformers.ViTConfig(**config_keywords)
        return transformers.ViTForImageClassification(config), IMAGE
    if ".py:" in model_name:
        import importlib.util

        path, factory = model_name.rsplit(":", 1)
        spec = importlib.util.spec_from_file_location(Path(path).stem, Path(path).resolve())
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, factory)(), IMAGE
    import timm

    return timm.create_model(model_name, pretrained=False), IMAGE


def block_paths(model: nn.Module) -> list[str]:
    """The module paths of the transformer blocks FSDP2 shards one by one, read from the
    model's own structure as each package writes it: timm's ``blocks.N``, torchvision's
    ``encoder.layers.encoder_layer_N``, transformers' ViT ``vit.layers.N`` (5.x; 4.x:
    ``vit.encoder.layer.N``), vit-pytorch's ``transformer.layers.N``."""
    for container in ("blocks", "encoder.layers", "vit.layers", "vit.encoder.layer",
                      "transformer.layers"):
        try:
            found = model.get_submodule(container)
        except AttributeError:
            continue
        return [f"{container}.{name}" for name, _ in found.named_children()]
    raise ValueError(f"no transformer blocks known in a {type(model).__name__}")


def shard_unit(block: nn.Module) -> nn.Module | list[nn.Module]:
    """What ``fully_shard`` takes for one block: the block, or, for a ``ModuleList`` /
    ``ModuleDict`` that runs no forward of its own (vit-pytorch's ``[attention,
    feed-forward]``), the list of its children, one group (FSDP2 refuses such a container)."""
    runs_no_forward = type(block).forward is nn.Module.forward
    if isinstance(block, (nn.ModuleList, nn.ModuleDict)) and runs_no_forward:
        return list(block.children())
    return block


def logits(output: Any) -> torch.Tensor:
    """A classifier's logits: the output, or a transformers output's ``logits``."""
    return output if isinstance(output, torch.Tensor) else output.logits


def wrap(model: nn.Module, strategy: str, world_size: int) -> tuple[nn.Module,
                                                                     torch.optim.Optimizer]:
    """The model as ``strategy`` runs it, and its AdamW (see the module)."""
    if strategy == "none":
        return model, torch.optim.AdamW(model.parameters())
    if strategy in ("ddp", "zero1"):
        from torch.distributed.optim import ZeroRedundancyOptimizer
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model)
        if strategy == "ddp":
            return ddp, torch.optim.AdamW(ddp.parameters())
        return ddp, ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW)
    if strategy in ("zero2", "fsdp"):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (world_size,))
        reshard = strategy == "fsdp"
        for path in block_paths(model):
            fully_shard(shard_unit(model.get_submodule(path)), mesh=mesh,
                        reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        return model, torch.optim.AdamW(model.parameters())
    raise ValueError(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")


def checkpointed(model: nn.Module, checkpoint: str) -> nn.Module:
    """``model`` with each of its transformer blocks (``model.blocks``) wrapped in torch's
    ``checkpoint_wrapper`` (non-reentrant ``torch.utils.checkpoint``) for ``blocks``, before any
    strategy wraps it: the order torch's FSDP2 tests and torchtitan apply (the checkpoint
    inside, ``fully_shard`` on the wrapper, its hooks outside the recomputation)."""
    if checkpoint == "none":
        return model
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    blocks = model.get_submodule("blocks")
    for name, block in list(blocks.named_children()):
        setattr(blocks, name, checkpoint_wrapper(block))
    return model


def step(model: nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
         labels: torch.Tensor, memory: StepMemory | None = None, amp: str = "none") -> None:
    """One training step; ``memory``'s phase follows it. ``amp`` (bfloat16, float16): the
    forward under ``torch.autocast("cpu", dtype)``, the loss outside it."""

    def phase(name: str) -> None:
        if memory is not None:
            memory.phase = name

    phase("optimizer")  # setting gradients to None: no op, so no reading
    model.zero_grad(set_to_none=True)
    phase("forward")
    if amp == "none":
        out = logits(model(images))
    else:
        with torch.autocast("cpu", dtype=getattr(torch, amp)):
            out = logits(model(images))
    loss = F.cross_entropy(out, labels)
    del out
    phase("backward")
    loss.backward()
    phase("optimizer")
    optimizer.step()


def measure_rank(run: Run, rank: int) -> RankRow:
    """This process's readings of ``run``'s second step (the process group is up, if any)."""
    torch.set_num_threads(1)
    with StepMemory() as memory:
        torch.manual_seed(0)  # the same model on every rank
        model, image = build(run.model)
        model, optimizer = wrap(checkpointed(model, run.checkpoint), run.strategy,
                                run.world_size)
        torch.manual_seed(1000 + rank)  # each rank its own batch
        images = torch.randn(run.batch, 3, image, image)
        labels = torch.randint(0, 10 if run.model == TINY else 1000, (run.batch,))
        step(model, optimizer, images, labels, amp=run.amp)
        model.zero_grad(set_to_none=True)
        gc.collect()
        if dist.is_initialized():
            dist.barrier()
        memory.phase = "optimizer"
        memory.start_step()
        began = time.perf_counter()
        step(model, optimizer, images, labels, memory, run.amp)
        seconds = time.perf_counter() - began
        peak = memory.heap_peak()
    return RankRow(
        model=run.model, strategy=run.strategy, world_size=run.world_size, rank=rank,
        batch=run.batch, repeat=run.repeat, peak_bytes=peak.bytes, phase=peak.phase,
        op=peak.op, baseline_bytes=memory.baseline_bytes,
        heap_rise_bytes=peak.bytes - memory.baseline_bytes,
        storage_peak_bytes=memory.storage_peak.bytes, storage_phase=memory.storage_peak.phase,
        seconds=round(seconds, 3), threads=torch.get_num_threads(), torch=torch.__version__,
        checkpoint=run.checkpoint, amp=run.amp)


def _rank_main(rank: int, run: Run, port: int, folder: str) -> None:
    """A rank's process: joins the group (not for ``none``), measures, writes its row as JSON."""
    if run.strategy != "none":
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=run.world_size)
    try:
        row = measure_rank(run, rank)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    Path(folder, f"{rank}.json").write_text(json.dumps(asdict(row)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_ranks(run: Run) -> list[RankRow]:
    """``run``'s rows, one per rank, each measured in its own forked process (the parent has
    run no op, so no thread pool of torch's is forked half-made)."""
    import timm  # noqa: F401  (imported once here, inherited by the ranks)
    import torch.distributed.fsdp
    import torch.distributed.optim  # noqa: F401

    package = PACKAGES.get(run.model.split(":", 1)[0] if ":" in run.model else "timm")
    if package is not None:
        __import__(package)

    ranks = 1 if run.strategy == "none" else run.world_size
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(_rank_main, args=(run, free_port(), folder), nprocs=ranks,
                           join=True, start_method="fork")
        return [RankRow(**json.loads(Path(folder, f"{rank}.json").read_text()))
                for rank in range(ranks)]


def probe() -> dict[str, int]:
    """What the harness reads for 1,000,000 float32 made and kept under it (4,000,000 B), after
    the same ops once before under another harness (the first dispatch mode of a process sets
    up about 28 MB of torch's Python dispatch machinery in the heap)."""
    torch.set_num_threads(1)
    with StepMemory():
        torch.empty(1_000_000, dtype=torch.float32).fill_(1.0)
    with StepMemory() as memory:
        memory.start_step()
        kept = torch.empty(1_000_000, dtype=torch.float32).fill_(1.0)
        view = kept[1:]  # a view: the same storage, counted once
        freed = torch.empty(250_000, dtype=torch.float32)
        freed.untyped_storage().resize_(0)  # as FSDP2 frees a gathered parameter: 0 B now
        peak = memory.heap_peak()
        return {"nbytes": kept.nbytes, "view_nbytes": view.nbytes,
                "resized_nbytes": freed.untyped_storage().nbytes(),
                "live_rise": memory.live_bytes() - memory.baseline_bytes,
                "heap_rise": peak.bytes - memory.baseline_bytes,
                "storage_peak_rise": memory.storage_peak.bytes - memory.baseline_bytes}


def runs(models: Sequence[str], strategies: Sequence[str], world_sizes: Sequence[int],
         batch: int, repeats: int, checkpoint: str = "none", amp: str = "none") -> list[Run]:
    """The grid: ``none`` once per model (one process), the others at every world size."""
    grid = []
    for repeat in range(1, repeats + 1):
        for model in models:
            for strategy in strategies:
                sizes = [1] if strategy == "none" else world_sizes
                grid += [Run(model, strategy, size, batch, repeat, checkpoint, amp)
                         for size in sizes]
    return grid


def csv_text(rows: Sequence[Any], row_type: type) -> str:
    """The CSV of ``rows``, dataclasses of ``row_type``: a header of its fields, a line a row."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, [f.name for f in fields(row_type)], lineterminator="\n")
    writer.writeheader()
    writer.writerows(asdict(row) for row in rows)
    return buffer.getvalue()


def keep_rows(rows: Sequence[Any], row_type: type, out: Path | None) -> None:
    """Write the grid's rows so far to ``out`` (None: print only), after every run, so that a
    long grid cut short keeps what it made (this and distributed_peers.py)."""
    if out is not None:
        from vitprof.core.atomic_write import write_atomically  # the file only

        write_atomically(out, csv_text(rows, row_type))


def grid_done(table_text: str, out: Path | None) -> int:
    """The end of a grid's ``main``: its table, and the file written (None: none)."""
    print(table_text)
    if out is not None:
        print(f"wrote {out}")
    return 0


def table(rows: Sequence[RankRow]) -> str:
    lines = [f"{'model':24} {'strategy':8} {'ws':>2} {'rank':>4} {'rep':>3} {'peak_bytes':>13} "
             f"{'phase':10} {'baseline':>13} {'storage_peak':>13} {'s':>6}"]
    lines += [f"{r.model:24} {r.strategy:8} {r.world_size:>2} {r.rank:>4} {r.repeat:>3} "
              f"{r.peak_bytes:>13,} {r.phase:10} {r.baseline_bytes:>13,} "
              f"{r.storage_peak_bytes:>13,} {r.seconds:>6.1f}" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=("grid", "probe", "blocks"), default="grid")
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--strategies", nargs="+", default=STRATEGIES, choices=STRATEGIES)
    parser.add_argument("--world-sizes", nargs="+", type=int, default=WORLD_SIZES)
    parser.add_argument("--batch", type=int, default=8, help="images per rank")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--checkpoint", choices=("none", "blocks"), default="none",
                        help="blocks: each transformer block under torch's checkpoint_wrapper")
    parser.add_argument("--amp", choices=("none", "bfloat16", "float16"), default="none",
                        help="the forward under torch.autocast on the CPU (ddp, zero1, none)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--append", action="store_true",
                        help="keep the rows already in --out (those of a run made again go)")
    args = parser.parse_args(argv)
    if args.what == "probe":
        print(json.dumps(probe()))
        return 0
    if args.what == "blocks":
        print(json.dumps({name: block_paths(build(name)[0]) for name in args.models}))
        return 0
    if not dist.is_gloo_available():
        print("distributed_measured: torch was built without gloo", file=sys.stderr)
        return 2
    rows: list[RankRow] = []
    kept = read_rows(args.out) if args.append else []
    for run in runs(args.models, args.strategies, args.world_sizes, args.batch, args.repeats,
                    args.checkpoint, args.amp):
        began = time.perf_counter()
        done = run_ranks(run)
        rows += done
        kept = [row for row in kept if run_of(row) != run]
        print(f"{run.model} {run.strategy} ws {run.world_size} repeat {run.repeat}: "
              f"{', '.join(f'{r.peak_bytes:,}' for r in done)} B "
              f"({time.perf_counter() - began:.0f} s)", flush=True)
        keep_rows([*kept, *rows], RankRow, None if args.no_write else args.out)
    return grid_done(table(rows), None if args.no_write else args.out)


def read_rows(path: Path) -> list[RankRow]:
    """The rows of a CSV this script wrote (none where there is no file)."""
    if not path.exists():
        return []
    types = {f.name: f.type for f in fields(RankRow)}
    convert = {"int": int, "float": float, "str": str}
    with path.open() as handle:
        return [RankRow(**{key: convert[str(types[key])](value) for key, value in row.items()})
                for row in csv.DictReader(handle)]


def run_of(row: RankRow) -> Run:
    """The run a row was measured in."""
    return Run(row.model, row.strategy, row.world_size, row.batch, row.repeat, row.checkpoint,
               row.amp)


if __name__ == "__main__":
    sys.exit(main())
