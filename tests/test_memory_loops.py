"""The training loop a memory prediction models (``loss``, ``zero_grad``, ``set_to_none``,
``gradient_accumulation``, ``freeze``: :mod:`vitprof.measure.memory.loop`): what each changes in
the prediction, derived from the step; bad values refused in one line; and loops held to a real
CPU step measured by :mod:`vitprof.measure.memory.measured` as tests/test_memory.py holds the
default loop (the peak between ops, the kernels' scratch aside, and the bytes saved exactly)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_memory import TINY_PARAMS, TINY_PY, TINY_TENSORS, _unexplained, tiny

from vitprof import MemoryEstimate, memory
from vitprof.cli.main import main
from vitprof.core.errors import UserError
from vitprof.measure.memory.measured import TrainingLoop, measure_training_memory
from vitprof.workload import InputRequest

BATCH = 4
CLASSES = 10  # TINY's head
HEAD_PARAMS = 64 * CLASSES + CLASSES  # head.weight and head.bias: 650
GRAD_BYTES = TINY_PARAMS * 4  # every gradient, float32: 457,000


def _predict(**loop: object) -> MemoryEstimate:
    return memory(tiny(), InputRequest(batch_size=BATCH), target="cpu", attention="flash", **loop)


@pytest.fixture(scope="module")
def default() -> MemoryEstimate:
    return _predict()


def _phase(estimate: MemoryEstimate, phase: str) -> list[dict[str, int]]:
    return [dict(e.live) for e in estimate.timeline if e.phase == phase]


def _without_gradients(events: list[dict[str, int]]) -> list[dict[str, int]]:
    return [{k: v for k, v in live.items() if k != "gradients"} for live in events]


@pytest.mark.parametrize("loop", [{"set_to_none": False}, {"gradient_accumulation": 2}])
def test_gradients_held_through_the_forward(default: MemoryEstimate,
                                            loop: dict[str, object]) -> None:
    """zero_grad(set_to_none=False) keeps the gradients as zeros, and the second pass of an
    accumulation finds the first's: all of them, 4 bytes per element, are alive through the
    forward, which is otherwise the default's; the backward adds into them in place, so the
    gradients never exceed one set."""
    held = _predict(**loop)
    forward = _phase(held, "forward")
    assert {live["gradients"] for live in forward} == {GRAD_BYTES}
    assert _without_gradients(forward) == _without_gradients(_phase(default, "forward"))
    assert max(e.live["gradients"] for e in held.timeline) == GRAD_BYTES
    assert held.peak_bytes > default.peak_bytes
    assert held.saved_bytes == default.saved_bytes


def test_accumulation_and_zeros_model_the_same_step() -> None:
    """The last pass of an accumulation and a step whose gradients were zeroed in place both
    find one set of gradients and add into it: the same timeline."""
    accumulated, zeros = _predict(gradient_accumulation=2), _predict(set_to_none=False)
    assert [e.live for e in accumulated.timeline] == [e.live for e in zeros.timeline]


def test_zero_grad_before_the_backward_frees_them_there(default: MemoryEstimate) -> None:
    """The tutorials' loop (forward, zero_grad(), backward, step): the previous gradients live
    through the forward (GRAD_BYTES more at every op) and are freed as the backward starts,
    which is then the default's."""
    tutorial = _predict(zero_grad="before-backward")
    forward = _phase(tutorial, "forward")
    assert [live["gradients"] for live in forward] == [GRAD_BYTES] * len(forward)
    assert _without_gradients(forward) == _without_gradients(_phase(default, "forward"))
    # the backward's first event (a device query before the loss's gradient) still holds them
    backward, as_default = _phase(tutorial, "backward"), _phase(default, "backward")
    assert backward[0]["gradients"] == GRAD_BYTES and backward[1:] == as_default[1:]
    assert _without_gradients(backward[:1]) == _without_gradients(as_default[:1])
    assert tutorial.peak_bytes >= default.peak_bytes


def test_zero_grad_at_the_end_is_the_same_step(default: MemoryEstimate) -> None:
    """zero_grad() after opt.step() frees the gradients before the next forward, as one at the
    start does: the step is the same."""
    end = _predict(zero_grad="end")
    assert [e.live for e in end.timeline] == [e.live for e in default.timeline]
    assert "opt.step(); opt.zero_grad()" in end.convention


def test_cross_entropy_saves_its_log_probabilities_and_labels(default: MemoryEstimate) -> None:
    """F.cross_entropy is log_softmax then nll_loss: the backward keeps the log-probabilities
    (BATCH x CLASSES float32), the labels (BATCH int64) and nll_loss's total weight (one
    float32)."""
    ce = _predict(loss="cross-entropy")
    assert ce.saved_bytes - default.saved_bytes == BATCH * CLASSES * 4 + BATCH * 8 + 4  # 196
    assert ce.settings["loss"] == "cross-entropy"
    assert "loss = F.cross_entropy(model(x), y); loss.backward()" in ce.convention


def test_a_sum_loss_saves_nothing_more(default: MemoryEstimate) -> None:
    """out.sum() keeps no tensor for its backward (it expands the gradient)."""
    assert _predict(loss="sum").saved_bytes == default.saved_bytes


def test_a_frozen_backbone_has_the_heads_gradients_and_state_alone(
        default: MemoryEstimate) -> None:
    frozen = _predict(freeze="backbone")
    assert frozen.total.params == default.total.params == TINY_PARAMS * 4
    assert frozen.total.grads == HEAD_PARAMS * 4  # 2,600
    # adamw: two moments per element and a float32 step per tensor, for head.weight and .bias
    assert frozen.total.optimizer_state == 2 * HEAD_PARAMS * 4 + 4 * 2
    assert default.total.optimizer_state == 2 * TINY_PARAMS * 4 + 4 * TINY_TENSORS
    # the head's backward needs its input alone: the class token of the final norm's output,
    # a view that keeps the whole BATCH x 17 tokens x 64 float32 alive
    assert frozen.saved_bytes == BATCH * 17 * 64 * 4  # 17,408
    assert frozen.settings["freeze"] == "backbone"


def test_the_default_loop_is_named() -> None:
    found = _predict()
    assert {k: found.settings[k] for k in ("loss", "zero_grad", "set_to_none",
                                           "gradient_accumulation", "freeze")} == {
        "loss": "ones", "zero_grad": "start", "set_to_none": "true",
        "gradient_accumulation": "1", "freeze": "none"}


LOOPS = [
    pytest.param({"loss": "cross-entropy", "gradient_accumulation": 2},
                 TrainingLoop("cross-entropy", accumulation=2), id="cross-entropy-accumulation-2"),
    pytest.param({"zero_grad": "end"}, TrainingLoop(zero_grad="end"), id="end"),
]
# Not here: the loops whose gradients are alive when the measured step begins (set_to_none=False,
# zero_grad before the backward). The profiler reports no free of a block allocated before it
# started, so measure_training_memory clones them inside the profile; the peak it finds then is
# 0 or 256 bytes (one 64-float gradient) below the prediction from run to run, on TINY. Those two
# loops are held to the glibc heap by benchmarks/independent_loops.py (reports/memory.md, DeiT-Ti:
# -0.11% and -0.12%).


@pytest.mark.parametrize(("settings", "loop"), LOOPS)
def test_a_loop_matches_a_real_cpu_step(settings: dict[str, object],
                                        loop: TrainingLoop) -> None:
    predicted = memory(tiny(), InputRequest(batch_size=8, image_size=32), target="cpu",
                       attention="flash", **settings)
    torch.manual_seed(1)
    measured = measure_training_memory(tiny(), torch.randn(8, 3, 32, 32), loop=loop)
    assert predicted.saved_bytes == measured.saved_bytes
    assert _unexplained(predicted.peak_bytes, measured) == 0, (predicted.peak_bytes, measured)


def test_a_frozen_backbone_matches_a_real_cpu_step() -> None:
    """The measured step trains what requires a gradient: the head, the rest frozen by hand."""
    predicted = memory(tiny(), InputRequest(batch_size=8, image_size=32), target="cpu",
                       attention="flash", freeze="backbone", loss="cross-entropy")
    model = tiny()
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith("head."))
    torch.manual_seed(1)
    measured = measure_training_memory(model, torch.randn(8, 3, 32, 32),
                                       loop=TrainingLoop("cross-entropy"))
    assert predicted.saved_bytes == measured.saved_bytes
    assert _unexplained(predicted.peak_bytes, measured) == 0, (predicted.peak_bytes, measured)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"loss": "mse"}, "unknown loss 'mse'; choose from ones, sum, cross-entropy"),
    ({"zero_grad": "middle"}, "unknown zero_grad 'middle'"),
    ({"freeze": "all"}, "unknown freeze 'all'; choose from none, backbone"),
    ({"set_to_none": "no"}, "set_to_none must be true or false, got 'no'"),
    ({"gradient_accumulation": 0}, "gradient_accumulation must be a positive int"),
    ({"gradient_accumulation": 1.5}, "gradient_accumulation must be a positive int"),
    ({"mode": "inference", "loss": "sum"}, "mode='inference' is one forward without "
                                           "gradients: loss does not apply"),
])
def test_bad_loop_settings_are_refused(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        memory(tiny(), **kwargs)


def test_a_cross_entropy_needs_logits() -> None:
    tokens = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 8, 8), torch.nn.Flatten(2))
    with pytest.raises(UserError, match=r"loss='cross-entropy' takes logits of shape "
                                        r"\(batch, classes\); this model returns 1x8x16"):
        memory(tokens, InputRequest(image_size=32), loss="cross-entropy")


def test_a_frozen_backbone_needs_a_head() -> None:
    class NoHead(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mixer = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.mixer(x.mean((2, 3)).repeat(1, 3)[:, :8])

    with pytest.raises(UserError, match="freeze='backbone' trains the head alone, and the "
                                        "breakdown found no trainable head parameter"):
        memory(NoHead(), InputRequest(image_size=8), freeze="backbone")


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--gradient-accumulation", "0"], "expected a positive integer, got 0"),
    (["--loss", "mse"], "invalid choice: 'mse'"),
    (["--zero-grad", "middle"], "invalid choice: 'middle'"),
    (["--set-to-none", "no"], "invalid choice: 'no'"),
    (["--freeze", "all"], "invalid choice: 'all'"),
    (["--mode", "inference", "--gradient-accumulation", "2"],
     "--mode inference is one forward without gradients: --gradient-accumulation does not "
     "apply"),
])
def test_bad_loop_options_are_one_line(tmp_path, argv: list[str], fragment: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tiny.py").write_text(TINY_PY)
    status: object
    try:
        status = main(["memory", f"{tmp_path / 'tiny.py'}:tiny", *argv])
    except SystemExit as exit_:  # argparse's usage errors exit on their own
        status = exit_.code
    assert status == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("vitprof: error:") and fragment in lines[0]


def test_the_options_reach_the_prediction(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    (tmp_path / "tiny.py").write_text(TINY_PY)
    assert main(["memory", f"{tmp_path / 'tiny.py'}:tiny", "--target", "cpu", "--batch-size",
                 str(BATCH), "--attention", "flash", "--set-to-none", "false", "--freeze",
                 "backbone", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    found = _predict(set_to_none=False, freeze="backbone")
    assert data["peak_bytes"] == found.peak_bytes
    assert data["settings"]["set_to_none"] == "false" and data["settings"]["freeze"] == "backbone"
    assert "opt.zero_grad(set_to_none=False)" in data["convention"]


def test_a_budget_names_the_loop(tmp_path) -> None:
    import tomllib

    from vitprof.checks.budget import evaluate, parse_budgets

    (tmp_path / "tiny.py").write_text(TINY_PY)

    def budget(table: str, limit: int = 2**40) -> object:
        text = f'''
[tiny]
model = "{tmp_path / 'tiny.py'}:tiny"
batch_size = {BATCH}
max_peak_bytes = {limit}
memory = {table}
'''
        return parse_budgets(tomllib.loads(text), text=text)[0]

    table = ('{ target = "cpu", attention = "flash", gradient_accumulation = 2, '
             'set_to_none = true, loss = "cross-entropy" }')
    peak = _predict(gradient_accumulation=2, loss="cross-entropy").peak_bytes
    assert evaluate(budget(table, peak)).passed  # type: ignore[arg-type]
    assert not evaluate(budget(table, peak - 1)).passed  # type: ignore[arg-type]
    with pytest.raises(UserError, match="expected true or false, got"):
        budget('{ set_to_none = "false" }')
    with pytest.raises(UserError, match="expected an integer, got"):
        budget('{ gradient_accumulation = "2" }')
    with pytest.raises(UserError, match="gradient_accumulation must be a positive int"):
        budget("{ gradient_accumulation = 0 }")
