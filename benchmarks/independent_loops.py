"""reports/memory.md's loop rows: the loops people write, run for real on the CPU and measured by
a harness that shares no code with vitprof, beside vitprof's prediction; and ``--fit`` against a
binary search over real steps.

The measurement (:func:`measure`, :func:`largest_fitting_batch`) imports torch, timm, the
standard library and independent_memory.py's heap reader only (no vitprof). The loop is
written as its user writes it (:func:`run_loop`): the loss, where ``zero_grad()`` stands, its
``set_to_none``, gradient accumulation, a frozen backbone.
The peak of the **second optimizer step** is the glibc heap (``mallinfo2()``: ``uordblks``, the
bytes in use in the heap, plus ``hblkhd``, the bytes of the blocks malloc maps on its own: torch's
large tensors) sampled after every aten op by independent_memory.py's ``HeapPeak`` (forward,
backward and the optimizer's step), less the heap just before that step, plus the bytes alive
then (each storage once: parameters, buffers, the optimizer's state, the inputs and labels, and
any ``.grad``). Sampled after each op, it is the peak between ops: a kernel's scratch freed
inside its op is not seen (oneDNN's grows about 2.4 MB per thread, so the thread count is fixed
and stated). The attention path is named on both sides: ``torch.nn.attention.sdpa_kernel``
here, ``attention=`` in vitprof.

The prediction (:func:`predict`, the one place vitprof is imported) is ``vitprof.memory`` with
``target="cpu"`` and the loop's settings.

    python benchmarks/independent_loops.py [--out reports] [--threads 1]

About three minutes on one idle thread (DeiT-Ti at 224, batch 8; the search at 64 x 64 pixels);
the page states the time its run took (1285 s on two cores shared by seven users).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from independent_memory import HeapPeak, heap_bytes
from sections import write_section
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

MODEL = "deit_tiny_patch16_224"
IMAGE, BATCH = 224, 8
FIT_IMAGE = 64  # the search's images: 4 x 4 patches + the class token, batches in the tens
FIT_BUDGETS = (256 * 2**20, 384 * 2**20)
TOLERANCE = 3.0  # percent
BACKENDS = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION}
HEADING = "## The loops people write"
FIT_HEADING = "## `--fit` against a search over real steps"


@dataclass(frozen=True)
class Loop:
    """A training loop as its user writes it (the keywords are ``vitprof.memory``'s)."""

    label: str
    settings: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any) -> Any:
        return self.settings.get(key, default)


LOOPS = (
    Loop("zero_grad() first, out.backward(ones) (vitprof's default)"),
    Loop("loss = out.sum()", {"loss": "sum"}),
    Loop("loss = F.cross_entropy(out, y)", {"loss": "cross-entropy"}),
    Loop("zero_grad() after opt.step()", {"zero_grad": "end", "loss": "cross-entropy"}),
    Loop("zero_grad() between forward and backward (the tutorials')",
         {"zero_grad": "before-backward", "loss": "cross-entropy"}),
    Loop("zero_grad(set_to_none=False)", {"set_to_none": False, "loss": "cross-entropy"}),
    Loop("gradient accumulation 2", {"gradient_accumulation": 2, "loss": "cross-entropy"}),
    Loop("backbone frozen, head trained", {"freeze": "backbone", "loss": "cross-entropy"}),
)


def build(model: str, image: int) -> nn.Module:
    """timm's ``model`` for ``image`` pixels, random weights."""
    import timm

    torch.manual_seed(0)
    return timm.create_model(model, pretrained=False, img_size=image)


def _storages(tensors: Iterator[torch.Tensor]) -> int:
    seen = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(seen.values())


def _held(model: nn.Module, opt: torch.optim.Optimizer, *data: torch.Tensor) -> int:
    """Bytes alive between steps: parameters, buffers, their ``.grad``, optimizer state, data."""
    def tensors() -> Iterator[torch.Tensor]:
        yield from model.parameters()
        yield from model.buffers()
        yield from (p.grad for p in model.parameters() if p.grad is not None)
        for state in opt.state.values():
            yield from (v for v in state.values() if isinstance(v, torch.Tensor))
        yield from data

    return _storages(tensors())


def run_loop(model: nn.Module, loop: Loop, batch: int, image: int, steps: int = 2) -> int:
    """Train ``model`` ``steps`` optimizer steps on the CPU as ``loop`` says (AdamW, one batch
    of random images and labels); the peak bytes of the last step (see the module)."""
    if loop.get("freeze", "none") == "backbone":
        for p in model.parameters():
            p.requires_grad_(False)
        head: nn.Module = model.get_classifier()  # type: ignore[operator]
        for p in head.parameters():
            p.requires_grad_(True)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    model.train()
    x = torch.randn(batch, 3, image, image)
    y = torch.randint(0, 1000, (batch,))
    loss_kind = loop.get("loss", "ones")
    set_to_none = loop.get("set_to_none", True)
    where = loop.get("zero_grad", "start")
    micro = loop.get("gradient_accumulation", 1)

    def forward() -> torch.Tensor:
        out = model(x)
        if loss_kind == "sum":
            return out.sum()
        if loss_kind == "cross-entropy":
            return torch.nn.functional.cross_entropy(out, y)
        return out

    def backward(loss: torch.Tensor) -> None:
        if loss.dim() == 0:
            loss.backward()
        else:
            loss.backward(torch.ones_like(loss))

    def step() -> None:
        for i in range(micro):
            if where == "start" and i == 0:
                opt.zero_grad(set_to_none=set_to_none)
            loss = forward()
            if where == "before-backward" and i == 0:
                opt.zero_grad(set_to_none=set_to_none)
            backward(loss)
            del loss
        opt.step()
        if where == "end":
            opt.zero_grad(set_to_none=set_to_none)

    for _ in range(steps - 1):
        step()
    held = _held(model, opt, x, y)
    before = heap_bytes()
    with HeapPeak() as peak:
        step()
    return held + peak.peak - before


def measure(loop: Loop, batch: int, image: int, attention: str) -> int:
    """The measured peak of ``loop``'s second step of a fresh DeiT-Ti."""
    with sdpa_kernel(BACKENDS[attention]):
        return run_loop(build(MODEL, image), loop, batch, image)


def largest_fitting_batch(budget: int, image: int, attention: str) -> tuple[int, list[int]]:
    """The largest batch whose measured step (vitprof's default loop) fits ``budget``: batches
    doubled until one does not fit, then bisected; and the batches measured."""
    tried: dict[int, int] = {}

    def fits(batch: int) -> bool:
        if batch not in tried:
            tried[batch] = measure(LOOPS[0], batch, image, attention)
        return tried[batch] <= budget

    low, high = 0, 1
    while fits(high):
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low, sorted(tried)


def predict(loop: Loop, batch: int, image: int, attention: str, fit: int | None = None) -> Any:
    """vitprof's prediction of the same step (the one import of vitprof)."""
    from vitprof import InputRequest, memory

    return memory(build(MODEL, image), InputRequest(batch_size=batch, image_size=image),
                  target="cpu", attention=attention, optimizer="adamw", fit=fit,
                  **loop.settings)


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f}"


def loop_rows(attention: str) -> list[str]:
    rows = ["| loop | vitprof loop settings | measured MiB | vitprof MiB | error |",
            "|---|---|---:|---:|---:|"]
    for loop in LOOPS:
        measured = measure(loop, BATCH, IMAGE, attention)
        predicted = predict(loop, BATCH, IMAGE, attention).peak_bytes
        error = 100 * (predicted - measured) / measured
        settings = ", ".join(f"{k}={v!r}" for k, v in loop.settings.items()) or "(defaults)"
        rows.append(f"| {loop.label} | {settings} | {_mib(measured)} | {_mib(predicted)} | "
                    f"{error:+.2f}% |")
        print(rows[-1], flush=True)
    return rows


def fit_rows(attention: str) -> list[str]:
    rows = ["| budget | batches measured | largest batch that fits (search) | vitprof --fit |",
            "|---|---|---:|---:|"]
    for budget in FIT_BUDGETS:
        searched, tried = largest_fitting_batch(budget, FIT_IMAGE, attention)
        answer = predict(LOOPS[0], 8, FIT_IMAGE, attention, fit=budget).largest_batch
        rows.append(f"| {budget // 2**20} MiB | {', '.join(map(str, tried))} | {searched} | "
                    f"{answer} |")
        print(rows[-1], flush=True)
    return rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("reports"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--attention", choices=sorted(BACKENDS), default="flash")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    loops = loop_rows(args.attention)
    fits = fit_rows(args.attention)
    seconds = time.perf_counter() - start
    how = (f"{MODEL}, AdamW, float32, attention `{args.attention}` on both sides "
           f"(`sdpa_kernel` / `attention=`), {args.threads} thread(s) "
           f"(`torch.set_num_threads`), {seconds:.0f} s; "
           f"`python benchmarks/independent_loops.py --threads {args.threads} --attention "
           f"{args.attention}`")
    write_section(args.out / "memory.md", HEADING, "\n".join([
        HEADING, "",
        f"Each loop trained for real on the CPU ({MODEL} at batch {BATCH}, {IMAGE} x {IMAGE}) "
        "and measured by `benchmarks/independent_loops.py`, which shares no code with vitprof: "
        "the glibc heap (`mallinfo2()`: uordblks + hblkhd) after every aten op of the second "
        "optimizer step, less the heap before it, plus what was alive then. vitprof's column "
        f"is `vitprof.memory(..., target=\"cpu\")` with the loop's settings. CPU, measured: "
        f"{how}. The heap after each op is the peak between ops: a kernel's scratch freed "
        "inside its op is not in either column.", "", *loops, ""]), level=2)
    write_section(args.out / "memory.md", FIT_HEADING, "\n".join([
        FIT_HEADING, "",
        f"The largest batch whose real step fits a budget ({MODEL} at {FIT_IMAGE} x "
        f"{FIT_IMAGE}, the default loop), found by doubling then bisecting over real steps "
        "measured as above, against `vitprof memory --fit` (from batch 8). CPU, measured: "
        f"{how}.", "", *fits, ""]), level=2)
    print(f"wrote two sections of {args.out / 'memory.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
