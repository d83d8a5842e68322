"""Per-rank memory of a data-parallel training step (DDP, ZeRO-1, FSDP2 as ZeRO-2 or ZeRO-3),
predicted by running torch.distributed's own code on fake tensors in a fake process group:
:mod:`~vitprof.measure.distributed.estimate` is the entry point."""
