"""Outputs of the core that stay in the process: the preview (what the studio window shows) and a latency meter.

``PreviewOutput`` keeps the frames the core made ahead of time and retires each when the program clock reaches it
(a present thread); the window's one timer pulls ``latest_frame()``. Frames that were overtaken before they could be
shown are counted (superseded), as are frames shown more than half a frame period late. Without a clock (the
microphone) frames are shown as they come, at most one per frame period, ``delay_s`` after they were made.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from studio.contracts import Output, OutputState, OutputStats, ProgramBatch, ProgramFormat, RateMeter


@dataclass(frozen=True)
class PreviewFrame:
    """One program frame for the screen, shown at ``pts_s`` on the program clock."""

    image: np.ndarray = field(repr=False)  # H x W x 3 uint8 RGB
    pts_s: float
    index: int  # frame slot
    heard_ns: int | None = None  # microphone: monotonic ns when the sound it shows arrived
    title: str = ""


class PreviewOutput(Output):
    """See the module docstring. ``clock``: an object with ``now_s()`` on the program clock, or None."""

    name = "preview"

    def __init__(self, clock=None, max_pending_s: float = 2.0, delay_s: float = 0.0) -> None:
        self.clock = clock
        self.max_pending_s = max_pending_s
        self.delay_s = delay_s
        self._cond = threading.Condition()
        self._pending: deque[tuple[float, PreviewFrame]] = deque()  # (due on the present clock, frame)
        self._latest: PreviewFrame | None = None
        self.on_present = None  # called on the present thread whenever a new frame becomes the latest (a wake-up)
        self.shown = RateMeter()
        self.superseded = 0  # made, but overtaken before it could be shown
        self.overflow = 0  # dropped because too many waited (the clock stopped)
        self.late = 0
        self.frames = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_due = -math.inf
        self._latency_ms: deque[float] = deque(maxlen=250)
        self._av_ms: deque[float] = deque(maxlen=50)
        self._lock = threading.Lock()

    def open(self, fmt: ProgramFormat) -> None:
        super().open(fmt)
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._present_loop, name="present", daemon=True)
            self._thread.start()

    def _now(self) -> float:
        return self.clock.now_s() if self.clock is not None else time.monotonic()

    def write(self, batch: ProgramBatch) -> None:
        period = 1.0 / self.fmt.fps
        with self._cond:
            for j, slot in enumerate(batch.slots):
                frame = PreviewFrame(image=batch.frames[j], pts_s=float(batch.pts_s[j]), index=int(slot),
                                     heard_ns=int(batch.heard_ns[j]) if batch.heard_ns is not None
                                     and batch.heard_ns[j] > 0 else None, title=batch.on_air.title)
                if self.clock is not None:
                    due = frame.pts_s
                else:  # as they come, one per frame period at most
                    due = max(time.monotonic() + self.delay_s, self._last_due + 0.9 * period)
                    self._last_due = due
                self._pending.append((due, frame))
                self.frames += 1
            limit = max(2, int(self.max_pending_s * self.fmt.fps))
            while len(self._pending) > limit:
                self._pending.popleft()
                self.overflow += 1
            self._cond.notify_all()

    def drop_from(self, slot: int) -> None:
        """Forget waiting frames from ``slot`` on (the program changed under them)."""
        with self._cond:
            while self._pending and self._pending[-1][1].index >= slot:
                self._pending.pop()

    def clear(self) -> None:
        with self._cond:
            self._pending.clear()
            self._last_due = -math.inf

    def set_clock(self, clock) -> None:
        """Show frames on ``clock`` from now on (None: as they come). Frames still waiting were due on the old clock's
        time, which means nothing on the new one (program seconds against monotonic seconds: all due at once, shown
        as superseded), so a change of clock forgets them, as a cut does."""
        with self._cond:  # an RLock underneath: clear() takes it again
            if clock is not self.clock:
                self.clear()
            self.clock = clock
            self._cond.notify_all()

    def _present_loop(self) -> None:
        period = 1.0
        while not self._stop.is_set():
            fmt = getattr(self, "fmt", None)
            if fmt is not None:
                period = 1.0 / fmt.fps
            with self._cond:
                now = self._now()
                due = 0
                while due < len(self._pending) and self._pending[due][0] <= now:
                    due += 1
                if due == 0:
                    wait = 0.02 if not self._pending else min(0.02, max(0.0005, self._pending[0][0] - now))
                    self._cond.wait(wait)
                    continue
                shown = [self._pending.popleft() for _ in range(due)]
            self.superseded += len(shown) - 1
            when, frame = shown[-1]
            if now - when > 0.5 * period:
                self.late += 1
            self._latest = frame
            self.shown.tick()
            wake = self.on_present
            if wake is not None:
                wake()

    def latest_frame(self) -> PreviewFrame | None:
        return self._latest

    def note_displayed(self, frame: PreviewFrame) -> None:
        """The window calls this when ``frame`` first reaches the screen: sound-to-screen latency (microphone) or the
        A/V offset there (program clock: > 0 = picture late)."""
        with self._lock:
            if frame.heard_ns is not None:
                self._latency_ms.append((time.monotonic_ns() - frame.heard_ns) / 1e6)
            elif self.clock is not None:
                self._av_ms.append((self.clock.now_s() - frame.pts_s) * 1000.0)

    def latency_ms(self) -> tuple[float, float]:
        """Sound-to-screen latency over the last ~10 s: (median, 95th percentile); nan before any."""
        with self._lock:
            v = np.asarray(self._latency_ms, np.float64)
        if not v.size:
            return math.nan, math.nan
        return float(np.median(v)), float(np.percentile(v, 95))

    def av_offset_ms(self) -> tuple[float, int]:
        with self._lock:
            v = list(self._av_ms)
        return (float(np.median(v)), len(v)) if v else (math.nan, 0)

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def stats(self) -> OutputStats:
        return OutputStats(self.name, OutputState.ON if self._thread is not None else OutputState.OFF,
                           frames=self.frames, dropped=self.superseded + self.overflow, fps=self.shown.rate(),
                           detail=f"{self.late} late")


class LatencyMeter(Output):
    """Headless sound-to-pixel latency: from the arrival of the sound a frame shows to the moment the core finished
    the frame (where a window would draw it). Keeps the last ``keep`` frames."""

    name = "latency"
    needs_rgb = False
    retains_frames = False

    def __init__(self, keep: int = 3000) -> None:
        self._ms: deque[float] = deque(maxlen=keep)
        self.frames = 0

    def write(self, batch: ProgramBatch) -> None:
        self.frames += len(batch.slots)
        if batch.heard_ns is None:
            return
        for h in batch.heard_ns:
            if h > 0:
                self._ms.append((batch.finished_ns - int(h)) / 1e6)

    def percentile(self, q: float) -> float:
        return float(np.percentile(np.asarray(self._ms), q)) if self._ms else math.nan
