"""What several test files share."""

from __future__ import annotations

import pytest

from vitprof import schema

# Models for budget files to name as FILE.py:factory: one with a data-dependent shape (it cannot
# run on meta and falls back to CPU), one whose forward raises, one factory that raises.
BUDGET_MODELS_PY = '''
import torch
from torch import nn


class DataDependent(nn.Module):
    """Keeps int(x.sum()) + 1 tokens: a data-dependent shape, impossible on meta."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 8, kernel_size=4, stride=4)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        keep = int(x.sum()) + 1
        tokens = self.patch(x).flatten(2).transpose(1, 2)[:, :keep]
        return self.head(tokens.mean(1))


class Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        raise RuntimeError("forward is broken")


def make():
    return DataDependent()


def make_broken():
    return Broken()


def make_failing():
    raise ValueError("cannot build this model")
'''


@pytest.fixture(autouse=True)
def _json_outputs_follow_their_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every JSON output any test makes is validated against its schema as it is made."""
    monkeypatch.setattr(schema, "CHECK_OUTPUTS", True)
