"""A fixed-capacity float32 audio ring addressed by absolute sample index, with arrival times.

One producer (the capture callback) writes; any number of readers read by absolute sample index
(``0`` = the first sample ever written). Each written block records ``time.monotonic_ns()`` of its arrival so a
consumer can tell when a given sample entered the ring (sound-to-pixel latency). Writing never blocks on readers:
the oldest audio is overwritten and counted.
"""

from __future__ import annotations

import bisect
import threading
import time

import numpy as np


class AudioRing:
    """Mono float32 ring buffer; thread-safe for one writer and many readers."""

    def __init__(self, capacity_samples: int, sample_rate_hz: int, max_blocks: int = 4096) -> None:
        if capacity_samples <= 0:
            raise ValueError("capacity_samples must be positive")
        self.capacity_samples = int(capacity_samples)
        self.sample_rate_hz = int(sample_rate_hz)
        self._buf = np.zeros(self.capacity_samples, np.float32)  # N
        self._total = 0  # samples written since start
        self._lock = threading.Lock()
        # Arrival records, oldest first: the absolute [start, end) samples of each block and its arrival time (ns).
        self._max_blocks = int(max_blocks)
        self._block_start: list[int] = []
        self._block_end: list[int] = []
        self._block_ns: list[int] = []
        self.overwritten_samples = 0  # samples overwritten by newer audio (ring full)
        self.read_misses = 0  # reads that asked for audio already overwritten (a reader fell behind)

    @property
    def total_written(self) -> int:
        return self._total

    @property
    def oldest_sample(self) -> int:
        """Absolute index of the oldest sample still held."""
        return max(0, self._total - self.capacity_samples)

    def write(self, samples: np.ndarray, arrival_ns: int | None = None) -> None:
        """Append mono samples (converted to float32); overwrites the oldest when full."""
        x = np.asarray(samples, dtype=np.float32).reshape(-1)
        n = x.shape[0]
        if n == 0:
            return
        now_ns = time.monotonic_ns() if arrival_ns is None else int(arrival_ns)
        with self._lock:
            if n > self.capacity_samples:
                x = x[-self.capacity_samples :]
            m = x.shape[0]
            start = (self._total + n - m) % self.capacity_samples
            first = min(m, self.capacity_samples - start)
            self._buf[start : start + first] = x[:first]
            if first < m:
                self._buf[: m - first] = x[first:]
            before_oldest = self.oldest_sample
            self._total += n
            self.overwritten_samples += self.oldest_sample - before_oldest
            self._block_start.append(self._total - n)
            self._block_end.append(self._total)
            self._block_ns.append(now_ns)
            if len(self._block_end) > self._max_blocks:
                drop = len(self._block_end) - self._max_blocks
                del self._block_start[:drop]
                del self._block_end[:drop]
                del self._block_ns[:drop]

    def read(self, start_sample: int, n: int) -> np.ndarray | None:
        """Samples [start_sample, start_sample + n) as a new array; None if any of them was overwritten.

        Raises ValueError when asked for samples not written yet.
        """
        if n < 0 or start_sample < 0:
            raise ValueError("start_sample and n must be >= 0")
        with self._lock:
            if start_sample + n > self._total:
                raise ValueError(f"samples up to {start_sample + n} requested, only {self._total} written")
            if start_sample < self.oldest_sample:
                self.read_misses += 1
                return None
            return self._copy(start_sample, n)

    def latest(self, n: int) -> np.ndarray:
        """The newest ``n`` samples (fewer if fewer are held)."""
        with self._lock:
            n = min(int(n), self._total, self.capacity_samples)
            return self._copy(self._total - n, n)

    def arrival_ns(self, sample_index: int) -> int | None:
        """Monotonic time (ns) at which the block holding ``sample_index`` arrived; None if unknown or not yet."""
        with self._lock:
            i = bisect.bisect_right(self._block_end, sample_index)
            if i >= len(self._block_end) or sample_index < self._block_start[i]:
                return None  # not written yet, or the record of its block was already dropped
            return self._block_ns[i]

    def _copy(self, start_sample: int, n: int) -> np.ndarray:
        out = np.empty(n, np.float32)
        if n == 0:
            return out
        s = start_sample % self.capacity_samples
        first = min(n, self.capacity_samples - s)
        out[:first] = self._buf[s : s + first]
        if first < n:
            out[first:] = self._buf[: n - first]
        return out
