"""Token reduction in the study: DynamicViT, EViT and ToMe on timm's DeiT, counted by vitprof
block by block against the papers' published rows (``token_reduction.md``).

* :mod:`~vitprof.study.token_reduction.models`: the three methods, from the papers' algorithms;
* :mod:`~vitprof.study.token_reduction.closed_forms`: their token counts and MACs as arithmetic;
* :mod:`~vitprof.study.token_reduction.counts`: each built on meta and counted per block, the
  reduction's own modules apart;
* :mod:`~vitprof.study.token_reduction.published`: the published rows and their verdicts;
* :mod:`~vitprof.study.token_reduction.inputs`: what the page shows, computed.
"""
