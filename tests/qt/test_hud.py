"""The HUD strip draws the core's newest bus sample, a pill click asks for the flag, and H hides it (offscreen)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMainWindow, QVBoxLayout, QWidget

from studio.pipeline.settings import Optimization
from studio.pipeline.telemetry import (CacheRate, ComputeSaved, OptimizationShare, OptimizationStatus, StageTiming,
                                       TelemetryBus, TelemetrySample)
from studio.ui.hud import HudStrip, install_hud, pill_style, pill_text

pytestmark = pytest.mark.qt


def known_sample() -> TelemetrySample:
    return TelemetrySample(
        taken_s=1.0, source="core", frames_produced=321, frames_dropped=7, fps_target=25.0,
        stages={"generate": StageTiming(41.25, 55.5, 50, 2000.0), "motion": StageTiming(0.75, 1.5, 50, 40.0)},
        queue_depths={"motion->generate": 2}, drops={"source": 7},
        caches={"audio_cache": CacheRate(hits=3, misses=1, saved_ms=12.0)},
        compute=ComputeSaved(40.0, 10.0, "this run: plain chunks interleaved 1 in 8", shares=(
            OptimizationShare("pyramidal", OptimizationStatus.ACTIVE, 0.5, "measured live"),
            OptimizationShare("silence_sieve", OptimizationStatus.INACTIVE, math.nan, "switched off"),
            OptimizationShare("gpu_encode", OptimizationStatus.UNAVAILABLE, math.nan, "no CUDA GPU"))))


@pytest.fixture
def window(qtbot):
    w = QMainWindow()
    body = QWidget()
    lay = QVBoxLayout(body)
    bus = TelemetryBus()
    strip = HudStrip(bus)
    lay.addWidget(strip)
    w.setCentralWidget(body)
    action = install_hud(w, strip)
    w.resize(1200, 300)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    w.activateWindow()
    return w, strip, action, bus


def test_strip_shows_the_core_sample(window) -> None:
    w, strip, action, bus = window
    assert strip.isVisible()  # visible by default
    bus.publish(known_sample())
    strip.refresh()
    assert strip.ribbon.text() == "75% compute saved"
    assert "10.0 of 40.0 ms per frame" in strip.detail.text()
    assert "plain chunks interleaved" in strip.ribbon.toolTip()
    assert "7 slots skipped by the core" in strip.status.text() and "generate 41.2" in strip.status.text()
    assert "first frame" not in strip.status.text()  # none written yet in this sample
    bus.publish(replace(known_sample(), taken_s=1.5, extra={"first_frame_from_command_s": 4.25}))
    strip.refresh()
    assert "first frame 4.2 s after start" in strip.status.text()
    p = strip.pills
    assert p[Optimization.PYRAMIDAL].text() == "pyramidal: 50%" and p[Optimization.PYRAMIDAL].isChecked()
    assert p[Optimization.SILENCE_SIEVE].text() == "sieve: off" and not p[Optimization.SILENCE_SIEVE].isChecked()
    assert p[Optimization.GPU_ENCODE].text() == "GPU encode: n/a"
    assert not p[Optimization.GPU_ENCODE].isEnabled() and "no CUDA GPU" in p[Optimization.GPU_ENCODE].toolTip()
    other = TelemetrySample(taken_s=2.0, source="other", stages={"generate": StageTiming(1.0, 1.0, 1, 1.0)})
    bus.publish(other)
    strip.refresh()  # another publisher's sample is not the core's: nothing changes
    assert strip.ribbon.text() == "75% compute saved"
    bus.publish(TelemetrySample(taken_s=3.0, source="core", stages={"generate": StageTiming(12.0, 13.0, 1, 12.0)}))
    strip.refresh()  # the newest core sample replaces the old one
    assert "generate 12.0" in strip.status.text() and strip.ribbon.text() == "measuring compute saved…"


def test_the_ribbon_says_measuring_until_its_pairs_are_in_then_the_median_and_its_interval(window) -> None:
    w, strip, action, bus = window

    def show(pairs: int) -> None:
        c = ComputeSaved(16.0, 11.0, "this run", fraction=0.31, low=0.28, high=0.35, pairs=pairs, pairs_needed=5)
        bus.publish(TelemetrySample(taken_s=float(pairs), source="core", compute=c))
        strip.refresh()

    show(3)
    assert strip.ribbon.text() == "measuring compute saved…"
    assert strip.detail.text().startswith("3 of 5 baseline pairs")
    show(12)
    assert strip.ribbon.text() == "31% compute saved"
    assert strip.detail.text().startswith("28 to 35 % (90 %), last 12 baseline pairs; 11.0 of 16.0 ms per frame")


def test_a_pill_click_asks_for_its_flag(window, qtbot) -> None:
    w, strip, action, bus = window
    bus.publish(known_sample())
    strip.refresh()
    with qtbot.waitSignal(strip.toggled, timeout=2000) as sig:
        qtbot.mouseClick(strip.pills[Optimization.SILENCE_SIEVE], Qt.LeftButton)
    assert sig.args == [Optimization.SILENCE_SIEVE, True]
    with qtbot.waitSignal(strip.toggled, timeout=2000) as sig:
        qtbot.mouseClick(strip.pills[Optimization.PYRAMIDAL], Qt.LeftButton)
    assert sig.args == [Optimization.PYRAMIDAL, False]


def test_h_hides_and_shows_the_strip(window, qtbot) -> None:
    w, strip, action, bus = window
    qtbot.keyClick(w, Qt.Key_H)
    qtbot.waitUntil(lambda: not strip.isVisible(), timeout=2000)
    qtbot.keyClick(w, Qt.Key_H)
    qtbot.waitUntil(strip.isVisible, timeout=2000)


def test_a_flag_that_costs_time_here_looks_it(window) -> None:
    w, strip, action, bus = window
    sample = known_sample()
    shares = sample.compute.shares + (OptimizationShare("async_pipeline", OptimizationStatus.ACTIVE, -0.05,
                                                        "measured live"),)
    bus.publish(TelemetrySample(taken_s=2.0, source="core", compute=ComputeSaved(40.0, 10.0, "x", shares=shares)))
    strip.refresh()
    costing, saving = strip.pills[Optimization.ASYNC_PIPELINE], strip.pills[Optimization.PYRAMIDAL]
    assert costing.property("status") == "costing" and costing.isChecked() and costing.text() == "async: -5%"
    assert "costs 5% here" in costing.toolTip() and "Click to turn it off." in costing.toolTip()
    assert saving.property("status") == "active"
    # a share that rounds to 0 % is not shown as a cost
    assert pill_style(OptimizationShare("silence_sieve", OptimizationStatus.ACTIVE, -0.004)) == "active"


def test_charts_say_what_they_show_and_why_one_is_empty(qtbot) -> None:
    from studio.ui.charts import TelemetryCharts

    charts = TelemetryCharts()
    qtbot.addWidget(charts)
    plain = TelemetrySample(taken_s=1.0, source="core", stages={"generate": StageTiming(4.0, 5.0, 1, 4.0)},
                            queue_depths={"motion->generate": 1})
    charts.update_from(plain, 25.0)
    assert "n/a here" in charts.cache.title_html() and "no cache" in charts.cache.widget.toolTip()
    assert "n/a here" in charts.kv.title_html() and "n/a here" in charts.gpu.title_html()
    assert "to gen" in charts.queues.title_html() and "n/a" not in charts.stages.title_html()
    charts.update_from(known_sample(), 25.0)  # the audio cache now runs: its chart is no longer marked
    assert "n/a" not in charts.cache.title_html() and charts.cache.widget.toolTip() == ""
    assert charts.cache.data["hit rate"][-1][1] == 75.0


def test_pill_words() -> None:
    assert pill_text(OptimizationShare("kv_cache", OptimizationStatus.UNAVAILABLE, math.nan, "no model")) == \
        "KV cache: n/a"
    assert pill_text(OptimizationShare("pyramidal", OptimizationStatus.ACTIVE, math.nan)) == "pyramidal: —"
    assert pill_text(OptimizationShare("frame_interpolation", OptimizationStatus.INACTIVE)) == "keyframes: off"
    off = OptimizationShare("cuda_graphs", OptimizationStatus.UNAVAILABLE, math.nan,
                            "CUDA graphs: off for a cast of 2 (its warp runs eager)", "CUDA graphs: off for a cast of 2")
    assert pill_text(off) == "CUDA graphs: off for a cast of 2"


def test_a_flag_a_cast_cannot_use_says_so_on_its_pill(window) -> None:
    w, strip, action, bus = window
    line = "CUDA graphs: off for a cast of 2 (the cast's warp runs eager)"
    sample = known_sample()
    shares = sample.compute.shares + (OptimizationShare("cuda_graphs", OptimizationStatus.UNAVAILABLE, math.nan, line,
                                                        "CUDA graphs: off for a cast of 2"),)
    bus.publish(replace(sample, compute=replace(sample.compute, shares=shares)))
    strip.refresh()
    pill = strip.pills[Optimization.CUDA_GRAPHS]
    assert pill.text() == "CUDA graphs: off for a cast of 2" and line in pill.toolTip()
    assert not pill.isEnabled() and pill.property("status") == "unavailable"


def test_leaderboard_panel_says_a_run_was_cut_short_and_what_the_builtin_size_is(qtbot) -> None:
    from studio.ui.leaderboard_panel import COLUMNS, LeaderboardPanel

    panel = LeaderboardPanel("cpu")
    qtbot.addWidget(panel)
    rows = [{"engine": "builtin", "label": "Built-in", "native_px": 0, "status": "measured", "rank": 1,
             "backend": "eager", "precision": "fp32", "ms_per_frame_plain": 92.5, "ms_per_frame_optimized": 80.0,
             "compute_saved": 0.135},
            {"engine": "wav2lip", "label": "Wav2Lip", "native_px": 96, "status": "needs a GPU", "reason": "slow"}]
    panel.show_result({"started": "2026-12-05 02:00:00", "complete": False, "output": "1080p canvas at 30 fps",
                       "rows": rows})
    assert "cut short" in panel.status.text() and "finished ?" not in panel.status.text()
    assert panel.table.item(0, 2).text() == "any" and panel.table.item(1, 2).text() == "96 px"
    # why a row was not measured: said in the row, across the figures' columns, the whole reason in its tooltip
    assert panel.table.item(1, 3).text() == "needs a GPU" and panel.table.item(1, 5).text() == "slow"
    assert panel.table.columnSpan(1, 5) == len(COLUMNS) - 5 and panel.table.item(1, 5).toolTip() == "slow"
    panel.show_result({"complete": True, "finished": "2026-12-05 02:10:00", "rows": rows})
    assert "finished 2026-12-05 02:10:00" in panel.status.text()
    assert panel.table.item(0, 6).text() == "80.00" and panel.table.item(0, 7).text() == "14%"
    # with a measured best set (the flags the engine ran slower with dropped): that figure, and what it left out
    rows[0].update(ms_per_frame_best=70.0, compute_saved_best=0.243, best_optimizations=["audio_cache"])
    panel.show_result({"complete": True, "finished": "2026-12-05 02:10:00", "rows": rows})
    assert panel.table.item(0, 6).text() == "70.00" and panel.table.item(0, 7).text() == "24%"
    assert "audio_cache" in panel.table.item(0, 6).toolTip() and "80.00" in panel.table.item(0, 6).toolTip()
    # the "saved" cell: each flag's share, largest first, and the audio cache; or that the shares were not measured
    assert "not measured for this row" in panel.table.item(0, 7).toolTip()
    rows[0].update(saved_share={"pyramidal": 0.27, "silence_sieve": -0.01, "cuda_graphs": 0.097},
                   audio_cache={"hits": 3, "misses": 5, "encoder_ms_per_call": 8.72})
    panel.show_result({"complete": True, "finished": "2026-12-05 02:10:00", "rows": rows})
    tip = panel.table.item(0, 7).toolTip()
    assert tip.index("pyramidal: +27.0 %") < tip.index("cuda graphs: +9.7 %") < tip.index("silence sieve: -1.0 %")
    assert "3 hits, 5 misses" in tip and "8.7 ms" in tip and "audio_cache" in tip


def test_leaderboard_panel_follows_the_bench_row_by_row_with_the_time_left(qtbot) -> None:
    """The bench's progress line moves the bar and says which run of which engine and the time left; the table is
    re-read from the file the bench rewrites, so a finished row shows at once and the running one says where it is."""
    import json

    from studio.pipeline.telemetry import leaderboard_path
    from studio.ui.leaderboard_panel import LeaderboardPanel

    rows = [{"engine": "builtin", "label": "Built-in", "native_px": 0, "status": "measured", "backend": "eager",
             "precision": "fp32", "ms_per_frame_plain": 92.5, "ms_per_frame_optimized": 80.0},
            {"engine": "wav2lip", "label": "Wav2Lip", "native_px": 96, "status": "measuring", "reason": "",
             "progress": "run 2 of 4"},
            {"engine": "musetalk-1.5", "label": "MuseTalk", "native_px": 256, "status": "waiting",
             "reason": "not measured yet"}]
    leaderboard_path().write_text(json.dumps({"started": "2026-12-07 17:00:00", "complete": False,
                                              "output": "1080p canvas at 30 fps", "rows": rows}))
    panel = LeaderboardPanel("cpu")
    qtbot.addWidget(panel)
    panel.take_output("leaderboard [2/3] Wav2Lip: run 2 of 4, about 75 s left in this engine; 130 s elapsed of a "
                      "300-s budget\n")
    assert (panel.progress.maximum(), panel.progress.value()) == (3, 1)
    text = panel.status.text()
    assert "Engine 2 of 3: Wav2Lip: run 2 of 4" in text and "about 1 min 15 s left for this engine" in text
    assert "2 min 10 s so far, 2 min 50 s of the run's 5 min 00 s budget left" in text
    assert panel.table.item(0, 6).text() == "80.00"  # the finished row, with its figure
    assert panel.table.item(1, 3).text() == "measuring (run 2 of 4)"
    assert panel.table.item(2, 3).text() == "waiting"
