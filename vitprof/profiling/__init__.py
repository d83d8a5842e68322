"""Measured profiling: time, memory and throughput per component, and training counts.

One job per module: :mod:`~vitprof.profiling.timing` (per-module timeline with the right
synchronization), :mod:`~vitprof.profiling.peak` (the device's matmul peak and copy bandwidth),
:mod:`~vitprof.profiling.roofline` (arithmetic intensity, the roofline figure),
:mod:`~vitprof.profiling.memory` (parameter, activation and saved-for-backward memory),
:mod:`~vitprof.profiling.training` (forward + backward counting), :mod:`~vitprof.profiling.measure`
(one profiling run, end to end) and :mod:`~vitprof.profiling.report` (tables and JSON).

Nothing is imported here, so that :mod:`vitprof.analysis` can use the training module without
importing the rest.
"""
