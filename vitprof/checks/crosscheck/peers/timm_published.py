"""``timm-published``: timm's published results table, ``infer_gmacs`` and ``param_count`` of
a ``timm:NAME`` model at the image size counted, batch 1; the rules and causes are those of
:mod:`vitprof.checks.crosscheck.published`, which also writes the timm-published page."""

from __future__ import annotations

from vitprof.checks.crosscheck.published import UNIT, subject_row
from vitprof.checks.crosscheck.subject import Peer, Subject
from vitprof.checks.crosscheck.table import PeerRow

RANK = 90


def _row(subject: Subject, peer: Peer) -> PeerRow:
    return subject_row(subject)


PEERS = (Peer("timm-published", UNIT, _row),)
