"""Measured profiling: time, memory and throughput per component, and training counts.

One job per module: :mod:`~vitprof.measure.timing` (per-module timeline with the right
synchronization), :mod:`~vitprof.measure.peak` (the device's matmul peak and copy bandwidth),
:mod:`~vitprof.measure.roofline` (arithmetic intensity, the roofline figure),
:mod:`~vitprof.measure.memory` (the memory feature, predicted and measured, in one room),
:mod:`~vitprof.count.training` (forward + backward counting), :mod:`~vitprof.measure.profile`
(one profiling run, end to end), :mod:`~vitprof.measure.result` (what it measured, as plain data),
:mod:`~vitprof.render.speed` (tables and JSON), :mod:`~vitprof.measure.mfu` (MFU of a training
loop: ``vitprof.track``) and :mod:`~vitprof.measure.optimizer_step` (an optimizer's second step
under a dispatch mode, the harness MFU's pricing and the memory step share).

Nothing is imported here, so that :mod:`vitprof.analysis` can use the training module without
importing the rest.
"""
