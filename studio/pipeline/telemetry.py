"""Telemetry of the real-time runtime: one frozen snapshot the UI pulls on its timer, and the meters behind it.

Every figure is measured on this machine while the studio runs; nothing here is estimated or typed in.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections import deque
from dataclasses import dataclass


class RuntimeState(enum.Enum):
    """What the runtime is doing; the status bar shows ``label``."""

    STARTING = "starting"
    NO_ANCHOR = "no anchor"
    IDLE = "idle"  # the presenter idles (blinks, breathes) and says nothing
    PREPARING = "preparing speech"  # live, waiting for the text-to-speech of the next segment
    LIVE = "live"  # speaking a segment
    MICROPHONE = "microphone live"  # the presenter follows the person at the microphone
    PAUSED = "paused"
    STOPPED = "stopped"  # the run loop has ended

    @property
    def label(self) -> str:
        return self.value


class ClockSource(enum.Enum):
    AUDIO_OUTPUT = "audio output"  # the sound card's playback position is the master clock
    MONOTONIC = "monotonic"  # no audio output: the preview runs on its own clock, silently


@dataclass(frozen=True)
class TelemetrySnapshot:
    """Everything the HUD and the status bar show, as of ``taken_s`` (monotonic seconds)."""

    taken_s: float
    state: RuntimeState
    device: str  # "CPU" or the GPU's name
    anchor_name: str
    clock_source: ClockSource
    audio_output: str  # the output device's name, or a sentence saying why there is none
    clock_s: float  # program time now (what is being heard)
    fps_target: float
    fps_shown: float  # frames shown per second over the last ~2 s
    frames_produced: int  # frames rendered
    frames_dropped: int  # frame slots never rendered, or rendered and superseded before being shown
    frames_late: int  # frames shown more than half a frame period after their time
    render_ms_per_frame: float  # moving average of the renderer's cost per frame
    av_offset_ms: float  # median of (audio clock - frame pts) when frames reach the screen; > 0 = picture late
    av_offset_samples: int  # how many displayed frames that median is over
    segment_index: int  # index in the rundown being spoken, -1 when none
    word_index: int  # index of the word being spoken in that segment, -1 when none
    recording_path: str  # "" when not recording
    recording_s: float  # length of the recording so far (program seconds)
    input_level_dbfs: float  # microphone level over the last 50 ms; -inf with no microphone
    last_error: str
    mode: str = "script"  # PreviewMode value: "script" or "microphone"
    latency_ms_median: float = math.nan  # microphone mode: sound to screen over the last ~10 s
    latency_ms_p95: float = math.nan


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


class MedianWindow:
    """Median of the last ``size`` values (thread-safe); nan when empty."""

    def __init__(self, size: int = 50) -> None:
        self._values: deque[float] = deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, value: float) -> None:
        with self._lock:
            self._values.append(float(value))

    def median(self) -> tuple[float, int]:
        with self._lock:
            vals = sorted(self._values)
        if not vals:
            return math.nan, 0
        n = len(vals)
        mid = vals[n // 2] if n % 2 else 0.5 * (vals[n // 2 - 1] + vals[n // 2])
        return mid, n


class StallMeter:
    """Longest lateness of a periodic tick: call ``tick()`` from a timer of period ``period_ms``.

    Used by the UI to measure how long its event loop was blocked (the timer fires late by that much).
    """

    def __init__(self, period_ms: float) -> None:
        self.period_ms = period_ms
        self._last_s: float | None = None
        self.max_stall_ms = 0.0
        self.recent_stall_ms = 0.0  # worst over the last ~5 s
        self._recent: deque[tuple[float, float]] = deque()

    def reset(self) -> None:
        self._last_s = None
        self.max_stall_ms = 0.0
        self.recent_stall_ms = 0.0
        self._recent.clear()

    def tick(self, now_s: float | None = None) -> float:
        """Record one tick; returns this tick's lateness in ms."""
        now = time.monotonic() if now_s is None else now_s
        late_ms = 0.0
        if self._last_s is not None:
            late_ms = max(0.0, (now - self._last_s) * 1000.0 - self.period_ms)
            self.max_stall_ms = max(self.max_stall_ms, late_ms)
            self._recent.append((now, late_ms))
            while self._recent and self._recent[0][0] < now - 5.0:
                self._recent.popleft()
            self.recent_stall_ms = max(v for _, v in self._recent)
        self._last_s = now
        return late_ms
