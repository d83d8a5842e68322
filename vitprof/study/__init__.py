"""vitprof's own study of Vision Transformers, beside the library: the five source notes'
figures measured and corrected, the model pages and ``vitprof report --check``.

The study is the library's biggest user and uses only its public API (the names
``vitprof`` exports and the modules listed in ``docs/api.md``; ``tests/test_study_api.py``
holds it to that). Its layer is above ``render`` and below ``cli``.

* :mod:`~vitprof.study.corrections`: the notes' claims (data, ``vitprof/data/corrections.toml``),
  measured and judged;
* what each page shows, computed: :mod:`~vitprof.study.page_inputs` (one model's page),
  :mod:`~vitprof.study.zoo_rows` (the zoo table), :mod:`~vitprof.study.published_rows` (timm's
  published table, row by row, explained by the ``timm-published`` crosscheck peer's rules);
* :mod:`~vitprof.study.token_reduction`: DynamicViT, EViT and ToMe written on timm's DeiT and
  counted block by block against the papers' published rows;
* :mod:`~vitprof.study.pages`: those results rendered to markdown and figures, counting nothing;
* :mod:`~vitprof.study.generate`: the pages of ``vitprof report``, computed, rendered, written;
* :mod:`~vitprof.study.page_check`: the page check, ``vitprof report --check`` (regenerate and
  compare).

Words: a *page* is one markdown file of the reports folder with its figures; the *page check*
is ``report --check``; ``vitprof check`` and :mod:`vitprof.checks` are budgets, diff and
crosscheck; a *self-check* is a rule the breakdown of every analysis must pass.
"""
