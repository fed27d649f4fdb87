"""The studio window driven offscreen: anchor, go live, record, a bad anchor, no sound device.

One window is shared by the tests of this module (building a renderer costs seconds on 2 cores); its runtime runs
in a QThread that is quit() and wait()ed when the module ends. eSpeak voices keep speech fast.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from PySide6.QtCore import QSettings, Qt

from studio.pipeline.commands import PreviewMode
from studio.pipeline.rundown import Segment
from studio.pipeline.settings import CoreSettings
from studio.pipeline.telemetry import ClockSource, RuntimeState
from studio.runtime import StudioSettings
from studio.ui.main_window import MainWindow
from studio.ui.theme import apply_theme

pytestmark = pytest.mark.qt

FPS = 25.0
SEGMENTS = [
    Segment("One", "Good evening. Here is the news, read by a test voice, slowly and clearly.", "espeak:en-us"),
    Segment("Two", "The weather stays fine all week, with light winds and clear skies.", "espeak:en-us"),
]


def _has_audio_output() -> bool:
    try:
        import sounddevice as sd

        return any(d["max_output_channels"] > 0 for d in sd.query_devices())
    except Exception:
        return False


@pytest.fixture(scope="module")
def window(qapp, tmp_path_factory: pytest.TempPathFactory):
    apply_theme(qapp)
    ini = tmp_path_factory.mktemp("settings") / "studio.ini"
    settings = StudioSettings(core=CoreSettings(size_px=128, fps=FPS, chunk_frames=2, batch_frames=2,
                                                measure_baseline=True),
                              warm_up_voice=False, default_voice="espeak:en-us")
    w = MainWindow(runtime_settings=settings, settings=QSettings(str(ini), QSettings.IniFormat))
    w.resize(1280, 800)
    w.show()
    yield w
    w.close()
    assert not w.bridge.running  # the runtime's QThread was quit() and wait()ed


def _wait_for_anchor(qtbot, w: MainWindow) -> None:
    qtbot.waitUntil(lambda: w.anchor_name != "" and w.runtime.latest_frame() is not None, timeout=90_000)


def _frame_index(w: MainWindow) -> int:
    f = w.runtime.latest_frame()
    return -1 if f is None else f.index


def test_window_shows_the_anchor(qtbot, window: MainWindow) -> None:
    _wait_for_anchor(qtbot, window)
    assert window.windowTitle() == f"NewsStudio — {window.anchor_name}"
    first = _frame_index(window)
    qtbot.waitUntil(lambda: _frame_index(window) > first + 3, timeout=20_000)  # idling: frames keep coming
    image = window.preview.view.grab().toImage()
    assert image.width() > 0


def test_go_live_record_3_s_and_stop(qtbot, window: MainWindow, tmp_path: Path) -> None:
    _wait_for_anchor(qtbot, window)
    window.rundown.set_segments(SEGMENTS)
    window.record_panel.folder_edit.setText(str(tmp_path))
    window.rundown.list.setCurrentRow(0)
    window.rundown.toggle_live()
    qtbot.waitUntil(lambda: window.state == RuntimeState.LIVE, timeout=30_000)
    qtbot.waitUntil(lambda: window.telemetry is not None and window.telemetry.segment_index == 0, timeout=30_000)
    window.toggle_recording()
    qtbot.waitUntil(lambda: window.recording_path is not None, timeout=10_000)
    qtbot.waitUntil(lambda: window.telemetry.recording_s >= 3.0, timeout=60_000)
    window.toggle_recording()
    qtbot.waitUntil(lambda: window.last_recording is not None, timeout=30_000)
    qtbot.waitUntil(lambda: window.teleprompter.current_word >= 0, timeout=30_000)
    window.rundown.toggle_live()  # stop
    qtbot.waitUntil(lambda: window.state == RuntimeState.IDLE, timeout=10_000)

    path = window.last_recording
    assert path.parent == tmp_path and path.suffix == ".mp4"
    assert not list(tmp_path.glob(".*.part"))
    with av.open(str(path)) as c:
        v, a = c.streams.video[0], c.streams.audio[0]
        n_frames = sum(1 for _ in c.decode(video=0))
    with av.open(str(path)) as c:
        audio = np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(audio=0)])
        rate = c.streams.audio[0].rate
    video_s = n_frames / FPS
    audio_s = len(audio) / rate
    assert v.width == 128 and v.height == 128
    assert 3.0 <= video_s <= 6.0
    assert abs(audio_s - video_s) <= 1024 / rate + 1 / FPS  # same length, within one AAC frame and one video frame
    assert np.sqrt(np.mean(audio**2)) > 0.01  # the speech is in the file, not silence


def test_bad_anchor_keeps_the_previous_one(qtbot, window: MainWindow, tmp_path: Path) -> None:
    _wait_for_anchor(qtbot, window)
    name = window.anchor_name
    bad = tmp_path / "not-a-photo.png"
    bad.write_text("this is not an image")
    window.load_anchor(bad)
    qtbot.waitUntil(lambda: window.anchor_panel.error.isVisible(), timeout=30_000)
    assert "not-a-photo.png" in window.anchor_panel.error.text() and name in window.anchor_panel.error.text()
    assert window.anchor_name == name and window.windowTitle().endswith(name)
    before = _frame_index(window)
    qtbot.waitUntil(lambda: _frame_index(window) > before + 3, timeout=20_000)  # the old anchor keeps going


def test_no_sound_device_runs_on_its_own_clock(qtbot, window: MainWindow) -> None:
    if _has_audio_output():
        pytest.skip("this machine has an audio output")
    _wait_for_anchor(qtbot, window)
    assert window.runtime.telemetry().clock_source == ClockSource.MONOTONIC
    assert "No audio output" in window.status_audio.text()
    assert "No audio output" in window.preview.source_label.text()
    t0 = window.runtime.clock_s()
    qtbot.waitUntil(lambda: window.runtime.clock_s() > t0 + 0.5, timeout=5_000)


def test_space_toggles_live(qtbot, window: MainWindow) -> None:
    _wait_for_anchor(qtbot, window)
    window.rundown.set_segments(SEGMENTS[1:])
    window.rundown.list.setFocus()
    window.activateWindow()
    qtbot.keyClick(window.rundown.list, Qt.Key_Space)
    qtbot.waitUntil(lambda: window.state in (RuntimeState.PREPARING, RuntimeState.LIVE), timeout=10_000)
    qtbot.keyClick(window.rundown.list, Qt.Key_Space)
    qtbot.waitUntil(lambda: window.state == RuntimeState.IDLE, timeout=10_000)


def test_microphone_mode_without_an_input_device_says_so_and_keeps_idling(qtbot, window: MainWindow) -> None:
    from studio.audio.capture import list_input_devices

    if list_input_devices():
        pytest.skip("this machine has an input device (see tests/qt/test_mic_mode.py)")
    _wait_for_anchor(qtbot, window)
    window.activateWindow()
    qtbot.keyClick(window, Qt.Key_M)  # the mode shortcut
    assert window.preview.mic_button.isChecked()
    qtbot.waitUntil(lambda: "No input device" in window.preview.notice.text(), timeout=10_000)
    assert window.preview.notice.isVisible()
    assert window.state == RuntimeState.IDLE  # the presenter idles on
    before = _frame_index(window)
    qtbot.waitUntil(lambda: _frame_index(window) > before + 3, timeout=20_000)
    qtbot.keyClick(window, Qt.Key_M)
    assert window.preview.script_button.isChecked() and not window.preview.notice.isVisible()


def test_the_window_freezes_the_start_up_heap_then_what_the_presenter_loaded(qapp, qtbot, tmp_path) -> None:
    import gc

    gc.unfreeze()
    settings = StudioSettings(core=CoreSettings(size_px=128, fps=FPS, chunk_frames=2, batch_frames=2),
                              warm_up_voice=False, default_voice="espeak:en-us")
    w = MainWindow(runtime_settings=settings, settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    try:
        at_start = gc.get_freeze_count()
        assert at_start > 10_000  # modules and widgets: a full collection no longer walks them
        _wait_for_anchor(qtbot, w)
        assert w.heap_settled
        qtbot.waitUntil(lambda: gc.get_freeze_count() > at_start, timeout=10_000)
    finally:
        w.close()


def test_a_new_frame_is_shown_on_the_runtimes_wake_up_not_at_the_next_tick(window, qtbot) -> None:
    """With the window's timer stopped, the frame the runtime presents still reaches the preview: its present
    thread's wake-up is a queued signal to the window."""
    from studio.ui.main_window import TICK_MS

    w = window
    w.timer.stop()
    try:
        qtbot.waitUntil(lambda: w.preview.view._image is not None, timeout=60000)
        first = w._last_frame_index
        qtbot.waitUntil(lambda: w._last_frame_index != first, timeout=10000)  # and the next ones, tick-less
    finally:
        w.timer.start(TICK_MS)


def test_the_keyframes_pill_and_the_keyframe_field_agree(qtbot, window: MainWindow) -> None:
    from studio.pipeline.settings import Optimization

    window._toggle_optimization(Optimization.FRAME_INTERPOLATION, False)
    assert "generated per second" not in window.format_panel.keys.currentText()
    window._toggle_optimization(Optimization.FRAME_INTERPOLATION, True)
    field = window.format_panel.keys
    assert field.currentData() == 1 or "generated per second" in field.currentText()


def test_an_interview_without_an_input_device_says_so_and_keeps_idling(qtbot, window: MainWindow) -> None:
    """The microphone panel's interview box asks for the interview through the runtime's command table; with no
    microphone the preview says in one line that the guest needs one, and the box is unticked with the script."""
    from studio.audio.capture import list_input_devices

    if list_input_devices():
        pytest.skip("this machine has an input device (see tests/unit/test_interview_studio.py)")
    _wait_for_anchor(qtbot, window)
    window.mic_panel.interview_box.setChecked(True)
    assert window.mode == PreviewMode.INTERVIEW and window.preview.mic_button.isChecked()
    qtbot.waitUntil(lambda: "guest needs a microphone" in window.preview.notice.text(), timeout=10_000)
    assert "\n" not in window.preview.notice.text()
    assert window.state == RuntimeState.IDLE  # the presenter idles on
    window.preview.script_button.click()
    assert window.mode == PreviewMode.SCRIPT and not window.mic_panel.interview_box.isChecked()
