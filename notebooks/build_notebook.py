"""Build ``vit_complexity.ipynb`` from the cells below and execute it to store its outputs.

Run from anywhere: ``.venv/bin/python notebooks/build_notebook.py``. The notebook is a walk
through ViT-B/16 with vitprof's API; ``tests/test_notebook.py`` executes it again so it cannot rot.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
NOTEBOOK = HERE / "vit_complexity.ipynb"
TIMEOUT_S = 600

CELLS: list[tuple[str, str]] = [
    ("markdown", """\
# What a ViT-B/16 costs, part by part

A walk through torchvision's `vit_b_16` with vitprof. Conventions, everywhere below:

- **MACs** are multiply-accumulates of the matmuls, linears, convolutions and attention products;
  **FLOPs = 2 x MACs**;
- **vector FLOPs** are the element-wise work (LayerNorm, softmax, GELU, bias and residual adds),
  counted apart at the per-element costs of `vitprof.count.formulas`;
- parameters are counted once each; the model runs on the **meta device** (no memory, no
  compute), batch 1, 224 x 224."""),
    ("code", """\
from IPython.display import Image, Markdown

from vitprof import analyze

profile = analyze("vit_b_16")
print("\\n".join(profile.to_dict()["units"].values()))
profile.totals"""),
    ("markdown", """\
## Where the parameters and the MACs go

Nine components. The MLP holds about two thirds of both; the attention core (QK^T, softmax, AV)
has no parameters at all but 4% of the MACs at 224 px."""),
    ("code", "profile.by_component()"),
    ("markdown", """\
## One block, part by part

A block's MACs are its weights used once per token (197 tokens here), plus the attention core,
which has no weights. The vector FLOPs of the LayerNorms are real work, but not MACs."""),
    ("code", """\
from vitprof.study.pages.markdown import blocks_table, one_block_table, stages

Markdown(one_block_table(profile, 0))"""),
    ("code", """\
for stage, counts in stages(profile):
    print(f"{stage:42s} {counts.params:>12,} params {counts.macs:>16,} MACs")"""),
    ("code", "Markdown(blocks_table(profile))"),
    ("markdown", """\
## The peers, side by side

fvcore, torchinfo and torch's `FlopCounterMode` count the same model differently; each
difference from vitprof is decomposed into named causes (the peers run on a CPU copy with random
weights, so this cell takes a few seconds)."""),
    ("code", """\
from vitprof.checks.crosscheck import run_crosscheck
from vitprof.render.crosscheck import crosscheck_document
from vitprof.render.formats import render

Markdown(render(crosscheck_document(run_crosscheck("vit_b_16")), "markdown"))"""),
    ("markdown", """\
## The figures

The same figures as `reports/vit_b_16.md`, drawn here into a temporary folder."""),
    ("code", """\
import tempfile
from pathlib import Path

from vitprof.render import figures

folder = Path(tempfile.mkdtemp())
figures.save(figures.component_shares(profile), folder / "components.png")
figures.save(figures.block_macs(profile), folder / "blocks.png")
Image(filename=folder / "components.png")"""),
    ("code", "Image(filename=folder / \"blocks.png\")"),
    ("markdown", """\
## Cost against image size

The attention core grows with the square of the token count N, everything else linearly, so
the ratio core / MLP is N / N*. For ViT-B/16 the closed form says core = 2 N^2 D and MLP =
2 N D M per block: N* = M = 3072 tokens, an image of about 887 px."""),
    ("code", """\
from vitprof.render.sweep import crossover_text
from vitprof.sweep import sweep

sizes = [224, 384, 512, 640, 768, 896, 1024, 1152]
result = sweep("vit_b_16", "image_size", sizes, progress=False)
print(crossover_text(result))
figures.save(figures.sweep_macs(result), folder / "scaling.png")
Image(filename=folder / "scaling.png")"""),
    ("markdown", """\
## Will it train? Memory over one training step

`vitprof.memory` runs one training step (AdamW, the second step, so the optimizer state exists)
on fake tensors, which hold no memory, and follows every tensor from the op that allocates it to
the moment it is freed: bytes everywhere, the **peak** being the most alive at once, on CUDA's
allocator (blocks of 512 bytes, 32 MiB of cuBLAS workspace) by default. timm's DeiT-Ti (built on
the meta device) at batch 32, in a few seconds of CPU; the section below is the one
`vitprof memory --format markdown` writes (its per-block table left out), then the timeline."""),
    ("code", """\
import timm
import torch

from vitprof import InputRequest, memory
from vitprof.render.memory_report import memory_section, timeline_figure

with torch.device("meta"):  # no weights are made
    deit_tiny = timm.create_model("deit_tiny_patch16_224", pretrained=False)
estimate = memory(deit_tiny, InputRequest(batch_size=32), optimizer="adamw")
figures.save(timeline_figure(estimate), folder / "memory.png")
Markdown(memory_section(estimate, figure="memory.png").split("| block |")[0])"""),
    ("code", "Image(filename=folder / \"memory.png\")"),
    ("markdown", """\
## What the source notes got wrong

Every figure of the five source notes, measured again by vitprof (the full text, with the
reasons, is `reports/corrections.md`)."""),
    ("code", """\
import pandas as pd

from vitprof.study.corrections import corrections


def shown(value):
    return "-" if value is None else f"{value:,.0f}" if value == int(value) else f"{value:,.4f}"


found = corrections()
table = pd.DataFrame(
    [
        {"claim": c.claim.id, "says": " … ".join(c.claim.quote), "note": shown(c.claim.value),
         "vitprof": shown(c.measured), "unit": c.claim.unit, "verdict": c.label}
        for c in found
    ]
)
print(table["verdict"].value_counts().to_string())
table[table["claim"].str.startswith("000")]"""),
]


def build() -> nbformat.NotebookNode:
    """The notebook, without outputs."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python",
    }
    notebook.metadata["language_info"] = {"name": "python"}
    make = {"markdown": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    notebook.cells = [make[kind](source) for kind, source in CELLS]
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{index:02d}"
    return notebook


def execute(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Run every cell in a fresh python3 kernel, in this folder; outputs are stored in place."""
    client = NotebookClient(notebook, timeout=TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(HERE)}})
    client.execute()
    return notebook


def main() -> None:
    nbformat.write(execute(build()), NOTEBOOK)
    print(NOTEBOOK)


if __name__ == "__main__":
    main()
