"""``vitprof crosscheck``: every peer's count of a model next to vitprof's, differences explained.

Peers: the closed form, fvcore ``FlopCountAnalysis``, torchinfo ``summary``, torch's
``FlopCounterMode`` (on meta and on a real CPU run), ptflops (``pytorch`` and ``aten`` backends),
calflops and DeepSpeed's flops profiler (the optional extra ``peers``) and torchvision's
published figures; :mod:`vitprof.render.crosscheck` writes the result. See
``docs/crosscheck.md`` for each peer's rule and the causes.
"""

from vitprof.checks.crosscheck.causes import Cause
from vitprof.checks.crosscheck.run import PEERS, run_crosscheck
from vitprof.checks.crosscheck.table import CrossCheck, PeerRow

__all__ = ["PEERS", "Cause", "CrossCheck", "PeerRow", "run_crosscheck"]
