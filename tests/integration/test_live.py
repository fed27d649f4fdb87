"""`python main.py live` against the PulseAudio null sink: speech in, a lip-synced and aligned MP4 out.

Each test runs the real command in a subprocess (the way a kiosk or CI runs it) while this process plays human speech
(the alsa-utils clips) into the virtual microphone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from math import gcd
from pathlib import Path

import av
import numpy as np
import pytest
from scipy.io import wavfile
from scipy.signal import correlate, resample_poly

REPO_ROOT = Path(__file__).resolve().parents[2]
ALSA = Path("/usr/share/sounds/alsa")
CLIPS = ("Front_Center.wav", "Front_Left.wav", "Rear_Right.wav", "Side_Left.wav")
RATE = 16000


def _speech_file(folder: Path) -> tuple[Path, np.ndarray, int]:
    """Several alsa-utils speech clips with 0.3 s pauses, as one wav; returns (path, samples -1..1, rate)."""
    parts, rate = [], 0
    for name in CLIPS:
        if not (ALSA / name).is_file():
            pytest.skip("alsa-utils speech clips missing: apt-get install alsa-utils")
        rate, x = wavfile.read(ALSA / name)
        x = x.astype(np.float32) / 32768.0
        x = x.mean(axis=1) if x.ndim > 1 else x
        parts += [x, np.zeros(int(0.3 * rate), np.float32)]
    speech = np.concatenate(parts)
    path = folder / "speech.wav"
    wavfile.write(path, rate, (speech * 32767).astype(np.int16))
    return path, speech, rate


def _start_live(out: Path, seconds: float, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `main.py live` and wait until it listens (bounded wait; not a timing assertion)."""
    proc = subprocess.Popen(
        [sys.executable, "main.py", "live", "--seconds", str(seconds), "--out", str(out), "--device", "cpu"],
        cwd=REPO_ROOT, env=env or dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("live: listening"):
            return proc
    proc.kill()
    out_text, err_text = proc.communicate()
    pytest.fail("live never started listening:\n" + "".join(lines) + err_text[-3000:])


def _decode_audio(path: Path) -> np.ndarray:
    with av.open(str(path)) as c:
        stream = c.streams.audio[0]
        res = av.AudioResampler(format="flt", layout="mono", rate=RATE)
        chunks = [o.to_ndarray().reshape(-1) for f in c.decode(stream) for o in res.resample(f)]
        chunks += [o.to_ndarray().reshape(-1) for o in res.resample(None)]
    return np.concatenate(chunks)


def _count_video_frames(path: Path) -> int:
    with av.open(str(path)) as c:
        return sum(1 for _ in c.decode(c.streams.video[0]))


@pytest.mark.integration
def test_live_speech_gives_an_aligned_lip_synced_mp4(pulse_sink: Path, play_into_sink, tmp_path: Path) -> None:
    from studio.bench.lipsync import measure_lipsync

    wav, speech, rate = _speech_file(tmp_path)
    out = tmp_path / "live.mp4"
    seconds = len(speech) / rate + 3.0
    proc = _start_live(out, seconds)
    time.sleep(0.5)
    play_into_sink(wav).wait(timeout=60)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    summary = [line for line in stdout.splitlines() if line.startswith("live: ")]
    assert summary and "latency median" in summary[-1], stdout
    print(summary[-1])

    # What was heard: the played file, inside the recording.
    got = _decode_audio(out)
    g = gcd(rate, RATE)
    ref = resample_poly(speech, RATE // g, rate // g).astype(np.float32)
    assert len(got) > len(ref)
    xc = correlate(got, ref, mode="valid")
    lag = int(np.argmax(np.abs(xc)))
    seg = got[lag : lag + len(ref)]
    r = float(np.dot(seg, ref) / (np.linalg.norm(seg) * np.linalg.norm(ref) + 1e-12))
    assert r > 0.9, f"audio correlation {r:.3f} at {lag / RATE:.2f} s"

    # What was shown: the mouth follows that audio, in sync, with a face in every frame.
    report = measure_lipsync(out)
    print(f"lip sync: corr {report.best_corr} at lag {report.best_lag_frames} frames, "
          f"{report.n_frames} frames, {report.n_frames_no_face} without a face")
    assert report.n_frames_no_face == 0
    assert report.best_corr is not None and report.best_corr >= 0.4, report.corr_by_lag
    assert report.best_lag_frames is not None and abs(report.best_lag_frames) <= 3, report.corr_by_lag


@pytest.mark.integration
def test_live_survives_the_sound_server_dying(pulse_sink: Path, restart_pulse_sink, play_into_sink,
                                              tmp_path: Path) -> None:
    """The server dies mid-run: a status line, the presenter idles on, and the file is finalized and playable."""
    out = tmp_path / "lost.mp4"
    seconds = 6.0
    proc = _start_live(out, seconds)
    try:
        play_into_sink(ALSA / CLIPS[0])
        time.sleep(1.0)
        subprocess.run(["pulseaudio", "--kill"], env=dict(os.environ), check=True, timeout=10)
        time.sleep(1.5)
    finally:
        restart_pulse_sink()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    assert "stopped delivering audio" in stderr, stderr[-3000:]
    assert "Traceback" not in stderr
    assert out.is_file()
    n_frames = _count_video_frames(out)  # decodes the whole file: it is playable
    audio_s = len(_decode_audio(out)) / RATE
    # The clock ran on through the outage: the video covers the run, and the audio exactly as much.
    assert n_frames >= 0.8 * seconds * 25, n_frames
    assert abs(audio_s - n_frames / 25.0) < 0.1, (audio_s, n_frames)


@pytest.mark.integration
def test_live_without_a_sound_server_says_so(tmp_path: Path) -> None:
    """No server at all: one clear error line, a non-zero exit, no traceback, no output file."""
    out = tmp_path / "none.mp4"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "XDG_RUNTIME_DIR": str(tmp_path),
        "PULSE_SERVER": f"unix:{tmp_path}/no-such-socket",
    }
    proc = subprocess.run(
        [sys.executable, "main.py", "live", "--seconds", "2", "--out", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    if "listening" in proc.stderr:
        pytest.skip("this machine has an audio input without a sound server")
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: No microphone found"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()
