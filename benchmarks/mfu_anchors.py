"""The figures of docs/mfu.md: one ViT-B/16 training step counted three ways, and the peaks.

* vitprof: :func:`vitprof.measure.mfu.flops.count_step` (what ``vitprof.track`` logs), per
  component, forward and backward;
* the 6N rule: 6 x parameters x tokens (197 tokens a 224 image: 196 patches and the class
  token), per component from vitprof's parameter attribution;
* Lightning's ``measure_flops`` (``lightning.fabric.utilities.throughput``, what its docs feed
  ``ThroughputMonitor``): ``FlopCounterMode`` over a forward and a backward on a meta model.

Each is run for the whole model trained and for a linear probe (only the head trains). The
peaks: Lightning's table (``get_available_flops``' ``_CUDA_FLOPS``) beside vitprof's dense
figures, for the GPUs both have; the Trainer's ``floating_point_ops``. Prints markdown, or with
``--write docs/mfu.md`` replaces the page's generated section:
``python benchmarks/mfu_anchors.py [--write docs/mfu.md]``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from vitprof.analysis import analyze
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


def peaks() -> list[str]:
    try:
        from lightning.fabric.utilities.throughput import _CUDA_FLOPS
    except ImportError:
        return ["(Lightning is not installed: no comparison of peaks)"]
    # Lightning's keys for the same GPUs (it has no A10, only the A10G, a different part)
    keys = {"H100 SXM": "h100 sxm", "H100 PCIe": "h100 pcie", "H200 SXM": "h200 sxm1",
            "L4": "l4", "A100 SXM": "a100", "A100 PCIe": "a100", "V100 SXM2": "v100 sxm",
            "V100 PCIe": "v100 pcie", "RTX 4090": "rtx 4090"}
    dtypes: dict[str, Any] = {"fp32": torch.float32, "tf32": "tfloat32",
                              "bf16": torch.bfloat16, "fp16": torch.float16}
    lines = ["| GPU | dtype | vitprof dense TFLOP/s | Lightning TFLOP/s | Lightning / dense |",
             "|---|---|---:|---:|---:|"]
    for row in peak_table():
        theirs = _CUDA_FLOPS.get(keys.get(row.gpu, ""), {}).get(dtypes.get(row.dtype))
        if theirs is None:
            continue
        ours = "" if row.dense_tflops is None else f"{row.dense_tflops:g}"
        ratio = "" if row.dense_tflops is None else f"{theirs / 1e12 / row.dense_tflops:.2f}"
        sparse = (f" (sparse {row.sparse_tflops:g})" if row.sparse_tflops is not None
                  and row.dense_tflops is None else "")
        lines.append(f"| {row.gpu} | {row.dtype} | {ours or 'none written'}{sparse} | "
                     f"{theirs / 1e12:g} | {ratio} |")
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
    """Print the figures; ``--write PAGE`` puts them between the page's markers instead."""
    text = generated()
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        page = Path(sys.argv[2])
        before, rest = page.read_text().split(BEGIN)
        after = rest.split(END)[1]
        page.write_text(f"{before}{BEGIN}\n{text}\n{END}{after}")
    else:
        print(text)


if __name__ == "__main__":
    main()
