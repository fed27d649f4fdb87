"""The HUD strip under the program preview: the live "compute saved" ribbon and one pill per optimization.

Everything it shows is the newest ``TelemetrySample`` of the core on the telemetry bus, measured on this machine while
the studio runs: the ribbon is (baseline - actual) / baseline with both costs from the core's interleaved baseline
chunks; each pill shows its optimization's measured share. Clicking a pill turns that optimization off or on in the
running core (``toggled``); a pill the machine cannot use says so, with the reason, and cannot be clicked.

The strip never talks to the runtime: the window's one timer calls ``refresh()``, which pulls the bus.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QFrame, QGridLayout, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout,
                               QWidget)

from studio.pipeline.settings import Optimization
from studio.pipeline.telemetry import OptimizationShare, OptimizationStatus, TelemetryBus, TelemetrySample

WHAT = {  # what each optimization does, for the pills' tooltips
    Optimization.PYRAMIDAL: "Generate small and bring it up to size (built-in engine: a low-resolution warp field; "
                            "other engines: their small native size + super-resolution).",
    Optimization.AUDIO_CACHE: "Fingerprint cache in front of the audio encoders: repeated phrases skip the encoder.",
    Optimization.FRAME_INTERPOLATION: "Generate keyframes only and interpolate the frames between them (motion "
                                      "space for the built-in engine, RIFE for the others).",
    Optimization.KV_CACHE: "The motion model's sliding-window INT8 KV cache: bounded memory and step time.",
    Optimization.ASYNC_PIPELINE: "Motion, generation and post-processing overlap on three threads (two CUDA "
                                 "streams on a GPU).",
    Optimization.SILENCE_SIEVE: "Where nobody speaks, keyframes are sparser and the audio model rests.",
    Optimization.CUDA_GRAPHS: "Generation replayed as CUDA graphs (or a compiled engine).",
    Optimization.GPU_ENCODE: "Colour conversion to NV12 on the GPU (only NV12 crosses PCIe), NVENC where it opens.",
}


def _pct(v: float) -> str:
    return "—" if not math.isfinite(v) else f"{100 * v:.0f}%"


def _ms(v: float) -> str:
    return "—" if not math.isfinite(v) else f"{v:.1f}"


SHORT = {Optimization.PYRAMIDAL: "pyramidal", Optimization.AUDIO_CACHE: "audio cache",
         Optimization.FRAME_INTERPOLATION: "keyframes", Optimization.KV_CACHE: "KV cache",
         Optimization.ASYNC_PIPELINE: "async", Optimization.SILENCE_SIEVE: "sieve",
         Optimization.CUDA_GRAPHS: "graphs / engine", Optimization.GPU_ENCODE: "GPU encode"}


def pill_text(share: OptimizationShare) -> str:
    """What one pill says: the name and, in plain words, whether it runs and what it saved."""
    name = SHORT[Optimization(share.name)] if share.name in {o.value for o in Optimization} \
        else share.name.replace("_", " ")
    if share.status is OptimizationStatus.UNAVAILABLE:
        return share.headline or f"{name}: n/a"  # the tooltip says why
    if share.status is OptimizationStatus.INACTIVE:
        return f"{name}: off"
    return f"{name}: {_pct(share.saved_fraction)}"


PILLS_PER_ROW = 4

PILL_STYLE = """
QPushButton[role="pill"] {{ border-radius: 11px; padding: 2px 8px; font-size: 8pt; font-weight: 600; }}
QPushButton[role="pill"][status="active"] {{ background: #173d2a; border: 1px solid #2fbf71; color: #c9f5dc; }}
QPushButton[role="pill"][status="not active"] {{ background: #1c222b; border: 1px solid #2a323d; color: #8792a2; }}
QPushButton[role="pill"][status="unavailable"] {{ background: #2e2412; border: 1px solid #5a4417; color: #c99a4a; }}
QPushButton[role="pill"][status="costing"] {{ background: #33190f; border: 1px solid #e5683b; color: #f6b48f; }}
"""


def pill_style(share: OptimizationShare) -> str:
    """The pill's look: its status, or "costing" when it is on and measured to cost time here (a share that rounds to
    -1 % or less: the pill's figure says so too)."""
    if share.status is OptimizationStatus.ACTIVE and math.isfinite(share.saved_fraction) \
            and share.saved_fraction <= -0.005:
        return "costing"
    return share.status.value


class HudStrip(QFrame):
    """The strip (module docstring); ``refresh()`` pulls the bus, ``show_sample()`` draws one sample."""

    toggled = Signal(object, bool)  # (Optimization, on)

    def __init__(self, bus: TelemetryBus, source: str = "core", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bus = bus
        self.source_name = source
        self.setObjectName("hudstrip")
        self.setStyleSheet("QFrame#hudstrip { background: #0b0e12; border-top: 1px solid #2a323d; }"
                           + PILL_STYLE.format())
        self.ribbon = QLabel("— compute saved")
        self.ribbon.setStyleSheet("font-size: 17pt; font-weight: 800; color: #2fbf71;")
        self.ribbon.setToolTip("Waiting for the first measurements.")
        self.detail = QLabel("measuring…")
        self.detail.setProperty("role", "muted")
        self.status = QLabel("")
        self.status.setProperty("role", "muted")
        self.status.setStyleSheet("font-family: 'DejaVu Sans Mono', monospace; font-size: 9pt;")
        left = QVBoxLayout()
        left.setSpacing(0)
        left.addWidget(self.ribbon)
        left.addWidget(self.detail)
        self.pills: dict[Optimization, QPushButton] = {}
        pill_grid = QGridLayout()
        pill_grid.setHorizontalSpacing(6)
        pill_grid.setVerticalSpacing(4)
        for i, opt in enumerate(Optimization):
            b = QPushButton(SHORT[opt])
            b.setProperty("role", "pill")
            b.setProperty("status", "not active")
            b.setCheckable(True)
            b.setCursor(Qt.PointingHandCursor)
            b.clicked.connect(lambda on, o=opt: self.toggled.emit(o, on))
            b.setToolTip(WHAT[opt])
            b.setMinimumWidth(60)
            b.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
            self.pills[opt] = b
            pill_grid.addWidget(b, i // PILLS_PER_ROW, i % PILLS_PER_ROW)
        self.status.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        right = QVBoxLayout()
        right.setSpacing(4)
        right.addLayout(pill_grid)
        right.addWidget(self.status)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 6, 10, 6)
        lay.setSpacing(16)
        lay.addLayout(left)
        lay.addLayout(right, 1)
        self.sample: TelemetrySample | None = None
        self._published = -1

    def refresh(self) -> None:
        """Pull the bus's newest sample of the core (cheap when nothing new was published)."""
        if not self.isVisible() or self.bus.published == self._published:
            return
        self._published = self.bus.published
        sample = self.bus.latest(self.source_name)
        if sample is not None:
            self.show_sample(sample)

    def show_sample(self, s: TelemetrySample) -> None:
        self.sample = s
        stages = "  ".join(f"{k} {_ms(v.median_ms)}" for k, v in s.stages.items())
        queues = "  ".join(f"{k} {v}" for k, v in s.queue_depths.items())
        # the core's counts: slots it skipped because it fell behind (the preview's "not shown" adds the frames the
        # screen replaced before showing them)
        self.status.setText(f"{s.frames_produced} frames made · {s.frames_dropped} slots skipped by the core · "
                            f"ms per chunk: {stages or '—'}"
                            + (f" · queues {queues}" if queues else "")
                            + (f" · GPU {s.gpu_mem_mb:.0f} MB" if math.isfinite(s.gpu_mem_mb) else "")
                            + _first_frame(s.extra))
        c = s.compute
        self.ribbon.setText(ribbon_text(c))
        self.detail.setText(ribbon_detail(c))
        if c is None or not math.isfinite(c.saved_fraction):
            self.ribbon.setToolTip(c.baseline_source if c is not None else "Waiting for the first measurements.")
        else:
            self.ribbon.setStyleSheet("font-size: 17pt; font-weight: 800; color: "
                                      + ("#2fbf71;" if c.saved_fraction >= 0 else "#f2a541;"))
            self.ribbon.setToolTip(
                "Compute saved = (baseline - actual) / baseline, both measured now on this machine: the median over "
                "the last baseline pairs, never one chunk's noise.\n"
                f"Baseline: {c.baseline_source}.\nActual: the normal chunks' stage costs per output frame.")
        shares = {sh.name: sh for sh in (c.shares if c is not None else ())}
        for opt, b in self.pills.items():
            sh = shares.get(opt.value)
            if sh is None:
                continue
            status = pill_style(sh)
            if b.property("status") != status:
                b.setProperty("status", status)
                b.style().unpolish(b)
                b.style().polish(b)
            b.setText(pill_text(sh))
            b.setChecked(sh.status is OptimizationStatus.ACTIVE)
            b.setEnabled(sh.status is not OptimizationStatus.UNAVAILABLE)
            why = sh.reason or ("switched off" if sh.status is OptimizationStatus.INACTIVE else "")
            if status == "costing":
                why = (f"on, and it costs {100 * -sh.saved_fraction:.0f}% here: the chunks measured without it ran "
                       "faster" + (f" ({why})" if why else ""))
            b.setToolTip(f"{WHAT[opt]}\n{pill_text(sh)}" + (f" — {why}" if why else "")
                         + ("" if sh.status is OptimizationStatus.UNAVAILABLE else "\nClick to turn it "
                            + ("off." if sh.status is OptimizationStatus.ACTIVE else "on.")))


def _first_frame(extra: dict) -> str:
    """The time to the first program frame: from the studio's start, and from its core's (a new core after a format
    change starts its own count)."""
    if "first_frame_from_command_s" not in extra:
        return ""
    core = extra.get("first_frame_from_core_s")
    return (f" · first frame {extra['first_frame_from_command_s']:.1f} s after start"
            + (f" ({core:.1f} s after the core's)" if core is not None else ""))


def ribbon_text(c) -> str:
    """The ribbon: the windowed figure, or that it is still measuring (a ComputeSaved or None)."""
    if c is None or not math.isfinite(c.saved_fraction):
        return "measuring compute saved…"
    return f"{100 * c.saved_fraction:.0f}% compute saved"


def ribbon_detail(c) -> str:
    """The line under the ribbon: its interval and what it is the median of, or how far the measuring is."""
    if c is None:
        return "waiting for the first chunks"
    if c.measuring:
        return f"{c.pairs} of {c.pairs_needed} baseline pairs (one every few seconds)"
    if not math.isfinite(c.saved_fraction):
        return "measuring the baseline…"
    spread = (f"{100 * c.low:.0f} to {100 * c.high:.0f} % (90 %), " if math.isfinite(c.low) and math.isfinite(c.high)
              else "")
    pairs = f"last {c.pairs} baseline pairs; " if c.pairs_needed else ""
    return f"{spread}{pairs}{_ms(c.actual_ms_per_frame)} of {_ms(c.baseline_ms_per_frame)} ms per frame"


def install_hud(window: QWidget, strip: HudStrip) -> QAction:
    """The window action (shortcut H) that hides and shows the strip (visible by default)."""
    action = QAction("Show HUD (telemetry strip)", window)
    action.setCheckable(True)
    action.setChecked(True)
    action.setShortcut(QKeySequence(Qt.Key_H))
    action.setShortcutContext(Qt.WindowShortcut)
    action.toggled.connect(lambda on: (strip.setVisible(on), strip.refresh()))
    window.addAction(action)
    return action
