"""Measure the peak memory of real training steps on a CUDA GPU, for reports/memory.md's CUDA
column: ``torch.cuda.max_memory_allocated`` over the second training step, after
``torch.cuda.reset_peak_memory_stats``.

For every row of :func:`memory_rows.cuda_rows` (the acceptance grid, the CPU benchmark's other
rows, ViT-B/16 at batch 64 with the fused attention, Mesa's DeiT rows at batch 128): the model
(timm's, torchvision's ``vit_b_16``; random weights) and AdamW on the GPU, then two steps of
``zero_grad(set_to_none=True)``, forward (under ``torch.autocast("cuda", dtype)`` for a 16-bit
row), ``out.backward(ones)`` (a ones gradient on the logits: no loss function, no gradient
scaler), ``optimizer.step()``. The first step makes the optimizer state (and cuBLAS's
workspace); the peak is that of the second, so it holds the parameters, the optimizer state, the
input, the gradients and the activations. The attention path is chosen with
``torch.nn.attention.sdpa_kernel`` (math, flash or memory-efficient); block checkpointing is
timm's ``set_grad_checkpointing`` (every block under non-reentrant ``torch.utils.checkpoint``);
the ``explicit`` path turns timm's ``fused_attn`` off.

This script uses torch, timm and torchvision only: it shares no code with vitprof's predictor.

    python benchmarks/device_memory.py [--out reports] [--rows deit_tiny] [--list]
    python benchmarks/device_memory.py --markdown reports/memory_cuda.json
    python benchmarks/device_memory.py --dry-run [--rows deit_tiny]

writes ``OUT/memory_cuda.json`` (read by memory_accuracy.py) and ``OUT/memory_cuda.md``. Without
a CUDA device it says so in one line and exits 2. ``run(out_dir)`` does the same from Python
(benchmarks/device_checks.py calls it). ``--markdown`` prints the table of a JSON a GPU run
wrote, held to its schema (a file it refuses: one line, exit 2), without measuring.
``--dry-run`` checks on any machine what can be checked before a GPU is lent: each planned row's
model built on the CPU as a run builds it (its fused attention and checkpointing printed), and
the JSON a run writes held to its schema (its rows unmeasured); nothing measured or written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_rows import VIT_B_16, Row, cuda_rows

OUTPUT = "memory_cuda.json"
SCHEMA_FILE = Path(__file__).with_name("memory_cuda.schema.json")  # the JSON's schema
SCHEMA_VERSION = 2
CONVENTION = ("bytes; peak_bytes = torch.cuda.max_memory_allocated over the second AdamW step "
              "after torch.cuda.reset_peak_memory_stats; allocated_before = "
              "torch.cuda.memory_allocated when that step began")
# the SDPA kernel of each attention path (explicit attention calls no SDPA: any will do)
BACKENDS = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
            "explicit": "MATH"}


class NoDevice(RuntimeError):
    """There is no CUDA device to measure on."""


class NotAMeasurement(ValueError):
    """A file that the measurement's schema refuses."""


def plan(rows: Sequence[Row], only: str | None) -> list[Row]:
    """The rows to measure: those whose key contains ``only`` (every row when None)."""
    return [r for r in rows if only is None or only in r.key]


def build(row: Row) -> Any:
    """The model of ``row`` with random weights: torchvision's ``vit_b_16``, else timm's; with
    timm's ``fused_attn`` off everywhere for the ``explicit`` attention path."""
    if row.model == VIT_B_16:
        import torchvision

        return torchvision.models.vit_b_16(weights=None)
    import timm

    model = timm.create_model(row.model, pretrained=False)
    if row.attention == "explicit":
        for module in model.modules():
            if hasattr(module, "fused_attn"):
                module.fused_attn = False
    return model


def prepare(row: Row) -> Any:
    """The model of ``row`` in training mode, with timm's block checkpointing on for a
    ``blocks`` row (on the CPU: a run moves it to the GPU)."""
    model = build(row).train()
    if row.checkpoint == "blocks":
        model.set_grad_checkpointing(True)
    return model


def _step(model: Any, x: Any, opt: Any, amp: str | None) -> None:
    import torch

    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=getattr(torch, amp or "float32"), enabled=amp is not None):
        out = model(x)
    out.backward(torch.ones_like(out))
    del out
    opt.step()


def measure(row: Row) -> dict[str, Any]:
    """One row's measurement: the peak bytes allocated during the second step and what was
    allocated when it began (parameters, optimizer state, input, workspaces)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    model = prepare(row).cuda()
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(row.batch, 3, 224, 224, device="cuda")
    start = time.perf_counter()
    try:
        with sdpa_kernel(getattr(SDPBackend, BACKENDS[row.attention])):
            _step(model, x, opt, row.amp)
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            _step(model, x, opt, row.amp)
            torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        return {"row": row.key, "peak_bytes": peak, "allocated_before": before,
                "seconds": round(time.perf_counter() - start, 3)}
    finally:
        del model, opt, x
        torch.cuda.empty_cache()


def run(out_dir: Path, only: str | None = None) -> None:
    """Measure the rows (those whose key contains ``only``) and write ``memory_cuda.json`` and
    ``memory_cuda.md`` into ``out_dir``; raise :class:`NoDevice` without CUDA."""
    import torch

    if not torch.cuda.is_available():
        raise NoDevice("device_memory: no CUDA device (torch.cuda.is_available() is False); "
                       "run it on a machine with a GPU")
    results = []
    for row in plan(cuda_rows(), only):
        try:
            results.append(measure(row))
        except torch.cuda.OutOfMemoryError as error:  # one row too large leaves the others
            results.append({"row": row.key, "error": str(error).splitlines()[0]})
        print(f"{row.key}: {results[-1].get('peak_bytes', results[-1].get('error'))}",
              flush=True)
    data = document(results, torch.cuda.get_device_name(), torch.__version__)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / OUTPUT).write_text(json.dumps(data, indent=1) + "\n")
    (out_dir / "memory_cuda.md").write_text(markdown(data))


def document(results: list[dict[str, Any]], device: str, torch_version: str) -> dict[str, Any]:
    """The JSON written (its schema: ``memory_cuda.schema.json`` beside this script)."""
    return {"schema_version": SCHEMA_VERSION, "convention": CONVENTION, "device": device,
            "torch": torch_version, "rows": results}


def read_measurement(path: Path) -> dict[str, Any]:
    """The measurements in ``path`` (a JSON this script wrote), held to ``SCHEMA_FILE``; raise
    :class:`NotAMeasurement` (one line) where the schema refuses them. Needs jsonschema."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as malformed:
        raise NotAMeasurement(f"{path}: not a device_memory.py measurement: not JSON "
                              f"({malformed})") from None
    hold_to_schema(data, str(path))
    return data


def hold_to_schema(data: dict[str, Any], source: str) -> None:
    """Raise :class:`NotAMeasurement` (one line naming ``source``) where ``SCHEMA_FILE``
    refuses ``data``. Needs jsonschema."""
    import jsonschema

    try:
        jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text()))
    except jsonschema.ValidationError as refused:
        raise NotAMeasurement(f"{source}: not a device_memory.py measurement: {refused.message}"
                              ) from None


def dry_run(rows: Sequence[Row]) -> None:
    """Print each row's model as a run prepares it (on the CPU), then hold the JSON a run
    writes, each row unmeasured, to the schema (:class:`NotAMeasurement` where it refuses)."""
    import torch

    for row in rows:
        model = prepare(row)
        fused = [m.fused_attn for m in model.modules() if hasattr(m, "fused_attn")]
        checkpointing = "on" if getattr(model, "grad_checkpointing", False) else "off"
        print(f"{row.key}: fused attention in {sum(fused)} of {len(fused)} attention modules, "
              f"block checkpointing {checkpointing}", flush=True)
    data = document([{"row": r.key, "error": "not measured: dry run"} for r in rows],
                    "none (dry run)", torch.__version__)
    hold_to_schema(data, "the JSON a run writes")
    print(f"the JSON a run writes: schema_version {data['schema_version']}, valid under "
          f"{SCHEMA_FILE.name}; convention: {data['convention']}")


def markdown(data: dict[str, Any]) -> str:
    """The measurements as a markdown table (bytes, and MiB = 2**20 bytes)."""
    lines = [f"# Training-step peaks on {data['device']} (torch {data['torch']})", "",
             "max_memory_allocated over the second step, after reset_peak_memory_stats.", "",
             "| row | peak (bytes) | peak (MiB) | allocated before (bytes) |",
             "| :--- | ---: | ---: | ---: |"]
    lines += [f"| {r['row']} | {r['peak_bytes']:,} | {r['peak_bytes'] / 2**20:,.1f} | "
              f"{r['allocated_before']:,} |" if "peak_bytes" in r
              else f"| {r['row']} | failed: {r['error']} | | |" for r in data["rows"]]
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("reports"), help="folder written")
    p.add_argument("--rows", help="measure only the rows whose key contains this")
    p.add_argument("--list", action="store_true", help="print the planned rows and stop")
    p.add_argument("--markdown", type=Path, metavar="JSON",
                   help="print the table of a measurement file and stop (nothing measured)")
    p.add_argument("--dry-run", action="store_true",
                   help="build the planned rows' models on the CPU and check the JSON's schema "
                        "(nothing measured or written)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.list:
        print("\n".join(r.key for r in plan(cuda_rows(), args.rows)))
        return 0
    try:
        if args.markdown:
            print(markdown(read_measurement(args.markdown)), end="")
        elif args.dry_run:
            dry_run(plan(cuda_rows(), args.rows))
        else:
            run(args.out, args.rows)
    except (NoDevice, NotAMeasurement) as error:
        print(error, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
