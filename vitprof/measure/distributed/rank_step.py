"""One rank's training step under a strategy, run by torch's own distributed code on fake
tensors in a fake world, every storage logged (:class:`~.rank_log.RankLog`).

The step is the training loop of the settings (:mod:`vitprof.measure.memory.loop`) on each rank,
as :meth:`~vitprof.measure.memory.loop.Loop.code` writes it; the default: ``opt.zero_grad()``
(to None), the forward of the rank's batch, the backward of a ones gradient on the output,
``opt.step()``. With gradient accumulation every micro-batch's backward synchronises (DDP's
all-reduce, FSDP2's reduce-scatter: no ``no_sync()``); a frozen parameter requires no gradient.
The second step is logged (the optimizer state exists, DDP has rebuilt its buckets in the order
the first backward made the gradients, FSDP2 has run its lazy initialization). With
``checkpoint``, the blocks are checkpointed as in one process
(:func:`~vitprof.measure.memory.step.checkpointed_blocks`), inside the strategy's hooks; with
``amp`` (DDP, ZeRO-1) the wrapped model's forward runs under autocast as in one process
(:func:`~vitprof.measure.memory.step.autocast_forward`), the loss outside it. The
model is a fresh copy whose parameters and buffers are fake CPU tensors of the same shapes and
dtypes; every ``scaled_dot_product_attention`` call runs the kernel the ``target`` and
``attention`` settings choose, as in a single-process step.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from vitprof.core.errors import UserError
from vitprof.core.vocab import MemoryTarget, Strategy, ZeroGrad
from vitprof.count.running import one_line
from vitprof.count.sdpa import attention_routed
from vitprof.count.training import first_output
from vitprof.measure.distributed.fake_world import fake_world
from vitprof.measure.distributed.kinds import claims, kind_of_op
from vitprof.measure.distributed.rank_log import RankLog
from vitprof.measure.distributed.strategies import Wrapped, largest_share, wrap
from vitprof.measure.memory import cuda_model
from vitprof.measure.memory.attention_kernels import AttentionChoice
from vitprof.measure.memory.cuda_autocast import cuda_policy, lower_precision_call
from vitprof.measure.memory.loop import Loop, labels_of, loss_of_output
from vitprof.measure.memory.step import StepSettings, autocast_forward, checkpointed_blocks
from vitprof.workload import Workload


@dataclass
class RankStep:
    """What one rank's logged step did: the ``log`` (its allocations' kinds settled), the
    attention kernels its SDPA calls ran, and which ``rank`` of the world it was."""

    log: RankLog
    attention: AttentionChoice
    rank: int = 0


def fake_copy(module: nn.Module, fake: FakeTensorMode) -> nn.Module:
    """A copy of ``module`` whose parameters and buffers are fake CPU tensors (same shapes,
    strides, dtypes and ``requires_grad``); ``module`` is left as it is."""
    twin = copy.deepcopy(module)
    for owner in twin.modules():
        for name, param in owner._parameters.items():
            if param is not None:
                owner._parameters[name] = nn.Parameter(_fake_like(param, fake),
                                                       requires_grad=param.requires_grad)
        for name, buffer in owner._buffers.items():
            if buffer is not None:
                owner._buffers[name] = _fake_like(buffer, fake)
    return twin


def _fake_like(tensor: torch.Tensor, fake: FakeTensorMode) -> torch.Tensor:
    with fake:
        return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype,
                                   device="cpu")


def run_rank_step(work: Workload, blocks: Sequence[str], settings: StepSettings,
                  strategy: str, world_size: int, batch: int, trained: Collection[str],
                  rank: int = 0) -> RankStep:
    """The step of ``rank`` (:func:`largest_share_rank`: the one that holds the most) running
    ``work`` at ``batch`` under ``strategy`` in a world of ``world_size`` (see the module);
    ``blocks``: the module paths FSDP2 shards one by one; ``trained``: the names of the
    parameters the loop trains (the others frozen)."""
    fake = FakeTensorMode()
    model = _trained_copy(work, trained, fake)
    rounded = cuda_model.rounded if settings.target == MemoryTarget.CUDA else (lambda n: n)
    log = RankLog(kind_of_op, claims, rounded)
    choice = AttentionChoice(settings.target, settings.attention)
    kernel = attention_routed(partial(lower_precision_call, choice))
    with fake_world(world_size, rank) as mesh, fake:  # DDP makes its buckets as it is built
        wrapped = wrap(strategy, model, [model.get_submodule(path) for path in blocks], mesh,
                       settings.optimizer, settings.target,
                       lambda bucket: log.mark(bucket, "gradients"))
        args, kwargs = work.inputs.at_batch(batch).example("cpu")
        labels = labels_of(settings.loop.loss, batch)
        try:
            with kernel, checkpointed_blocks(model, {path: index for index, path
                                                     in enumerate(blocks)}, settings.every), \
                    (cuda_policy() if settings.amp is not None
                     and settings.target == MemoryTarget.CUDA else _nothing()), \
                    autocast_forward(wrapped.model, settings.amp), \
                    loss_of_output(wrapped.model, settings.loop.loss, labels):
                _step(wrapped, args, kwargs, settings.loop, fake, None)
                _register(log, wrapped, (args, kwargs, labels), settings.target)
                _step(wrapped, args, kwargs, settings.loop, fake, log)
        except UserError:
            raise
        except Exception as error:  # torch's distributed code or the model on fake tensors
            raise UserError(f"{work.name}: a {strategy} step at world size {world_size} could "
                            f"not run on fake tensors in a fake process group: "
                            f"{one_line(error)}") from None
    return RankStep(log, choice, rank)


def _trained_copy(work: Workload, trained: Collection[str], fake: FakeTensorMode) -> nn.Module:
    """A fake copy of ``work``'s model whose parameters named in ``trained`` alone require a
    gradient."""
    model = fake_copy(work.module, fake)
    for name, param in model.named_parameters():
        param.requires_grad_(name in trained)
    return model


def largest_share_rank(work: Workload, blocks: Sequence[str], settings: StepSettings,
                       strategy: str, world_size: int, trained: Collection[str]) -> int:
    """The rank that holds the most under ``strategy`` whatever the batch: under ZeRO-1 the
    one with the largest share of the optimizer state, asked of ZeroRedundancyOptimizer's own
    partition on a fake copy of the model (:func:`~.strategies.largest_share`); else 0."""
    if strategy != Strategy.ZERO1:
        return 0
    fake = FakeTensorMode()
    model = _trained_copy(work, trained, fake)
    with fake_world(world_size) as mesh, fake:
        wrapped = wrap(strategy, model, [model.get_submodule(path) for path in blocks], mesh,
                       settings.optimizer, settings.target, lambda _: None)
        return largest_share(wrapped)


def _register(log: RankLog, wrapped: Wrapped, inputs: object, target: str) -> None:
    """What the rank holds before the step: parameters (and buffers), optimizer state (on
    cuda without the ``step`` counts, which torch keeps on the host), inputs, and the
    gradients the loop keeps from the previous step (``set_to_none`` False, ``zero_grad`` at
    the end... : :class:`~vitprof.measure.memory.loop.Loop`)."""
    log.register([*wrapped.parameters(), *wrapped.model.buffers()], "parameters")
    log.register(wrapped.gradients(), "gradients")
    log.register(wrapped.state(lambda key: target == MemoryTarget.CPU or key != "step"),
                 "optimizer_state")
    log.register(inputs, "inputs")


def _step(wrapped: Wrapped, args: tuple[object, ...], kwargs: dict[str, object], loop: Loop,
          fake: FakeTensorMode, log: RankLog | None) -> None:
    """One optimizer step of ``loop`` as :meth:`Loop.code` writes it (``zero_grad()`` where
    it stands, ``loop.accumulation`` forwards and backwards, the output's loss taken by the
    hook of :func:`~vitprof.measure.memory.loop.loss_of_output`), logged in ``log`` phase by
    phase when one is given."""
    def phase(name: str) -> None:
        if log is not None:
            log.phase = name

    def zero_grad() -> None:
        wrapped.optimizer.zero_grad(set_to_none=loop.set_to_none)

    with fake, (log if log is not None else _nothing()), \
            (log.resizes() if log is not None else _nothing()):
        if loop.zero_grad is ZeroGrad.START:
            zero_grad()
        for micro_batch in range(loop.accumulation):
            phase("forward")
            out = first_output(wrapped.model(*args, **kwargs))
            if micro_batch == 0 and loop.zero_grad is ZeroGrad.BEFORE_BACKWARD:
                zero_grad()
            phase("backward")
            out.backward(torch.ones_like(out))
            del out
        if log is not None:
            for gradient in wrapped.gradients():
                log.mark(gradient, "gradients")
        phase("optimizer")
        wrapped.optimizer.step()
        if loop.zero_grad is ZeroGrad.END:
            zero_grad()


def _nothing() -> contextlib.nullcontext[None]:
    return contextlib.nullcontext()
