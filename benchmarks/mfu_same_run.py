"""One Lightning run of ViT-B/16 on the CPU, measured at once by Lightning's ``ThroughputMonitor``
(fed ``measure_flops``, as its docs show), by the 6N rule and by vitprof's ``MFUCallback``.

The run: timm's ``vit_base_patch16_224``, batch 2 of random 224 x 224 images, cross-entropy,
SGD, ``--steps`` steps (8) on the CPU, both callbacks on the same ``Trainer``. The three FLOPs
per step:

* ``ThroughputMonitor``: ``LightningModule.flops_per_batch``, set as Lightning's docs set it:
  ``measure_flops`` (``FlopCounterMode`` over a forward and a sum-loss backward) on a meta twin
  of the model; also shown, the same call on the CPU model itself, as a user without a meta twin
  would make it (its attention runs the CPU's fused kernel, which ``FlopCounterMode`` does not
  count);
* the 6N rule: 6 x parameters x tokens x batch (197 tokens: 196 patches and the class token);
* vitprof: each step's FLOPs as the callback counted them (forward + backward, 2 x MACs).

The times: ``ThroughputMonitor`` divides the FLOPs of its window (``--window`` batches, 4) by the
wall clock between the ends of the window's first and last batches, so its interval holds the
loading of each batch and every callback; vitprof times each step from ``on_train_batch_start``
to ``on_train_batch_end``. The 6N rule has no clock: its rate is given with vitprof's time. All
three MFUs use one peak, measured on the spot (``ThroughputMonitor`` itself has no peak for a
CPU). Prints markdown; ``--write docs/mfu.md`` replaces the page's generated section.

    python benchmarks/mfu_same_run.py [--steps 8] [--window 4] [--write docs/mfu.md]
"""

from __future__ import annotations

import argparse
import csv
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.functional import cross_entropy
from torch.utils.data import DataLoader, TensorDataset

from vitprof.core.atomic_write import write_atomically
from vitprof.measure.mfu.peaks import measured_peak

BATCH, TOKENS, CLASSES = 2, 197, 1000
BEGIN, END = "<!-- mfu_same_run: begin -->", "<!-- mfu_same_run: end -->"


def vit_b_16(meta: bool = False) -> nn.Module:
    import timm

    if meta:
        with torch.device("meta"):
            return timm.create_model("vit_base_patch16_224", pretrained=False)
    return timm.create_model("vit_base_patch16_224", pretrained=False)


def measured_flops(model: nn.Module, device: str) -> int:
    """Lightning's ``measure_flops`` of one batch with a sum loss, the model on ``device``."""
    from lightning.fabric.utilities.throughput import measure_flops

    x = torch.randn(BATCH, 3, 224, 224, device=device)
    flops = int(measure_flops(model, lambda: model(x), torch.Tensor.sum))
    model.zero_grad(set_to_none=True)
    return flops


def train(steps: int, window: int, peak_tflops: float, out: Path) -> tuple[
        list[dict[str, str]], list[dict[str, Any]], int, int]:
    """Fit the model with both callbacks; the logged rows, vitprof's history, the parameters
    and ThroughputMonitor's FLOPs per batch."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ThroughputMonitor

    from vitprof.integrations.lightning import MFUCallback

    flops_per_batch = measured_flops(vit_b_16(meta=True), "meta")

    class Classifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.vit = vit_b_16()
            self.flops_per_batch = flops_per_batch  # what ThroughputMonitor reads

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.vit(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return cross_entropy(self(batch[0]), batch[1])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=1e-3)

    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(steps * BATCH, 3, 224, 224, generator=generator),
                         torch.randint(0, CLASSES, (steps * BATCH,), generator=generator))
    module = Classifier()
    callback = MFUCallback(peak_tflops=peak_tflops)
    monitor = ThroughputMonitor(batch_size_fn=lambda batch: batch[0].shape[0],
                                window_size=window)
    trainer = pl.Trainer(accelerator="cpu", max_steps=steps, log_every_n_steps=1,
                         logger=pl.loggers.CSVLogger(out), enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[monitor, callback])
    trainer.fit(module, DataLoader(data, batch_size=BATCH))
    log_dir = trainer.logger.log_dir if trainer.logger is not None else None
    assert callback.tracker is not None and log_dir is not None
    metrics = Path(log_dir) / "metrics.csv"
    logged = list(csv.DictReader(metrics.read_text().splitlines()))
    params = sum(p.numel() for p in module.parameters())
    return logged, list(callback.tracker.history), params, flops_per_batch


def report(steps: int, window: int) -> str:
    """The run as markdown: the last full window of ThroughputMonitor beside vitprof's steps in
    that window."""
    peak = measured_peak("cpu", torch.float32)
    with tempfile.TemporaryDirectory() as scratch:
        logged, history, params, monitor_flops = train(steps, window, peak.tflops, Path(scratch))
    cpu_flops = measured_flops(vit_b_16(), "cpu")
    rate = [float(r["train/device/flops_per_sec"]) for r in logged
            if r.get("train/device/flops_per_sec")][-1]
    # its window: the W - 1 intervals between the ends of the last W batches
    intervals = window - 1
    monitor_seconds = monitor_flops * intervals / rate
    steps_in_window = history[-intervals:]
    seconds = sum(e["seconds"] for e in steps_in_window)
    vitprof_flops = steps_in_window[-1]["flops"]
    assert all(e["flops"] == vitprof_flops for e in steps_in_window)
    six_n = 6 * params * TOKENS * BATCH
    # what the text below says the CPU model's measure_flops misses: ViT-B/16's attention
    # products, 2 a block, forward and both operand gradients, 2 FLOPs a MAC
    assert vitprof_flops - cpu_flops == 3 * 2 * 12 * 2 * TOKENS**2 * 768 * BATCH
    per_peak = peak.tflops * 1e12

    def row(name: str, flops: int, clock: float, whose: str) -> str:
        achieved = flops * intervals / clock
        return (f"| {name} | {flops:,} | {flops / vitprof_flops:.4f} | {achieved / 1e12:.4f} | "
                f"{100 * achieved / per_peak:.2f}% | {whose}: {clock:.3f} s |")

    lines = [
        f"### ViT-B/16 (timm), batch {BATCH}, {steps} steps on the CPU "
        f"({torch.get_num_threads()} threads), torch {torch.__version__}", "",
        f"One peak for every MFU: {peak.source}. The figures are those of ThroughputMonitor's "
        f"last window ({window} batches: the {intervals} intervals between their ends, steps "
        f"{steps - intervals + 1}-{steps}) and of the same {intervals} steps as vitprof timed "
        f"them.", "",
        f"| counted by | FLOPs per step | x vitprof | TFLOP/s | MFU | clock over {intervals} "
        f"steps |",
        "|---|---:|---:|---:|---:|---|",
        row("ThroughputMonitor, measure_flops on meta (its docs' way)", monitor_flops,
            monitor_seconds, "its own"),
        row("ThroughputMonitor, measure_flops on the CPU model", cpu_flops, monitor_seconds,
            "its own"),
        row("6N rule", six_n, seconds, "vitprof's"),
        row("vitprof MFUCallback (compute-window MFU)", vitprof_flops, seconds, "its own"),
        "",
        f"- FLOPs: `measure_flops` on meta gives vitprof's count "
        f"({monitor_flops - vitprof_flops:+,}); on the CPU model it misses the attention "
        f"products, {vitprof_flops - cpu_flops:,} = 3 x 2 x 12 x 2 x 197^2 x 768 x {BATCH}; the "
        f"6N rule is {six_n - vitprof_flops:+,} off, for the reasons of the per-component table "
        f"above, at batch {BATCH} (twice its figures).",
        f"- Time: ThroughputMonitor's {monitor_seconds:.3f} s run from one batch's end to the "
        f"next; vitprof's {seconds:.3f} s from each step's start to its end. The "
        f"{monitor_seconds - seconds:+.3f} s between them is what runs between two steps "
        f"(loading the next batch, Lightning's hooks), which vitprof's compute-window MFU "
        f"leaves out: ThroughputMonitor's MFU is vitprof's x "
        f"{seconds:.3f} / {monitor_seconds:.3f} where the FLOPs agree.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    text = report(args.steps, args.window)
    if args.write is None:
        print(text)
        return
    page = args.write.read_text()
    before, rest = page.split(BEGIN)
    _, after = rest.split(END)
    write_atomically(args.write, f"{before}{BEGIN}\n{text}\n{END}{after}")


if __name__ == "__main__":
    main()
