"""Measured profiling: time, memory and throughput per component, and training counts.

One job per module: :mod:`~vitprof.measure.timing` (per-module timeline with the right
synchronization), :mod:`~vitprof.measure.peak` (the device's matmul peak and copy bandwidth),
:mod:`~vitprof.measure.roofline` (arithmetic intensity, the roofline figure),
:mod:`~vitprof.measure.memory.by_kind` (parameter, activation and saved-for-backward memory),
:mod:`~vitprof.count.training` (forward + backward counting), :mod:`~vitprof.measure.profile`
(one profiling run, end to end), :mod:`~vitprof.measure.result` (what it measured, as plain data),
:mod:`~vitprof.render.speed` (tables and JSON) and :mod:`~vitprof.measure.mfu` (MFU of a training
loop: ``vitprof.track``).

Nothing is imported here, so that :mod:`vitprof.analysis` can use the training module without
importing the rest.
"""
