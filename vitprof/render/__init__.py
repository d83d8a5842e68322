"""Rendering finished results: every result becomes a :class:`~vitprof.render.document.Document`
(``profile_document``, ``budget_document``, ``diff_document``, ``crosscheck_document``,
``formula_document``, ``speed_document``, ``sweep_document``), written by
``vitprof.render.formats.render(document, fmt)`` in any format of the one registry; JSON schemas
and figures. Renderers take computed results and never count. The markdown pages of ``vitprof
report`` are the study's (:mod:`vitprof.study.pages`).
"""
