"""A tiny ViT trained on the CPU for a few steps in a plain loop, in Lightning and in the Hugging
Face Trainer: each step's FLOPs equal FlopCounterMode's over one real training step, and the MFU
logged is the counted FLOPs over the measured time over the peak.

The convention both sides share: FLOPs = 2 x the MACs of the matmuls, convolutions and attention
products of the forward and the backward (loss and optimizer element-wise work not included).
FlopCounterMode has no formula for the CPU's fused attention kernel
(``_scaled_dot_product_flash_attention_for_cpu``), so its reference step runs attention in its
math form (``SDPBackend.MATH``: two batched matmuls forward, four backward), which it counts.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import cross_entropy
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

from vitprof import track

PEAK = 1.0  # TFLOP/s: far above what a tiny CPU step achieves, so the MFU is a small fraction
BATCH, CLASSES, IMAGE = 4, 10, 32


def reference_flops(model: nn.Module, loss: Any) -> int:
    """FlopCounterMode's FLOPs over one real training step (forward, loss, backward)."""
    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        loss(model).backward()
    model.zero_grad()
    return int(counter.get_total_flops())


def data(steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return (torch.randn(steps * BATCH, 3, IMAGE, IMAGE, generator=generator),
            torch.randint(0, CLASSES, (steps * BATCH,), generator=generator))


def timm_vit() -> nn.Module:
    timm = pytest.importorskip("timm")
    return timm.create_model("vit_tiny_patch16_224", img_size=IMAGE, patch_size=8, depth=2,
                             embed_dim=64, num_heads=2, num_classes=CLASSES, pretrained=False)


def assert_mfu_is_arithmetic(entry: dict[str, Any]) -> None:
    assert entry["tflops"] == entry["flops"] / entry["seconds"] / 1e12
    assert entry["mfu"] == entry["flops"] / entry["seconds"] / (PEAK * 1e12)


@pytest.mark.slow  # building timm's model and a real CPU step under FlopCounterMode: seconds
def test_plain_loop() -> None:
    model = timm_vit()
    x, y = data(3)
    expected = reference_flops(model, lambda m: cross_entropy(m(x[:BATCH]), y[:BATCH]))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with track(model, peak_tflops=PEAK, optimizer=optimizer) as tracker:
        for xb, yb in zip(x.split(BATCH), y.split(BATCH), strict=True):
            cross_entropy(model(xb), yb).backward()
            optimizer.step()
            optimizer.zero_grad()
            tracker.step(xb)
    assert [e["flops"] for e in tracker.history] == [expected] * 3
    for entry in tracker.history:
        assert_mfu_is_arithmetic(entry)
    assert_sgd_counted(model, tracker.history)


def assert_sgd_counted(model: nn.Module, history: list[dict[str, Any]]) -> None:
    """Plain SGD: one add per trainable element (param -= lr * grad), from the second step."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert [e["optimizer_vector_flops"] for e in history] == [None, trainable, trainable]


def lightning_vit(batch_of: Callable[[Any], tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """A LightningModule around the tiny timm ViT whose training step reads its batch with
    ``batch_of`` and calls ``self(x)``."""
    pl = pytest.importorskip("lightning.pytorch")

    class Classifier(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.vit = timm_vit()

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return self.vit(image)  # type: ignore[no-any-return]

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch_of(batch)
            return cross_entropy(self(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Classifier()


def fit_logged(module: Any, callback: Any, x: torch.Tensor, y: torch.Tensor,
               tmp_path: Path) -> Any:
    """A CPU Lightning Trainer that fits ``module`` on ``(x, y)`` for 3 steps of ``BATCH`` with
    ``callback``, logging every step to a CSV under ``tmp_path``; returns the Trainer."""
    import lightning.pytorch as pl

    trainer = pl.Trainer(accelerator="cpu", max_steps=3, enable_checkpointing=False,
                         logger=pl.loggers.CSVLogger(tmp_path), log_every_n_steps=1,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[callback])
    trainer.fit(module, DataLoader(TensorDataset(x, y), batch_size=BATCH))
    return trainer


@pytest.mark.slow  # importing Lightning and starting its Trainer take seconds
def test_lightning(tmp_path: Path) -> None:
    pytest.importorskip("lightning.pytorch")
    from vitprof.integrations.lightning import MFUCallback

    module = lightning_vit(lambda batch: (batch[0], batch[1]))
    x, y = data(3)
    expected = reference_flops(module, lambda m: cross_entropy(m(x[:BATCH]), y[:BATCH]))
    callback = MFUCallback(peak_tflops=PEAK, summary=tmp_path / "mfu.md")
    trainer = fit_logged(module, callback, x, y, tmp_path)
    history = callback_history(callback)
    assert [e["flops"] for e in history] == [expected] * 3
    assert_sgd_counted(module, history)
    assert_summary_written(callback, tmp_path / "mfu.md")
    metrics = (Path(trainer.logger.log_dir) / "metrics.csv").read_text().splitlines()
    logged = [row for row in csv.DictReader(metrics) if row.get("vitprof/mfu")]
    assert len(logged) == 3
    for row, entry in zip(logged, history, strict=True):
        assert_mfu_is_arithmetic(entry)
        # logged as float32: the logged MFU is the logged TFLOP/s over the peak
        assert float(row["vitprof/tflops"]) == pytest.approx(entry["tflops"], rel=1e-6)
        assert float(row["vitprof/mfu"]) == pytest.approx(
            float(row["vitprof/tflops"]) / PEAK, rel=1e-6)


@pytest.mark.slow  # importing Lightning and starting its Trainer take seconds
def test_lightning_module_without_forward(tmp_path: Path) -> None:
    """A LightningModule with no forward whose training step calls ``self.backbone(x)``, as
    Lightning's own examples do: its first step is counted as it runs and equals FlopCounterMode
    over one real step, and the steps after it log ``vitprof/mfu`` and ``vitprof/tflops``; main
    warned and logged neither."""
    pl = pytest.importorskip("lightning.pytorch")
    from vitprof.integrations.lightning import MFUCallback

    class Backboned(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.backbone = timm_vit()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return cross_entropy(self.backbone(batch[0]), batch[1])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    module = Backboned()
    x, y = data(3)
    expected = reference_flops(module, lambda m: m.training_step((x[:BATCH], y[:BATCH]), 0))
    callback = MFUCallback(peak_tflops=PEAK, summary=tmp_path / "mfu.md")
    trainer = fit_logged(module, callback, x, y, tmp_path)
    history = callback_history(callback)
    assert [e["flops"] for e in history] == [expected] * 3
    assert [e["counted_in_step"] for e in history] == [True, False, False]
    assert_summary_written(callback, tmp_path / "mfu.md")
    assert "- steps counted as they ran, without TFLOP/s or MFU" in (
        tmp_path / "mfu.md").read_text()
    metrics = (Path(trainer.logger.log_dir) / "metrics.csv").read_text().splitlines()
    logged = [row for row in csv.DictReader(metrics) if row.get("vitprof/mfu")]
    assert len(logged) == 2  # steps 2 and 3: step 1's time holds its count
    for row, entry in zip(logged, history[1:], strict=True):
        assert_mfu_is_arithmetic(entry)
        assert float(row["vitprof/tflops"]) == pytest.approx(entry["tflops"], rel=1e-6)


def assert_summary_written(callback: Any, path: Path) -> None:
    """The callback wrote the tracker's markdown summary of its 3 steps at the training's end."""
    assert path.read_text() == callback.tracker.summary()
    assert "- steps: 3;" in path.read_text()


def callback_history(callback: Any) -> list[dict[str, Any]]:
    assert callback.tracker is not None
    return list(callback.tracker.history)


def hf_vit() -> Any:
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig(image_size=IMAGE, patch_size=8, hidden_size=64,
                                    num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=128, num_labels=CLASSES)
    return transformers.ViTForImageClassification(config)


def hf_fit(tmp_path: Path, model: nn.Module, trainer_class: Any = None) -> tuple[Any, Any]:
    """Three steps of ``model`` (batch 4) in a Hugging Face Trainer of ``trainer_class`` (the
    Trainer itself by default) with the callback; the callback and the Trainer."""
    transformers = pytest.importorskip("transformers")
    from vitprof.integrations.transformers import MFUCallback

    x, y = data(3)

    class Images(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return len(x)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"pixel_values": x[i], "labels": y[i]}

    callback = MFUCallback(peak_tflops=PEAK, summary=tmp_path / "mfu.md")
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=BATCH,
        logging_steps=1, report_to=[], save_strategy="no", use_cpu=True,
        dataloader_num_workers=0, disable_tqdm=True, optim="sgd",
    )
    trainer = (trainer_class or transformers.Trainer)(
        model=model, args=args, train_dataset=Images(), callbacks=[callback])
    trainer.train()
    return callback, trainer


@pytest.mark.slow  # the Trainer's start (accelerate) takes seconds
def test_hugging_face_trainer(tmp_path: Path) -> None:
    model = hf_vit()
    x, y = data(3)
    expected = reference_flops(model, lambda m: m(pixel_values=x[:BATCH], labels=y[:BATCH]).loss)
    callback, trainer = hf_fit(tmp_path, model)
    history = callback_history(callback)
    assert [e["flops"] for e in history] == [expected] * 3
    assert_sgd_counted(model, history)
    assert_summary_written(callback, tmp_path / "mfu.md")
    logged = [row for row in trainer.state.log_history if "vitprof/mfu" in row]
    assert [row["step"] for row in logged] == [1, 2, 3]
    for row, entry in zip(logged, history, strict=True):
        assert_mfu_is_arithmetic(entry)
        assert row["vitprof/tflops"] == entry["tflops"]
        assert row["vitprof/mfu"] == row["vitprof/tflops"] / PEAK


def subset_loss(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model fed the images only, the loss computed outside it."""
    return cross_entropy(model(pixel_values=inputs["pixel_values"]).logits, inputs["labels"])


def submodule_loss(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's encoder and head called one by one: the model's own forward never runs."""
    tokens = model.vit(inputs["pixel_values"]).last_hidden_state
    return cross_entropy(model.classifier(tokens[:, 0]), inputs["labels"])


@pytest.mark.slow  # the Trainer's start (accelerate) takes seconds
@pytest.mark.parametrize("loss", [subset_loss, submodule_loss])
def test_hugging_face_trainer_with_its_own_compute_loss(tmp_path: Path, loss: Any) -> None:
    """A Trainer subclass whose ``compute_loss`` feeds the model a subset of the inputs or calls
    its sub-modules: its first step is counted as it runs and equals FlopCounterMode over one
    real step; the next steps read that count and log their MFU. main counted the forward it
    caught on meta (the subset: the same FLOPs here, but not what ran) or, for the sub-modules,
    nothing, and said nothing."""
    transformers = pytest.importorskip("transformers")

    class OwnLoss(transformers.Trainer):  # type: ignore[misc,name-defined]
        def compute_loss(self, model: Any, inputs: dict[str, torch.Tensor], **_: Any) -> Any:
            return loss(model, inputs)

    model = hf_vit()
    x, y = data(3)
    expected = reference_flops(model, lambda m: loss(m, {"pixel_values": x[:BATCH],
                                                         "labels": y[:BATCH]}))
    callback, trainer = hf_fit(tmp_path, model, OwnLoss)
    history = callback_history(callback)
    assert [e["flops"] for e in history] == [expected] * 3
    assert [e["counted_in_step"] for e in history] == [True, False, False]
    assert history[0]["mfu"] is None  # its time holds the count
    logged = [row for row in trainer.state.log_history if "vitprof/mfu" in row]
    assert [row["step"] for row in logged] == [2, 3]
    for row, entry in zip(logged, history[1:], strict=True):
        assert_mfu_is_arithmetic(entry)
        assert row["vitprof/mfu"] == entry["mfu"]
    assert "training_step" not in vars(trainer)  # the callback's wrapper went with the training


@pytest.mark.slow  # a child interpreter importing torch
def test_import_vitprof_imports_no_framework() -> None:
    import subprocess
    import sys

    code = ("import sys, vitprof; vitprof.track; "
            "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'transformers') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def seeded_lightning_fit(tmp_path: Path, callbacks: list[Any], *, forward: bool = True
                         ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Three seeded Lightning steps of a small model with dropout, with ``callbacks``: the
    losses and the parameters at the end. ``forward=False``: the training step calls the
    network itself, as a LightningModule without forward does (its steps counted as they
    run)."""
    pl = pytest.importorskip("lightning.pytorch")

    class DroppedNet(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(1), nn.Linear(3 * 8 * 8, 16), nn.Dropout(0.5),
                                     nn.Linear(16, CLASSES))
            self.losses: list[torch.Tensor] = []

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            logits = self(batch[0]) if forward else self.net(batch[0])
            loss = cross_entropy(logits, batch[1])  # dropout: the global generator
            self.losses.append(loss.detach())
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class Dropped(DroppedNet):
        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return self.net(image)  # type: ignore[no-any-return]

    torch.manual_seed(0)
    module = Dropped() if forward else DroppedNet()
    x, y = torch.randn(3 * BATCH, 3, 8, 8), torch.randint(0, CLASSES, (3 * BATCH,))
    trainer = pl.Trainer(accelerator="cpu", max_steps=3, enable_checkpointing=False,
                         logger=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=tmp_path, callbacks=callbacks)
    trainer.fit(module, DataLoader(TensorDataset(x, y), batch_size=BATCH))
    return module.losses, [p.detach() for p in module.parameters()]


@pytest.mark.slow  # two Lightning Trainers start in seconds
def test_lightning_callback_leaves_a_seeded_run_bit_for_bit(tmp_path: Path) -> None:
    """MFUCallback() measures the CPU's peak when the training starts: main drew its matrices
    from torch's global generator, so the dropout masks and the trained parameters differed
    from the same seeded run without the callback."""
    pytest.importorskip("lightning.pytorch")
    from vitprof.integrations.lightning import MFUCallback

    callback = MFUCallback()
    losses, parameters = seeded_lightning_fit(tmp_path / "plain", [])
    tracked_losses, tracked_parameters = seeded_lightning_fit(tmp_path / "tracked", [callback])
    assert callback.tracker is not None and len(callback.tracker.history) == 3
    assert callback.tracker.peak is not None and callback.tracker.peak.measured
    assert len(losses) == 3 and all(map(torch.equal, losses, tracked_losses))
    assert all(map(torch.equal, parameters, tracked_parameters))


@pytest.mark.slow  # two Lightning Trainers start in seconds
def test_a_step_counted_as_it_runs_is_the_same_bit_for_bit(tmp_path: Path) -> None:
    """The first step of a LightningModule without forward runs under vitprof's counter: each
    op runs as it is, nothing decomposed or drawn, so the seeded run with dropout is the same
    bit for bit as without the callback."""
    pytest.importorskip("lightning.pytorch")
    from vitprof.integrations.lightning import MFUCallback

    callback = MFUCallback(peak_tflops=PEAK)
    losses, parameters = seeded_lightning_fit(tmp_path / "plain", [], forward=False)
    tracked_losses, tracked_parameters = seeded_lightning_fit(tmp_path / "tracked", [callback],
                                                              forward=False)
    assert callback.tracker is not None
    assert [e["counted_in_step"] for e in callback.tracker.history] == [True, False, False]
    assert callback.tracker.history[0]["flops"]  # the counted step has its FLOPs
    assert len(losses) == 3 and all(map(torch.equal, losses, tracked_losses))
    assert all(map(torch.equal, parameters, tracked_parameters))
