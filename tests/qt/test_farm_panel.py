"""The FARM tab: the open rundown rendered on a local Ray cluster from a worker thread, progress shown while the
window keeps handling events; an unreachable cluster is one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer

from studio.encode import probe_mp4
from studio.pipeline.rundown import Segment
from studio.pipeline.settings import CoreSettings
from studio.ui.farm_panel import FarmPanel, OpenRundown

pytestmark = pytest.mark.qt


def _panel(qtbot, tmp_path, segments):
    p = FarmPanel(lambda: OpenRundown(segments), lambda: CoreSettings(size_px=64), lambda: None, tmp_path / "farm")
    qtbot.addWidget(p)
    return p


def test_the_open_rundown_renders_on_the_farm_while_the_window_stays_live(qtbot, tmp_path) -> None:
    panel = _panel(qtbot, tmp_path, [Segment("Opening", "Good evening."), Segment("Close", "Good night.")])
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(panel.running))
    timer.start(50)
    with qtbot.waitSignal(panel.farm_finished, timeout=300_000):
        panel.button.click()
        assert panel.running and panel.button.text() == "Cancel"
    timer.stop()
    assert any(ticks), "the event loop stood still while the farm ran"
    assert panel.bar.value() == panel.bar.maximum() == 2
    assert "2 made" in panel.status.text()
    assert panel.nodes.count() >= 1
    bulletin = tmp_path / "farm" / "studio_rundown.mp4"
    assert probe_mp4(bulletin).audio_sample_rate_hz == 48000
    report = json.loads((tmp_path / "farm" / "studio_rundown.json").read_text())
    assert [s["status"] for s in report["segments"]] == ["done", "done"]


def test_an_unreachable_cluster_is_one_line(qtbot, tmp_path) -> None:
    panel = _panel(qtbot, tmp_path, [Segment("Opening", "Good evening.")])
    panel.remote.setChecked(True)
    panel.address.setText("127.0.0.1:9")
    with qtbot.waitSignal(panel.farm_finished, timeout=60_000):
        panel.button.click()
    assert panel.status.text().startswith("Cannot reach the Ray cluster at 127.0.0.1:9")
    assert "\n" not in panel.status.text()
    assert not panel.running


def test_cancel_stops_the_run_and_says_how_to_resume(qtbot, tmp_path) -> None:
    panel = _panel(qtbot, tmp_path, [Segment("Opening", "Good evening."), Segment("Close", "Good night.")])
    panel.button.click()
    worker = panel.worker
    with qtbot.waitSignal(worker.progress, timeout=300_000):
        pass
    with qtbot.waitSignal(panel.farm_finished, timeout=120_000):
        panel.button.click()
        assert not panel.button.isEnabled()
    assert "cancelled" in panel.status.text() and "resume" in panel.status.text()
    assert panel.button.isEnabled() and not panel.running
    assert not (tmp_path / "farm" / "studio_rundown.mp4").exists()


def test_the_open_rundown_goes_to_the_farm_with_its_cast_graphics_and_layout(qtbot, tmp_path, hopper_path) -> None:
    from studio.contracts import CastLayout
    from studio.farm.plan import plan_rundowns
    from studio.graphics.look import Graphics
    from studio.pipeline.cast import Member

    cast = (Member("Anna", voice="espeak:en-us"), Member("Grace", portrait=hopper_path, voice="piper:joe"))
    segments = [Segment("Opening", "Good evening.", anchor="Anna"),
                Segment("Weather", "Rain.", anchor="Grace", graphics=Graphics(headline="Rain"))]
    panel = FarmPanel(lambda: OpenRundown(segments, Graphics(ticker=("Markets up",)), cast, CastLayout.CUT),
                      lambda: CoreSettings(size_px=64), lambda: None, tmp_path / "farm")
    qtbot.addWidget(panel)
    settings, [path] = panel._job()
    assert settings.cast_layout is CastLayout.CUT
    data = json.loads(path.read_text())
    assert data["cast"]["Grace"] == {"portrait": str(hopper_path.resolve()), "voice": "piper:joe"}
    assert data["graphics"]["ticker"] == ["Markets up"]
    # the farm plans it as the studio shows it: the cast on every segment, each with its speaker
    plan = plan_rundowns([path], settings.core, layout=settings.cast_layout)
    assert plan.rejected == ()
    assert [(j.speaker, j.voice, [m.name for m in j.cast]) for j in plan.jobs] == [
        ("Anna", "espeak:en-us", ["Anna", "Grace"]), ("Grace", "piper:joe", ["Anna", "Grace"])]
    assert plan.jobs[1].graphics.headline == "Rain" and plan.jobs[0].layout is CastLayout.CUT


def test_the_farm_renders_on_the_studio_set(qtbot, tmp_path, monkeypatch) -> None:
    """The studio's set (a picture the producer chose) goes with the job, its path absolute for every node, and each
    segment's look keeps it beside the rundown's graphics."""
    import numpy as np
    from PIL import Image

    from studio.farm.plan import plan_rundowns
    from studio.graphics.look import CanvasStyle, Graphics

    monkeypatch.chdir(tmp_path)
    Image.fromarray(np.full((90, 160, 3), 40, np.uint8)).save(tmp_path / "set.png")
    segments = [Segment("Opening", "Good evening.")]
    panel = FarmPanel(lambda: OpenRundown(segments, Graphics(ticker=("Markets up",))),
                      lambda: CoreSettings(size_px=64), lambda: None, tmp_path / "farm",
                      style_of=lambda: CanvasStyle(background_image=Path("set.png")))
    qtbot.addWidget(panel)
    settings, [path] = panel._job()
    assert settings.canvas_style.background_image == tmp_path / "set.png"
    assert settings.canvas_style.background_image.is_absolute()
    plan = plan_rundowns([path], settings.core, layout=settings.cast_layout)
    style = plan.jobs[0].canvas_style(settings.canvas_style)
    assert style.background_image == tmp_path / "set.png" and style.graphics.ticker == ("Markets up",)
    # without a chosen set, the plain look as before
    plain = FarmPanel(lambda: OpenRundown(segments), lambda: CoreSettings(size_px=64), lambda: None, tmp_path / "f2")
    qtbot.addWidget(plain)
    assert plain._job()[0].canvas_style is None
