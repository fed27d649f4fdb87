"""What the optimizations save, over a window of baseline pairs: the figure the HUD's ribbon and pills show.

The core makes one chunk in a few as a baseline variant (every optimization off, "plain", or all but one flag,
"minus:<flag>"; studio/pipeline/core.py). One such chunk alone says little: its content (speech or silence, which
the sieve treats very differently) and the machine's load at that moment differ from the chunks around it. So each
baseline chunk is paired with the normal chunks on either side of it (the mean of the one before and the one after:
the same moment of the program and of the machine), and the figure is the median over the last ``pairs`` pairs,
with a distribution-free interval for that median (order statistics, about 90 %). Until ``min_pairs`` pairs are in,
there is no figure: "measuring".
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass

Z_90 = 1.645  # two-sided 90 % normal quantile: the median interval's ranks


@dataclass(frozen=True)
class WindowedFigure:
    """A median over the last ``pairs`` pairs and its ~90 % interval (fractions of the baseline)."""

    fraction: float
    low: float
    high: float
    pairs: int
    baseline_ms_per_frame: float  # median of the baseline chunks' costs in the window
    actual_ms_per_frame: float  # median of their normal neighbours' costs


def median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    if not n:
        return math.nan
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def median_interval(values: list[float], z: float = Z_90) -> tuple[float, float]:
    """A distribution-free interval for the median of ``values``: the order statistics at ranks n/2 -+ z sqrt(n)/2
    (the binomial's normal approximation), clipped to the sample."""
    v = sorted(values)
    n = len(v)
    if not n:
        return math.nan, math.nan
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half) - 1)
    return v[lo], v[hi]


class PairedSavings:
    """Baseline chunks paired with their normal neighbours (see the module docstring). The core's last stage feeds
    it; readers (the telemetry sample, the studio's thread) may call ``saved`` / ``share`` from any thread."""

    def __init__(self, pairs: int = 48, min_pairs: int = 12) -> None:
        self.window = pairs
        self.min_pairs = min_pairs
        self._before: float | None = None  # the last normal chunk's cost per frame
        self._pending: list[tuple[str, float, float | None]] = []  # (variant, cost, normal before) waiting
        self._pairs: dict[str, deque[tuple[float, float]]] = {}  # variant -> (its cost, its neighbours' cost)
        self._lock = threading.Lock()

    def add(self, variant: str, cost_ms_per_frame: float) -> None:
        """One chunk's cost per output frame; ``variant`` "normal", "plain" or "minus:<flag>"."""
        if not math.isfinite(cost_ms_per_frame):
            return
        with self._lock:
            self._add(variant, cost_ms_per_frame)

    def _add(self, variant: str, cost_ms_per_frame: float) -> None:
        if variant != "normal":
            self._pending.append((variant, cost_ms_per_frame, self._before))
            return
        for v, cost, before in self._pending:
            around = cost_ms_per_frame if before is None else 0.5 * (before + cost_ms_per_frame)
            self._pairs.setdefault(v, deque(maxlen=self.window)).append((cost, around))
        self._pending.clear()
        self._before = cost_ms_per_frame

    def count(self, variant: str = "plain") -> int:
        with self._lock:
            return len(self._pairs.get(variant, ()))

    def _list(self, variant: str) -> list[tuple[float, float]]:
        with self._lock:
            return list(self._pairs.get(variant, ()))

    def saved(self, extra_baseline_ms: float = 0.0) -> WindowedFigure | None:
        """Compute saved, (plain - normal) / plain per pair, over the window; ``extra_baseline_ms``: what the motion
        stage's caches saved per frame (measured there, outside the chunks' variants), added to each plain cost.
        None until ``min_pairs`` pairs are in."""
        pairs = [(p + extra_baseline_ms, n) for p, n in self._list("plain") if p + extra_baseline_ms > 0]
        if len(pairs) < self.min_pairs:
            return None
        fr = [(p - n) / p for p, n in pairs]
        lo, hi = median_interval(fr)
        return WindowedFigure(median(fr), lo, hi, len(fr), median([p for p, _ in pairs]), median([n for _, n in pairs]))

    def share(self, flag: str, baseline_ms: float) -> WindowedFigure | None:
        """One flag's share of the baseline: (without it - normal) / ``baseline_ms`` per pair, over the window."""
        pairs = self._list(f"minus:{flag}")
        if len(pairs) < self.min_pairs or not baseline_ms > 0:
            return None
        fr = [(w - n) / baseline_ms for w, n in pairs]
        lo, hi = median_interval(fr)
        return WindowedFigure(median(fr), lo, hi, len(fr), baseline_ms, median([n for _, n in pairs]))
