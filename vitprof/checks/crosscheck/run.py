"""``run_crosscheck()``: vitprof's count of a model next to every peer's, each difference explained.

The peers are the modules of :mod:`vitprof.checks.crosscheck.peers`, in the order of their
ranks; each runs on the :class:`~vitprof.checks.crosscheck.subject.Subject`, the model as
vitprof counted it and its meta and CPU copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from vitprof.analysis import analyze
from vitprof.checks.crosscheck.harness import CannotTake, PeerUnavailable
from vitprof.checks.crosscheck.peers import load, names
from vitprof.checks.crosscheck.subject import NoNumber, Peer, Subject
from vitprof.checks.crosscheck.table import CrossCheck, PeerRow, missing_row
from vitprof.core.errors import UserError
from vitprof.core.overrides import Override
from vitprof.core.progress import progress
from vitprof.core.vocab import Recognizer
from vitprof.count.running import on_meta, one_line
from vitprof.count.state import in_place_warning, untouched
from vitprof.workload import InputRequest, request_of

TABLE = load()
PEERS = names()


def check_peers(peers: Sequence[str] | None) -> tuple[Peer, ...]:
    """The peers to run, in the order of :data:`TABLE`; a UserError names an unknown one."""
    if peers is None:
        return TABLE
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise UserError(f"unknown peer '{unknown[0]}'; choose from {', '.join(PEERS)}")
    return tuple(peer for peer in TABLE if peer.name in peers)


def _row(peer: Peer, subject: Subject, changed: list[str]) -> PeerRow:
    """``peer``'s row; a caller's module and the random number generators are left as they
    were (:func:`vitprof.count.state.untouched`: peers bind attributes, switch modes, draw
    random inputs and weights); the caller's parameters its run changed in place are added to
    ``changed``."""
    model = subject.source if isinstance(subject.source, nn.Module) else None
    try:
        with untouched(model, changed):
            return peer.build(subject, peer)
    except (PeerUnavailable, NoNumber, CannotTake) as error:
        return missing_row(peer.name, peer.unit, str(error))
    except UserError:
        raise
    except Exception as error:
        return missing_row(peer.name, peer.unit, f"could not run: {one_line(error)}")


def run_crosscheck(
    model: str | nn.Module,
    request: InputRequest | None = None,
    *,
    peers: Sequence[str] | None = None,
    grad: bool = True,
    overrides: Sequence[Override] = (),
    deploy: bool = False,
    recognizer: str = Recognizer.AUTO,
    **inputs: Any,
) -> CrossCheck:
    """vitprof's count of ``model`` next to each peer's, every difference decomposed.

    ``overrides`` are ``--map`` rules and ``recognizer`` the recognizer for vitprof's breakdown
    (the totals depend on neither).
    ``grad=False`` runs the peers that run a forward under ``torch.no_grad()``, where
    ``nn.MultiheadAttention`` takes its fused fast path (torchinfo always runs that way). With
    ``deploy``, vitprof and every peer count the deploy form (:mod:`vitprof.models.deploy`).
    The input is ``request`` (:class:`vitprof.workload.InputRequest`; None: the model's own):
    every peer that runs the model gets the whole forward, keyword inputs included, or says in
    its row that it cannot take it. The input keywords it took before (``image_size``,
    ``batch_size``, ``in_chans``, ...: the fields of a request) still make one, with a
    DeprecationWarning.
    """
    chosen = check_peers(peers)
    asked = request_of(request, inputs, "run_crosscheck")
    profile = analyze(model, request=asked, overrides=overrides, deploy=deploy,
                      recognizer=recognizer)
    return _check(Subject(profile, model, asked, grad=grad, deploy=deploy), chosen)


def check_subject(subject: Subject, peers: Sequence[str] | None = None) -> CrossCheck:
    """Each peer's row (all of them when ``peers`` is None) against ``subject``, whose Profile
    is counted already; its meta model, if built already, is reused."""
    return _check(subject, check_peers(peers))


def _check(subject: Subject, chosen: tuple[Peer, ...]) -> CrossCheck:
    """The rows of the ``chosen`` peers against ``subject``."""
    profile = subject.profile
    changed: list[str] = []
    try:
        rows = [_row(peer, subject, changed)
                for peer in progress(chosen, desc=f"crosscheck {profile.model}", unit="peer")]
    finally:
        subject.release()
    return CrossCheck(profile.model, profile.input_shape, profile.input_dtype,
                      profile.torch_version, profile.device,
                      profile.attention_implementation, profile.totals, rows,
                      _with_changes(profile.warnings, changed, subject.source))


def _with_changes(warnings: tuple[str, ...], changed: list[str], source: object
                  ) -> tuple[str, ...]:
    """``warnings`` and the line naming the caller's parameters the peers' runs ``changed`` in
    place, unless vitprof's own count named the same already."""
    if not changed or not isinstance(source, nn.Module):
        return warnings
    line = in_place_warning(list(dict.fromkeys(changed)), on_meta(source))
    return warnings if line in warnings else (*warnings, line)
