"""The program preview: the presenter's frames scaled with their aspect ratio, and a broadcast-style overlay
(timecode, ON AIR / REC badges, measured A/V offset, dropped and late frames). Frames are pushed in by the window's
one timer (``show_frame``); this widget never talks to the runtime.
"""

from __future__ import annotations

import math
import time

import numpy as np
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from studio.pipeline.telemetry import RuntimeState, TelemetrySnapshot
from studio.ui import theme


def timecode(seconds: float, fps: float) -> str:
    """HH:MM:SS:FF for program time ``seconds``."""
    seconds = max(0.0, seconds)
    frames = int(seconds * fps + 1e-6)
    per_s = max(1, int(round(fps)))
    s_total, ff = divmod(frames, per_s)
    hh, rem = divmod(s_total, 3600)
    mm, ss = divmod(rem, 60)
    return f"{hh:02d}:{mm:02d}:{ss:02d}:{ff:02d}"


class FrameView(QWidget):
    """Paints the newest frame letterboxed, plus the overlay."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumSize(320, 320)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self.setAttribute(Qt.WA_OpaquePaintEvent)
        self._image: QImage | None = None
        self._array: np.ndarray | None = None  # keeps the QImage's memory alive
        self.telemetry: TelemetrySnapshot | None = None
        self.message = "Preparing the anchor…"
        self.gui_stall_ms = 0.0

    def set_frame(self, image: np.ndarray) -> None:
        """``image``: H x W x 3 uint8 RGB."""
        self._array = np.ascontiguousarray(image)
        h, w = self._array.shape[:2]
        self._image = QImage(self._array.data, w, h, 3 * w, QImage.Format_RGB888)
        self.update()

    def image_rect(self) -> QRectF:
        """Where the frame is drawn: the largest square-aspect rect that fits, centred."""
        if self._image is None:
            return QRectF()
        iw, ih = self._image.width(), self._image.height()
        scale = min(self.width() / iw, self.height() / ih)
        w, h = iw * scale, ih * scale
        return QRectF((self.width() - w) / 2, (self.height() - h) / 2, w, h)

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt)
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("#050607"))
        p.setRenderHint(QPainter.SmoothPixmapTransform, True)
        p.setRenderHint(QPainter.Antialiasing, True)
        if self._image is None:
            p.setPen(QColor(theme.MUTED))
            f = QFont(self.font())
            f.setPointSizeF(13)
            p.setFont(f)
            p.drawText(self.rect(), Qt.AlignCenter, self.message)
            p.end()
            return
        r = self.image_rect()
        p.drawImage(r, self._image)
        self._paint_overlay(p, r)
        p.end()

    def _badge(self, p: QPainter, x: float, y: float, text: str, bg: str, fg: str = "#ffffff",
               mono: bool = False, dot: bool = False) -> float:
        """Draw a rounded label at (x, y) (top-left); returns its width."""
        f = QFont("DejaVu Sans Mono" if mono else self.font().family())
        f.setPointSizeF(10.5)
        f.setBold(True)
        p.setFont(f)
        fm = p.fontMetrics()
        pad = 8
        dot_w = 14 if dot else 0
        w = fm.horizontalAdvance(text) + 2 * pad + dot_w
        h = fm.height() + 8
        path = QPainterPath()
        path.addRoundedRect(QRectF(x, y, w, h), 4, 4)
        p.fillPath(path, QColor(bg))
        if dot:
            p.setBrush(QColor(fg))
            p.setPen(Qt.NoPen)
            p.drawEllipse(QRectF(x + pad, y + h / 2 - 4, 8, 8))
        p.setPen(QColor(fg))
        p.drawText(QRectF(x + pad + dot_w, y, w - 2 * pad - dot_w, h), Qt.AlignVCenter | Qt.AlignLeft, text)
        return w

    def _paint_overlay(self, p: QPainter, r: QRectF) -> None:
        t = self.telemetry
        if t is None:
            return
        m = 10
        self._badge(p, r.left() + m, r.top() + m, timecode(t.clock_s, t.fps_target), "#b0000000", mono=True)
        x = r.right() - m
        badges = []
        if t.recording_path:
            badges.append((f"REC {timecode(t.recording_s, t.fps_target)[:8]}", "#d0c1121f"))
        if t.state == RuntimeState.MICROPHONE:
            badges.append(("MIC LIVE", "#d0e5383b"))
        elif t.state in (RuntimeState.LIVE, RuntimeState.PREPARING):
            badges.append(("ON AIR", "#d0e5383b"))
        elif t.state == RuntimeState.PAUSED:
            badges.append(("PAUSED", "#d0f2a541"))
        elif t.state == RuntimeState.FAILED:  # the last frame stays up: say it is a still
            badges.append(("PRESENTER STOPPED", "#d0e5383b"))
        for text, bg in badges:
            f = QFont(self.font().family())
            f.setPointSizeF(10.5)
            f.setBold(True)
            p.setFont(f)
            w = p.fontMetrics().horizontalAdvance(text) + 16 + 14
            x -= w
            self._badge(p, x, r.top() + m, text, bg, dot=True)
            x -= 6
        if t.mode != "script":  # the microphone or an interview: sound to pixel
            av = "latency —" if math.isnan(t.latency_ms_median) else \
                f"latency {t.latency_ms_median:.0f} ms (p95 {t.latency_ms_p95:.0f})"
        else:
            av = "A/V —" if math.isnan(t.av_offset_ms) else f"A/V {t.av_offset_ms:+.0f} ms"
        # not shown: slots the core skipped plus frames replaced by a newer one before the screen showed them
        stats = f"{t.fps_shown:4.1f} fps shown   {av}   not shown {t.frames_dropped}   late {t.frames_late}"
        f = QFont("DejaVu Sans Mono")
        f.setPointSizeF(9)
        p.setFont(f)
        fm = p.fontMetrics()
        h = fm.height() + 8
        w = fm.horizontalAdvance(stats) + 16
        box = QRectF(r.left() + m, r.bottom() - m - h, w, h)
        path = QPainterPath()
        path.addRoundedRect(box, 4, 4)
        p.fillPath(path, QColor(0, 0, 0, 170))
        p.setPen(QPen(QColor("#cfd6df")))
        p.drawText(box, Qt.AlignCenter, stats)


class PreviewPanel(QWidget):
    """The frame view with its transport row (mode switch, play/pause, timecode, clock source) and a notice line."""

    play_toggled = Signal(bool)  # True = play
    mode_requested = Signal(str)  # "script" or "microphone" (PreviewMode values)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view = FrameView(self)
        self.play_button = QPushButton("❚❚  Pause")
        self.play_button.setCheckable(True)
        self.play_button.setToolTip("Pause or resume the program (picture and sound)")
        self.play_button.toggled.connect(self._on_toggled)
        self.clock_label = QLabel("00:00:00:00")
        self.clock_label.setProperty("role", "clock")
        self.source_label = QLabel("")
        self.source_label.setProperty("role", "muted")
        self.source_label.setWordWrap(True)
        # What drives the presenter: a two-way switch (shortcut M toggles it).
        self.script_button = QPushButton("SCRIPT")
        self.mic_button = QPushButton("MICROPHONE")
        self.mode_group = QButtonGroup(self)
        self.mode_group.setExclusive(True)
        for b, mode, tip in ((self.script_button, "script", "The presenter reads the rundown (text to speech)"),
                             (self.mic_button, "microphone", "The presenter follows the selected microphone, live")):
            b.setCheckable(True)
            b.setProperty("role", "mode")
            b.setToolTip(f"{tip}  (M switches)")
            b.clicked.connect(lambda _=False, m=mode: self.mode_requested.emit(m))
            self.mode_group.addButton(b)
        self.script_button.setChecked(True)
        self.notice = QLabel("")
        self.notice.setProperty("role", "notice")
        self.notice.setWordWrap(True)
        self.notice.setVisible(False)
        row = QHBoxLayout()
        row.setContentsMargins(8, 4, 8, 6)
        row.setSpacing(0)
        row.addWidget(self.script_button)
        row.addWidget(self.mic_button)
        row.addSpacing(16)
        row.addWidget(self.play_button)
        row.addSpacing(12)
        row.addWidget(self.clock_label)
        row.addSpacing(12)
        row.addWidget(self.source_label, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.notice)
        lay.addLayout(row)

    def show_mode(self, mode: str, notice: str = "") -> None:
        """Reflect the requested mode on the switch, and say plainly when it cannot run (``notice``)."""
        (self.script_button if mode == "script" else self.mic_button).setChecked(True)
        self.play_button.setEnabled(mode == "script")  # the microphone cannot be paused
        self.notice.setText(notice)
        self.notice.setVisible(bool(notice))

    def _on_toggled(self, paused: bool) -> None:
        self.play_button.setText("▶  Play" if paused else "❚❚  Pause")
        self.play_toggled.emit(not paused)

    def set_telemetry(self, t: TelemetrySnapshot) -> None:
        self.view.telemetry = t
        self.clock_label.setText(timecode(t.clock_s, t.fps_target))


class LevelMeter(QWidget):
    """Horizontal dBFS meter (-60..0) with a peak hold; ``set_level`` is called from the window's timer. It repaints
    only when its bar or peak moves by a pixel, and at most ``MAX_PAINTS_PER_S`` times a second: each paint runs
    Python on the GUI thread, which takes the GIL from the pipeline's threads."""

    FLOOR_DBFS = -60.0
    MAX_PAINTS_PER_S = 30.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(18)
        self.setMaximumHeight(22)
        self.level_dbfs = -math.inf
        self._shown = self.FLOOR_DBFS
        self._peak = self.FLOOR_DBFS
        self._peak_age = 0
        self._enabled_input = True
        self._drawn: tuple[int, int, bool] | None = None  # what the last paint showed: bar and peak pixels, input on
        self._painted_at = -math.inf

    @property
    def enabled_input(self) -> bool:
        return self._enabled_input

    @enabled_input.setter
    def enabled_input(self, on: bool) -> None:
        self._enabled_input = bool(on)
        self._repaint_if_moved(force=True)

    def set_level(self, dbfs: float) -> None:
        self.level_dbfs = dbfs
        v = max(self.FLOOR_DBFS, min(0.0, dbfs)) if math.isfinite(dbfs) else self.FLOOR_DBFS
        self._shown = v if v > self._shown else self._shown + 0.25 * (v - self._shown)  # fast attack, slow release
        if v >= self._peak:
            self._peak, self._peak_age = v, 0
        else:
            self._peak_age += 1
            if self._peak_age > 60:
                self._peak = max(self.FLOOR_DBFS, self._peak - 1.0)
        self._repaint_if_moved()

    def _repaint_if_moved(self, force: bool = False) -> None:
        w = max(1, self.width())
        drawn = (int(self._x(self._shown, w)), int(self._x(self._peak, w)), self._enabled_input)
        now = time.monotonic()
        if drawn != self._drawn and (force or now - self._painted_at >= 1.0 / self.MAX_PAINTS_PER_S):
            self._drawn, self._painted_at = drawn, now
            self.update()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt)
        self._drawn = None  # a new width: every position moves
        super().resizeEvent(event)

    def _x(self, dbfs: float, width: float) -> float:
        return (dbfs - self.FLOOR_DBFS) / -self.FLOOR_DBFS * width

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt)
        p = QPainter(self)
        r = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        p.fillRect(r, QColor("#0b0e12"))
        if self._enabled_input:
            w = r.width()
            for lo, hi, colour in ((-60, -18, theme.READY), (-18, -6, theme.WARN), (-6, 0, theme.ON_AIR)):
                x0, x1 = self._x(lo, w), self._x(min(hi, self._shown), w)
                if x1 > x0:
                    p.fillRect(QRectF(r.left() + x0, r.top() + 2, x1 - x0, r.height() - 4), QColor(colour))
            px = r.left() + self._x(self._peak, w)
            p.fillRect(QRectF(px - 1, r.top() + 2, 2, r.height() - 4), QColor("#ffffff"))
            p.setPen(QColor(255, 255, 255, 40))
            for db in (-48, -36, -24, -12, -6):
                x = r.left() + self._x(db, w)
                p.drawLine(int(x), int(r.top()), int(x), int(r.bottom()))
        p.setPen(QColor(theme.BORDER))
        p.drawRect(r)
        p.end()
