"""Outputs: where the program leaves the core (preview, recorder, streams), and the figures they report."""

from __future__ import annotations

import abc
import enum
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

from studio.contracts.chunk import ProgramBatch
from studio.contracts.formats import ProgramFormat


class OutputState(enum.Enum):
    """The status light of an output."""

    OFF = "off"
    STARTING = "starting"
    ON = "on"
    RECONNECTING = "reconnecting"
    FAILED = "failed"


@dataclass(frozen=True)
class OutputStats:
    name: str
    state: OutputState
    frames: int = 0
    dropped: int = 0  # frames the output could not take in time (counted, never queued without limit)
    repeated: int = 0  # slots that repeat the previous picture (dropped upstream, or dropped here)
    bitrate_kbps: float = float("nan")
    fps: float = float("nan")
    detail: str = ""  # where it goes (a path, a URL) or, when failed, the last error in words


class Output(abc.ABC):
    """Frames and audio leave the core (see the module docstring)."""

    name: ClassVar[str] = "output"
    needs_rgb: ClassVar[bool] = True  # False: the output does not read ``ProgramBatch.frames``
    wants_yuv: ClassVar[bool] = False  # True: with GPU_ENCODE on a GPU the core makes ``ProgramBatch.yuv`` (I420)
    retains_frames: ClassVar[bool] = True  # False: the output is done with the arrays when ``write`` returns
    # True once opened for the current run: by the core, or by a driver that opens its outputs before the run (to
    # fail early); a core that takes an output over (a restart) does not open it again
    opened: bool = False

    def open(self, fmt: ProgramFormat) -> None:
        self.fmt = fmt

    @abc.abstractmethod
    def write(self, batch: ProgramBatch) -> None:
        """Take one batch; never blocks the loop for long (drop and count instead)."""

    def close(self) -> object:
        """Finish (a recorder finalizes its file and returns its path); safe to call more than once."""
        return None

    def stats(self) -> OutputStats:
        return OutputStats(self.name, OutputState.ON)


class RateMeter:
    """Events per second over a sliding window (thread-safe)."""

    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def tick(self, now_s: float | None = None) -> None:
        now = time.monotonic() if now_s is None else now_s
        with self._lock:
            self._times.append(now)
            while self._times and self._times[0] < now - self.window_s:
                self._times.popleft()

    def rate(self, now_s: float | None = None) -> float:
        now = time.monotonic() if now_s is None else now_s
        with self._lock:
            while self._times and self._times[0] < now - self.window_s:
                self._times.popleft()
            if len(self._times) < 2:
                return 0.0
            span = max(now - self._times[0], 1e-6)
            return (len(self._times) - 1) / span if span < self.window_s * 0.5 else len(self._times) / self.window_s
