"""Choosing the renderer's torch thread count by measured cost (shared by the studio runtime and live mode)."""

from __future__ import annotations


class ThreadChooser:
    """Picks the renderer's torch thread count (1..max) by measured cost per frame, and keeps checking.

    Most batches run with the best count so far; every ``explore_every`` batches a few run with another count, so a
    change of load (another program taking a core) is noticed within seconds. Costs are medians of recent batches.
    """

    def __init__(self, max_threads: int, explore_every: int = 40, trial_batches: int = 4, memory: int = 9) -> None:
        self.counts = list(range(1, max_threads + 1))
        self.best = max_threads
        self.current = self.best
        self.previous = self.best
        self.explore_every = explore_every
        self.trial_batches = trial_batches
        self._costs: dict[int, list[float]] = {n: [] for n in self.counts}
        self._memory = memory
        self._batches = 0

    def median_s(self, threads: int) -> float:
        c = sorted(self._costs[threads])
        return c[len(c) // 2] if c else float("nan")

    def record(self, cost_per_frame_s: float) -> int:
        """Note the cost of the batch just rendered with ``current`` threads; returns the count for the next one."""
        costs = self._costs[self.current]
        costs.append(cost_per_frame_s)
        del costs[:-self._memory]
        self._batches += 1
        self.previous = self.current
        if len(self.counts) == 1:
            return self.current
        phase = self._batches % self.explore_every
        if phase < self.trial_batches * (len(self.counts) - 1) and self._batches >= self.explore_every:
            others = [n for n in self.counts if n != self.best]
            self.current = others[phase // self.trial_batches]
        else:
            known = [n for n in self.counts if self._costs[n]]
            self.best = min(known, key=self.median_s)
            self.current = self.best
        return self.current
