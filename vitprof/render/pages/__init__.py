"""Markdown reports with figures: one model's page, the corrections to the source notes, the zoo
table and timm's published table, each rendered from results computed in :mod:`vitprof.checks`.

One job per module: :mod:`~vitprof.render.figures` (deterministic matplotlib figures),
:mod:`~vitprof.render.pages.markdown` (one model's page, from
:mod:`~vitprof.checks.page_inputs`), :mod:`~vitprof.render.pages.corrections` (the notes'
claims, measured by :mod:`~vitprof.checks.corrections`), :mod:`~vitprof.render.pages.zoo_table`
(from :mod:`~vitprof.checks.zoo_rows`) and :mod:`~vitprof.render.pages.timm_published` (from
:mod:`~vitprof.checks.crosscheck.published_rows`). Computing, writing and ``vitprof report
--check`` are :mod:`vitprof.cli.pages`'.
"""
