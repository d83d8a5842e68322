"""``vitprof report``'s orchestration: compute each page's results
(:mod:`vitprof.checks.page_inputs`, :mod:`vitprof.checks.zoo_rows`,
:mod:`vitprof.checks.crosscheck.published_rows`), render them (:mod:`vitprof.render.pages`) and
write them (:mod:`~vitprof.cli.pages.generate`), or regenerate and compare
(:mod:`~vitprof.cli.pages.check`, ``report --check``).
"""
