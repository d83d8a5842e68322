"""Markdown reports with figures, image-size / depth / width sweeps, the corrections to the source
notes, the zoo table and ``vitprof report --check``.

One job per module: :mod:`~vitprof.checks.sweep` (analyze along one axis, find the attention-core
/ MLP crossover), :mod:`~vitprof.render.figures` (deterministic matplotlib figures),
:mod:`~vitprof.render.pages.markdown` (one model's page),
:mod:`~vitprof.render.pages.corrections` (the notes' claims, measured by
:mod:`~vitprof.checks.corrections`), :mod:`~vitprof.render.pages.zoo_table`,
:mod:`~vitprof.render.pages.generate` (write pages and figures) and
:mod:`~vitprof.render.pages.check` (regenerate and compare).
"""
