"""Shared by the compile tests: a synthetic CPU fingerprint, a tiny frame-making module and a job driver."""

from __future__ import annotations

import torch
from torch import nn

from studio.compile.silicon import Fingerprint
from studio.contracts import CompileTarget

FP = Fingerprint(kind="cpu", name="Test CPU", arch="cpu", cpu_isa=("AVX2",), cores=2)


class Tiny(nn.Module):
    """B x 13 coefficients -> B x 3 x 8 x 8 frames in 0..255 (the shape of a renderer, the size of a test)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(13, 64)
        self.fc2 = nn.Linear(64, 3 * 8 * 8)

    def forward(self, c: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc2(torch.tanh(self.fc1(c)))).view(-1, 3, 8, 8) * 255.0


def tiny_target(seed: int = 0) -> CompileTarget:
    torch.manual_seed(seed)
    return CompileTarget("net", Tiny().eval(), (torch.randn(4, 13),))


def run(job):
    """Drive a compile job to its end; returns (progress list, result)."""
    seen = []
    while True:
        try:
            seen.append(next(job))
        except StopIteration as stop:
            return seen, stop.value
