"""The model under cross-check (:class:`Subject`) and what a peer is (:class:`Peer`).

vitprof counts on the meta device (:func:`vitprof.analyze`). The peers that need real tensors
run on a CPU copy with random weights; a model passed as a module is used as it is (and left as
it was): on the meta device the peers that need weights say so in their rows. Every peer that
runs the model is given the workload's whole example, ``model(*args, **kwargs)``
(:meth:`vitprof.workload.InputSpec.example`), keyword inputs included.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import TypeVar

from torch import nn

from vitprof.checks.crosscheck import causes as why
from vitprof.checks.crosscheck.harness import CannotTake, PatchRun, PeerUnavailable
from vitprof.checks.crosscheck.table import PeerRow, peer_row
from vitprof.core.vocab import Device
from vitprof.count.result import Profile
from vitprof.count.running import one_line
from vitprof.count.session import Inputs
from vitprof.models.zoo import Published, zoo_entry
from vitprof.workload import InputRequest, InputSpec, Workload, deployed, make_workload

R = TypeVar("R")


class NoNumber(Exception):
    """A peer cannot produce a number for this case; the message says why."""


def cpu_copy_limit() -> int:
    """Largest parameter count copied to the CPU: 4-byte weights in a quarter of the memory."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 16


@dataclass
class Subject:
    """The model under check, as vitprof counted it, and the copies the peers run on."""

    profile: Profile
    source: str | nn.Module
    request: InputRequest = field(default_factory=InputRequest)  # the input asked for
    grad: bool = True  # the grad mode the peers that run a forward are called in
    deploy: bool = False  # the peers run on the deploy form too (vitprof.models.deploy)

    def workload(self, device: str) -> Workload:
        """The model under check built on ``device`` (a module: itself), deploy form if asked."""
        return deployed(make_workload(self.source, self.request, device=device), self.deploy)

    @cached_property
    def meta_workload(self) -> Workload:
        """A meta build of a named model; a module as it is (meta stand-ins run it on meta)."""
        return self.workload("meta")

    @property
    def meta_model(self) -> nn.Module:
        return self.meta_workload.module

    @property
    def inputs(self) -> InputSpec:
        return self.meta_workload.inputs

    @cached_property
    def no_cpu_model(self) -> str:
        """Why there is no CPU model with weights for the peers ("" when there is one)."""
        if isinstance(self.source, str):
            params, limit = self.profile.totals.params, cpu_copy_limit()
            if params > limit:
                return (f"a CPU copy of {params:,} params would take more than a quarter of "
                        f"this machine's memory")
            return ""
        devices = {t.device.type for t in [*self.source.parameters(), *self.source.buffers()]}
        if devices <= {Device.CPU}:
            return ""
        return f"the model lives on {', '.join(sorted(devices))}, not with weights on the cpu"

    @cached_property
    def cpu_model(self) -> nn.Module | None:
        """A CPU model with weights (random ones for a named model), or None."""
        if self.no_cpu_model:
            return None
        return self.workload("cpu").module

    def release(self) -> None:
        """Frees the CPU model built for a named model now, weights and all (a later peer builds
        another). The peers leave reference cycles through the model they ran (ptflops binds
        its counting methods to it, torchinfo's tree of layers refers to each module), which
        only the garbage collector frees: it is run here, rather than at its next full pass,
        so that the weights of one cross-check (2.5 GB for vit_h_14) are not still held when
        the next one builds its own model."""
        if isinstance(self.source, str) and self.__dict__.pop("cpu_model", None) is not None:
            gc.collect()

    def example(self, device: str) -> Inputs:
        """The whole forward's inputs on ``device``, random values: ``(args, kwargs)``."""
        return self.inputs.example(device, random=True)

    def published(self) -> Published | None:
        """The figures published for a zoo model at this image size, None for any other."""
        entry = zoo_entry(self.source) if isinstance(self.source, str) else None
        return None if entry is None else entry.published(self.inputs.image_size,
                                                          entry.num_classes)

    def run_real(self, runner: Callable[[nn.Module, Inputs], R]) -> tuple[nn.Module, R]:
        """``runner(model, inputs)`` on the CPU model, else on the meta model, where it may
        fail."""
        model = self.cpu_model
        if model is not None:
            return model, runner(model, self.example("cpu"))
        try:
            return self.meta_model, runner(self.meta_model, self.example("meta"))
        except (PeerUnavailable, CannotTake):
            raise
        except Exception as error:
            raise NoNumber(f"{self.no_cpu_model}, and on the meta device it fails: "
                           f"{one_line(error)}") from None


@dataclass(frozen=True)
class Peer:
    """One row of the cross-check: its name, its unit, the extras of vitprof that install its
    package (none: a dependency of vitprof), or the ``package`` a user installs for it where
    no extra lists it (``pip install PACKAGE``: a new peer is then its file alone), and the
    function that builds its row from the subject. Each file of
    :mod:`vitprof.checks.crosscheck.peers` declares its peers."""

    name: str
    unit: str
    build: Callable[[Subject, Peer], PeerRow]
    extras: tuple[str, ...] = ()
    package: str = ""

    @property
    def optional(self) -> bool:
        """Whether its package is installed apart from vitprof (by an extra, or by itself)."""
        return bool(self.extras or self.package)


def grad_note(subject: Subject, peer: Peer, model: nn.Module, fast_path_blind: bool) -> str:
    """The grad mode a peer ran in, which decides the nn.MultiheadAttention path, and with grad
    enabled what the fast path would hide from a ``fast_path_blind`` peer."""
    note = f"run in eval mode, {'grad enabled' if subject.grad else 'under torch.no_grad()'}"
    hidden = why.fast_path_macs(subject.profile, model) if fast_path_blind else 0
    if subject.grad and hidden:
        note += (f"; under torch.no_grad() the nn.MultiheadAttention fast path hides all "
                 f"{hidden:,} MACs of its modules from {peer.name}")
    return note


def breakdown(by_operator: dict[str, int]) -> str:
    """``by_operator`` largest first: ``aten.addmm 1,920, aten.bmm 800``."""
    ordered = sorted(by_operator.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{op} {n:,}" for op, n in ordered) or "nothing"


def patch_peer(
    runner: Callable[..., PatchRun],
    explain: Callable[[Profile, nn.Module, PatchRun], list[why.Cause]],
    fast_path_blind: bool = True,
) -> Callable[[Subject, Peer], PeerRow]:
    """A row builder for a hook-and-patch peer: its MACs, params and the causes ``explain``
    names; the note states the grad mode, which decides the nn.MultiheadAttention path, and
    with grad enabled what the fast path would hide from a ``fast_path_blind`` peer."""

    def build(subject: Subject, peer: Peer) -> PeerRow:
        model, run = subject.run_real(partial(runner, grad=subject.grad))
        causes = explain(subject.profile, model, run)
        return peer_row(peer.name, run.macs, peer.unit, run.macs, run.params,
                        subject.profile.totals, causes,
                        grad_note(subject, peer, model, fast_path_blind))

    return build
