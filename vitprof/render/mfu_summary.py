"""The markdown summary of a tracked run: the peak and where it comes from, the median
TFLOP/s and MFU, and each component's share of the step's FLOPs."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from vitprof.core.display import Shows

if TYPE_CHECKING:
    from vitprof.measure.mfu.peaks import ChosenPeak
    from vitprof.measure.mfu.tracker import Tracker

CONVENTION = ("FLOPs = 2 x MACs of the training step (forward + backward, the backward to the "
              "parameters that require a gradient), counted once per input shape, on meta or "
              "as the step ran; "
              "element-wise work apart as vector FLOPs; compute-window MFU = FLOPs / the "
              "step's own seconds (its start to its end: the time between steps is left out) "
              "/ dense peak (on the CPU a measured matmul rate, not a theoretical peak)")


def median_of(history: list[dict[str, Any]], key: str) -> float | None:
    """The median of ``key`` over the entries that have one (None where none has)."""
    values = [e[key] for e in history if e[key] is not None]
    return statistics.median(values) if values else None


def _shares(history: list[dict[str, Any]], key: str, weight: str) -> dict[str, float]:
    """Each component's share of ``key`` (``components``: FLOPs; ``time_components``: the
    forward's time) over the run, each step's shares weighted by its ``weight``."""
    amounts: dict[str, float] = {}
    for entry in history:
        for component, share in (entry.get(key) or {}).items():
            amounts[component] = amounts.get(component, 0.0) + share * (entry[weight] or 0)
    total = sum(amounts.values())
    return {c: v / total for c, v in amounts.items()} if total else {}


def _optimizer(history: list[dict[str, Any]]) -> str:
    counted = [e["optimizer_vector_flops"] for e in history
               if e.get("optimizer_vector_flops") is not None]
    if not counted:
        return "not counted (pass optimizer=; it is counted on its second step)"
    return f"{counted[-1]:,} vector FLOPs a step, apart from the FLOPs above"


def _uncounted(history: list[dict[str, Any]]) -> list[str]:
    """The line naming the steps without FLOPs (their shape could not be counted), if any."""
    missing = sum(1 for e in history if e["flops"] is None)
    if not missing:
        return []
    return [f"- steps without FLOPs: {missing} of {len(history)} (a shape that could not be "
            f"counted: vitprof warned why)"]


def _counted_in_step(history: list[dict[str, Any]]) -> list[str]:
    """The line naming the steps counted as they ran (FLOPs, no rate), if any."""
    counted = [str(e["step"]) for e in history if e.get("counted_in_step")]
    if not counted:
        return []
    return [f"- steps counted as they ran, without TFLOP/s or MFU (their time holds the count): "
            f"{len(counted)} of {len(history)} (step {', '.join(counted)})"]


def _above_peak(history: list[dict[str, Any]], peak: ChosenPeak | None) -> list[str]:
    """The line naming the steps with FLOPs but no MFU against a peak (they ran above a peak
    given or from the table, which is wrong: vitprof warned), if any."""
    above = sum(1 for e in history if e["flops"] is not None and e["mfu"] is None
                and not e.get("counted_in_step"))
    if peak is None or not above:
        return []
    return [f"- steps above the peak, without MFU: {above} of {len(history)} (the peak is wrong "
            f"for this device and dtype: vitprof warned)"]


def _world(history: list[dict[str, Any]]) -> list[str]:
    """The lines of the world's step in a DDP or FSDP2 run (none without a process group)."""
    sized = [e for e in history if e.get("world_size") is not None]
    if not sized:
        return []
    tflops, mfu = median_of(sized, "world_tflops"), median_of(sized, "world_mfu")
    return [f"- world: {sized[-1]['world_size']} ranks (this summary is rank "
            f"{sized[-1]['rank']}'s; the figures above are its own step)",
            f"- median world TFLOP/s: {'n/a' if tflops is None else f'{tflops:.4g}'}",
            f"- median world compute-window MFU: "
            f"{'n/a' if mfu is None else f'{100 * mfu:.2f}%'} (the ranks' summed FLOPs over "
            f"the slowest rank's seconds over the summed peaks)"]


def summary(history: list[dict[str, Any]], peak: ChosenPeak | None, counts: int) -> str:
    """Markdown for ``history`` (the tracker's entries), ``peak`` (None: no MFU) and the
    number of meta counts the run needed."""
    tflops, mfu = median_of(history, "tflops"), median_of(history, "mfu")
    lines = [
        "## vitprof training MFU", "",
        f"- steps: {len(history)}; input shapes counted: {counts}",
        f"- peak: {peak.source if peak else 'none (no MFU): pass peak_tflops='}",
        f"- median TFLOP/s: {'n/a' if tflops is None else f'{tflops:.4g}'}",
        f"- median compute-window MFU: {'n/a' if mfu is None else f'{100 * mfu:.2f}%'}",
        f"- optimizer step: {_optimizer(history)}",
        *_world(history),
        *_uncounted(history),
        *_counted_in_step(history),
        *_above_peak(history, peak),
        f"- convention: {CONVENTION}", "",
    ]
    flops = _shares(history, "components", "flops")
    times = _shares(history, "time_components", "seconds")
    if not flops and not times:
        return "\n".join(lines)
    if times:
        lines += ["| component | share of FLOPs | share of forward time |", "|---|---:|---:|"]
    else:
        lines += ["| component | share of FLOPs |", "|---|---:|"]
    for component in sorted(flops.keys() | times.keys(), key=lambda c: -flops.get(c, 0.0)):
        row = f"| {component} | {100 * flops.get(component, 0.0):.2f}% |"
        lines.append(row + (f" {100 * times.get(component, 0.0):.2f}% |" if times else ""))
    return "\n".join(lines) + "\n"


def tracker_summary(tracker: Tracker, fmt: Shows) -> str:
    """The show function of a :class:`~vitprof.measure.mfu.tracker.Tracker`: in any ``fmt``
    (:meth:`Tracker.summary` asks for markdown) the markdown of :func:`summary`."""
    return summary(tracker.history, tracker.peak, tracker.counts.counts)
