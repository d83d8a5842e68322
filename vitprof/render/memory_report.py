"""A training-memory estimate as a figure (its timeline) and as a markdown section. Renders;
never predicts.

Convention (stated in every section): sizes are bytes (exact integers; MiB = 2**20 bytes). A
component's row is its parameters, their gradients, the optimizer's state for them and the
activations autograd saves for the backward; the **peak** is the most bytes alive at once
during one training step (forward, backward, optimizer step), parameters, gradients, optimizer
state and every activation and temporary held at that moment included, as the estimate's
target allocator holds them.

It renders ``vitprof.MemoryEstimate`` (:mod:`vitprof.measure.memory.estimate`) and its
``MemoryEvent`` and ``ComponentMemory`` values.

The timeline figure (kind ``memory_timeline``, drawn by :func:`vitprof.render.figures.save`):
the bytes alive after each operation against the operation's index (not time: every
operation is one step of the axis, however long it runs), stacked by the keys of
``MemoryEvent.live`` that hold bytes at some operation (parameters, optimizer state, gradients,
any other key that is not a component alphabetically, such as the inputs or a workspace, then
the components in :data:`~vitprof.core.records.COMPONENTS` order), each phase's run of
operations shaded, the estimate's peak marked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from vitprof.core.records import COMPONENTS
from vitprof.core.vocab import Mode
from vitprof.measure.memory.cuda_model import PART_NAMES, estimate_parts
from vitprof.measure.memory.estimate import ComponentMemory, MemoryEstimate, MemoryEvent
from vitprof.render import figures
from vitprof.render.figures import COLORS, FigureData
from vitprof.render.formats import markdown_table

STEP = "one training step"  # what a training estimate's peak is of
TRAINING_STEP = f"{STEP} (forward, backward, optimizer step)"
CONVENTION = (
    "bytes (MiB = 2**20 bytes); per component: parameters, their gradients, the optimizer's "
    "state and the activations saved for the backward; peak = the most bytes alive at once "
    f"in {TRAINING_STEP}, everything held then included, as the target's allocator holds it"
)
FORWARD = "one forward without gradients"  # what an inference estimate's peak is of
STATE_KEYS = ("parameters", "optimizer_state", "gradients")  # stacked first, in this order
STATE_COLORS = {"parameters": "#4d4d4d", "optimizer_state": "#a6a6a6", "gradients": "#d9d9d9"}
EXTRA_COLORS = ("#c5b0d5", "#f7b6d2", "#dbdb8d", "#9edae5", "#c49c94")  # other keys, in turn
PHASE_COLORS = {"forward": "#dbe9f6", "backward": "#fbe3d6", "optimizer": "#e2f0d9"}
KIND = "memory_timeline"
X_LABEL = "operation index (not time)"  # one step per op, whatever the op's duration


# ------------------------------------------------------------------------------- figure


def stack_order(keys: Iterable[str]) -> list[str]:
    """The keys of ``live`` in stacking order: parameters, optimizer state, gradients, any
    other key that is not a component alphabetically, then the components in
    :data:`COMPONENTS` order."""
    present = set(keys)
    state = [k for k in STATE_KEYS if k in present]
    components = [k for k in COMPONENTS if k in present]
    return state + sorted(present - {*state, *components}) + components


def phase_spans(timeline: Sequence[MemoryEvent]) -> list[tuple[str, int, int]]:
    """Each run of consecutive events of one phase: (phase, first index, last index)."""
    spans: list[tuple[str, int, int]] = []
    for event in timeline:
        if spans and spans[-1][0] == event.phase:
            spans[-1] = (event.phase, spans[-1][1], event.index)
        else:
            spans.append((event.phase, event.index, event.index))
    return spans


def _run_of(estimate: MemoryEstimate) -> str:
    """What the estimate's peak is of: :data:`STEP`, or with ``mode inference``
    :data:`FORWARD`."""
    return FORWARD if estimate.settings.get("mode") == Mode.INFERENCE else STEP


def timeline_figure(estimate: MemoryEstimate) -> FigureData:
    """The timeline of ``estimate`` as figure data: per key of ``live`` holding bytes at some
    event, its bytes after every event (0 where an event's ``live`` lacks the key), the phases'
    spans and the peak."""
    keys = stack_order(k for event in estimate.timeline for k, v in event.live.items() if v)
    return FigureData(KIND, f"{estimate.model}: memory over {_run_of(estimate)}", {
        "index": [event.index for event in estimate.timeline],
        "series": {k: [event.live.get(k, 0) for event in estimate.timeline] for k in keys},
        "phases": [list(span) for span in phase_spans(estimate.timeline)],
        "peak": {"index": estimate.peak_index, "bytes": estimate.peak_bytes,
                 "phase": estimate.peak_phase, "component": estimate.peak_component},
        "settings": dict(estimate.settings),
        "batch_size": estimate.batch_size,
    })


def unit_for(peak_bytes: int) -> tuple[str, int]:
    """The unit the figure draws in: GiB from 2 GiB up, MiB below."""
    return ("GiB", 2**30) if peak_bytes >= 2 * 2**30 else ("MiB", 2**20)


def _draw_timeline(fig: Figure, data: dict[str, Any]) -> None:
    fig.set_size_inches(9.0, 4.5)  # room for the legend beside the axes
    ax = fig.add_subplot()
    unit, scale = unit_for(data["peak"]["bytes"])
    for phase, first, last in data["phases"]:
        ax.axvspan(first - 0.5, last + 0.5, color=PHASE_COLORS.get(phase, "#eeeeee"), lw=0)
        ax.annotate(phase, xy=((first + last) / 2, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                    fontsize="x-small", color="#555555")
    names = list(data["series"])
    extra = iter(EXTRA_COLORS * len(names))
    # each event holds its bytes over [index - 0.5, index + 0.5], as the phases' shading does
    xs = [x for i in data["index"] for x in (i - 0.5, i + 0.5)]
    ax.stackplot(xs, *([b / scale for b in data["series"][k] for _ in (0, 1)] for k in names),
                 labels=[k.replace("_", " ") for k in names],
                 colors=[STATE_COLORS.get(k) or COLORS.get(k) or next(extra) for k in names])
    peak = data["peak"]
    ax.plot(peak["index"], peak["bytes"] / scale, marker="v", color="black", zorder=3)
    ax.annotate(f"peak {peak['bytes'] / scale:,.2f} {unit}\n{peak['phase']}, {peak['component']}",
                xy=(peak["index"], peak["bytes"] / scale), xytext=(0, 6),
                textcoords="offset points", ha="center", va="bottom", fontsize="x-small")
    ax.set_ylim(0, 1.2 * peak["bytes"] / scale or 1.0)
    if xs:
        ax.set_xlim(xs[0], xs[-1])
    ax.set_xlabel(X_LABEL)
    ax.set_ylabel(f"alive ({unit})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="x-small")


figures.register(KIND, _draw_timeline)


# ------------------------------------------------------------------------------- markdown

# No column sums a row's four kinds: the bytes of every kind and component summed are no moment's
# bytes, and exceed the peak when activations are freed before the optimizer's state is made
HEADERS = ("params", "grads", "optimizer state", "activations (saved)")


def mib(value: int) -> str:
    """Bytes in MiB, two decimals."""
    return f"{value / 2**20:,.2f} MiB"


def memory_row(label: str, memory: ComponentMemory) -> list[str]:
    """One table row: the label and the four kinds of bytes."""
    values = (memory.params, memory.grads, memory.optimizer_state, memory.activations)
    return [label, *(f"{v:,}" for v in values)]


def memory_table(first: str, rows: Mapping[Any, ComponentMemory], total: str = "total"
                 ) -> str:
    """A pipe table of ``rows`` (label -> bytes) and each column's sum, labelled ``total``."""
    totals = [sum(getattr(m, f) for m in rows.values())
              for f in ("params", "grads", "optimizer_state", "activations")]
    body = [memory_row(str(label), m) for label, m in rows.items()]
    body.append([total, *(f"{v:,}" for v in totals)])
    return markdown_table((first, *HEADERS), body)


def peak_line(estimate: MemoryEstimate) -> str:
    """Where the peak is: bytes, phase, operation index (and its op when the timeline has it)
    and component."""
    ops = {event.index: event.op for event in estimate.timeline}
    op = f" ({ops[estimate.peak_index]})" if estimate.peak_index in ops else ""
    return (f"peak: {estimate.peak_bytes:,} bytes ({mib(estimate.peak_bytes)}) in the "
            f"{estimate.peak_phase}, at operation {estimate.peak_index}{op}, "
            f"component {estimate.peak_component}")


def memory_section(estimate: MemoryEstimate, figure: str | None = None,
                   level: int = 2) -> str:
    """The estimate as a markdown section: its input and settings, the peak, the bytes saved
    for the backward, the largest batch that fits (when asked for), the convention, the table
    per component and per block and, when ``figure`` names one, the timeline figure."""
    settings = ", ".join(f"{k} {v}" for k, v in estimate.settings.items())
    inference = _run_of(estimate) == FORWARD
    lines = [
        f"{'#' * level} {'Inference' if inference else 'Training'} memory: {estimate.model}",
        "",
        f"- input: {estimate.input}; batch size {estimate.batch_size}",
        f"- settings: {settings}",
        f"- {peak_line(estimate)}",
        f"- saved for the backward: {estimate.saved_bytes:,} bytes "
        f"({mib(estimate.saved_bytes)})",
    ]
    if estimate.largest_batch is not None:
        lines.append(f"- largest batch that fits: {estimate.largest_batch}")
    lines += [f"- {PART_NAMES[part]}: {words}"
              for part, words in estimate_parts(estimate.settings).items()]
    convention = CONVENTION.replace(TRAINING_STEP, FORWARD) if inference else CONVENTION
    lines += [f"- convention: {convention}", "",
              memory_table("component", estimate.by_component), ""]
    if estimate.by_block:
        lines += [memory_table("block", estimate.by_block, "all blocks"), ""]
    if figure:
        lines += [f"![memory over {_run_of(estimate)} of {estimate.model}]({figure})", ""]
    return "\n".join(lines)
