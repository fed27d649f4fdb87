"""An output the tests put on a core: it keeps every program batch the core hands out."""

from __future__ import annotations

import numpy as np

from studio.contracts import Output, ProgramBatch


class Collect(Output):
    """Keeps what the core hands out."""

    name = "collect"

    def __init__(self) -> None:
        self.batches: list[ProgramBatch] = []

    def write(self, batch: ProgramBatch) -> None:
        self.batches.append(batch)

    def slots(self) -> list[int]:
        return [int(s) for b in self.batches for s in b.slots]

    def frames(self) -> np.ndarray:
        return np.concatenate([b.frames for b in self.batches])
