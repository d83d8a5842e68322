"""Fused projections: one weighted record computing the q/k/v of an attention and something else.

A projection of an attention core (:mod:`.attention`) is **fused** when its output is split
along the last dimension (a split, chunk or slice: :attr:`~vitprof.count.trace.Step.parts`)
into parts of which some reach the core and some do not, every consumer reading a part:
ViT-22B's parallel block (timm's ``ParallelScalingBlock``) computes the MLP's first layer and
q, k, v with one ``in_proj`` of ``3D + H`` outputs. Its cost is shared out by output columns:
the columns reaching the core are ``attn_qkv``, the rest go where the rules for a record that is
no projection place it (``mlp`` there); so are the rows of its weight and bias. A projection
whose parts all reach the core (a qkv linear unbound into q, k and v), or whose output is also
read whole, or read in parts overlapping (v read by the core and by a depthwise conv beside
it), is not fused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vitprof.recognize.graph.attention import Core
from vitprof.recognize.graph.flow import Flow


@dataclass(frozen=True)
class Fused:
    """A fused projection: ``width`` output columns, ``qkv`` of which reach attention cores."""

    width: int
    qkv: int

    def shares(self, total: int) -> tuple[int, int]:
        """``total`` (MACs, vector FLOPs, bytes, a weight's elements) split by columns: the
        q/k/v share and the rest's, integers that sum to ``total`` exactly (the rest takes the
        remainder of the division)."""
        qkv = total * self.qkv // self.width
        return qkv, total - qkv


def fused_projections(flow: Flow, cores: list[Core]) -> dict[int, Fused]:
    """The fused projections among the cores' q/k/v projections, by record."""
    feeding: dict[int, list[Core]] = {}
    for core in cores:
        for i in core.qkv:
            feeding.setdefault(i, []).append(core)
    found = {}
    for i, fed in feeding.items():
        fused = _split(flow, i, fed)
        if fused is not None:
            found[i] = fused
    return found


def _split(flow: Flow, i: int, cores: list[Core]) -> Fused | None:
    """Record ``i`` as a fused projection of ``cores``, or None if it is none."""
    shape = flow.steps[i].shape
    if not shape:
        return None
    reaching: list[tuple[int, int]] = []
    other: list[tuple[int, int]] = []
    for j in flow.consumers[i]:
        parts = [(first, stop) for source, first, stop in flow.steps[j].parts if source == i]
        if not parts:
            return None  # read whole
        (reaching if _reaches(flow, j, cores) else other).extend(parts)
    qkv, rest = _columns(reaching), _columns(other)
    if not qkv or not rest or qkv & rest:
        return None
    return Fused(shape[-1], len(qkv))


def _reaches(flow: Flow, j: int, cores: list[Core]) -> bool:
    """Whether record ``j`` is in one of ``cores`` or feeds it."""
    return any(flow.descendants(j, max(core.steps)) & core.steps for core in cores)


def _columns(parts: Iterable[tuple[int, int]]) -> set[int]:
    return {column for first, stop in parts for column in range(first, stop)}
