"""The rows the training-memory benchmarks run (shared by memory_accuracy.py, which predicts and
measures on the CPU, and device_memory.py, which measures on a CUDA GPU).

A row is one training step of one model: its batch, precision (float32, or autocast to a 16-bit
dtype with float32 master weights), activation checkpointing (none, or every transformer block)
and attention path (``math``: the decomposition that keeps the softmax scores; ``flash`` and
``efficient``: the fused kernels, which keep O(L) per head). AdamW throughout.

The CPU rows are chosen to keep the real runs to about ten minutes on two idle cores (from
single-step timings; the page states the time its run took): every
row of the acceptance grid (DeiT-Ti and DeiT-S at batch 8 and 32, float32 and bfloat16, with and
without block checkpointing) is run on CUDA, but on the CPU the bfloat16 rows are DeiT-Ti's at
batch 8 only (bfloat16 on a CPU without AVX-512 BF16 runs emulated: DeiT-S at batch 8 took 77 s
a step, float32 3.4 s).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product

DEIT_TI, DEIT_S, DEIT_B = "deit_tiny_patch16_224", "deit_small_patch16_224", "deit_base_patch16_224"
SWIN = "swin_tiny_patch4_window7_224"
HYBRID = "vit_tiny_r_s16_p8_224"  # timm's ViT-Ti on a ResNetV2 stem: 7 x 7 + 1 = 50 tokens
VIT_B_16 = "vit_b_16"  # torchvision's; every other model is timm's
IMAGE = 224


@dataclass(frozen=True)
class Row:
    """One measured training step."""

    model: str
    batch: int
    amp: str | None = None  # None: float32; else the autocast dtype
    checkpoint: str = "none"  # "none" | "blocks"
    attention: str = "flash"  # "math" | "flash" | "efficient" | "explicit"

    @property
    def precision(self) -> str:
        return self.amp or "float32"

    @property
    def key(self) -> str:
        """The row's name: ``model/b8/float32/none/flash``."""
        return (f"{self.model}/b{self.batch}/{self.precision}/{self.checkpoint}/"
                f"{self.attention}")


def acceptance_grid(attention: str = "flash") -> list[Row]:
    """The rows of issue 26's acceptance: DeiT-Ti and DeiT-S at batch 8 and 32, float32 and
    bfloat16 autocast, with and without block checkpointing (2 x 2 x 2 x 2 = 16)."""
    return [Row(m, b, a, c, attention) for m, b, a, c in product(
        (DEIT_TI, DEIT_S), (8, 32), (None, "bfloat16"), ("none", "blocks"))]


def cpu_rows() -> list[Row]:
    """The rows measured on the CPU (see the module's docstring for the choice)."""
    fp32 = [r for r in acceptance_grid() if r.amp is None]  # 8 rows
    return [
        *fp32,
        Row(DEIT_TI, 8, attention="math"), Row(DEIT_S, 8, attention="math"),
        Row(DEIT_TI, 8, "bfloat16"), Row(DEIT_TI, 8, "bfloat16", "blocks"),
        Row(DEIT_B, 8), Row(SWIN, 8), Row(HYBRID, 8),
    ]


def quick_rows() -> list[Row]:
    """A smoke subset of the CPU rows: DeiT-Ti at batch 8 in float32 (3 rows)."""
    return [r for r in cpu_rows() if r.model == DEIT_TI and r.batch == 8 and r.amp is None]


def cuda_attention(row: Row) -> Row:
    """A row's attention on CUDA: a CPU row's ``flash`` (the CPU's fused kernel) is CUDA's
    flash kernel at 16 bits and the memory-efficient one in float32 (flash has no float32)."""
    if row.attention == "flash" and row.amp is None:
        return replace(row, attention="efficient")
    return row


def mesa_rows() -> list[Row]:
    """Mesa's measured setting: DeiT-Ti/S/B at batch 128, float16 autocast, the explicit
    attention of timm 0.3.2."""
    return [Row(m, 128, "float16", "none", "explicit") for m in (DEIT_TI, DEIT_S, DEIT_B)]


def cuda_rows() -> list[Row]:
    """The rows measured on CUDA: the whole acceptance grid, the other CPU rows, ViT-B/16 at
    batch 64 with the fused attention (float32 and bfloat16) and Mesa's three rows."""
    rows = [*acceptance_grid(), *cpu_rows(),
            Row(VIT_B_16, 64), Row(VIT_B_16, 64, "bfloat16"), *mesa_rows()]
    return list(dict.fromkeys(cuda_attention(r) for r in rows))  # in order, each once
