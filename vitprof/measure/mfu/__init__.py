"""Model FLOPs utilisation of a training run: :func:`~vitprof.measure.mfu.tracker.track`.

One job per module: :mod:`~vitprof.measure.mfu.flops` (a training step's FLOPs, counted once
per input shape), :mod:`~vitprof.measure.mfu.clocks` (wall clock on the CPU, CUDA events read
late), :mod:`~vitprof.measure.mfu.peaks` (the dense peak: the datasheet table, the user's, or
measured), :mod:`~vitprof.measure.mfu.tracker` (the steps, their MFU and medians),
:mod:`~vitprof.measure.mfu.ranks` (a rank's own step under DDP and FSDP2, and the world's); the
markdown summary renders in :mod:`vitprof.render.mfu_summary`. The framework callbacks are in
:mod:`vitprof.integrations`.
"""
