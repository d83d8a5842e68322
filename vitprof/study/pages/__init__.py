"""The study's pages, markdown with figures: one model's page, the corrections to the source
notes, the zoo table and timm's published table, each rendered from results computed in
:mod:`vitprof.study` (nothing is counted here).

One job per module: :mod:`~vitprof.study.pages.markdown` (one model's page, from
:mod:`~vitprof.study.page_inputs`), :mod:`~vitprof.study.pages.corrections` and
:mod:`~vitprof.study.pages.correction_figures` (the notes' claims, measured by
:mod:`~vitprof.study.corrections`), :mod:`~vitprof.study.pages.zoo_table` (from
:mod:`~vitprof.study.zoo_rows`), :mod:`~vitprof.study.pages.timm_published` (from
:mod:`~vitprof.study.published_rows`), :mod:`~vitprof.study.pages.token_reduction` (from
:mod:`~vitprof.study.token_reduction`) and :mod:`~vitprof.study.pages.note_models` (what the
note models with a page are). The figures are drawn by :mod:`vitprof.render.figures`.
"""
