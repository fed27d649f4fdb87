"""Telemetry of the real-time runtime: one frozen snapshot the UI pulls on its timer, and the meters behind it.

Every figure is measured on this machine while the studio runs; nothing here is estimated or typed in.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


class RuntimeState(enum.Enum):
    """What the runtime is doing; the status bar shows ``label``."""

    STARTING = "starting"
    NO_ANCHOR = "no anchor"
    IDLE = "idle"  # the presenter idles (blinks, breathes) and says nothing
    PREPARING = "preparing speech"  # live, waiting for the text-to-speech of the next segment
    LIVE = "live"  # speaking a segment
    MICROPHONE = "microphone live"  # the presenter follows the person at the microphone
    PAUSED = "paused"
    FAILED = "presenter stopped: it kept failing"  # the core failed again after each restart (the last error says why)
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
    mode: str = "script"  # PreviewMode value: "script", "microphone" or "interview"
    latency_ms_median: float = math.nan  # microphone mode: sound to screen over the last ~10 s
    latency_ms_p95: float = math.nan


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


# -- the telemetry bus: one form of per-frame measurements that the runtime, the pipeline and the bench publish, and
# -- that the HUD and the bench read (latest value pulled) -------------------------------------------------------------

class OptimizationStatus(enum.Enum):
    ACTIVE = "active"  # on in the run that publishes
    INACTIVE = "not active"  # available on this machine, switched off in this run
    UNAVAILABLE = "unavailable"  # cannot run here (no GPU, no hardware encoder, no weights); ``reason`` says why


@dataclass(frozen=True)
class StageTiming:
    """One stage's cost over a window of calls (ms)."""

    median_ms: float
    p95_ms: float
    n: int
    total_ms: float


@dataclass(frozen=True)
class CacheRate:
    """A cache's counts since it was made (or last reset) and the compute its hits saved."""

    hits: int
    misses: int
    saved_ms: float = 0.0  # measured cost of a miss x hits

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else math.nan


@dataclass(frozen=True)
class OptimizationShare:
    """One optimization's share of the compute saved: ``saved_fraction`` of the baseline (nan: not measured)."""

    name: str
    status: OptimizationStatus
    saved_fraction: float = math.nan
    reason: str = ""  # why it is not active / unavailable, or where the fraction was measured
    headline: str = ""  # what its pill says where the status alone would not ("CUDA graphs: off for a cast of 2")


@dataclass(frozen=True)
class ComputeSaved:
    """(baseline - actual) / baseline, with both costs measured on this machine; ``baseline_source`` says where the
    baseline was measured (a calibration run, or a bench JSON file and its date)."""

    baseline_ms_per_frame: float
    actual_ms_per_frame: float
    baseline_source: str
    shares: tuple[OptimizationShare, ...] = ()
    # a figure over a window of baseline pairs (studio/pipeline/savings.py): its median, its ~90 % interval, the pairs
    # in it and the pairs it needs before it is shown (0: a figure from two costs, the formula below)
    fraction: float = math.nan
    low: float = math.nan
    high: float = math.nan
    pairs: int = 0
    pairs_needed: int = 0

    @property
    def measuring(self) -> bool:
        """A windowed figure still short of its pairs: the HUD says "measuring", not a number."""
        return self.pairs_needed > 0 and self.pairs < self.pairs_needed

    @property
    def saved_fraction(self) -> float:
        if self.pairs_needed:
            return math.nan if self.measuring else self.fraction
        if not (self.baseline_ms_per_frame > 0 and math.isfinite(self.actual_ms_per_frame)):
            return math.nan
        return (self.baseline_ms_per_frame - self.actual_ms_per_frame) / self.baseline_ms_per_frame


@dataclass(frozen=True)
class TelemetrySample:
    """Everything measured about the running pipeline as of ``taken_s`` (monotonic s); what the HUD draws and the bench
    records. Dicts are keyed by stage / queue / cache name."""

    taken_s: float
    source: str  # "runtime", "live", "pipeline", "bench"
    frames_produced: int = 0
    frames_dropped: int = 0
    fps_shown: float = math.nan
    fps_target: float = math.nan
    stages: dict[str, StageTiming] = field(default_factory=dict)
    queue_depths: dict[str, int] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    gpu_mem_mb: float = math.nan  # nan: no GPU
    caches: dict[str, CacheRate] = field(default_factory=dict)
    compute: ComputeSaved | None = None
    extra: dict[str, float] = field(default_factory=dict)  # other measured figures (model ms, KV cache bytes, ...)


def stage_timing(values_ms: Iterable[float]) -> StageTiming:
    """Median, 95th percentile (linear interpolation), count and total of a list of stage times; nan when empty."""
    vals = sorted(float(v) for v in values_ms)
    n = len(vals)
    if n == 0:
        return StageTiming(math.nan, math.nan, 0, 0.0)
    mid = vals[n // 2] if n % 2 else 0.5 * (vals[n // 2 - 1] + vals[n // 2])
    pos = 0.95 * (n - 1)
    lo = int(pos)
    p95 = vals[lo] + (vals[min(lo + 1, n - 1)] - vals[lo]) * (pos - lo)
    return StageTiming(mid, p95, n, float(sum(vals)))


class StageWindow:
    """Per-stage timings over a sliding window of the last ``size`` calls (thread-safe)."""

    def __init__(self, size: int = 120) -> None:
        self._size = size
        self._values: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def add(self, stage: str, ms: float) -> None:
        with self._lock:
            self._values.setdefault(stage, deque(maxlen=self._size)).append(float(ms))

    def timings(self) -> dict[str, StageTiming]:
        with self._lock:
            snap = {k: list(v) for k, v in self._values.items()}
        return {k: stage_timing(v) for k, v in snap.items() if v}


class TelemetryBus:
    """Latest-value mailbox: publishers replace the sample of their source, readers pull the newest (thread-safe).

    No queue and no callbacks: a reader on a timer sees at most one sample per tick and never blocks a publisher."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, TelemetrySample] = {}
        self._newest: TelemetrySample | None = None
        self.published = 0

    def publish(self, sample: TelemetrySample) -> None:
        with self._lock:
            self._latest[sample.source] = sample
            self._newest = sample
            self.published += 1

    def latest(self, source: str | None = None) -> TelemetrySample | None:
        """The newest sample of ``source``, or the newest of any source; None before the first."""
        with self._lock:
            return self._newest if source is None else self._latest.get(source)

    def sources(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._latest)


# -- where a baseline comes from ----------------------------------------------------------------------------------------

OPTIMIZATIONS = ("pyramidal", "audio_cache", "frame_interpolation", "kv_cache", "async_pipeline", "silence_sieve",
                 "gpu_encode", "cuda_graphs")


def last_bench_path(device_kind: str) -> Path:
    """Where ``python main.py bench`` leaves a copy of its last JSON on this machine (``device_kind``: cpu / cuda)."""
    from studio.paths import cache_dir

    return cache_dir("bench") / f"last_{device_kind}.json"


def leaderboard_path() -> Path:
    """Where ``python main.py bench --leaderboard`` keeps this machine's last leaderboard (the studio's panel reads it)."""
    from studio.paths import cache_dir

    return cache_dir("bench") / "leaderboard.json"


def load_bench(path: Path) -> dict | None:
    """A bench JSON measured on this machine (same platform string and CPU count), else None."""
    import json
    import os
    import platform

    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    m = result.get("machine", {})
    if m.get("platform") != platform.platform() or m.get("cpu_count") != os.cpu_count():
        return None
    return result


def shares_from(active: Iterable[str], bench: dict | None, unavailable: dict[str, str],
                inactive_reason: str = "switched off") -> tuple[OptimizationShare, ...]:
    """One pill per optimization: active / not active / unavailable (with the reason); the saved fraction is the
    bench's measured ablation row on this machine where there is one."""
    active = set(active)
    rows: dict[str, float] = {}
    skipped: dict[str, str] = {}
    if bench is not None:
        for r in bench.get("ablation", []) + bench.get("extra_ablation", []):
            rows[r["optimization"]] = float(r["saved_fraction"])
        skipped = {r["optimization"]: r["reason"] for r in bench.get("skipped", [])}
    out = []
    for name in OPTIMIZATIONS:
        frac = rows.get(name, math.nan)
        if name in unavailable:
            out.append(OptimizationShare(name, OptimizationStatus.UNAVAILABLE, math.nan, unavailable[name]))
        elif name in active:
            out.append(OptimizationShare(name, OptimizationStatus.ACTIVE, frac, "measured by bench" if rows else ""))
        elif name in skipped and name not in rows:
            out.append(OptimizationShare(name, OptimizationStatus.UNAVAILABLE, math.nan, skipped[name]))
        else:
            out.append(OptimizationShare(name, OptimizationStatus.INACTIVE, frac, inactive_reason))
    return tuple(out)
