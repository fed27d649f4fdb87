"""The HUD draws what the telemetry bus holds, and H toggles it (offscreen)."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMainWindow

from studio.pipeline.telemetry import (CacheRate, ComputeSaved, OptimizationShare, OptimizationStatus, StageTiming,
                                       TelemetryBus, TelemetrySample)
from studio.ui.hud import install_hud, pill_text
from studio.ui.preview import FrameView

pytestmark = pytest.mark.qt


def known_sample() -> TelemetrySample:
    return TelemetrySample(
        taken_s=1.0, source="runtime", frames_produced=321, frames_dropped=7, fps_shown=24.5, fps_target=25.0,
        stages={"render": StageTiming(41.25, 55.5, 50, 2000.0), "motion": StageTiming(0.75, 1.5, 50, 40.0)},
        queue_depths={"present": 2}, drops={"render": 5, "present": 2},
        caches={"audio_cache": CacheRate(hits=3, misses=1, saved_ms=12.0)},
        compute=ComputeSaved(40.0, 10.0, "calibration at 12:00:00: plain renderer, 8 frames", shares=(
            OptimizationShare("pyramidal", OptimizationStatus.ACTIVE, 0.5),
            OptimizationShare("silence_sieve", OptimizationStatus.INACTIVE, 0.1, "switched off"),
            OptimizationShare("gpu_encode", OptimizationStatus.UNAVAILABLE, math.nan, "no GPU / no NVENC"))))


@pytest.fixture
def window(qtbot):
    w = QMainWindow()
    view = FrameView()
    w.setCentralWidget(view)
    bus = TelemetryBus()
    hud, action = install_hud(w, view, bus)
    w.resize(900, 700)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    w.activateWindow()
    return w, hud, action, bus


def test_hud_shows_the_bus_sample(window) -> None:
    w, hud, action, bus = window
    action.setChecked(True)
    bus.publish(known_sample())
    hud.refresh()
    assert "41.2 ms" in hud.stages.text() and "p95    55.5 ms" in hud.stages.text()
    assert "24.5 / 25 fps" in hud.rates.text() and "dropped 7" in hud.rates.text()
    assert "audio_cache 75% hit" in hud.caches.text()
    assert "compute saved 75%" in hud.compute.text()
    assert "calibration at 12:00:00" in hud.source.text()
    pills = [p.text() for p in hud.pills if not p.isHidden()]
    assert pills == ["pyramidal: saves 50%", "silence sieve: not active (switched off, bench 10%)",
                     "gpu encode: unavailable (no GPU / no NVENC)"]
    bus.publish(TelemetrySample(taken_s=2.0, source="runtime", stages={"render": StageTiming(12.0, 13.0, 1, 12.0)}))
    hud.refresh()  # the newest sample replaces the old one
    assert "12.0 ms" in hud.stages.text() and "compute saved: —" in hud.compute.text()


def test_h_toggles_the_hud(window, qtbot) -> None:
    w, hud, action, bus = window
    assert not hud.isVisible()
    qtbot.keyClick(w, Qt.Key_H)
    qtbot.waitUntil(hud.isVisible, timeout=2000)
    qtbot.keyClick(w, Qt.Key_H)
    qtbot.waitUntil(lambda: not hud.isVisible(), timeout=2000)


def test_pill_words() -> None:
    assert pill_text(OptimizationShare("kv_cache", OptimizationStatus.UNAVAILABLE, math.nan, "no weights")) == \
        "kv cache: unavailable (no weights)"
    assert pill_text(OptimizationShare("pyramidal", OptimizationStatus.ACTIVE, math.nan)) == "pyramidal: saves —"
