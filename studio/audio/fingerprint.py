"""Fingerprint cache in front of the neural audio encoder.

Audio is cut into overlapping windows of 200 ms (20 log-mel frames) whose starts advance 133 ms on average
(13, 13, 14 mel frames: ``window_ends``). A window's key is the MD5 of its log-mel quantized to 16 levels; the value
is whatever the encoder computed for it. One LRU cache (capacity 50,000 windows by default) is shared across
segments, so repeated phrases ("Welcome back to ...") and replays skip the encoder. Hit / miss counts and the encoder
time saved (the mean measured miss cost x hits) are kept.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable

import numpy as np

WINDOW_MEL = 20  # 200 ms
STRIDE_MS = 400.0 / 3.0  # 133.3 ms
LEVELS = 16
Q_LO = -11.5  # log-mel range mapped onto the 16 levels (natural log; -11.5 = the feature floor)
Q_HI = 4.5


def window_ends(first_end: int, n_frames: int) -> list[int]:
    """Exclusive end (in mel frames) of each window: ``first_end + round(k * 13.33)`` up to ``n_frames``."""
    ends = []
    k = 0
    while True:
        e = first_end + int(round(k * STRIDE_MS / 10.0))
        if e > n_frames:
            return ends
        ends.append(e)
        k += 1


def fingerprint(mel_window: np.ndarray) -> bytes:
    """MD5 of the 16-level quantized log-mel of one window (WINDOW_MEL x n_mels)."""
    q = np.clip(((mel_window - Q_LO) * (LEVELS / (Q_HI - Q_LO))).astype(np.int32), 0, LEVELS - 1).astype(np.uint8)
    return hashlib.md5(q.tobytes()).digest()


@dataclass(frozen=True)
class FingerprintStats:
    hits: int
    misses: int
    entries: int
    capacity: int
    evictions: int
    encoder_ms_per_miss: float  # measured: the median of the misses after the first (that one warms the encoder)
    encoder_ms_saved: float  # hits x encoder_ms_per_miss

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0


class EncoderCallTimes:
    """An encoder's call times: the first apart (it warms the encoder up: kernels, allocations) and the median of the
    later ones (the last 256), which is what a call costs and so what a cache hit saves."""

    def __init__(self) -> None:
        self.n = 0
        self.first_ms = float("nan")
        self._warm: deque[float] = deque(maxlen=256)

    def add(self, ms: float) -> None:
        if self.n == 0:
            self.first_ms = ms
        else:
            self._warm.append(ms)
        self.n += 1

    def per_call_ms(self, without_calls: float = float("nan")) -> float:
        """The median warm call (the first call's time when it is the only one; ``without_calls`` before any)."""
        if self._warm:
            return float(np.median(list(self._warm)))
        return self.first_ms if self.n else without_calls


class FingerprintCache:
    """LRU map fingerprint -> encoder output, with counts. Thread-safe."""

    def __init__(self, capacity: int = 50_000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._d: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0
        self._miss_times = EncoderCallTimes()  # kept across reset_counts: the cost estimate

    def get_or_compute(self, mel_window: np.ndarray, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The cached value for this window, or ``compute(mel_window)`` (timed, then stored)."""
        import time

        key = fingerprint(mel_window)
        with self._lock:
            v = self._d.get(key)
            if v is not None:
                self._d.move_to_end(key)
                self.hits += 1
                return v
        t0 = time.perf_counter()
        v = compute(mel_window)
        dt = time.perf_counter() - t0
        with self._lock:
            self.misses += 1
            self._miss_times.add(dt * 1e3)
            self._d[key] = v
            self._d.move_to_end(key)
            while len(self._d) > self.capacity:
                self._d.popitem(last=False)
                self.evictions += 1
        return v

    @property
    def first_miss_ms(self) -> float:
        return self._miss_times.first_ms

    def __contains__(self, mel_window: np.ndarray) -> bool:
        return fingerprint(mel_window) in self._d

    def __len__(self) -> int:
        return len(self._d)

    def clear(self) -> None:
        """Forget every entry (a cold cache, as at start-up); the measured cost of a miss is kept."""
        with self._lock:
            self._d.clear()

    def reset_counts(self) -> None:
        """Zero the hit / miss / eviction counts (e.g. per pass); the measured cost of a miss is kept."""
        with self._lock:
            self.hits = self.misses = self.evictions = 0

    def stats(self) -> FingerprintStats:
        with self._lock:
            per_miss_ms = self._miss_times.per_call_ms(without_calls=0.0)
        return FingerprintStats(self.hits, self.misses, len(self._d), self.capacity, self.evictions, per_miss_ms,
                                self.hits * per_miss_ms)
