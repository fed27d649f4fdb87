"""The live frame clock (due frames, drops, silence on stalls, latency) and the recorder's A/V alignment."""

from __future__ import annotations

import time
from pathlib import Path

import av
import numpy as np
import pytest

from studio.audio.capture import CaptureStatus
from studio.audio.ringbuffer import AudioRing
from studio.pipeline.live import LiveRecorder, LiveSession, LiveSettings

RATE = 16000


class FakeCapture:
    """Stands in for MicCapture: the test writes the 'microphone' audio into the ring itself."""

    def __init__(self) -> None:
        self.ring = AudioRing(RATE * 10, RATE)
        self.status = CaptureStatus.STOPPED
        self.last_error = ""
        self.device = None

    def start(self) -> None:
        self.status = CaptureStatus.RUNNING

    def stop(self) -> None:
        self.status = CaptureStatus.STOPPED


class FakePresenter:
    """Stands in for the renderer: a tiny frame whose grey level is the jaw opening."""

    def __init__(self) -> None:
        self.rendered: list[np.ndarray] = []

    def render_batch(self, coeffs: np.ndarray) -> np.ndarray:
        self.rendered.append(coeffs.copy())
        return np.zeros((len(coeffs), 8, 8, 3), np.uint8)


def _session(**settings) -> tuple[LiveSession, FakeCapture, FakePresenter]:
    cap, pres = FakeCapture(), FakePresenter()
    s = LiveSession(settings=LiveSettings(size_px=8, **settings), capture=cap, presenter=pres)  # type: ignore[arg-type]
    s.start()
    return s, cap, pres


def test_only_the_newest_due_frame_is_rendered_and_the_rest_are_dropped() -> None:
    from studio.audio.settings import AudioEngine

    s, cap, pres = _session(audio_engine=AudioEngine.POCKETSPHINX, stall_ms=60_000.0)  # the 40 ms default lead
    assert s.step() is None  # no audio yet: nothing is due
    cap.ring.write(np.zeros(RATE // 2, np.float32))  # 0.5 s at once, as after a hiccup
    f = s.step()
    assert f is not None
    lead = int(0.040 * RATE)
    assert f.index == (RATE // 2 - lead) * 25 // RATE  # the newest frame whose audio (+ lead) is in
    assert s.stats().frames_dropped == f.index and s.stats().frames_shown == 1
    assert s.step() is None  # the next one is not due yet
    cap.ring.write(np.zeros(RATE // 25, np.float32))  # one more frame period of audio
    g = s.step()
    assert g is not None and g.index == f.index + 1
    assert s.stats().frames_dropped == f.index and len(pres.rendered) == 2


def test_latency_runs_from_the_arrival_of_the_shown_sample() -> None:
    s, cap, _ = _session(stall_ms=60_000.0)
    arrived = time.monotonic_ns() - 100_000_000  # the audio entered the ring 100 ms ago
    cap.ring.write(np.zeros(RATE // 5, np.float32), arrival_ns=arrived)
    f = s.step()
    assert f is not None and f.latency_ms is not None
    assert f.latency_ms >= 100.0
    assert s.stats().latency_ms_median == f.latency_ms


def test_a_silent_microphone_lets_the_clock_run_on_as_silence() -> None:
    s, cap, _ = _session(stall_ms=20.0)
    time.sleep(0.2)  # no audio at all (a device lost, or a stream not delivering yet)
    f = s.step()
    assert f is not None and f.latency_ms is None and not f.speaking
    assert s.stats().silence_inserted_s > 0.1
    cap.ring.write(np.zeros(RATE // 5, np.float32))  # audio comes back: its frames follow the silence
    g = s.step()
    assert g is not None and g.index > f.index and g.latency_ms is not None


@pytest.mark.parametrize("missing", [(), (10, 11, 12)])
def test_recorder_keeps_the_click_and_the_flash_on_the_same_frame(tmp_path: Path, missing: tuple[int, ...]) -> None:
    """Synthetic sources: a click at 1.0 s of session audio and a white frame in slot 25 must coincide."""
    fps, n = 25.0, 50
    rec = LiveRecorder(tmp_path / "sync.mp4", 64, fps, RATE, max_queued_frames=n)
    audio = np.zeros(int(n / fps * RATE) + 777, np.float32)  # more audio than frames: trimmed to the video
    audio[RATE : RATE + 80] = 0.9
    for i in range(0, audio.size, 160):
        rec.add_audio(audio[i : i + 160])
    for k in range(n):
        if k in missing:
            continue
        rec.add_frame(k, np.full((64, 64, 3), 255 if k == 25 else 0, np.uint8))
    path = rec.close()
    assert rec.frames_repeated == len(missing)
    with av.open(str(path)) as c:
        luma = [f.to_ndarray(format="gray").mean() for f in c.decode(c.streams.video[0])]
    with av.open(str(path)) as c:
        res = av.AudioResampler(format="flt", layout="mono", rate=RATE)
        got = np.concatenate([o.to_ndarray().reshape(-1) for f in c.decode(c.streams.audio[0])
                              for o in res.resample(f)])
    assert len(luma) == n
    assert int(np.argmax(luma)) == 25
    click_frame = int(np.argmax(np.abs(got))) / RATE * fps
    assert abs(click_frame - 25) < 0.25, click_frame
    assert abs(len(got) - n / fps * RATE) < 1100  # equal track lengths (AAC frames of 1024)


def _speech_16k() -> np.ndarray:
    from math import gcd

    from scipy.io import wavfile
    from scipy.signal import resample_poly

    clip = Path("/usr/share/sounds/alsa/Front_Center.wav")
    if not clip.is_file():
        pytest.skip("alsa-utils speech clip missing: apt-get install alsa-utils")
    rate, x = wavfile.read(clip)
    g = gcd(rate, RATE)
    return resample_poly(x.astype(np.float32) / 32768.0, RATE // g, rate // g).astype(np.float32)


@pytest.mark.parametrize("gain", [0.0, 1.0, 20.0])  # silent, normal, hard-clipped input
def test_silent_normal_and_clipped_input_give_sane_mouths(gain: float) -> None:
    from studio.presenter.coeffs import Coeff

    s, cap, pres = _session(stall_ms=60_000.0)
    audio = np.clip(_speech_16k() * gain, -1.0, 1.0)
    jaws = []
    for i in range(0, audio.size, 160):  # 10 ms blocks, stepping like the live loop
        cap.ring.write(audio[i : i + 160])
        f = s.step()
        if f is not None:
            jaws.append(float(pres.rendered[-1][0, Coeff.JAW_OPEN]))
    jaw = np.array(jaws)
    assert len(jaw) > 20 and np.isfinite(np.concatenate(pres.rendered)).all()
    assert ((jaw >= 0) & (jaw <= 1)).all()
    if gain == 0.0:
        assert jaw.max() == 0.0  # lips closed in silence
        assert s.stats().sieve_frames_skipped == s.stats().sieve_frames_seen  # no recognition work at all
    else:
        assert jaw.max() > 0.2  # the mouth opens for speech, clipped or not


def test_neural_engine_waits_for_its_lead_and_falls_back_when_its_weights_are_missing(monkeypatch) -> None:
    from studio.audio.settings import AudioEngine
    from studio.errors import ModelLoadError

    s, cap, _ = _session(audio_engine=AudioEngine.NEURAL, stall_ms=60_000.0)
    assert s.audio_engine is AudioEngine.NEURAL and s.engine_note == ""
    cap.ring.write(np.zeros(RATE // 2, np.float32))
    f = s.step()
    lead = int(round(s.motion.min_lead_s * RATE))
    assert f is not None and f.index == (RATE // 2 - lead) * 25 // RATE  # not the 40 ms default lead
    assert s.stats().audio_engine == "neural" and s.stats().frames_missing == 0
    assert s.motion._worker is not None  # the model runs on its own thread while the session runs
    s.stop()
    assert s.motion._worker is None

    def no_weights():
        raise ModelLoadError("Audio-to-motion weights not found.")

    monkeypatch.setattr("studio.neural.mic.default_engine", no_weights)
    s2, _, _ = _session(audio_engine=AudioEngine.NEURAL)
    assert s2.audio_engine is AudioEngine.POCKETSPHINX
    assert "weights not found" in s2.engine_note and "pocketsphinx" in s2.engine_note
