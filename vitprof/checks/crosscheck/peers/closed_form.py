"""``closed-form``: :func:`vitprof.models.closed_form.closed_form` of the spec read from the
model (:func:`vitprof.models.spec_inference.spec_from_model`), the analytic counts; no model
run at all. No cause is expected: the residual must be 0."""

from __future__ import annotations

from vitprof.checks.crosscheck.subject import Peer, Subject
from vitprof.checks.crosscheck.table import PeerRow, missing_row, peer_row
from vitprof.core.errors import UserError
from vitprof.models.closed_form import closed_form
from vitprof.models.spec_inference import spec_from_model
from vitprof.workload import InputSpec

RANK = 10


def _image_sides(inputs: InputSpec) -> tuple[int, int]:
    """The (height, width) of an image input, square or not; a UserError for any other."""
    if len(inputs.spatial) != 2:
        raise UserError(f"this needs an image input, got {inputs.describe()}")
    return inputs.spatial[0], inputs.spatial[1]


def _row(subject: Subject, peer: Peer) -> PeerRow:
    try:
        spec = spec_from_model(subject.meta_model, _image_sides(subject.inputs))
        totals = closed_form(spec, subject.inputs.batch).totals
    except UserError as error:
        return missing_row(peer.name, peer.unit,
                           f"closed form does not describe this model: {error}")
    return peer_row(peer.name, totals.macs, peer.unit, totals.macs, totals.params,
                    subject.profile.totals, [])


PEERS = (Peer("closed-form", "MACs", _row),)
