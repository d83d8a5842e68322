"""Markdown reports with figures, image-size / depth / width sweeps, the corrections to the source
notes, the zoo table and ``vitprof report --check``.

One job per module: :mod:`~vitprof.report.sweep` (analyze along one axis, find the attention-core
/ MLP crossover), :mod:`~vitprof.report.figures` (deterministic matplotlib figures),
:mod:`~vitprof.report.markdown` (one model's page), :mod:`~vitprof.report.corrections` (the notes'
claims as data, measured), :mod:`~vitprof.report.zoo_table`, :mod:`~vitprof.report.generate`
(write pages and figures) and :mod:`~vitprof.report.check` (regenerate and compare).
"""
