"""``open_clip-published``: open_clip's published model profile (``docs/model_profile.csv`` of
its repository), ``image_mparams`` and ``image_gflops`` of an ``open_clip:NAME`` image tower at
the table's ``image_size``, batch 1.

vitprof ships that file verbatim (:data:`DATA_FILE`, source, commit and date in its header). It
was written by open_clip's ``src/training/profiler.py`` at that commit, whose rules are the
causes here:

* **FLOPs, not MACs**: ``image_gflops`` is ``FlopCounterMode``'s total on ``model.visual``, 2
  FLOPs per MAC of ``mm``, ``addmm``, ``bmm``, convolutions and the attention kernels, bias and
  element-wise work excluded; it is converted to MACs by halving it. The same repository
  published fvcore MACs (``gmacs`` columns) before it switched to this counter.
* **what its counter misses**: a kernel ``FlopCounterMode`` runs without a formula, priced by
  vitprof's records (:func:`~vitprof.checks.crosscheck.peers.flopcounter.flop_counter_causes`;
  on the meta device none for the towers of the table).
* **the image size**: each row is the tower at its configured ``image_size``; another size has
  no row.
* **rounding**: ``round(flops / 1e9, 2)`` and ``round(params / 1e6, 2)``
  (:func:`~vitprof.checks.crosscheck.peers.timm_published.rounded`), each the rounding of
  vitprof's count.

A row is reconciled when these take vitprof's count exactly to the printed figures (residual 0).
The ``image_width`` column is not a count: it is ``CLIPVisionCfg(**vision_cfg).width``, which for
a timm tower (a ``timm_model_name`` config that sets no ``width``) is the dataclass default 768,
whatever the trunk's width (:func:`width_note` names it).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path

from torch import nn

from vitprof.checks.crosscheck.causes import Cause
from vitprof.checks.crosscheck.peers.flopcounter import flop_counter_causes, run_flop_counter
from vitprof.checks.crosscheck.peers.timm_published import commented_csv, rounded
from vitprof.checks.crosscheck.subject import Peer, Subject
from vitprof.checks.crosscheck.table import PeerRow, missing_row, peer_row
from vitprof.count.result import Profile
from vitprof.count.session import Inputs
from vitprof.models.libraries.open_clip import PREFIX

RANK = 95
PEER = "open_clip-published"
UNIT = "GFLOPs (open_clip profile table: FlopCounterMode, 2 per MAC)"
DATA_FILE = Path(__file__).resolve().parents[3] / "data" / "open_clip_profile.csv"
GIGA, MEGA = 10**9, 10**6
CLIP_VISION_DEFAULT_WIDTH = 768  # open_clip's CLIPVisionCfg.width when a config sets none


@dataclass(frozen=True)
class OpenClipRow:
    """One row of open_clip's table, the image tower's figures kept as printed."""

    model: str
    image_size: int
    image_width: int
    image_mparams: str  # millions of params of model.visual
    image_gflops: str  # billions of FlopCounterMode FLOPs of model.visual

    @property
    def params(self) -> int:
        return int(Decimal(self.image_mparams) * MEGA)

    @property
    def flops(self) -> int:
        return int(Decimal(self.image_gflops) * GIGA)


@dataclass(frozen=True)
class OpenClipTable:
    """open_clip's table: its source, commit, date and rows."""

    source: str
    commit: str
    date: str
    rows: tuple[OpenClipRow, ...]

    def find(self, model: str) -> OpenClipRow | None:
        return next((r for r in self.rows if r.model == model), None)

    @property
    def citation(self) -> str:
        return f"open_clip docs/model_profile.csv @ {self.commit[:8]} ({self.date})"


@cache
def load_table(path: Path = DATA_FILE) -> OpenClipTable:
    """The shipped table (or another file in its format)."""
    header, records = commented_csv(path)
    rows = tuple(OpenClipRow(r["model"], int(r["image_size"]), int(r["image_width"]),
                             r["image_mparams"], r["image_gflops"]) for r in records)
    return OpenClipTable(header["source"], header["commit"], header["date"], rows)


def rounding_causes(profile: Profile, counted: list[Cause]) -> list[Cause]:
    """open_clip's rounding to 0.01 GFLOPs and 0.01 M params of what vitprof's count and the
    ``counted`` causes give, in MACs (the FLOPs' rounding halved: both are even)."""
    macs = profile.totals.macs + sum(c.macs for c in counted)
    params = profile.totals.params + sum(c.params for c in counted)
    flops = 2 * macs
    return [c for c in [
        Cause(f"rounded to 0.01 GFLOPs: {flops:,} FLOPs = 2 x {macs:,} MACs",
              (rounded(flops, GIGA) - flops) // 2),
        Cause(f"rounded to 0.01 M params: {params:,} params",
              params=rounded(params, MEGA) - params),
    ] if c.macs or c.params]


def tower_width(tower: nn.Module) -> int | None:
    """The width of an image tower's tokens: open_clip's own ViT's ``transformer.width``, a timm
    trunk's ``embed_dim`` (else ``num_features``); None for another tower."""
    transformer = getattr(tower, "transformer", None)
    if isinstance(getattr(transformer, "width", None), int):
        return int(transformer.width)  # type: ignore[union-attr]
    trunk = getattr(tower, "trunk", None)
    for attribute in ("embed_dim", "num_features"):
        value = getattr(trunk, attribute, None)
        if isinstance(value, int):
            return value
    return None


def width_note(row: OpenClipRow, tower: nn.Module) -> str:
    """What the row's ``image_width`` is, where it is not the tower's width ("" where it is,
    or where the tower has no single width)."""
    width = tower_width(tower)
    if width is None or width == row.image_width:
        return ""
    default = (" (CLIPVisionCfg's default: the config sets no width for this timm tower)"
               if row.image_width == CLIP_VISION_DEFAULT_WIDTH and hasattr(tower, "trunk") else "")
    return f"image_width {row.image_width} is not the tower's width {width}{default}"


def explain(profile: Profile, row: OpenClipRow, table: OpenClipTable, tower: nn.Module,
            inputs: Inputs) -> tuple[PeerRow, str]:
    """The peer row of ``row`` against ``profile``, vitprof's count of ``tower`` at the row's
    image size, batch 1 (``inputs``: its meta example), and the note on its ``image_width``."""
    run = run_flop_counter(tower, inputs)
    counted = flop_counter_causes(profile, run.uncounted)
    causes = counted + rounding_causes(profile, counted)
    width = width_note(row, tower)
    note = "; ".join(filter(None, [
        f"{table.citation}: {row.model} at {row.image_size}px, image_mparams "
        f"{row.image_mparams}, image_gflops {row.image_gflops} = {row.flops:,} FLOPs = "
        f"{row.flops // 2:,} MACs (2 FLOPs per MAC)", width]))
    return peer_row(PEER, float(row.image_gflops), UNIT, row.flops // 2, row.params,
                    profile.totals, causes, note), width


def _row(subject: Subject, peer: Peer) -> PeerRow:
    source = subject.source
    if not isinstance(source, str) or not source.startswith(PREFIX):
        return missing_row(peer.name, peer.unit, "only for open_clip:NAME models")
    table = load_table()
    row = table.find(source.removeprefix(PREFIX))
    if row is None:
        return missing_row(peer.name, peer.unit, f"no row for {source} in {table.citation}")
    batch, size = subject.profile.input_shape[0], subject.profile.input_shape[-1]
    if size != row.image_size:
        return missing_row(peer.name, peer.unit, f"open_clip's table has {source} at "
                                                 f"{row.image_size}px only, not {size}px")
    if batch != 1:
        return missing_row(peer.name, peer.unit, f"open_clip's table is per image; run with "
                                                 f"batch size 1, not {batch}")
    return explain(subject.profile, row, table, subject.meta_model, subject.example("meta"))[0]


PEERS = (Peer("open_clip-published", UNIT, _row),)
