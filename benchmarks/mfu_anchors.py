"""The figures of docs/mfu.md: one ViT-B/16 training step counted three ways, and the peaks.

* vitprof: :func:`vitprof.measure.mfu.flops.count_step` (what ``vitprof.track`` logs), per
  component, forward and backward;
* the 6N rule: 6 x parameters x tokens (197 tokens a 224 image: 196 patches and the class
  token), per component from vitprof's parameter attribution;
* Lightning's ``measure_flops`` (``lightning.fabric.utilities.throughput``, what its docs feed
  ``ThroughputMonitor``): ``FlopCounterMode`` over a forward and a backward on a meta model.

Each is run for the whole model trained and for a linear probe (only the head trains). The
peaks: Lightning's ``get_available_flops`` for each GPU of vitprof's table, called by its
real device name (``"NVIDIA H200"``), beside vitprof's dense figures; the Trainer's
``floating_point_ops``. Prints markdown, or with ``--write docs/mfu.md`` replaces the page's
generated section:
``python benchmarks/mfu_anchors.py [--write docs/mfu.md]``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from vitprof.analysis import analyze
from vitprof.core.atomic_write import write_atomically
from vitprof.count.training import phase_components
from vitprof.measure.mfu.flops import count_step
from vitprof.measure.mfu.peaks import peak_table

TOKENS = 197  # 14 x 14 patches of 16 px in a 224 image, and the class token
BATCH = 1


def build(meta: bool) -> nn.Module:
    import timm

    if meta:
        with torch.device("meta"):
            return timm.create_model("vit_base_patch16_224", pretrained=False)
    return timm.create_model("vit_base_patch16_224", pretrained=False)


def probe(model: nn.Module) -> nn.Module:
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith("head."))
    return model


def lightning_flops(model: nn.Module, device: str = "meta") -> int | None:
    """``measure_flops`` with a sum loss, as Lightning's docs show it, on a model living on
    ``device``; None without Lightning."""
    try:
        from lightning.fabric.utilities.throughput import measure_flops
    except ImportError:
        return None
    x = torch.randn(BATCH, 3, 224, 224, device=device)
    flops = int(measure_flops(model, lambda: model(x), lambda y: y.sum()))
    model.zero_grad(set_to_none=True)
    return flops


def hugging_face_flops() -> tuple[int, int] | None:
    """``floating_point_ops`` of the Trainer (6 x params x "tokens", the tokens being the
    elements of ``pixel_values``) and vitprof's count, for HF's ViT-B/16; None without it."""
    try:
        import transformers
    except ImportError:
        return None
    with torch.device("meta"):
        model = transformers.ViTForImageClassification(transformers.ViTConfig(num_labels=1000))
    x = torch.randn(BATCH, 3, 224, 224)
    # the Trainer's own method (it reads only self.model): what it adds to its total_flos
    theirs = transformers.Trainer.floating_point_ops(SimpleNamespace(model=model),
                                                      {"pixel_values": x})
    return int(theirs), count_step(model, x).flops


def rows(model: nn.Module) -> list[tuple[str, int, int, int]]:
    """Per component: trainable parameters, 6N FLOPs (all parameters), vitprof FLOPs."""
    x = torch.randn(BATCH, 3, 224, 224)
    profile = analyze(model, mode="train", inputs=x)
    params: dict[str, int] = {}
    for record in profile.params:
        params[str(record.component)] = params.get(str(record.component), 0) + record.numel
    counted = {str(c): 2 * v.total.macs for c, v in phase_components(profile.ops).items()}
    return [(c, params.get(c, 0), 6 * params.get(c, 0) * TOKENS * BATCH, counted[c])
            for c in counted if params.get(c, 0) or counted[c]]


def table(title: str, model: nn.Module, meta: nn.Module) -> list[str]:
    step = count_step(model, torch.randn(BATCH, 3, 224, 224))
    found = rows(model)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    six_n = 6 * total * TOKENS * BATCH
    lines = [f"#### {title}", "",
             f"- vitprof: {step.flops:,} FLOPs (forward {2 * step.forward_macs:,}, backward "
             f"{2 * step.backward_macs:,})",
             f"- 6N rule: 6 x {total:,} params x {TOKENS} tokens = {six_n:,} FLOPs "
             f"({six_n / step.flops:.4f} x vitprof); with the {trainable:,} trainable params "
             f"only: {6 * trainable * TOKENS * BATCH:,}"]
    for device, where in (("meta", meta), ("cpu", model)):
        measured = lightning_flops(where, device)
        if measured is not None:
            lines.append(f"- Lightning measure_flops (FlopCounterMode) on {device}: "
                         f"{measured:,} FLOPs ({measured / step.flops:.4f} x vitprof; missing "
                         f"{step.flops - measured:,})")
    lines += ["", "| component | params | 6N FLOPs | vitprof FLOPs | 6N - vitprof |",
              "|---|---:|---:|---:|---:|"]
    lines += [f"| {c} | {p:,} | {n:,} | {v:,} | {n - v:+,} |" for c, p, n, v in found]
    lines += [f"| total | {total:,} | {six_n:,} | {step.flops:,} | {six_n - step.flops:+,} |", ""]
    return lines


def attention_line(meta: nn.Module) -> str:
    """What ``measure_flops`` counts of attention on meta: the ops FlopCounterMode saw."""
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(BATCH, 3, 224, 224, device="meta")
    with FlopCounterMode(display=False) as counter:
        meta(x).sum().backward()
    ops = sorted(str(op) for op in counter.get_flop_counts()["Global"])
    return f"FlopCounterMode's ops on meta: {', '.join(ops)}"


# each row's GPU as torch.cuda.get_device_name() names it (ROCm's torch too), and its compute
# capability (Lightning reads it to decide whether float32 is TF32); AMD's: None (not CUDA)
DEVICES: dict[str, tuple[str, tuple[int, int] | None]] = {
    "A100 SXM": ("NVIDIA A100-SXM4-80GB", (8, 0)), "A100 PCIe": ("NVIDIA A100 80GB PCIe", (8, 0)),
    "H100 SXM": ("NVIDIA H100 80GB HBM3", (9, 0)), "H100 PCIe": ("NVIDIA H100 PCIe", (9, 0)),
    "H200 SXM": ("NVIDIA H200", (9, 0)), "L4": ("NVIDIA L4", (8, 9)), "A10": ("NVIDIA A10", (8, 6)),
    "V100 SXM2": ("Tesla V100-SXM2-16GB", (7, 0)), "V100 PCIe": ("Tesla V100-PCIE-32GB", (7, 0)),
    "RTX 4090": ("NVIDIA GeForce RTX 4090", (8, 9)), "MI300X": ("AMD Instinct MI300X", None),
    "MI325X": ("AMD Instinct MI325X", None),
}
LIGHTNING_DTYPES = ("fp32", "tf32", "bf16", "fp16")  # Lightning's table has no fp8


def lightning_peak(device_name: str, capability: tuple[int, int] | None,
                   dtype: str) -> float | None:
    """What Lightning's ``get_available_flops`` (what ``ThroughputMonitor`` divides by) returns
    in TFLOP/s on a GPU named ``device_name``, or None (then Lightning logs no MFU): called as a
    training run calls it, with ``torch.cuda`` answering as that GPU would; fp32 with PyTorch's
    matmul precision "highest", tf32 as float32 under "high"."""
    import warnings
    from unittest import mock

    from lightning.fabric.utilities.throughput import get_available_flops

    asked: Any = torch.float32 if dtype in ("fp32", "tf32") else {
        "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if dtype == "fp32" else "high")
    try:
        with mock.patch("torch.cuda.get_device_name", return_value=device_name), \
                mock.patch("torch.cuda.get_device_capability", return_value=capability or (9, 4)), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its "FLOPs not found" warning: the None says it
            flops = get_available_flops(torch.device("cuda"), asked)
    finally:
        torch.set_float32_matmul_precision(before)
    return None if flops is None else flops / 1e12


def peaks() -> list[str]:
    """vitprof's dense peak beside Lightning's ``get_available_flops`` for each row of the
    table (fp32, tf32, bf16, fp16), the GPU called by its real device name."""
    if importlib.util.find_spec("lightning") is None:
        return ["(Lightning is not installed: no comparison of peaks)"]
    lines = ["| GPU (torch.cuda.get_device_name) | dtype | vitprof dense TFLOP/s | "
             "Lightning get_available_flops TFLOP/s | Lightning / dense |",
             "|---|---|---:|---:|---:|"]
    for row in peak_table():
        if row.dtype not in LIGHTNING_DTYPES:
            continue
        name, capability = DEVICES[row.gpu]
        theirs = lightning_peak(name, capability, row.dtype)
        ours = "none written" if row.dense_tflops is None else f"{row.dense_tflops:g}"
        lightning = "None (no MFU)" if theirs is None else f"{theirs:g}"
        ratio = "" if theirs is None or row.dense_tflops is None \
            else f"{theirs / row.dense_tflops:.2f}"
        lines.append(f"| {row.gpu} (\"{name}\") | {row.dtype} | {ours} | {lightning} | {ratio} |")
    return lines


def hugging_face_line() -> list[str]:
    found = hugging_face_flops()
    if found is None:
        return ["(transformers is not installed: no floating_point_ops)"]
    theirs, ours = found
    return [f"- HF ViTForImageClassification (ViT-B/16): Trainer.floating_point_ops "
            f"{theirs:,}, vitprof {ours:,}: {theirs / ours:,.1f} x", ""]


BEGIN, END = "<!-- mfu_anchors: begin -->", "<!-- mfu_anchors: end -->"


def generated() -> str:
    lines = [f"### ViT-B/16 (timm vit_base_patch16_224), batch {BATCH}, 224 x 224", ""]
    lines += table("Whole model trained", build(False), build(True))
    lines += table("Linear probe (only the head trains)", probe(build(False)), probe(build(True)))
    lines += [attention_line(build(True)), "", "#### Hugging Face", "", *hugging_face_line()]
    lines += ["#### Peaks", "", *peaks()]
    return "\n".join(lines)


def main() -> None:
    """Print the figures; ``--write PAGE`` puts them between the page's markers instead;
    ``--peaks`` prints the comparison of peaks alone (what tests/test_mfu_anchors.py reads)."""
    if sys.argv[1:] == ["--peaks"]:
        print("\n".join(peaks()))
        return
    text = generated()
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        page = Path(sys.argv[2])
        before, rest = page.read_text().split(BEGIN)
        after = rest.split(END)[1]
        write_atomically(page, f"{before}{BEGIN}\n{text}\n{END}{after}")
    else:
        print(text)


if __name__ == "__main__":
    main()
