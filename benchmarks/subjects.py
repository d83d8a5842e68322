"""What a third-party benchmark subject is: one model of a package, its builder, and the input
options given to vitprof (an image size, or a whole input shape)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn


@dataclass(frozen=True)
class Subject:
    """One third-party model: its package, a name, its builder and the input options given to
    vitprof (an image size, or a whole input shape)."""

    package: str
    name: str
    build: Callable[[], nn.Module]
    inputs: dict[str, Any]
