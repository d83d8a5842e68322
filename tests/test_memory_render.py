"""The training-memory figure and markdown section (vitprof/render/memory_report.py), on a small
hand-built estimate whose numbers are written beside it.

The estimate is a real ``vitprof.MemoryEstimate`` of ``MemoryEvent`` and ``ComponentMemory``
values, written by hand.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from vitprof.measure.memory.estimate import ComponentMemory as Component
from vitprof.measure.memory.estimate import MemoryEstimate as Estimate
from vitprof.measure.memory.estimate import MemoryEvent as Event
from vitprof.render import figures
from vitprof.render import memory_report as render

MIB = 2**20


def state(params: int, grads: int, opt: int, **held: int) -> dict[str, int]:
    """A ``live`` mapping in MiB: the three kinds of state and the components' activations."""
    return {"parameters": params * MIB, "gradients": grads * MIB,
            "optimizer_state": opt * MIB, **{k: v * MIB for k, v in held.items()}}


# parameters 1,000 MiB (mlp 600 + attn_qkv 400), AdamW state 2 x 1,000 = 2,000 MiB; each
# event's total in MiB beside it
TIMELINE = (
    Event(0, "aten.addmm", "forward", state(1000, 0, 2000, mlp=300), component="mlp"),  # 3,300
    Event(1, "aten.gelu", "forward", state(1000, 0, 2000, mlp=500), component="mlp"),  # 3,500
    Event(2, "aten.mm", "backward", state(1000, 600, 2000, mlp=200), component="mlp"),  # 3,800
    # attn_qkv's weight gradient (400 MiB) made while its 100 MiB of activations are held:
    # 1,000 + 1,000 + 2,000 + 100 = 4,100 MiB, the peak
    Event(3, "aten.mm", "backward", state(1000, 1000, 2000, attn_qkv=100),
          component="attn_qkv"),
    Event(4, "aten._foreach_add_", "optimizer", state(1000, 1000, 2000),
          component="other"),  # 4,000
)
ESTIMATE = Estimate(
    model="toy", input="batch 4, 3x32x32", batch_size=4,
    settings={"optimizer": "adamw", "dtype": "float32", "amp": "none", "checkpoint": "none",
              "target": "cpu", "attention": "flash", "mode": "train"},
    peak_bytes=4100 * MIB, peak_phase="backward", peak_index=3, peak_component="attn_qkv",
    saved_bytes=500 * MIB,
    by_component={"mlp": Component(600 * MIB, 600 * MIB, 1200 * MIB, 500 * MIB),
                  "attn_qkv": Component(400 * MIB, 400 * MIB, 800 * MIB, 0)},
    by_block={0: Component(1000 * MIB, 1000 * MIB, 2000 * MIB, 500 * MIB)},
    timeline=TIMELINE, largest_batch=None,
)


def test_keys_stack_state_first_then_the_rest_then_components_in_their_order() -> None:
    keys = ["mlp", "gradients", "workspace", "parameters", "attn_qkv", "inputs",
            "optimizer_state"]
    assert render.stack_order(keys) == [
        "parameters", "optimizer_state", "gradients", "inputs", "workspace", "attn_qkv", "mlp"]


def test_phase_spans_are_the_runs_of_one_phase() -> None:
    assert render.phase_spans(TIMELINE) == [
        ("forward", 0, 1), ("backward", 2, 3), ("optimizer", 4, 4)]
    # a phase that comes back is a second span
    again = (*TIMELINE, dataclasses.replace(TIMELINE[0], index=5))
    assert render.phase_spans(again)[-1] == ("forward", 5, 5)


def test_the_figure_stacks_every_key_with_zero_where_an_event_lacks_it() -> None:
    # a key that never holds a byte (conv here) is left out
    zero_conv = [dataclasses.replace(e, live={**e.live, "conv": 0}) for e in TIMELINE]
    data = render.timeline_figure(dataclasses.replace(ESTIMATE, timeline=zero_conv)).data
    assert list(data["series"]) == [
        "parameters", "optimizer_state", "gradients", "attn_qkv", "mlp"]
    assert data["series"]["mlp"] == [300 * MIB, 500 * MIB, 200 * MIB, 0, 0]
    assert data["series"]["attn_qkv"] == [0, 0, 0, 100 * MIB, 0]
    # the stack at the peak's index is the peak: 1,000 + 2,000 + 1,000 + 100 + 0 = 4,100 MiB
    at_peak = sum(series[3] for series in data["series"].values())
    assert at_peak == 4100 * MIB == data["peak"]["bytes"]
    assert data["phases"] == [["forward", 0, 1], ["backward", 2, 3], ["optimizer", 4, 4]]


def test_the_unit_is_gib_from_two_gib() -> None:
    assert render.unit_for(2 * 2**30) == ("GiB", 2**30)
    assert render.unit_for(2 * 2**30 - 1) == ("MiB", 2**20)


def test_the_drawing_marks_the_peak_and_shades_each_phase() -> None:
    fig = Figure(figsize=figures.SIZE_IN, dpi=figures.DPI)
    FigureCanvasAgg(fig)
    render._draw_timeline(fig, render.timeline_figure(ESTIMATE).data)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    # 4,100 MiB = 4,100 / 1,024 GiB = 4.00390625 GiB, drawn in GiB (at least 2 GiB)
    assert "peak 4.00 GiB\nbackward, attn_qkv" in texts
    assert {"forward", "backward", "optimizer"} <= set(texts)
    assert ax.get_ylim()[1] == 1.2 * 4100 / 1024
    assert ax.get_ylabel() == "alive (GiB)"
    assert ax.get_xlabel() == "operation index (not time)"  # one step per op, however long
    # three phase spans and one filled area per key (5 keys)
    assert len(ax.patches) == 3 and len(ax.collections) == 5


def test_the_figure_saves_with_its_digest(tmp_path: Path) -> None:
    figure = render.timeline_figure(ESTIMATE)
    figures.save(figure, tmp_path / "timeline.png")
    assert figures.read_digest(tmp_path / "timeline.png") == figure.digest


def test_the_section_tables_sum_per_column_and_no_cell_reads_as_the_peak() -> None:
    """Main added a ``total`` column, each row's four kinds summed: its corner cell (4,500 MiB)
    read like the peak (4,100 MiB) and exceeded it."""
    section = render.memory_section(ESTIMATE, figure="toy_memory.png")
    assert f"| mlp | {600 * MIB:,} | {600 * MIB:,} | {1200 * MIB:,} | {500 * MIB:,} |" in section
    # per column: params 600 + 400 = 1,000 MiB, grads the same, state 1,200 + 800 = 2,000 MiB,
    # saved 500 + 0 = 500 MiB
    assert (f"| total | {1000 * MIB:,} | {1000 * MIB:,} | {2000 * MIB:,} | {500 * MIB:,} |"
            in section)
    assert (f"| all blocks | {1000 * MIB:,} | {1000 * MIB:,} | {2000 * MIB:,} | "
            f"{500 * MIB:,} |") in section
    assert "| component | params | grads | optimizer state | activations (saved) |" in section
    # the four kinds of every component summed, 1,000 + 1,000 + 2,000 + 500 = 4,500 MiB, is
    # no moment's bytes: it is nowhere
    assert f"{4500 * MIB:,}" not in section
    assert "![memory over one training step of toy](toy_memory.png)" in section


def test_the_section_states_the_peak_settings_input_and_convention() -> None:
    section = render.memory_section(ESTIMATE)
    assert section.startswith("## Training memory: toy\n")
    assert (f"- peak: {4100 * MIB:,} bytes (4,100.00 MiB) in the backward, at operation 3 "
            "(aten.mm), component attn_qkv") in section
    assert "- input: batch 4, 3x32x32; batch size 4" in section
    assert ("- settings: optimizer adamw, dtype float32, amp none, checkpoint none, target cpu, "
            "attention flash, mode train") in section
    assert f"- saved for the backward: {500 * MIB:,} bytes (500.00 MiB)" in section
    assert f"- convention: {render.CONVENTION}" in section
    assert "largest batch" not in section and "![" not in section
    fitted = render.memory_section(dataclasses.replace(ESTIMATE, largest_batch=12))
    assert "- largest batch that fits: 12" in fitted


def test_a_peak_index_outside_the_timeline_names_no_operation() -> None:
    line = render.peak_line(dataclasses.replace(ESTIMATE, peak_index=9))
    assert "at operation 9, component attn_qkv" in line and "(aten" not in line


def test_a_key_that_is_no_component_gets_a_colour_of_its_own() -> None:
    with_inputs = [dataclasses.replace(e, live={**e.live, "inputs": 10 * MIB}) for e in TIMELINE]
    fig = Figure(figsize=figures.SIZE_IN, dpi=figures.DPI)
    FigureCanvasAgg(fig)
    estimate = dataclasses.replace(ESTIMATE, timeline=with_inputs)
    render._draw_timeline(fig, render.timeline_figure(estimate).data)
    # parameters, optimizer state, gradients, inputs, attn_qkv, mlp: six fills, six colours
    colours = {tuple(c.get_facecolor()[0]) for c in fig.axes[0].collections}
    assert len(colours) == 6


def test_a_cuda_estimate_names_its_modelled_parts_in_every_format() -> None:
    """The CUDA target's workspaces and rounding were never measured: the table, the markdown
    and the JSON say so, line by line; a CPU estimate (held to real steps) has no such line."""
    from vitprof.render.memory import memory_dict, memory_header

    cuda = dataclasses.replace(ESTIMATE, settings={**ESTIMATE.settings, "target": "cuda"})
    # two handles (the forward's thread, the backward's) x 32 MiB = 67,108,864 bytes
    workspace = "cuBLAS workspace: 67,108,864 bytes = 2 handles"
    rounding = "allocator rounding: every block rounded up to a multiple of 512 bytes"
    for text in ("\n".join(memory_header(cuda)), render.memory_section(cuda)):
        lines = [line for line in text.splitlines() if "modelled, not measured" in line]
        assert len(lines) == 2 and workspace in lines[0] and rounding in lines[1]
    parts = memory_dict(cuda)["modelled_not_measured"]
    assert set(parts) == {"cublas_workspace", "allocator_rounding"}
    assert all(words.endswith("modelled, not measured") for words in parts.values())
    assert "modelled" not in render.memory_section(ESTIMATE)  # target cpu
    assert "modelled_not_measured" not in memory_dict(ESTIMATE)
    inference = dataclasses.replace(cuda, settings={**cuda.settings, "mode": "inference"})
    # one handle, the forward's thread: 1 x 32 MiB = 33,554,432 bytes
    assert "cuBLAS workspace: 33,554,432 bytes = 1 handle (" in render.memory_section(inference)
