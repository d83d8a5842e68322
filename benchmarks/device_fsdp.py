"""FSDP2 at world size 1 on the lent GPU: ``vitprof memory --strategy fsdp --world-size 1
--target cuda`` against ``torch.cuda.max_memory_allocated`` of a real step.

The real step: DeiT-S (timm, no weights), ``fully_shard`` on every block and then the root
(``reshard_after_forward=True``), AdamW with torch's CUDA defaults, batch 32, the default loop
(``opt.zero_grad()``, ``out.backward(ones_like(out))``, ``opt.step()``); the peak of the
second step, from ``reset_peak_memory_stats`` after the first. The process group is NCCL's
with one rank. The prediction runs first (its fake process group needs none up). Writes
``OUT_DIR/fsdp_cuda.json`` and ``.md``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MODEL, BATCH = "deit_small_patch16_224", 32


def measured_peak() -> int:
    """``max_memory_allocated`` over the second real FSDP2 step at world size 1."""
    import tempfile

    import timm
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    store = Path(tempfile.mkdtemp()) / "store"
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        torch.cuda.set_device(0)
        model = timm.create_model(MODEL, pretrained=False).cuda()
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters())
        x = torch.randn(BATCH, 3, 224, 224, device="cuda")
        for step in range(2):
            if step == 1:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            opt.zero_grad(set_to_none=True)
            out = model(x)
            out.backward(torch.ones_like(out))
            del out
            opt.step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()
    finally:
        dist.destroy_process_group()


def run(out_dir: Path) -> dict[str, object]:
    import torch

    import vitprof
    from vitprof.workload import InputRequest

    predicted = vitprof.memory(f"timm:{MODEL}", InputRequest(batch_size=BATCH), target="cuda",
                               strategy="fsdp", world_size=1).peak_bytes
    measured = measured_peak()
    row = {"model": MODEL, "batch": BATCH, "strategy": "fsdp", "world_size": 1,
           "predicted_bytes": predicted, "measured_bytes": measured,
           "difference": (predicted - measured) / measured,
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    (out_dir / "fsdp_cuda.json").write_text(json.dumps(row, indent=2) + "\n")
    (out_dir / "fsdp_cuda.md").write_text(
        "| model | batch | strategy | world size | predicted B | measured B "
        "(max_memory_allocated) | difference |\n|---|---:|---|---:|---:|---:|---:|\n"
        f"| {MODEL} | {BATCH} | fsdp | 1 | {predicted:,} | {measured:,} | "
        f"{row['difference']:+.2%} |\n")
    return row


if __name__ == "__main__":
    print(run(Path(sys.argv[1])))
