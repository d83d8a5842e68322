"""The complex rotary of :mod:`strangers.rotary`, turned with autocast disabled on the input's
device type (x-transformers' ``disable_autocast``): ``torch.autocast("meta", enabled=False)``
raises "unsupported scalarType", a failure of the meta device itself."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from strangers import rotary
from strangers.parts import merge, split


class Rot(rotary.Rot):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(x.device.type, enabled=False):
            r = rotary.rotations(x.device)
            q, k, v = (split(t) for t in self.a(x).chunk(3, -1))
            q, k = rotary.turn(q, r), rotary.turn(k, r)
        return self.b(merge(F.scaled_dot_product_attention(q, k, v)))


class Net(rotary.Net):
    block = Rot
