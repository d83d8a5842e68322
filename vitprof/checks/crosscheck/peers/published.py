"""``published``: torchvision's published figures, ``weights.meta["_ops"]`` and
``num_params``, for the matching image size and class count.

``_ops`` is labelled GFLOPS but is GMACs of matmuls and convolutions (attention included, bias
excluded): vitprof's MAC count rounded to the decimals it is printed with (three for every
ViT). The one cause is that rounding, computed from vitprof's count; ``num_params`` must equal
vitprof's params exactly.
"""

from __future__ import annotations

from decimal import Decimal

from vitprof.checks.crosscheck.causes import Cause
from vitprof.checks.crosscheck.subject import Peer, Subject
from vitprof.checks.crosscheck.table import PeerRow, missing_row, peer_row
from vitprof.count.result import Profile
from vitprof.models.zoo import Published

RANK = 80


def published_causes(profile: Profile, published: Published) -> list[Cause]:
    """A published GMAC figure is vitprof's count rounded to the decimals it is printed with."""
    decimals = max(0, -int(Decimal(str(published.gmacs)).as_tuple().exponent))
    step = 10 ** (9 - decimals)
    macs = profile.totals.macs
    quotient, remainder = divmod(macs, step)
    rounded = (quotient + (2 * remainder > step or (2 * remainder == step and quotient % 2))) * step
    return [c for c in [
        Cause(f"printed as GMACs with {decimals} decimals: rounding of {macs:,}", rounded - macs)
    ] if c.macs]


def _row(subject: Subject, peer: Peer) -> PeerRow:
    published = subject.published()
    if published is None:
        return missing_row(peer.name, peer.unit,
                           "no published figure for this model, image size and class count")
    macs = int(Decimal(str(published.gmacs)) * 10**9)
    return peer_row(peer.name, published.gmacs, peer.unit, macs, published.params,
                    subject.profile.totals, published_causes(subject.profile, published),
                    published.source)


PEERS = (Peer("published", "GMACs (torchvision _ops)", _row),)
