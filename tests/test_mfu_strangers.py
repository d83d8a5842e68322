"""The MFU tracker used as a stranger would: precisions named as the frameworks name them,
peaks that are not numbers a device can reach, loops the authors did not write the tracker
around (gradient accumulation in Lightning, a batch that is a dict, a forward the training step
does not call). The framework cases are ``slow``: they start Lightning's Trainer."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from test_mfu_frameworks import lightning_vit, reference_flops
from torch import nn
from torch.nn.functional import cross_entropy
from torch.utils.data import DataLoader, TensorDataset

from vitprof.core.errors import UserError
from vitprof.measure.mfu.peaks import choose_peak, given_peak
from vitprof.measure.peak import matmul_flops
from vitprof.render.mfu_summary import summary


@pytest.mark.parametrize(("name", "dtype"), [("bf16", torch.bfloat16), ("fp16", torch.float16),
                                             ("fp32", torch.float32)])
def test_the_cpu_peak_is_measured_in_a_dtype_given_by_name(
        monkeypatch: pytest.MonkeyPatch, name: str, dtype: torch.dtype) -> None:
    """Lightning's ``precision="bf16-mixed"`` reaches the tracker as the name "bf16": on the CPU
    the peak is measured in bfloat16, not dropped with the MFU."""
    measured: list[torch.dtype] = []

    def matmul_flops(device: str, dtype: torch.dtype, n: int) -> float:
        measured.append(dtype)
        return 5e10

    monkeypatch.setattr("vitprof.measure.mfu.peaks.matmul_flops", matmul_flops)
    peak = choose_peak(None, torch.device("cpu"), name)
    assert measured == [dtype]
    assert peak.measured and peak.tflops == 0.05 and f" {name} matmuls" in peak.source  # 5e10/1e12


def test_fp8_cannot_be_measured_on_the_cpu_in_one_line() -> None:
    with pytest.raises(UserError, match="fp8") as raised:
        choose_peak(None, torch.device("cpu"), "fp8")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("peak", [float("inf"), 1e400])
def test_an_infinite_peak_is_refused(peak: Any) -> None:
    """An infinite peak would make every MFU 0.0, a value that looks measured; the error says
    why inf is refused (it said 'must be a positive number, got inf')."""
    with pytest.raises(UserError, match="peak_tflops must be a positive, finite number"):
        given_peak(peak)


def test_the_measured_peak_runs_the_kernel_of_a_linear_layer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without native bf16 (an AVX2 CPU), ``torch.mm`` in bfloat16 runs a reference loop some
    20 x slower than ``F.linear`` (oneDNN), which ``nn.Linear`` under autocast runs: a peak
    measured with ``mm`` was below what a bf16-mixed training step achieved, and the MFU above
    100% stopped the training. The peak is measured with ``F.linear`` (what is called, not how
    fast it ran: timings belong in benchmarks)."""
    calls: list[tuple[tuple[int, ...], torch.dtype]] = []
    linear = torch.nn.functional.linear

    def counting(a: torch.Tensor, b: torch.Tensor, *rest: Any) -> torch.Tensor:
        calls.append((tuple(a.shape), a.dtype))
        return linear(a, b, *rest)

    monkeypatch.setattr(torch.nn.functional, "linear", counting)
    matmul_flops("cpu", torch.bfloat16, size=8, repeats=2)
    assert calls and set(calls) == {((8, 8), torch.bfloat16)}


# --- Lightning, written as its users write it -------------------------------------------------

BATCH, CLASSES, IMAGE = 4, 10, 32


def lightning_fit(module: Any, batches: Any, tmp_path: Path, **trainer: Any) -> tuple[
        list[dict[str, Any]], list[dict[str, str]]]:
    """Fit ``module`` on ``batches`` with the callback (peak 1 TFLOP/s); the tracker's history
    and the rows of the CSV logger that hold a logged MFU."""
    pl = pytest.importorskip("lightning.pytorch")
    from vitprof.integrations.lightning import MFUCallback

    callback = MFUCallback(peak_tflops=1.0)
    fit = pl.Trainer(accelerator="cpu", enable_checkpointing=False, log_every_n_steps=1,
                     logger=pl.loggers.CSVLogger(tmp_path), enable_progress_bar=False,
                     enable_model_summary=False, callbacks=[callback], **trainer)
    fit.fit(module, batches)
    assert callback.tracker is not None
    metrics = (Path(fit.logger.log_dir) / "metrics.csv").read_text().splitlines()
    return callback.tracker.history, [r for r in csv.DictReader(metrics) if r.get("vitprof/mfu")]


def micro_batch_flops(module: nn.Module) -> int:
    x, y = torch.randn(BATCH, 3, IMAGE, IMAGE), torch.randint(0, CLASSES, (BATCH,))
    return reference_flops(module, lambda m: cross_entropy(m(x), y))


@pytest.mark.slow  # Lightning's Trainer starts in seconds
def test_lightning_gradient_accumulation_is_one_step_of_two_forwards(tmp_path: Path) -> None:
    """``accumulate_grad_batches=2``: 4 batches are 2 optimizer steps, each of 2 micro-batches
    (main logged each micro-batch as a step, 4 entries, and lost half of them in the logger)."""
    module = lightning_vit(lambda batch: (batch[0], batch[1]))
    expected = micro_batch_flops(module)
    x, y = torch.randn(4 * BATCH, 3, IMAGE, IMAGE), torch.randint(0, CLASSES, (4 * BATCH,))
    history, logged = lightning_fit(module, DataLoader(TensorDataset(x, y), batch_size=BATCH),
                                    tmp_path, max_steps=2, accumulate_grad_batches=2)
    assert [e["flops"] for e in history] == [2 * expected] * 2
    assert [float(r["vitprof/tflops"]) for r in logged] == pytest.approx(
        [e["tflops"] for e in history], rel=1e-6)  # logged as float32


@pytest.mark.slow  # Lightning's Trainer starts in seconds
def test_lightning_dict_batch_is_counted_as_the_forward_was_called(tmp_path: Path) -> None:
    """A batch ``{"image": x, "label": y}`` whose training step calls ``self(batch["image"])``:
    main passed the whole dict as keyword arguments (``label=`` too) and counted nothing."""
    module = lightning_vit(lambda batch: (batch["image"], batch["label"]))
    expected = micro_batch_flops(module)
    x, y = torch.randn(2 * BATCH, 3, IMAGE, IMAGE), torch.randint(0, CLASSES, (2 * BATCH,))
    batches = DataLoader([{"image": x[i], "label": y[i]} for i in range(len(x))],  # type: ignore[arg-type]
                         batch_size=BATCH)
    history, logged = lightning_fit(module, batches, tmp_path, max_steps=2)
    assert [e["flops"] for e in history] == [expected] * 2
    assert len(logged) == 2


@pytest.mark.slow  # importing Lightning takes seconds
def test_lightning_batch_it_cannot_read_warns_and_training_goes_on() -> None:
    """A batch of a type vitprof cannot read, from a training step that never calls
    ``self(...)``: main raised a UserError from ``on_train_batch_end``, stopping the training."""
    pytest.importorskip("lightning.pytorch")
    from vitprof.integrations.lightning import MFUCallback

    callback = MFUCallback(peak_tflops=1.0)
    trainer = SimpleNamespace(optimizers=[], precision="32-true", global_step=0)
    module = nn.Linear(2, 2)
    callback.on_train_start(trainer, module)
    callback.on_train_batch_start(trainer, module, object(), 0)
    trainer.global_step = 1  # the optimizer stepped
    with pytest.warns(UserWarning, match="cannot read the model's inputs"):
        callback.on_train_batch_end(trainer, module, None, object(), 0)
    callback.on_train_end(trainer, module)
    assert callback.tracker is not None
    assert [(e["step"], e["flops"]) for e in callback.tracker.history] == [(1, None)]


@pytest.mark.slow  # importing Lightning takes seconds
def test_lightning_module_without_forward_is_counted_as_its_step_runs() -> None:
    """A LightningModule whose training step runs ``self.head(self.backbone(x))`` with no
    ``forward``: main warned 'Probe has no forward of its own ...' and timed its steps without
    FLOPs. Its first step of a batch signature is counted as it runs (FLOPs, no MFU: its time
    holds the count), the next one of that signature reads the count, and nothing is warned."""
    pl = pytest.importorskip("lightning.pytorch")
    from vitprof.integrations.lightning import MFUCallback

    class Probe(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.backbone, self.head = nn.Conv2d(3, 4, 4, 4), nn.Linear(4, CLASSES)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            features = self.backbone(batch[0]).mean((2, 3))
            return cross_entropy(self.head(features), batch[1])

    callback = MFUCallback(peak_tflops=1.0)
    trainer = SimpleNamespace(optimizers=[], precision="32-true", global_step=0)
    module = Probe()
    batch = (torch.randn(BATCH, 3, 8, 8), torch.randint(0, CLASSES, (BATCH,)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback.on_train_start(trainer, module)
        for step in (1, 2):
            callback.on_train_batch_start(trainer, module, batch, step - 1)
            module.training_step(batch, step - 1).backward()
            trainer.global_step = step  # the optimizer stepped
            callback.on_train_batch_end(trainer, module, None, batch, step - 1)
        callback.on_train_end(trainer, module)
    assert [str(w.message) for w in caught if "vitprof" in str(w.message)] == []
    # the convolution: 4 images x 4 channels x 2 x 2 positions x (3 x 4 x 4) = 3,072 MACs, and
    # as many for its weight gradient (the image needs none); the head: 4 x 4 x 10 = 160, its
    # weight and input gradients 2 x 160: 2 x (3,072 + 3,072 + 160 + 320) = 13,248 FLOPs
    expected = 13_248
    assert reference_flops(module, lambda m: m.training_step(batch, 0)) == expected
    assert callback.tracker is not None
    history = callback.tracker.history
    assert [(e["step"], e["flops"], e["counted_in_step"]) for e in history] == [
        (1, expected, True), (2, expected, False)]
    assert history[0]["mfu"] is None and history[0]["tflops"] is None
    assert history[1]["mfu"] == expected / history[1]["seconds"] / 1e12  # a peak of 1 TFLOP/s
    assert callback.tracker.counts.counts == 1


@pytest.mark.slow  # importing Lightning takes seconds
def test_lightning_inputs_replace_the_forward_the_callback_caught() -> None:
    """``MFUCallback(inputs=...)`` counts the step on what it returns, not on the forward caught
    in ``training_step``: the forward ran on a batch of 2, ``inputs`` gives one of 3."""
    pytest.importorskip("lightning.pytorch")
    from vitprof.integrations.lightning import MFUCallback

    logged: list[dict[str, float]] = []

    class Logged(nn.Linear):  # a LightningModule's log_dict, kept in `logged`
        def log_dict(self, values: dict[str, float], **_: Any) -> None:
            logged.append(values)

    callback = MFUCallback(peak_tflops=1.0, inputs=lambda batch: batch["rows"])
    trainer = SimpleNamespace(optimizers=[], precision="32-true", global_step=0)
    module = Logged(2, 2)
    callback.on_train_start(trainer, module)
    callback.on_train_batch_start(trainer, module, None, 0)
    module(torch.randn(2, 4, 2))  # the training step's forward, caught
    trainer.global_step = 1  # the optimizer stepped
    callback.on_train_batch_end(trainer, module, None, {"rows": torch.randn(3, 4, 2)}, 0)
    callback.on_train_end(trainer, module)
    assert callback.tracker is not None
    # 3 x 4 rows x 2 in x 2 out = 48 MACs forward, 48 for the weight gradient (the input
    # needs none): 2 x (48 + 48) = 192 FLOPs; the caught 2 x 4 rows would give 128
    assert [e["flops"] for e in callback.tracker.history] == [192]
    assert [sorted(values) for values in logged] == [["vitprof/mfu", "vitprof/tflops"]]


def test_the_summary_says_which_steps_have_no_flops() -> None:
    """Steps whose shape could not be counted: main's summary said 'input shapes counted: 1'
    over an empty table of components, and nothing of the steps without FLOPs."""
    history = [{"step": s, "seconds": 1.0, "flops": None, "tflops": None, "mfu": None,
                "components": {}, "optimizer_vector_flops": None} for s in (1, 2)]
    text = summary(history, None, 1)
    assert "steps without FLOPs: 2 of 2" in text
    assert "| component |" not in text


def test_a_cpu_peak_measured_in_float32_is_not_called_tf32(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.set_float32_matmul_precision("high")`` (which Lightning recommends) lets tensor
    cores use TF32; a CPU has none, and its measured matmuls are float32."""
    monkeypatch.setattr("vitprof.measure.mfu.peaks.matmul_flops", lambda *a, **k: 5e10)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        peak = choose_peak(None, torch.device("cpu"), torch.float32)
    finally:
        torch.set_float32_matmul_precision(before)
    assert " fp32 matmuls on cpu" in peak.source


def test_a_count_that_fails_as_the_step_runs_is_one_warning_never_the_steps_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """vitprof's pricing failing on an op of a real step (here every record raises) ends the
    count, one warning and no FLOPs; the step itself runs to its end, its gradients as they
    are uncounted."""
    from vitprof.count.counter import OpCounter
    from vitprof.measure.mfu.live_count import LiveCount

    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    model(x).sum().backward()
    expected = model.weight.grad.clone()  # type: ignore[union-attr]
    model.zero_grad()

    def failing(*_: Any, **__: Any) -> None:
        raise RuntimeError("a formula's own bug")

    monkeypatch.setattr(OpCounter, "record", failing)
    live = LiveCount(model)
    live.start()
    model(x).sum().backward()
    with pytest.warns(UserWarning, match="counter failed on it .*a formula's own bug"):
        assert live.stop() is None
    assert torch.equal(model.weight.grad, expected)  # type: ignore[arg-type]


def test_a_breakdown_that_fails_after_the_step_is_one_warning_never_the_trainings_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The breakdown of a step counted as it runs (the recognize layer, after the step) failing
    ends that count in one warning, no FLOPs; ``stop`` raises nothing into the training loop
    that calls it (before this guard the breakdown's error reached the loop)."""
    from vitprof.measure.mfu import live_count

    def failing(*_: Any, **__: Any) -> None:
        raise RuntimeError("a recognition rule's own bug")

    monkeypatch.setattr(live_count, "breakdown", failing)
    model = nn.Linear(4, 2)
    live = live_count.LiveCount(model)
    live.start()
    model(torch.randn(3, 4)).sum().backward()
    with pytest.warns(UserWarning, match="breakdown failed on it .*a recognition rule's own bug"):
        assert live.stop() is None


@pytest.mark.slow  # importing transformers takes seconds
def test_a_trainer_step_that_runs_no_forward_of_the_model_is_one_warning() -> None:
    """Where the callback cannot find the Trainer running it (here no Trainer calls it) and a
    step runs no forward of the model, nothing can count the step: one warning says so and the
    step has no FLOPs (main said nothing)."""
    pytest.importorskip("transformers")
    from vitprof.integrations.transformers import MFUCallback

    callback = MFUCallback(peak_tflops=1.0)
    args = SimpleNamespace(bf16=False, fp16=False)
    callback.on_train_begin(args, None, None, model=nn.Linear(2, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in (1, 2):
            callback.on_step_begin(args, None, None)
            callback.on_step_end(args, None, None)
        callback.on_train_end(args, None, None)
    said = [str(w.message) for w in caught if "vitprof" in str(w.message)]
    assert len(said) == 1 and said[0].startswith(
        "vitprof: a training step ran no forward of the Trainer's model, so nothing can count it")
    assert callback.tracker is not None
    assert [(e["step"], e["flops"]) for e in callback.tracker.history] == [(1, None), (2, None)]


def test_a_step_counted_as_it_runs_knows_its_batch_as_the_models_input() -> None:
    """The batch a live count is started with is the model's input data, as a meta count's
    inputs are (:meth:`vitprof.count.counter.OpCounter.feed`): a model that is one layer whose
    residual adds take that input itself as their skip is split as its meta count, its
    feed-forward in ``mlp`` (without the batch, no join is found: it went to ``head``)."""
    from recognition_fixtures import HID, D, InputSkipLayer, N

    from vitprof.measure.mfu.flops import count_step
    from vitprof.measure.mfu.live_count import LiveCount

    model, batch = InputSkipLayer(), 2
    maps = torch.randn(batch, D, 2, 2)  # a D x 2 x 2 map: N = 4 tokens
    live = LiveCount(model)
    live.start(maps)
    model(maps).sum().backward()
    counted = live.stop()
    assert counted is not None
    # the two feed-forward linears on batch x N tokens, D x HID each, forward, weight's and
    # input's gradients: 2 x 3 x (2 x 4 x 8 x 16) MACs, FLOPs 2x
    assert counted.components["mlp"] == 2 * (2 * 3 * batch * N * D * HID) == 12_288
    assert counted.components == count_step(model, maps).components


def test_a_step_counted_as_it_runs_is_broken_down_as_its_meta_count() -> None:
    """The count of a real step (a Lightning module without ``forward``, a Trainer's own loss)
    is placed by the same breakdown as every other feature (:func:`vitprof.recognize.breakdown`,
    the graph read from the step's data flow): a hand-written net no component table detects
    has its components, not all of it in ``other`` (main placed a live count by the tables
    alone), and they are those of the meta count of the same step."""
    from recognition_fixtures import HID, D, N, Plain

    from vitprof.measure.mfu.flops import count_step
    from vitprof.measure.mfu.live_count import LiveCount

    model, batch = Plain(), 2
    images = torch.randn(batch, 3, 4 * int(N ** 0.5), 4 * int(N ** 0.5))  # 4 x 4 patches
    live = LiveCount(model)
    live.start()
    model(images).sum().backward()
    counted = live.stop()
    assert counted is not None
    # the two feed-forward linears of 2 blocks on batch x N tokens, D x HID each, run forward,
    # for the weight's gradient and for the input's: 2 x 2 x 3 x (2 x 4 x 8 x 16) MACs, FLOPs 2x
    assert counted.components["mlp"] == 2 * (2 * 2 * 3 * batch * N * D * HID) == 24_576
    assert counted.components["other"] == 0
    assert counted.components == count_step(model, images).components
