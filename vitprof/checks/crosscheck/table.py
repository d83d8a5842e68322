"""The cross-check result (:class:`CrossCheck`, one :class:`PeerRow` per peer); it is written by
:mod:`vitprof.render.crosscheck`.

Convention: MACs are the primary unit. Each peer's number is shown in its own unit, then
converted to MACs; ``delta = peer MACs - vitprof MACs = sum of the named causes + residual``, and
the same for params where the peer reports params. A peer that could not run has no number, and
its ``note`` says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vitprof.checks.crosscheck.causes import Cause
from vitprof.core.display import Shown
from vitprof.core.records import Counts

CONVENTION = (
    "MACs are the primary unit (FLOPs = 2 x MACs); each peer's number is shown in its own unit "
    "and converted to MACs; delta = peer - vitprof = sum of the named causes + residual"
)


@dataclass(frozen=True)
class PeerRow:
    """One peer's number, converted to MACs, its difference from vitprof and why."""

    peer: str
    reported: int | float | None
    unit: str
    macs: int | None
    params: int | None
    delta_macs: int | None
    delta_params: int | None
    causes: list[Cause] = field(default_factory=list)
    residual_macs: int | None = None
    residual_params: int | None = None
    note: str = ""


def peer_row(
    peer: str, reported: int | float, unit: str, macs: int, params: int | None,
    vitprof: Counts, causes: list[Cause], note: str = "",
) -> PeerRow:
    """A row whose residuals are what the causes leave of the deltas."""
    delta_macs = macs - vitprof.macs
    delta_params = None if params is None else params - vitprof.params
    return PeerRow(
        peer, reported, unit, macs, params, delta_macs, delta_params, causes,
        delta_macs - sum(c.macs for c in causes),
        None if delta_params is None else delta_params - sum(c.params for c in causes),
        note,
    )


def missing_row(peer: str, unit: str, note: str) -> PeerRow:
    """A peer that could not produce a number for this case, and why."""
    return PeerRow(peer, None, unit, None, None, None, None, [], None, None, note)


@dataclass(frozen=True, repr=False)
class CrossCheck(Shown):
    """vitprof's count of one model and input, and every peer's row against it."""

    model: str
    input_shape: tuple[int, ...]
    input_dtype: str  # the input tensor's (Profile.input_dtype)
    torch_version: str
    device: str  # where vitprof counted: meta, or cpu after a fallback
    attention_implementation: str
    vitprof: Counts
    rows: list[PeerRow]
    warnings: tuple[str, ...] = ()  # vitprof's own warnings about the model (its Profile's)

    def to_dict(self) -> dict[str, Any]:
        """The JSON interface: the model, vitprof's totals, the convention and every row."""
        return {
            "model": self.model,
            "input_shape": list(self.input_shape),
            "input_dtype": self.input_dtype,
            "torch_version": self.torch_version,
            "device": self.device,
            "attention_implementation": self.attention_implementation,
            "convention": CONVENTION,
            "vitprof": self.vitprof.as_dict(),
            "rows": [asdict(row) for row in self.rows],
            "warnings": list(self.warnings),
        }
