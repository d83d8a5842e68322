"""A Lightning run on two CPU processes with vitprof's MFUCallback, for test_mfu_ranks.

``python tests/lightning_ranks.py OUT STRATEGY`` fits a tiny timm ViT for a few steps with
``strategy="ddp"`` (Lightning's own launcher starts the second process by running this script
again) or ``"fsdp2"`` (``ModelParallelStrategy``, FSDP2: ``fully_shard`` on every block and on
the module in ``configure_model``; Lightning's ``"fsdp"`` strategy is FSDP1 and refuses the CPU).
Rank r trains on batches of 2 + 2r images and writes ``OUT/STRATEGY-rank{r}.json``: the
callback's history and, per step, ``FlopCounterMode`` over the rank's real step (from the batch's
start to the optimizer step: the forward and the backward, attention in its math form).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import cross_entropy
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

from vitprof.integrations.lightning import MFUCallback

STEPS, CLASSES, IMAGE, PEAK = 2, 10, 32, 1.0


class Classifier(pl.LightningModule):
    def __init__(self, shard: bool) -> None:
        super().__init__()
        import timm

        torch.manual_seed(0)
        self.shard = shard
        self.vit = timm.create_model("vit_tiny_patch16_224", img_size=IMAGE, patch_size=8,
                                     depth=2, embed_dim=64, num_heads=2, num_classes=CLASSES,
                                     pretrained=False)

    def configure_model(self) -> None:
        if self.shard:
            from torch.distributed.fsdp import fully_shard

            assert self.device_mesh is not None  # ModelParallelStrategy sets it
            mesh = self.device_mesh["data_parallel"]
            for block in self.vit.blocks:  # type: ignore[union-attr]
                fully_shard(block, mesh=mesh)
            fully_shard(self, mesh=mesh)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.vit(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        with sdpa_kernel(SDPBackend.MATH):
            return cross_entropy(self(x), y)

    def train_dataloader(self) -> DataLoader[Any]:
        batch = 2 + 2 * self.global_rank
        generator = torch.Generator().manual_seed(self.global_rank)
        x = torch.randn(STEPS * batch, 3, IMAGE, IMAGE, generator=generator)
        y = torch.randint(0, CLASSES, (STEPS * batch,), generator=generator)
        return DataLoader(TensorDataset(x, y), batch_size=batch)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Reference(pl.Callback):
    """FlopCounterMode over each real step, from the batch's start to the optimizer step."""

    def __init__(self) -> None:
        self.flops: list[int] = []
        self.counter: FlopCounterMode | None = None

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, i: int) -> None:
        self.counter = FlopCounterMode(display=False)
        self.counter.__enter__()

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        assert self.counter is not None
        self.counter.__exit__(None, None, None)
        self.flops.append(int(self.counter.get_total_flops()))


def main(out: Path, strategy_name: str) -> None:
    torch.set_num_threads(1)
    if strategy_name == "fsdp2":
        from lightning.pytorch.strategies import ModelParallelStrategy

        strategy: Any = ModelParallelStrategy()
    else:
        strategy = strategy_name
    reference, callback = Reference(), MFUCallback(peak_tflops=PEAK)
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy=strategy, max_steps=STEPS,
                         logger=pl.loggers.CSVLogger(out / strategy_name), log_every_n_steps=1,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, use_distributed_sampler=False,
                         callbacks=[reference, callback])
    trainer.fit(Classifier(shard=strategy_name == "fsdp2"))
    assert callback.tracker is not None
    result = {"reference": reference.flops, "history": callback.tracker.history,
              "log_dir": trainer.logger.log_dir if trainer.logger else None}
    (out / f"{strategy_name}-rank{trainer.global_rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
