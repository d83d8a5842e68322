"""MFU of ViT-B/16 trained for 20 steps in bf16 on a CUDA GPU, through all three integrations.

The same model, batch and step (forward, cross-entropy, backward, AdamW step; synthetic images
and labels) in a plain loop under ``torch.autocast(dtype=torch.bfloat16)`` with
``vitprof.track``, in Lightning (``precision="bf16-mixed"``, ``MFUCallback``) and in the Hugging
Face ``Trainer`` (``bf16=True``, ``MFUCallback``; its ViT-B/16 is ``ViTForImageClassification``
from the default ``ViTConfig``). The peak is the table's dense bf16 figure for the GPU found by
name, unless ``peak_tflops`` is given. Writes ``device_mfu.md`` (one row per integration, then
each tracker's summary) to ``out_dir``. Without CUDA it stops in one line.

    python benchmarks/device_mfu.py OUT_DIR [--peak-tflops T] [--batch 32] [--steps 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.nn.functional import cross_entropy
from torch.utils.data import DataLoader, Dataset, TensorDataset

from vitprof import track
from vitprof.core.errors import UserError
from vitprof.measure.mfu.tracker import Tracker

CLASSES = 1000


def images(batch: int, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return (torch.randn(batch * steps, 3, 224, 224, generator=generator),
            torch.randint(0, CLASSES, (batch * steps,), generator=generator))


def timm_vit_b() -> torch.nn.Module:
    import timm

    return timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=CLASSES)


def plain(batch: int, steps: int, peak: float | None) -> Tracker:
    model = timm_vit_b().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = images(batch, steps)
    with track(model, peak, measure_dtype="bf16", optimizer=optimizer) as tracker:
        for xb, yb in zip(x.split(batch), y.split(batch), strict=True):
            xb, yb = xb.cuda(non_blocking=True), yb.cuda(non_blocking=True)
            tracker.begin()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            tracker.step(xb)
    return tracker


def lightning(batch: int, steps: int, peak: float | None) -> Tracker:
    import lightning.pytorch as pl

    from vitprof.integrations.lightning import MFUCallback

    class Classifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.vit = timm_vit_b()

        def forward(self, x: torch.Tensor) -> Any:
            return self.vit(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return cross_entropy(self(batch[0]), batch[1])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    callback = MFUCallback(peak_tflops=peak)
    trainer = pl.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=steps,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[callback])
    trainer.fit(Classifier(), DataLoader(TensorDataset(*images(batch, steps)), batch_size=batch))
    assert callback.tracker is not None
    return callback.tracker


def transformers_trainer(batch: int, steps: int, peak: float | None) -> Tracker:
    import transformers

    from vitprof.integrations.transformers import MFUCallback

    x, y = images(batch, steps)

    class Images(Dataset[dict[str, torch.Tensor]]):
        def __len__(self) -> int:
            return len(x)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"pixel_values": x[i], "labels": y[i]}

    model = transformers.ViTForImageClassification(transformers.ViTConfig(num_labels=CLASSES))
    callback = MFUCallback(peak_tflops=peak)
    with tempfile.TemporaryDirectory() as scratch:
        args = transformers.TrainingArguments(
            output_dir=scratch, max_steps=steps, per_device_train_batch_size=batch, bf16=True,
            logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True,
            dataloader_num_workers=0,
        )
        transformers.Trainer(model=model, args=args, train_dataset=Images(),
                             callbacks=[callback]).train()
    assert callback.tracker is not None
    return callback.tracker


RUNS: dict[str, Callable[[int, int, float | None], Tracker]] = {
    "plain loop (vitprof.track)": plain, "Lightning MFUCallback": lightning,
    "HF Trainer MFUCallback": transformers_trainer,
}


def _row(name: str, tracker: Tracker) -> str:
    last = tracker.history[-1] if tracker.history else {}
    mfu = last.get("median_mfu")
    tflops = last.get("median_tflops")
    return (f"| {name} | {last.get('flops') or 0:,} | "
            f"{'n/a' if tflops is None else f'{tflops:.1f}'} | "
            f"{'n/a' if mfu is None else f'{100 * mfu:.1f}%'} |")


def run(out_dir: Path, *, peak_tflops: float | None = None, batch: int = 32,
        steps: int = 20) -> None:
    """Train through the three integrations and write ``out_dir / "device_mfu.md"``."""
    if not torch.cuda.is_available():
        raise UserError("a CUDA GPU is needed and none is available: the CUDA rows of "
                        "docs/mfu.md stay 'not measured'")
    out_dir.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name()
    trackers = {label: fn(batch, steps, peak_tflops) for label, fn in RUNS.items()}
    lines = [f"# ViT-B/16, bf16, batch {batch}, {steps} steps on {name}", "",
             f"torch {torch.__version__}; medians over every step (the first ones included)", "",
             "| integration | FLOPs per step | median TFLOP/s | median MFU |",
             "|---|---:|---:|---:|"]
    lines += [_row(label, tracker) for label, tracker in trackers.items()]
    for label, tracker in trackers.items():
        lines += ["", f"# {label}", "", tracker.summary()]
    (out_dir / "device_mfu.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    try:
        run(args.out_dir, peak_tflops=args.peak_tflops, batch=args.batch, steps=args.steps)
    except UserError as error:
        print(f"device_mfu: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
