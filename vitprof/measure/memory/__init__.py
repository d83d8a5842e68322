"""Memory, the whole feature: what a training step (or a forward) holds, predicted and measured.

One job per module: :mod:`~vitprof.measure.memory.estimate` (``vitprof.memory``: the estimate
per component, per block and over time, its peak), :mod:`~vitprof.measure.memory.settings`
(its settings, one typed value declared once), :mod:`~vitprof.measure.memory.step` (the
step run on fake tensors, every allocation logged), :mod:`~vitprof.measure.memory.loop` (the
training loop it models), :mod:`~vitprof.measure.memory.spelling` (setting errors in the
words of each surface), :mod:`~vitprof.measure.memory.attention_kernels` (the SDPA kernel a
step runs), :mod:`~vitprof.measure.memory.cuda_autocast` and
:mod:`~vitprof.measure.memory.cuda_model` (what a CUDA target changes),
:mod:`~vitprof.measure.memory.fit` (the largest batch that fits),
:mod:`~vitprof.measure.memory.by_kind` (parameter bytes by dtype and component, activation
bytes: ``vitprof profile``'s memory columns) and :mod:`~vitprof.measure.memory.measured` (the
independent harness that measures a real step, sharing no code with the prediction).

Nothing is imported here, so that each module loads only what it uses.
"""
