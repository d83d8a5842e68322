"""Fused projections: one weighted record computing the q/k/v of an attention and something else.

A projection of an attention core (:mod:`.attention`) is **fused** (found by
:data:`~vitprof.recognize.rules.cores.FUSED_SHARE`) when its output is split
along the last dimension (a split, chunk or slice: :attr:`~vitprof.count.trace.Step.parts`)
into parts of which some reach the core and some do not, every consumer reading a part: a
parallel block computing the MLP's first layer and q, k, v with one linear of ``3D + H``
outputs. Its cost is shared out by output columns:
the columns reaching the core are ``attn_qkv``, the rest go where the rules for a record that is
no projection place it (``mlp`` there); so are the rows of its weight and bias. A projection
whose parts all reach the core (a qkv linear unbound into q, k and v), or whose output is also
read whole, or read in parts overlapping (v read by the core and by a depthwise conv beside
it), is not fused.
"""

from __future__ import annotations

from dataclasses import dataclass


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
