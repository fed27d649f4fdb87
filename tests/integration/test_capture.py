"""Microphone capture through a real sound server (the PulseAudio null sink) and without one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from math import gcd
from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile
from scipy.signal import correlate, resample_poly

from studio.audio.capture import CaptureStatus, MicCapture, StreamingResampler, list_input_devices
from studio.audio.settings import CaptureSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
CLIP = Path("/usr/share/sounds/alsa/Front_Center.wav")
RATE = 16000


def _clip_16k() -> np.ndarray:
    rate, x = wavfile.read(CLIP)
    x = x.astype(np.float32) / 32768.0
    g = gcd(rate, RATE)
    return resample_poly(x, RATE // g, rate // g).astype(np.float32)


def _wait_for(predicate: Callable[[], bool], limit_s: float) -> bool:
    """Poll until ``predicate`` holds (a bound on waiting, not a timing assertion)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.mark.parametrize("in_rate_hz", [48000, 44100, 22050, 8000, 16000])
def test_streaming_resampler_matches_resample_poly(in_rate_hz: int) -> None:
    x = np.random.default_rng(1).standard_normal(in_rate_hz).astype(np.float32) * 0.3
    g = gcd(in_rate_hz, RATE)
    ref = resample_poly(x, RATE // g, in_rate_hz // g)
    r = StreamingResampler(in_rate_hz, RATE)
    block = in_rate_hz // 100 + 7  # odd block sizes on purpose
    y = np.concatenate([r.process(x[i : i + block]) for i in range(0, len(x), block)])
    assert len(ref) - 20 <= len(y) <= len(ref)
    np.testing.assert_allclose(y, ref[: len(y)], atol=1e-5)


@pytest.mark.integration
def test_captured_audio_matches_the_played_clip(pulse_sink: Path, play_into_sink) -> None:
    assert any(d.name in ("pulse", "default") for d in list_input_devices())
    cap = MicCapture(CaptureSettings(ring_seconds=10.0, ring_rate_hz=RATE))
    cap.start()
    try:
        assert cap.status is CaptureStatus.RUNNING
        assert _wait_for(lambda: cap.ring.total_written > 0, 10.0), "the stream never delivered audio"
        mark = cap.ring.total_written
        play_into_sink(CLIP).wait(timeout=20)
        end = cap.ring.total_written
        assert _wait_for(lambda: cap.ring.total_written >= end + RATE // 2, 5.0)
        got = cap.ring.read(mark, cap.ring.total_written - mark)
    finally:
        cap.stop()
    assert cap.status is CaptureStatus.STOPPED
    assert got is not None
    ref = _clip_16k()
    assert len(got) > len(ref)
    xc = correlate(got, ref, mode="valid")  # lag of the clip inside the recording
    lag = int(np.argmax(np.abs(xc)))
    seg = got[lag : lag + len(ref)]
    r = float(np.dot(seg, ref) / (np.linalg.norm(seg) * np.linalg.norm(ref) + 1e-12))
    assert r > 0.9, f"correlation {r:.3f} at lag {lag}"
    assert cap.stats().callbacks > 0


@pytest.mark.integration
def test_no_sound_server_gives_a_clear_error(tmp_path: Path) -> None:
    """In a fresh process with no reachable server: no devices, start() raises AudioDeviceError, no crash."""
    code = (
        "import json\n"
        "from studio.audio.capture import MicCapture, list_input_devices\n"
        "from studio.errors import AudioDeviceError\n"
        "out = {'devices': [d.name for d in list_input_devices()]}\n"
        "cap = MicCapture()\n"
        "try:\n"
        "    cap.start()\n"
        "    out['error'] = None\n"
        "    cap.stop()\n"
        "except AudioDeviceError as exc:\n"
        "    out['error'] = str(exc)\n"
        "out['status'] = cap.status.name\n"
        "print('RESULT' + json.dumps(out))\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_RUNTIME_DIR": str(tmp_path),
        "PULSE_SERVER": f"unix:{tmp_path}/no-such-socket",
        "PYTHONPATH": str(REPO_ROOT),
    }
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.split("RESULT", 1)[1])
    if out["devices"]:
        pytest.skip(f"this machine has audio hardware without a server: {out['devices']}")
    assert out["error"] and out["error"].startswith("No microphone found")
    assert out["status"] == "NO_DEVICE"


@pytest.mark.integration
def test_capture_survives_the_sound_server_going_away(pulse_sink: Path, restart_pulse_sink) -> None:
    """Kill the server mid-stream: DEVICE_LOST with a message; restart it: capture resumes by itself."""
    cap = MicCapture(CaptureSettings(retry_interval_ms=300.0))
    cap.start()
    try:
        assert _wait_for(lambda: cap.ring.total_written > 0, 10.0)
        subprocess.run(["pulseaudio", "--kill"], check=True, timeout=10)
        assert _wait_for(lambda: cap.status is CaptureStatus.DEVICE_LOST, 10.0)
        assert "retrying" in cap.last_error
        restart_pulse_sink()
        assert _wait_for(lambda: cap.status is CaptureStatus.RUNNING, 15.0), cap.last_error
        n = cap.ring.total_written
        assert _wait_for(lambda: cap.ring.total_written > n + RATE // 10, 10.0), "no audio after the device came back"
        stats = cap.stats()
        assert stats.device_losses == 1 and stats.reopen_attempts >= 1
    finally:
        cap.stop()
