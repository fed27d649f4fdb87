"""The HUD: a toggleable overlay (shortcut H) on the program preview that draws the newest ``TelemetrySample`` of the
telemetry bus: per-stage ms (median / p95), fps, drops, queue depths, cache hit rates, and the compute saved against
a baseline measured on this machine, with one pill per optimization (active with its measured share, not active, or
unavailable and why).

The HUD never talks to the runtime: the window's one timer calls ``refresh()``, which pulls the bus's latest sample.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QVBoxLayout, QWidget

from studio.pipeline.telemetry import OptimizationShare, OptimizationStatus, TelemetryBus, TelemetrySample

PILL_COLORS = {  # status -> (background, border, text)
    OptimizationStatus.ACTIVE: ("#173d2a", "#2fbf71", "#c9f5dc"),
    OptimizationStatus.INACTIVE: ("#1c222b", "#2a323d", "#8792a2"),
    OptimizationStatus.UNAVAILABLE: ("#2e2412", "#5a4417", "#f2a541"),
}
PILLS_PER_ROW = 2


def _ms(v: float) -> str:
    return "—" if not math.isfinite(v) else f"{v:.1f}"


def _pct(v: float) -> str:
    return "—" if not math.isfinite(v) else f"{100 * v:.0f}%"


def pill_text(share: OptimizationShare) -> str:
    """What one pill says: the name and, in plain words, whether it runs and what it saved."""
    name = share.name.replace("_", " ")
    if share.status is OptimizationStatus.UNAVAILABLE:
        return f"{name}: unavailable ({share.reason})" if share.reason else f"{name}: unavailable"
    if share.status is OptimizationStatus.INACTIVE:
        tail = f", bench {_pct(share.saved_fraction)}" if math.isfinite(share.saved_fraction) else ""
        return f"{name}: not active ({share.reason}{tail})" if share.reason else f"{name}: not active{tail}"
    return f"{name}: saves {_pct(share.saved_fraction)}"


class Hud(QFrame):
    """The overlay; ``refresh()`` pulls the bus, ``show_sample()`` draws one sample (tests call it directly too)."""

    def __init__(self, bus: TelemetryBus, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bus = bus
        self.setObjectName("hud")
        self.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.setStyleSheet("QFrame#hud { background: rgba(8, 10, 14, 215); border: 1px solid #2a323d;"
                           " border-radius: 6px; } QLabel { color: #dfe5ec; background: transparent; }"
                           " QLabel[role='hudmono'] { font-family: 'DejaVu Sans Mono', monospace; font-size: 9pt; }")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        lay.setSpacing(4)
        self.title = QLabel("HUD · waiting for telemetry (H hides)")
        self.title.setStyleSheet("font-weight: 700;")
        self.rates = QLabel()
        self.stages = QLabel()
        self.queues = QLabel()
        self.caches = QLabel()
        self.compute = QLabel()
        self.source = QLabel()
        for lbl in (self.rates, self.stages, self.queues, self.caches, self.compute):
            lbl.setProperty("role", "hudmono")
        self.source.setStyleSheet("color: #8792a2; font-size: 8pt;")
        self.source.setWordWrap(True)
        self.source.setMaximumWidth(460)
        self.pill_grid = QGridLayout()
        self.pill_grid.setSpacing(4)
        self.pills: list[QLabel] = []
        for w in (self.title, self.rates, self.stages, self.queues, self.caches, self.compute):
            lay.addWidget(w)
        lay.addLayout(self.pill_grid)
        lay.addWidget(self.source)
        self.sample: TelemetrySample | None = None
        self._published = -1

    def refresh(self) -> None:
        """Pull the bus's newest sample (cheap when nothing new was published)."""
        if not self.isVisible() or self.bus.published == self._published:
            return
        self._published = self.bus.published
        sample = self.bus.latest()
        if sample is not None:
            self.show_sample(sample)

    def show_sample(self, s: TelemetrySample) -> None:
        self.sample = s
        self.title.setText(f"HUD · {s.source} · measured live (H hides)")
        self.rates.setText(f"{s.fps_shown:5.1f} / {s.fps_target:.0f} fps   produced {s.frames_produced}"
                           f"   dropped {s.frames_dropped}"
                           + (f"   GPU {s.gpu_mem_mb:.0f} MB" if math.isfinite(s.gpu_mem_mb) else ""))
        self.stages.setText("\n".join(f"{k:<12} {_ms(v.median_ms):>7} ms  p95 {_ms(v.p95_ms):>7} ms"
                                      for k, v in s.stages.items()) or "no stage timings yet")
        self.queues.setText("queues  " + ("  ".join(f"{k} {v}" for k, v in s.queue_depths.items()) or "—")
                            + ("   drops " + "  ".join(f"{k} {v}" for k, v in s.drops.items()) if s.drops else ""))
        self.caches.setText("caches  " + ("  ".join(f"{k} {_pct(c.hit_rate)} hit" for k, c in s.caches.items())
                                          or "none in use"))
        c = s.compute
        if c is None:
            self.compute.setText("compute saved: — (no baseline measured yet)")
            self.source.setText("")
            self._set_pills(())
        else:
            self.compute.setText(f"compute saved {_pct(c.saved_fraction)}   {_ms(c.actual_ms_per_frame)} of "
                                 f"{_ms(c.baseline_ms_per_frame)} ms/frame")
            self.source.setText(f"baseline: {c.baseline_source}")
            self._set_pills(c.shares)
        self.adjustSize()

    def _set_pills(self, shares: tuple[OptimizationShare, ...]) -> None:
        while len(self.pills) < len(shares):
            lbl = QLabel()
            self.pill_grid.addWidget(lbl, len(self.pills) // PILLS_PER_ROW, len(self.pills) % PILLS_PER_ROW)
            self.pills.append(lbl)
        for i, lbl in enumerate(self.pills):
            if i >= len(shares):
                lbl.hide()
                continue
            bg, border, fg = PILL_COLORS[shares[i].status]
            lbl.setStyleSheet(f"background: {bg}; border: 1px solid {border}; color: {fg}; border-radius: 9px;"
                              " padding: 1px 8px; font-size: 8pt;")
            lbl.setText(pill_text(shares[i]))
            lbl.show()


class _Follow(QObject):
    """Keeps the HUD at the top-left of its parent (under the timecode badge) when the parent resizes."""

    def __init__(self, hud: Hud) -> None:
        super().__init__(hud)
        self.hud = hud

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt)
        if event.type() == QEvent.Resize:
            self.hud.move(10, 44)
            self.hud.setMaximumWidth(max(200, obj.width() - 20))
        return False


def install_hud(window: QWidget, over: QWidget, bus: TelemetryBus) -> tuple[Hud, QAction]:
    """A hidden HUD over ``over`` and the window action (shortcut H) that toggles it."""
    hud = Hud(bus, over)
    hud.move(10, 44)
    over.installEventFilter(_Follow(hud))
    hud.hide()
    action = QAction("Show HUD (telemetry)", window)
    action.setCheckable(True)
    action.setShortcut(QKeySequence(Qt.Key_H))
    action.setShortcutContext(Qt.WindowShortcut)
    action.toggled.connect(lambda on: (hud.setVisible(on), hud.raise_(), hud.refresh()))
    window.addAction(action)
    return hud, action
