"""timm's published results table as a cross-check peer (``timm-published``), differences named.

timm publishes, for each model and inference image size, ``param_count`` (millions) and
``infer_gmacs`` (billions of MACs), both rounded to 0.01 by ``benchmark.py``
(``round(x / 1e6, 2)``, ``round(macs / 1e9, 2)``). vitprof ships the needed columns of one such
file (:data:`DATA_FILE`, source, commit and date in its header). How that table counts, found by
experiment against vitprof's records on the 601 transformer rows of it (``vitprof report
timm-published``):

* **the deploy form** (*table form*, :func:`table_form`): ``param_count`` and the MACs are those
  of the model built with timm's non-fused attention and then ``timm.utils.reparameterize_model``
  (BatchNorm fused into the convolutions and linears of LeViT, EfficientViT-M, TinyViT; FastViT's
  MobileOne branches merged). A model counted as built differs by the fused BatchNorms'
  parameters, the merged branches' MACs, and where the two attention paths cost different MACs
  (timm's differential attention: its fused path computes A @ V twice).
* **fvcore's rules** (timm's ``benchmark.py`` profiles with fvcore ``FlopCountAnalysis``, one
  "flop" per MAC, when DeepSpeed is absent; the table's ``infer_macts`` column, which only the
  fvcore path fills, says it was; the attention products are in the published figures, so the
  models ran their non-fused attention, counted as vitprof counts it), which add
  element-wise work to the MACs: LayerNorm and GroupNorm 5 per input element (4 without a
  weight), eval BatchNorm 2 per element (1 without affine), a functional batch norm over batch
  statistics (weight standardisation) 5 (4 without affine), bilinear upsampling 4 per output
  element, adaptive average pooling 1 per input element; and no handle, so 0, for
  ``aten::baddbmm``.
* **rounding** to 0.01 M params and 0.01 GMACs of the count those rules give.

Each of these is a :class:`Cause` with its exact amount; what they leave is the residual, 0 when
the table is reconciled (the published figure is the rounding of vitprof's count under timm's
rules, so ``|published - (vitprof + rules)| <= 0.005``).
"""

from __future__ import annotations

import contextlib
import csv
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path

from torch import nn

from vitprof.analysis import analyze
from vitprof.checks.crosscheck.causes import Cause
from vitprof.checks.crosscheck.peers.fvcore import fvcore_norm_causes
from vitprof.checks.crosscheck.subject import Peer, Subject
from vitprof.checks.crosscheck.table import PeerRow, missing_row, peer_row
from vitprof.core.errors import UserError
from vitprof.core.records import OpRecord
from vitprof.count.result import Profile
from vitprof.models.deploy import reparameterized
from vitprof.models.libraries import library_of
from vitprof.models.libraries.timm import LIBRARY as TIMM
from vitprof.models.zoo import build

PEER = "timm-published"
UNIT = "GMACs (timm results table, rounded to 0.01)"
REPOSITORY = "https://github.com/huggingface/pytorch-image-models"
COLUMNS = ["model", "infer_img_size", "param_count", "infer_gmacs"]
DATA_FILE = Path(__file__).resolve().parents[3] / "data" / "timm_published.csv"
GIGA, MEGA = 10**9, 10**6
# fvcore's per-element "flops" (= MACs to it), (with affine, without), for an eval BatchNorm
# module and for a batch norm over batch statistics (fvcore's training-mode rule)
FVCORE_BATCH_NORM = (2, 1)
FVCORE_BATCH_STATISTICS = (5, 4)
# vitprof's vector FLOPs per element of each batch-norm kernel, before +1 for a weight, +1 bias
VITPROF_BATCH_NORM = {
    "aten._native_batch_norm_legit_no_training": 2,
    "aten.native_batch_norm": 5,
    "aten._native_batch_norm_legit": 5,
}
ADAPTIVE_POOL = ("aten._adaptive_avg_pool2d", "aten.adaptive_avg_pool2d")
FVCORE_NO_HANDLE = ("aten.baddbmm",)
BILINEAR = "aten.upsample_bilinear2d"
VITPROF_BILINEAR, FVCORE_BILINEAR = 2 * 4, 4  # per output element: vitprof's vector FLOPs, fvcore


def header_lines(source: str, commit: str, date: str) -> list[str]:
    """The ``#`` lines that head the shipped table: where it comes from."""
    return [
        "# timm's published results table: the columns vitprof needs",
        f"# source: {source}",
        f"# commit: {commit}",
        f"# date: {date}",
        "# regenerate with: python tools/refresh_timm_table.py SRC.csv --commit SHA --date DATE",
    ]


@dataclass(frozen=True)
class TimmRow:
    """One row of timm's table, figures kept as printed (strings of 0.01 precision)."""

    model: str
    image_size: int
    param_count: str  # millions
    gmacs: str  # billions of MACs

    @property
    def params(self) -> int:
        return int(Decimal(self.param_count) * MEGA)

    @property
    def macs(self) -> int:
        return int(Decimal(self.gmacs) * GIGA)


@dataclass(frozen=True)
class TimmTable:
    """timm's table: its source, commit, date and rows."""

    source: str
    commit: str
    date: str
    rows: tuple[TimmRow, ...]

    def find(self, model: str, image_size: int) -> TimmRow | None:
        """The row of ``model`` (a pretrained tag is ignored) at ``image_size``, or None."""
        name = model.partition(".")[0]
        return next((r for r in self.rows if r.model == name and r.image_size == image_size),
                    None)

    def sizes(self, model: str) -> list[int]:
        name = model.partition(".")[0]
        return [r.image_size for r in self.rows if r.model == name]

    @property
    def citation(self) -> str:
        return f"timm {self.source.rpartition('/')[2]} @ {self.commit[:8]} ({self.date})"


@cache
def load_table(path: Path = DATA_FILE) -> TimmTable:
    """The shipped table (or another file in its format)."""
    header, records = commented_csv(path)
    rows = tuple(
        TimmRow(r["model"], int(r["infer_img_size"]), r["param_count"], r["infer_gmacs"])
        for r in records
    )
    return TimmTable(header["source"], header["commit"], header["date"], rows)


def commented_csv(path: Path) -> tuple[dict[str, str], list[dict[str, str]]]:
    """A shipped table: its ``# key: value`` header lines as a dict, then its CSV rows."""
    header: dict[str, str] = {}
    with path.open(newline="") as handle:
        lines = [line for line in handle if not _comment(line, header)]
    return header, list(csv.DictReader(lines))


def _comment(line: str, header: dict[str, str]) -> bool:
    if not line.startswith("#"):
        return False
    key, sep, value = line[1:].strip().partition(": ")
    if sep:
        header[key] = value
    return True


# --------------------------------------------------------------------------------------- causes


def rounded(value: int, scale: int) -> int:
    """``value`` as timm prints it, ``round(value / scale, 2)``, back in units."""
    return int(Decimal(str(round(value / scale, 2))) * scale)


def table_form_causes(profile: Profile, table: Profile) -> list[Cause]:
    """What counting timm's form (:func:`table_form`) instead of the model counted changes."""
    params = table.totals.params - profile.totals.params
    macs = table.totals.macs - profile.totals.macs
    if not (params or macs):
        return []
    return [Cause("timm's table counts the model after timm.utils.reparameterize_model "
                  "(BatchNorm fused into convs and linears, re-parameterised branches merged), "
                  "with timm's non-fused attention", macs, params)]


def fvcore_rule_causes(table: Profile, model: nn.Module) -> list[Cause]:
    """fvcore's element-wise rules on the table form's records (module docstring)."""
    causes = fvcore_norm_causes(table, model, Counter())
    causes += _batch_norm_causes(table, model)
    pooled = sum(r.vector_flops for r in table.ops if _adaptive_pool(r, model))
    if pooled:
        causes.append(Cause(f"fvcore counts adaptive_avg_pool2d as 1 flop per input element, "
                            f"{pooled:,} elements", pooled))
    upsampled = sum(r.vector_flops for r in table.ops if r.op == BILINEAR) // VITPROF_BILINEAR
    if upsampled:
        causes.append(Cause(f"fvcore counts upsample_bilinear2d as {FVCORE_BILINEAR} flops per "
                            f"output element, {upsampled:,} elements",
                            upsampled * FVCORE_BILINEAR))
    for op in FVCORE_NO_HANDLE:
        macs = sum(r.macs for r in table.ops if r.op == op)
        if macs:
            causes.append(Cause(f"fvcore has no handle for {op.replace('.', '::')}: "
                                f"vitprof's MACs for it", -macs))
    return causes


def _adaptive_pool(record: OpRecord, model: nn.Module) -> bool:
    """An adaptive average pooling, which fvcore's trace sees as ``aten::adaptive_avg_pool2d``
    and the dispatcher as ``aten.mean`` when its output is 1x1 (one vector FLOP per input
    element either way)."""
    if record.op in ADAPTIVE_POOL:
        return True
    return record.op == "aten.mean" and isinstance(
        model.get_submodule(record.module), nn.AdaptiveAvgPool2d)


def _batch_norm_causes(table: Profile, model: nn.Module) -> list[Cause]:
    """fvcore's batch-norm rule: a BatchNorm module (eval, running statistics) 2 per element,
    1 without affine; a functional batch norm over batch statistics inside another module (the
    weight standardisation of timm's ``StdConv2d``, over that module's weight) 5, 4 without."""
    elements: Counter[tuple[bool, bool]] = Counter()  # (eval module, affine) -> elements
    calls: Counter[bool] = Counter()
    for record in table.ops:
        if record.op not in VITPROF_BATCH_NORM:
            continue
        module = model.get_submodule(record.module)
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            affine = module.weight is not None
            per_element = VITPROF_BATCH_NORM[record.op] + affine + (module.bias is not None)
            elements[True, affine] += record.vector_flops // per_element
        else:
            count, affine = _standardised_weight(record, module)
            elements[False, affine] += count
        calls[isinstance(module, nn.modules.batchnorm._BatchNorm)] += 1
    causes = []
    for module_call, text in ((True, "eval BatchNorm"),
                              (False, "batch_norm over batch statistics (weight standardisation)")):
        with_affine, without = FVCORE_BATCH_NORM if module_call else FVCORE_BATCH_STATISTICS
        amount = elements[module_call, True] * with_affine + elements[module_call, False] * without
        if amount:
            count = elements[module_call, True] + elements[module_call, False]
            causes.append(Cause(f"fvcore counts {text} as {with_affine} flops per element "
                                f"({without} without affine), {calls[module_call]} calls on "
                                f"{count:,} elements", amount))
    return causes


def _standardised_weight(record: OpRecord, module: nn.Module) -> tuple[int, bool]:
    """(elements, affine) of a functional batch norm over ``module``'s own weight: vitprof
    counts it at 5 per element, 6 with an affine weight; 0 elements when it is not that."""
    weight = getattr(module, "weight", None)
    numel = weight.numel() if isinstance(weight, nn.Parameter) else 0
    for affine, per_element in ((False, 5), (True, 6)):
        if numel and record.vector_flops == per_element * numel:
            return numel, affine
    return 0, False


def rounding_causes(expected_macs: int, expected_params: int) -> list[Cause]:
    """timm rounds to 0.01 G MACs and 0.01 M params: the rounding of the expected counts."""
    macs = rounded(expected_macs, GIGA) - expected_macs
    params = rounded(expected_params, MEGA) - expected_params
    return [c for c in [
        Cause(f"rounded to 0.01 GMACs: {expected_macs:,} MACs under timm's rules", macs),
        Cause(f"rounded to 0.01 M params: {expected_params:,} params in the table form",
              params=params),
    ] if c.macs or c.params]


def cause_groups(profile: Profile, table: Profile, table_model: nn.Module
                 ) -> dict[str, list[Cause]]:
    """Every named cause from vitprof's count ``profile`` to timm's published row, by group:
    ``deploy form``, ``fvcore rules`` and ``rounding`` (in that order, each on what the
    previous ones give)."""
    groups = {"deploy form": table_form_causes(profile, table),
              "fvcore rules": fvcore_rule_causes(table, table_model)}
    before = [c for causes in groups.values() for c in causes]
    expected_macs = profile.totals.macs + sum(c.macs for c in before)
    expected_params = profile.totals.params + sum(c.params for c in before)
    groups["rounding"] = rounding_causes(expected_macs, expected_params)
    return groups


# ------------------------------------------------------------------------------------------ row


@contextlib.contextmanager
def unfused_attention() -> Iterator[None]:
    """timm's fused attention off (``TIMM_FUSED_ATTN=0``) for the models built meanwhile."""
    from timm.layers import config

    previous = config._USE_FUSED_ATTN
    config.set_fused_attn(False)
    try:
        yield
    finally:
        config._USE_FUSED_ATTN = previous


def table_form(name: str, image_size: int) -> nn.Module:
    """The model timm's table counts: built with timm's non-fused attention (the published
    figures include the attention products, which fvcore cannot see in a fused kernel), then
    re-parameterised by ``timm.utils.reparameterize_model``."""
    with unfused_attention():
        return reparameterized(built_model(name, image_size))


def built_model(name: str, image_size: int) -> nn.Module:
    """``timm:NAME`` on meta, built as timm's benchmark builds it (no ``img_size`` argument)
    unless its own input size is not ``image_size`` and it takes an ``img_size``."""
    built = build(name, device="meta")
    if built.image_size == image_size:
        return built.module
    try:
        return build(name, image_size=image_size, device="meta").module
    except UserError as error:
        if "'img_size'" not in str(error):  # a model without one takes any input size
            raise
    return built.module


@dataclass(frozen=True)
class Explained:
    """vitprof's count of one timm model next to its row of timm's table, causes by group."""

    row: TimmRow
    groups: dict[str, list[Cause]]
    peer: PeerRow

    @property
    def reconciled(self) -> bool:
        """The causes take vitprof's count exactly to the published params and GMACs."""
        return self.peer.residual_macs == 0 and self.peer.residual_params == 0


def explain(profile: Profile, name: str, row: TimmRow, table: TimmTable,
            deploy: bool = False) -> Explained:
    """The causes and the peer row of ``row`` against ``profile``, vitprof's count of
    ``timm:NAME`` at the row's image size, batch 1 (of its deploy form with ``deploy``)."""
    model = table_form(name, row.image_size)
    table_profile = analyze(model, image_size=row.image_size, name=f"{name} (timm's form)")
    groups = cause_groups(profile, table_profile, model)
    peer = peer_row(PEER, float(row.gmacs), UNIT, row.macs, row.params, profile.totals,
                    [c for causes in groups.values() for c in causes],
                    f"{table.citation}: {row.model} at {row.image_size}px, param_count "
                    f"{row.param_count} M, infer_gmacs {row.gmacs}")
    return Explained(row, groups, peer)


def published_row(profile: Profile, name: str, table: TimmTable | None = None,
                  deploy: bool = False) -> PeerRow:
    """The ``timm-published`` row for ``profile``, vitprof's count of ``timm:NAME`` (of its
    deploy form with ``deploy``)."""
    table = table or load_table()
    batch, size = profile.input_shape[0], profile.input_shape[-1]
    model = timm_name(name) or name
    row = table.find(model, size)
    if row is None:
        sizes = ", ".join(map(str, table.sizes(model))) or "none"
        return missing_row(PEER, UNIT, f"no row for {name} at {size}px in {table.citation} "
                                       f"(sizes there: {sizes})")
    if batch != 1:
        return missing_row(PEER, UNIT, f"timm's table is per image; run with batch size 1, "
                                       f"not {batch}")
    return explain(profile, name, row, table, deploy).peer


def subject_row(subject: Subject) -> PeerRow:
    """The peer as ``vitprof crosscheck`` runs it: only for a ``timm:NAME`` model."""
    source = subject.source
    if not isinstance(source, str) or timm_name(source) is None:
        return missing_row(PEER, UNIT, "only for timm:NAME models")
    return published_row(subject.profile, source, deploy=subject.deploy)


def timm_name(name: str) -> str | None:
    """timm's own name of ``name`` where the model library registry gives it to timm's library
    (:func:`vitprof.models.libraries.library_of`; ``timm:vit_base_patch16_224`` ->
    ``vit_base_patch16_224``), else None: the prefix is the library's, never typed here."""
    if library_of(name) is not TIMM:
        return None
    return name.removeprefix(TIMM.prefix)


def _row(subject: Subject, peer: Peer) -> PeerRow:
    return subject_row(subject)


RANK = 90
PEERS = (Peer("timm-published", UNIT, _row),)
