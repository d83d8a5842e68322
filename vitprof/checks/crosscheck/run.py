"""``run_crosscheck()``: vitprof's count of a model next to every peer's, each difference explained.

vitprof counts on the meta device (:func:`vitprof.analyze`). The peers that need real tensors
(fvcore traces with ``torch.jit``; torchinfo, the CPU FlopCounterMode row, ptflops, calflops and
DeepSpeed run a forward) run on a CPU copy with random weights; FlopCounterMode also runs on a
meta copy, where ``scaled_dot_product_attention`` decomposes into ``bmm``. A model passed as a
module is used as it is (and left as it was): on the meta device the peers that need weights say
so in their rows.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property, partial
from typing import Any, TypeVar

import torch
from torch import nn

from vitprof.analysis import analyze
from vitprof.checks.crosscheck import causes as why
from vitprof.checks.crosscheck.peers import (
    PatchRun,
    PeerUnavailable,
    run_calflops,
    run_deepspeed,
    run_flop_counter,
    run_fvcore,
    run_ptflops,
    run_torchinfo,
)
from vitprof.checks.crosscheck.published import PEER as TIMM_PEER
from vitprof.checks.crosscheck.published import UNIT as TIMM_UNIT
from vitprof.checks.crosscheck.published import subject_row as timm_published_row
from vitprof.checks.crosscheck.table import CrossCheck, PeerRow, missing_row, peer_row
from vitprof.core.errors import UserError
from vitprof.core.progress import progress
from vitprof.count.families import Rule
from vitprof.count.result import Profile
from vitprof.count.running import one_line
from vitprof.count.state import untouched
from vitprof.models.closed_form import closed_form
from vitprof.models.spec_inference import spec_from_model
from vitprof.models.zoo import Published, lookup
from vitprof.workload import ImageSize, InputSpec, Workload, deployed, make_workload

R = TypeVar("R")


class _NoNumber(Exception):
    """A peer cannot produce a number for this case; the message says why."""


def cpu_copy_limit() -> int:
    """Largest parameter count copied to the CPU: 4-byte weights in a quarter of the memory."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 16


@dataclass
class Subject:
    """The model under check, as vitprof counted it, and the copies the peers run on."""

    profile: Profile
    source: str | nn.Module
    image_size: ImageSize | None  # as the caller gave it (None: the model's own)
    batch_size: int = 1
    grad: bool = True  # the grad mode the peers that run a forward are called in
    deploy: bool = False  # the peers run on the deploy form too (vitprof.models.deploy)
    # the other input keywords of make_workload the caller gave (frames, in_chans, dtype, ...)
    sizes: dict[str, Any] = field(default_factory=dict)

    def workload(self, device: str) -> Workload:
        """The model under check built on ``device`` (a module: itself), deploy form if asked."""
        work = make_workload(self.source, image_size=self.image_size,
                             batch_size=self.batch_size, device=device, **self.sizes)
        return deployed(work, self.deploy)

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
        if devices <= {"cpu"}:
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

    def example(self, device: str) -> torch.Tensor:
        return self.inputs.tensor(device, random=True)

    def published(self) -> Published | None:
        if not isinstance(self.source, str) or ":" in self.source.removeprefix("torchvision:"):
            return None
        entry = lookup(self.source)
        return entry.published(self.inputs.image_size, entry.num_classes)

    def run_real(self, runner: Callable[[nn.Module, torch.Tensor], R]) -> tuple[nn.Module, R]:
        """``runner(model, x)`` on the CPU model, else on the meta model, where it may fail."""
        model = self.cpu_model
        if model is not None:
            return model, runner(model, self.example("cpu"))
        try:
            return self.meta_model, runner(self.meta_model, self.example("meta"))
        except PeerUnavailable:
            raise
        except Exception as error:
            raise _NoNumber(f"{self.no_cpu_model}, and on the meta device it fails: "
                            f"{one_line(error)}") from None


@dataclass(frozen=True)
class Peer:
    """One peer: its name, its unit and the function that builds its row from the subject."""

    name: str
    unit: str
    build: Callable[[Subject, Peer], PeerRow]


def _image_sides(inputs: InputSpec) -> tuple[int, int]:
    """The (height, width) of an image input, square or not; a UserError for any other."""
    if len(inputs.spatial) != 2:
        raise UserError(f"this needs an image input, got {inputs.describe()}")
    return inputs.spatial[0], inputs.spatial[1]


def _closed_form(subject: Subject, peer: Peer) -> PeerRow:
    try:
        spec = spec_from_model(subject.meta_model, _image_sides(subject.inputs))
        totals = closed_form(spec, subject.inputs.batch).totals
    except UserError as error:
        return missing_row(peer.name, peer.unit,
                           f"closed form does not describe this model: {error}")
    return peer_row(peer.name, totals.macs, peer.unit, totals.macs, totals.params,
                    subject.profile.totals, [])


def _breakdown(by_operator: dict[str, int]) -> str:
    ordered = sorted(by_operator.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{op} {n:,}" for op, n in ordered) or "nothing"


def _grad_note(subject: Subject, peer: Peer, model: nn.Module, fast_path_blind: bool) -> str:
    """The grad mode a peer ran in, which decides the nn.MultiheadAttention path, and with grad
    enabled what the fast path would hide from a ``fast_path_blind`` peer."""
    note = f"run in eval mode, {'grad enabled' if subject.grad else 'under torch.no_grad()'}"
    hidden = why.fast_path_macs(subject.profile, model) if fast_path_blind else 0
    if subject.grad and hidden:
        note += (f"; under torch.no_grad() the nn.MultiheadAttention fast path hides all "
                 f"{hidden:,} MACs of its modules from {peer.name}")
    return note


def _fvcore(subject: Subject, peer: Peer) -> PeerRow:
    model, run = subject.run_real(partial(run_fvcore, grad=subject.grad))
    profile = subject.profile
    causes = why.uncounted_causes(profile, run.unsupported, "does not count", "::")
    causes += why.fvcore_norm_causes(profile, model, run.unsupported)
    note = (f"{_grad_note(subject, peer, model, fast_path_blind=True)}; "
            f"by operator: {_breakdown(run.by_operator)}")
    free = why.free_uncounted(profile, run.unsupported)
    if free:
        note += f"; also unsupported, no MACs in vitprof either: {', '.join(free)}"
    return peer_row(peer.name, run.total, peer.unit, run.total, run.params,
                    profile.totals, causes, note)


def _torchinfo(subject: Subject, peer: Peer) -> PeerRow:
    model, run = subject.run_real(run_torchinfo)
    causes = why.torchinfo_causes(subject.profile, run.layers, model)
    return peer_row(peer.name, run.total_mult_adds, peer.unit, run.total_mult_adds,
                    run.total_params, subject.profile.totals, causes)


def _flop_counter(subject: Subject, peer: Peer, device: str) -> PeerRow:
    model = subject.meta_model if device == "meta" else subject.cpu_model
    if model is None:
        return missing_row(peer.name, peer.unit, f"needs a model with weights on the cpu: "
                                                 f"{subject.no_cpu_model}")
    run = run_flop_counter(model, subject.example(device), subject.grad)
    causes = why.flop_counter_causes(subject.profile, run.uncounted)
    # the fast path runs on real devices only: on meta every op is seen in either grad mode
    grad = _grad_note(subject, peer, model, fast_path_blind=True) if device != "meta" else ""
    return peer_row(peer.name, run.total_flops, peer.unit, run.total_flops // 2, None,
                    subject.profile.totals, causes,
                    "; ".join(filter(None, [
                        grad, f"2 FLOPs per MAC: {run.total_flops:,} FLOPs = "
                        f"{run.total_flops // 2:,} MACs; by operator: "
                        f"{_breakdown(run.by_operator)}"])))


def _published(subject: Subject, peer: Peer) -> PeerRow:
    published = subject.published()
    if published is None:
        return missing_row(peer.name, peer.unit,
                           "no published figure for this model, image size and class count")
    macs = int(Decimal(str(published.gmacs)) * 10**9)
    return peer_row(peer.name, published.gmacs, peer.unit, macs, published.params,
                    subject.profile.totals, why.published_causes(subject.profile, published),
                    published.source)


def _patch_peer(
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
                        _grad_note(subject, peer, model, fast_path_blind))

    return build


TABLE = (
    Peer("closed-form", "MACs", _closed_form),
    Peer("fvcore", "flops (fvcore: 1 flop = 1 MAC)", _fvcore),
    Peer("torchinfo", "mult-adds (MACs)", _torchinfo),
    Peer("flopcounter-meta", "FLOPs (2 FLOPs per MAC)", partial(_flop_counter, device="meta")),
    Peer("flopcounter-cpu", "FLOPs (2 FLOPs per MAC)", partial(_flop_counter, device="cpu")),
    Peer("ptflops-pytorch", "MACs (ptflops GMac)", _patch_peer(
        partial(run_ptflops, backend="pytorch"), why.ptflops_pytorch_causes,
        fast_path_blind=False)),
    Peer("ptflops-aten", "MACs (ptflops GMac)", _patch_peer(
        partial(run_ptflops, backend="aten"), why.ptflops_aten_causes)),
    Peer("calflops", "MACs (calflops macs)", _patch_peer(
        run_calflops, partial(why.patch_causes, peer="calflops", patches_attention=False))),
    Peer("deepspeed", "MACs (DeepSpeed macs)", _patch_peer(
        run_deepspeed, partial(why.patch_causes, peer="DeepSpeed", patches_attention=True))),
    Peer("published", "GMACs (torchvision _ops)", _published),
    Peer(TIMM_PEER, TIMM_UNIT, lambda subject, peer: timm_published_row(subject)),
)
PEERS = tuple(peer.name for peer in TABLE)


def check_peers(peers: Sequence[str] | None) -> tuple[Peer, ...]:
    """The peers to run, in the order of :data:`TABLE`; a UserError names an unknown one."""
    if peers is None:
        return TABLE
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise UserError(f"unknown peer '{unknown[0]}'; choose from {', '.join(PEERS)}")
    return tuple(peer for peer in TABLE if peer.name in peers)


def _row(peer: Peer, subject: Subject) -> PeerRow:
    """``peer``'s row; a caller's module and the random number generators are left as they
    were (:func:`vitprof.count.state.untouched`: peers bind attributes, switch modes, draw
    random inputs and weights)."""
    model = subject.source if isinstance(subject.source, nn.Module) else None
    try:
        with untouched(model):
            return peer.build(subject, peer)
    except (PeerUnavailable, _NoNumber) as error:
        return missing_row(peer.name, peer.unit, str(error))
    except UserError:
        raise
    except Exception as error:
        return missing_row(peer.name, peer.unit, f"could not run: {one_line(error)}")


def run_crosscheck(
    model: str | nn.Module,
    image_size: int | None = None,
    batch_size: int = 1,
    peers: Sequence[str] | None = None,
    grad: bool = True,
    overrides: Sequence[Rule] = (),
    deploy: bool = False,
    frames: int | None = None,
    in_chans: int | None = None,
    dtype: torch.dtype | str | None = None,
    input_shape: Sequence[int] | None = None,
    recognizer: str = "auto",
) -> CrossCheck:
    """vitprof's count of ``model`` next to each peer's, every difference decomposed.

    ``overrides`` are ``--map`` rules and ``recognizer`` the recognizer for vitprof's breakdown
    (the totals depend on neither).
    ``grad=False`` runs the peers that run a forward under ``torch.no_grad()``, where
    ``nn.MultiheadAttention`` takes its fused fast path (torchinfo always runs that way). With
    ``deploy``, vitprof and every peer count the deploy form (:mod:`vitprof.models.deploy`).
    ``frames``, ``in_chans``, ``dtype`` and ``input_shape`` are the input's, as in
    :func:`vitprof.analysis.analyze`.
    """
    chosen = check_peers(peers)
    sizes: dict[str, Any] = {"frames": frames, "in_chans": in_chans, "dtype": dtype,
                             "input_shape": input_shape}
    profile = analyze(model, image_size=image_size, batch_size=batch_size, overrides=overrides,
                      deploy=deploy, recognizer=recognizer, **sizes)
    subject = Subject(profile, model, image_size, batch_size, grad=grad, deploy=deploy,
                      sizes=sizes)
    return _check(subject, chosen)


def check_subject(subject: Subject, peers: Sequence[str] | None = None) -> CrossCheck:
    """Each peer's row (all of them when ``peers`` is None) against ``subject``, whose Profile
    is counted already; its meta model, if built already, is reused."""
    return _check(subject, check_peers(peers))


def _check(subject: Subject, chosen: tuple[Peer, ...]) -> CrossCheck:
    """The rows of the ``chosen`` peers against ``subject``."""
    profile = subject.profile
    try:
        rows = [_row(peer, subject)
                for peer in progress(chosen, desc=f"crosscheck {profile.model}", unit="peer")]
    finally:
        subject.release()
    return CrossCheck(profile.model, profile.input_shape, profile.input_dtype,
                      profile.torch_version, profile.device,
                      profile.attention_implementation, profile.totals, rows, profile.warnings)
