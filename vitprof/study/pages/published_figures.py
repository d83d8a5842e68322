"""``published_figures.md``: the index of published figures in the wild that vitprof reconciles:
for each source, its convention, the page that holds every row against vitprof (rows
reconciled: that page's summary, computed when it is generated), and the errors found in it,
each with a verdict of :class:`~vitprof.study.corrections.Verdict`, as the notes' corrections.

The facts here are the rules read from each source's code and found by its page; the counts
live on the pages, which derive them, so that this index, written by ``--all``, never holds a
figure its generator did not compute.
"""

from __future__ import annotations

from dataclasses import dataclass

from vitprof.render.tables import markdown_table
from vitprof.study.corrections import Verdict
from vitprof.study.pages.markdown import Page
from vitprof.study.pages.open_clip_published import FILES as OPEN_CLIP_FILES
from vitprof.study.pages.timm_published import FILES as TIMM_FILES
from vitprof.study.pages.token_reduction import FILES as TOKEN_REDUCTION_FILES
from vitprof.study.pages.torchvision_published import FILES as TORCHVISION_FILES

FILE = "published_figures.md"


@dataclass(frozen=True)
class Finding:
    """One thing a source publishes, and what vitprof finds of it."""

    claim: str
    verdict: Verdict
    reason: str
    qualifier: str = ""  # for CORRECT_ONLY_FOR: what it is correct for


@dataclass(frozen=True)
class Source:
    """A published table: where it is, how it counts and the page that reconciles it."""

    name: str
    where: str
    convention: str
    page: str
    findings: tuple[Finding, ...]


SOURCES = (
    Source(
        "timm results table", "huggingface/pytorch-image-models `results/benchmark-infer-*.csv` "
        "(`param_count`, `infer_gmacs`)",
        "fvcore MACs of the deploy form with non-fused attention, rounded to 0.01 G / 0.01 M",
        TIMM_FILES[0],
        (Finding("`infer_gmacs` are the models' MACs", Verdict.CORRECT_ONLY_FOR,
                 "fvcore adds LayerNorm/GroupNorm at 5 per element, BatchNorm at 2, pooling "
                 "and upsampling, and drops `aten::baddbmm`; the MACs are of the "
                 "re-parameterised model", "fvcore's rules on the deploy form"),),
    ),
    Source(
        "open_clip model profile", "mlfoundations/open_clip `docs/model_profile.csv` "
        "(`image_mparams`, `image_gflops`, `image_width`)",
        "FlopCounterMode FLOPs (2 per MAC, matmuls, convolutions, attention) of `model.visual`, "
        "batch 1, rounded to 0.01 G / 0.01 M", OPEN_CLIP_FILES[0],
        (Finding("`image_gflops` in FLOPs", Verdict.CORRECT,
                 "2 x vitprof's MACs to the rounding; the same repository published fvcore MACs "
                 "(`gmacs`) before, so its figures halve or double between versions"),
         Finding("`image_width` is the image tower's width", Verdict.WRONG,
                 "for a timm tower whose config sets no width it is CLIPVisionCfg's default "
                 "768 (ViT-SO400M-14-SigLIP is 1152 wide); the page lists every such row")),
    ),
    Source(
        "torchvision weights", "pytorch/vision `weights.meta` (`num_params`, `_ops`), every "
        "classification and video weight",
        "`_ops`: GMACs of matmuls and convolutions, bias excluded, three decimals; "
        "`num_params` exact", TORCHVISION_FILES[0],
        (Finding("`_ops` in GFLOPS, as the documentation's column says", Verdict.WRONG,
                 "the figures are GMACs: vitprof's MACs to the third decimal"),
         Finding("a video weight's `_ops` is the cost of the clip its accuracy is measured on",
                 Verdict.MISLEADING,
                 "every video `_ops` counts 16 frames; Swin3D's `_docs` state clip_len=32 and "
                 "S3D's 128 (the page gives vitprof's MACs at those lengths)"),
         Finding("`num_params` is the model's parameter count", Verdict.CORRECT_ONLY_FOR,
                 "GoogLeNet's weighted builder drops its auxiliary classifiers after "
                 "loading; `weights=None` keeps them", "the weighted builders' models")),
    ),
    Source(
        "token-reduction papers", "raoyongming/DynamicViT and youweiliang/evit `README.md` "
        "(Model Zoo: `FLOPs`, `MACs (G)`); ToMe's paper (arXiv 2210.09461, its README has no "
        "FLOPs), as paperswithcode lists its DeiT rows",
        "MACs of the reduced model at inference (top-k, fewer tokens), one decimal; the "
        "DeiT and LV-ViT rows", TOKEN_REDUCTION_FILES[0],
        (Finding("DynamicViT's `FLOPs` column and ToMe's GFLOPs in FLOPs", Verdict.WRONG,
                 "the figures are vitprof's MACs (twice them would be FLOPs), as EViT's column "
                 "says of its own"),
         Finding("DynamicViT's figures rounded to 0.1 G", Verdict.MISLEADING,
                 "they are the full count, predictors included, cut to one decimal, not "
                 "rounded (DeiT-B/0.7); the predictors left out fits only two of three"),
         Finding("fvcore's 12.96 G for DynamicViT-LVViT-M/0.7 (DynamicViT issue #35) is its "
                 "cost", Verdict.WRONG,
                 "a model left in training mode keeps every token and masks the attention; "
                 "the dense blocks and the predictors on every token account for all but a few "
                 "per cent of the gap (the page's arithmetic)")),
    ),
)


def _verdict(finding: Finding) -> str:
    label = str(finding.verdict)
    return f"**{label} {finding.qualifier}**" if finding.qualifier else f"**{label}**"


def published_figures_page() -> Page:
    """The index of :data:`SOURCES`."""
    rows = [[s.name, s.where, s.convention, f"[{s.page}]({s.page}) (its Summary)"]
            for s in SOURCES]
    findings = [[s.name, f.claim, _verdict(f), f.reason] for s in SOURCES for f in s.findings]
    lines = [
        "# Published figures in the wild", "",
        "Tables of params and FLOPs/MACs that people copy, each reconciled row by row by a page "
        "of its own: the page counts every row with vitprof and names every difference with an "
        "exact amount. How many rows reconcile is that page's summary, computed when it is "
        "generated (`vitprof report timm-published`, `open_clip-published`, "
        "`torchvision-published`, `token-reduction`).", "",
        markdown_table(["source", "where", "convention", "rows reconciled"], rows), "",
        "## Errors found", "",
        "Verdicts as in [corrections.md](corrections.md).", "",
        markdown_table(["source", "what it says", "verdict", "why"], findings),
    ]
    return Page(FILE, "\n".join(lines) + "\n")
