"""Live telemetry charts (pyqtgraph): per-stage cost, fps and drops, queue depths, audio cache hit rate, KV cache
bytes, GPU memory and CPU load, over the last ``HISTORY_S`` seconds.

Fed by the window's one timer (``update_from(sample, fps_shown)``): one point per call on a bounded history. The
window redraws one plot per call of ``draw_one`` on later ticks, so that no tick of the GUI thread paints all seven (on 2
busy cores one plot's repaint takes a few ms, seven in one tick reached 50-95 ms of stall in the soak).
"""

from __future__ import annotations

import math
import os
import time
from collections import deque

import pyqtgraph as pg
from PySide6.QtWidgets import QGridLayout, QWidget

from studio.pipeline.telemetry import TelemetrySample

HISTORY_S = 60.0
POINTS = 60  # one point every ~1 s (the window's CHARTS_EVERY_TICKS): a minute
COLORS = ("#3d8bfd", "#2fbf71", "#f2a541", "#e5383b", "#b48ead")


class _Plot:
    """One chart: its title carries the unit and the series' names in their colours (a legend inside a chart this size
    covered the lines), the x axis the last ``HISTORY_S`` seconds; a chart with nothing to draw here says "n/a here"
    and why (``set_note``)."""

    def __init__(self, title: str, unit: str, names: tuple[str, ...], labels: dict[str, str] | None = None) -> None:
        self.widget = pg.PlotWidget()
        self.widget.setBackground("#0b0e12")
        self.title, self.unit, self.note = title, unit, ""
        self.colors = {n: COLORS[i % len(COLORS)] for i, n in enumerate(names)}
        self.labels = labels or {}
        self.widget.showGrid(x=True, y=True, alpha=0.15)
        self.widget.setMouseEnabled(x=False, y=False)
        self.widget.hideButtons()
        self.widget.setMenuEnabled(False)
        self.widget.setXRange(-HISTORY_S, 0, padding=0)
        self.curves = {n: self.widget.plot([], [], pen=pg.mkPen(self.colors[n], width=1.5), name=n) for n in names}
        self.data = {n: deque(maxlen=POINTS) for n in names}
        self._show_title()

    def title_html(self) -> str:
        """Line 1: what and the unit; line 2: the series in their colours, or why there is nothing to draw."""
        if self.note:
            second = f'<span style="color:#c99a4a">{self.note}</span>'
        elif len(self.colors) > 1:
            second = " ".join(f'<span style="color:{c}">{self.labels.get(n, n)}</span>' for n, c in self.colors.items())
        else:
            second = ""
        return f'<span style="color:#8792a2">{self.title}, {self.unit}</span>' + (f"<br>{second}" if second else "")

    def _show_title(self) -> None:
        self.widget.setTitle(self.title_html(), size="8pt")

    def set_note(self, why: str) -> None:
        """Mark the chart "n/a here" with the reason in its tooltip (``""``: it has data)."""
        note = "n/a here" if why else ""
        if note != self.note:
            self.note = note
            self.widget.setToolTip(why)
            self._show_title()

    def add(self, t: float, values: dict[str, float]) -> None:
        for n, v in values.items():
            if n in self.data:
                self.data[n].append((t, v if v is not None and math.isfinite(v) else float("nan")))

    def draw(self, now: float) -> None:
        for n, curve in self.curves.items():
            pts = self.data[n]
            if pts:
                xs = [p[0] - now for p in pts]
                ys = [p[1] for p in pts]
                curve.setData(xs, ys, connect="finite")


class TelemetryCharts(QWidget):
    """The charts (module docstring)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        pg.setConfigOptions(antialias=False, foreground="#8792a2")
        self.stages = _Plot("stages", "ms/frame", ("motion", "generate", "post"), {"generate": "gen"})
        self.fps = _Plot("frames", "per s", ("shown", "skipped by the core"))
        self.queues = _Plot("queues", "chunks", ("motion->generate", "generate->post"),
                            {"motion->generate": "to gen", "generate->post": "to post"})
        self.cache = _Plot("cache hits", "%", ("hit rate",))
        self.kv = _Plot("KV cache", "kB", ("kv cache",))
        self.gpu = _Plot("GPU mem", "MB", ("allocated",))
        self.cpu = _Plot("CPU", "% of cores", ("studio process",))
        self.plots = (self.stages, self.fps, self.queues, self.cache, self.kv, self.gpu, self.cpu)
        grid = QGridLayout(self)
        grid.setContentsMargins(4, 4, 4, 4)
        grid.setSpacing(4)
        for i, p in enumerate(self.plots):
            p.widget.setMinimumSize(120, 110)
            grid.addWidget(p.widget, i // 4, i % 4)
        self._cpu0 = (time.monotonic(), time.process_time())
        self._dropped0: tuple[float, int] | None = None
        self.points = 0
        self._next = 0

    def draw_one(self) -> None:
        """Redraw the next plot in turn (the window calls this on ticks between the data points)."""
        if self.isVisible():
            self.plots[self._next].draw(time.monotonic())
        self._next = (self._next + 1) % len(self.plots)

    def update_from(self, s: TelemetrySample | None, fps_shown: float, draw: bool = True) -> None:
        """Add one point per plot (from the newest core sample); redraw them all unless ``draw`` is False."""
        now = time.monotonic()
        t_prev, cpu_prev = self._cpu0
        cpu_now = time.process_time()
        load = 100.0 * (cpu_now - cpu_prev) / max(1e-6, (now - t_prev) * (os.cpu_count() or 1))
        self._cpu0 = (now, cpu_now)
        self.cpu.add(now, {"studio process": load})
        if s is not None:
            n = max(1.0, float(s.extra.get("chunk_frames", 1.0)))
            self.stages.add(now, {k: v.median_ms / n for k, v in s.stages.items()})
            if self._dropped0 is not None and now > self._dropped0[0]:
                rate = (s.frames_dropped - self._dropped0[1]) / (now - self._dropped0[0])
            else:
                rate = 0.0
            self._dropped0 = (now, s.frames_dropped)
            self.fps.add(now, {"shown": fps_shown, "skipped by the core": max(0.0, rate)})
            self.queues.add(now, {k: float(v) for k, v in s.queue_depths.items()})
            caches = list(s.caches.values())
            if caches:
                hits = sum(c.hits for c in caches)
                total = hits + sum(c.misses for c in caches)
                self.cache.add(now, {"hit rate": 100.0 * hits / total if total else float("nan")})
            self.cache.set_note("" if caches else "No audio encoder runs in this mode, so there is no cache to hit.")
            if "kv_cache_bytes" in s.extra:
                self.kv.add(now, {"kv cache": s.extra["kv_cache_bytes"] / 1024.0})
            self.kv.set_note("" if "kv_cache_bytes" in s.extra
                             else "No audio-to-motion model runs in this mode, so there is no KV cache.")
            self.gpu.add(now, {"allocated": s.gpu_mem_mb})
            self.gpu.set_note("" if math.isfinite(s.gpu_mem_mb)
                              else "The pipeline runs on the CPU: no GPU memory to show.")
        self.points += 1
        if draw and self.isVisible():
            for p in self.plots:
                p.draw(now)
