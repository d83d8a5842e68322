"""Counting: op formulas, the counting session and its module stack, per-family component tables,
training steps, and the :class:`~vitprof.count.result.Profile` a count produces.

Conventions: MACs are multiply-accumulates of matmuls, linears, convolutions and attention
products; FLOPs = 2 x MACs; element-wise work is counted apart (see ``docs/formulas.md``).
"""
