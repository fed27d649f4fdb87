"""The window's microphone mode against the PulseAudio null sink: speech played into the virtual microphone moves the
presenter's mouth (and silence does not), the status bar shows the measured sound-to-pixel latency, and a recording
holds what was heard and shown.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from PySide6.QtCore import QSettings, QTimer
from scipy.io import wavfile

from studio.pipeline.commands import PreviewMode
from studio.pipeline.settings import CoreSettings
from studio.pipeline.telemetry import RuntimeState
from studio.presenter import landmarks as lm
from studio.runtime import AudioOutputMode, StudioSettings
from studio.ui.main_window import MainWindow
from studio.ui.theme import apply_theme

pytestmark = [pytest.mark.qt, pytest.mark.integration]

SIZE = 128
FPS = 25.0
ALSA = Path("/usr/share/sounds/alsa")
CLIPS = ("Front_Center.wav", "Rear_Right.wav")


def _speech_file(folder: Path) -> Path:
    """Two alsa-utils speech clips with a short pause, as one wav (~3 s of a human voice)."""
    parts, rate = [], 0
    for name in CLIPS:
        if not (ALSA / name).is_file():
            pytest.skip("alsa-utils speech clips missing: apt-get install alsa-utils")
        rate, x = wavfile.read(ALSA / name)
        x = x.mean(axis=1) if x.ndim > 1 else x
        parts += [x.astype(np.int16), np.zeros(int(0.2 * rate), np.int16)]
    path = folder / "speech.wav"
    wavfile.write(path, rate, np.concatenate(parts))
    return path


def _mouth_box(anchor) -> tuple[slice, slice]:
    """Rows and columns of the output frame around the lips and the chin below them (where speech shows)."""
    scale = SIZE / anchor.size_px
    pts = anchor.landmarks[list(lm.OUTER_UPPER_LIP + lm.OUTER_LOWER_LIP), :2] * scale
    x0, y0 = pts.min(axis=0)
    x1, y1 = pts.max(axis=0)
    pad = 0.15 * (x1 - x0)
    return slice(int(y0 - pad), int(y1 + 2 * pad) + 1), slice(int(x0 - pad), int(x1 + pad) + 1)


class _FrameLog:
    """Every distinct frame the window's runtime presents, sampled by a 5 ms timer (the test's own eyes)."""

    def __init__(self, window: MainWindow) -> None:
        self.window = window
        self.frames: dict[int, np.ndarray] = {}
        self.timer = QTimer()
        self.timer.timeout.connect(self._poll)
        self.timer.start(5)

    def _poll(self) -> None:
        f = self.window.runtime.latest_frame()
        if f is not None and f.index not in self.frames:
            self.frames[f.index] = f.image.copy()

    def since(self, index: int) -> list[np.ndarray]:
        return [img for k, img in sorted(self.frames.items()) if k > index]

    def last_index(self) -> int:
        return max(self.frames, default=-1)


def _change(frames: list[np.ndarray], box: tuple[slice, slice]) -> float:
    """Mean absolute change of a region from frame to frame (grey levels)."""
    crops = np.stack([f[box].astype(np.float32).mean(axis=2) for f in frames])
    return float(np.abs(np.diff(crops, axis=0)).mean())


def _mouth_motion(frames: list[np.ndarray], box: tuple[slice, slice]) -> float:
    """How much the mouth moves on its own: its region's change from frame to frame less that of the same-sized
    region above it (the nose), which moves with the head's idle sway but not with speech."""
    rows, cols = box
    h = rows.stop - rows.start
    above = slice(max(0, rows.start - h), rows.start), cols
    return _change(frames, box) - _change(frames, above)


@pytest.mark.parametrize("engine", ["pocketsphinx", "neural"])
def test_microphone_mode_follows_the_voice(qtbot, qapp, pulse_sink, play_into_sink, default_anchor,
                                           tmp_path: Path, engine: str) -> None:
    apply_theme(qapp)
    speech = _speech_file(tmp_path)
    settings = StudioSettings(core=CoreSettings(size_px=SIZE, fps=FPS, chunk_frames=2, batch_frames=2,
                                                measure_baseline=True),
                              warm_up_voice=False, default_voice="espeak:en-us", audio_output=AudioOutputMode.NONE)
    w = MainWindow(runtime_settings=settings, settings=QSettings(str(tmp_path / "studio.ini"), QSettings.IniFormat))
    w.resize(1280, 800)
    w.show()
    log = _FrameLog(w)
    try:
        qtbot.waitUntil(lambda: w.anchor_name != "" and w.runtime.latest_frame() is not None, timeout=90_000)
        assert w.mic_panel.mic_combo.isEnabled()  # the sink's monitor is an input device
        w.mic_panel.engine_combo.setCurrentIndex(w.mic_panel.engine_combo.findData(engine))  # the producer's choice in the panel
        assert w.settings.value("audio/engine") == engine or w.mic_panel.engine_combo.currentData() == engine
        w.toggle_mode()  # the M shortcut's action
        qtbot.waitUntil(lambda: w.state == RuntimeState.MICROPHONE, timeout=30_000)
        motion = w.runtime.supervisor.motion  # the microphone mode's motion source in the core
        assert type(motion).__name__ == "MicMotion" and motion.engine.value == engine
        assert w.preview.mic_button.isChecked() and not w.preview.notice.isVisible()
        w.record_panel.folder_edit.setText(str(tmp_path))
        w.toggle_recording()
        qtbot.waitUntil(lambda: w.recording_path is not None, timeout=10_000)

        # Silence first: the presenter idles with closed lips.
        start = log.last_index()
        qtbot.waitUntil(lambda: len(log.since(start)) >= 25, timeout=30_000)
        silent = log.since(start)
        # Then a human voice into the virtual microphone.
        start = log.last_index()
        player = play_into_sink(speech)
        qtbot.waitUntil(lambda: player.poll() is not None, timeout=30_000)
        assert player.returncode == 0
        spoken = log.since(start)
        qtbot.waitUntil(lambda: "ms" in w.status_latency.text(), timeout=10_000)
        latency_text = w.status_latency.text()
        latency_ms = w.telemetry.latency_ms_median

        w.toggle_recording()
        qtbot.waitUntil(lambda: w.last_recording is not None, timeout=30_000)
        w.toggle_mode()
        qtbot.waitUntil(lambda: w.state == RuntimeState.IDLE, timeout=30_000)
    finally:
        log.timer.stop()
        w.close()
    assert not w.bridge.running

    box = _mouth_box(default_anchor)
    # The mouth is judged on the distinct frames the studio made while the voice played: on a quiet machine about 75
    # (25 fps for 3 s), on a loaded one as few as 5, since a live source skips slots when the loop falls behind.
    assert len(spoken) >= 4
    still, moving = _mouth_motion(silent, box), _mouth_motion(spoken, box)
    assert still < 0.3, still  # in silence the lips rest: they move no more than the head carries them
    assert moving > still + 0.6, (still, moving)  # a voice moves them on their own

    assert latency_text.startswith("sound→pixel") and f"{latency_ms:.0f} ms" in latency_text
    assert 0 < latency_ms < 5000  # measured, plausible; its size is a benchmark figure, not a test
    assert not w.status_latency.isVisible() and w.mode == PreviewMode.SCRIPT  # back in script mode

    path = w.last_recording
    with av.open(str(path)) as c:
        n_frames = sum(1 for _ in c.decode(video=0))
    with av.open(str(path)) as c:
        rate = c.streams.audio[0].rate
        audio = np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(audio=0)])
    assert n_frames >= 3 * FPS  # silence + speech
    assert abs(len(audio) / rate - n_frames / FPS) <= 1024 / rate + 1 / FPS  # heard and shown: the same length
    assert np.sqrt(np.mean(audio**2)) > 0.01  # the voice is in the file
