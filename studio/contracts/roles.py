"""The roles around the generator: the source that paces the loop, the motion source, the post-processors."""

from __future__ import annotations

import abc
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from studio.contracts.chunk import Chunk
from studio.contracts.formats import OnAir, ProgramFormat

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Pacing:
    """What the core tells the source when it asks for the next chunk."""

    max_frames: int  # slots per chunk at most
    cost_s_per_frame: float  # the loop's measured cost per frame (the source schedules far enough ahead)
    stop: threading.Event
    lead_s: float = 0.0  # audio after a slot's start the motion source needs before the slot is due (its look-ahead)


class Source(abc.ABC):
    """What is said and when; paces the loop (see the module docstring)."""

    name: ClassVar[str] = "source"
    live: ClassVar[bool] = False  # True: real-time (drop when behind); False: every frame is produced (offline)
    # True: ask for a chunk only when the next stage is free (the sound arrives now, e.g. a microphone): what arrives
    # meanwhile waits in the source and joins the next chunk instead of waiting in a queue as a stale chunk.
    just_in_time: ClassVar[bool] = False

    def open(self, fmt: ProgramFormat) -> None:
        """Prepare for a run at ``fmt`` (called by the core before the first ``next_chunk``)."""
        self.fmt = fmt

    @abc.abstractmethod
    def next_chunk(self, pace: Pacing) -> Chunk | None:
        """The next slots to produce, with their audio; blocks until they are due. None: the program has ended
        (or ``pace.stop`` was set)."""

    def close(self) -> None:
        """End of the run (the core calls it once, also after an error)."""

    def progress(self) -> float:
        """0..1 of a finite program produced so far; nan for an endless one."""
        return float("nan")

    def on_air_states(self) -> tuple[OnAir, ...]:
        """What the run's chunks will have on air, as far as the source knows before it starts: a driver has the
        post stage draw their graphics then, not on the chunk that first shows them."""
        return (OnAir(),)


class MotionSource(abc.ABC):
    """Motion coefficients for a chunk's slots."""

    name: ClassVar[str] = "motion"

    def open(self, fmt: ProgramFormat) -> None:
        """Prepare for a run at ``fmt``. A motion source knows the source only by its chunks."""
        self.fmt = fmt

    @property
    def lead_s(self) -> float:
        """Audio after a slot's start that must have arrived before the slot is due (a live motion source's
        look-ahead); the core passes it to the source in ``Pacing``."""
        return 0.0

    @abc.abstractmethod
    def motion(self, chunk: Chunk) -> np.ndarray:
        """K x N_COEFFS float32 for ``chunk.slots`` (idle motion included: it never stops)."""

    def speaking(self, chunk: Chunk) -> np.ndarray | None:
        """K bool: whether someone speaks at each slot, when this source knows (else None: the sieve decides)."""
        return None

    def close(self) -> None:
        pass

    def stats(self) -> dict[str, float]:
        """Measured figures for the HUD (e.g. model ms per frame, cache bytes); empty by default."""
        return {}


class PostProcessor(abc.ABC):
    """Frames to frames on the device (stage C, before the outputs)."""

    name: ClassVar[str] = "post"

    def open(self, fmt: ProgramFormat, device: str) -> None:
        self.fmt = fmt

    @abc.abstractmethod
    def process(self, frames: "torch.Tensor", chunk: Chunk) -> "torch.Tensor":
        """N x 3 x h x w in 0..255 -> N x 3 x h' x w' in 0..255."""

    def close(self) -> None:
        pass
