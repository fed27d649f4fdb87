"""`python main.py live --interview` against the PulseAudio null sink: the host speaks two turns by text-to-speech, the
guest's voice (the alsa-utils clips) is played into the virtual microphone between them.

The recording is read back: the programme audio is cross-correlated with each source (the host's speech, synthesized
again here with the same deterministic voice, and the played clips): each is found intact where it was put on the
programme's timeline; each anchor's mouth (MediaPipe's face mesh on that half of the two-shot) follows its own
source's loudness at lag ~0; the host's mouth rests while the guest speaks.
"""

from __future__ import annotations

import os
import re
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
CLIPS = ("Front_Center.wav", "Front_Left.wav", "Rear_Right.wav")
RATE = 16000
FPS = 25.0
SIZE = 256
SCRIPT = "Good evening, and welcome to the programme. What did you see at the river tonight?\n\nThank you. What happens next?"
TURN = re.compile(r"live: host turn (\d+) of (\d+) on air at ([\d.]+) s \(([\d.]+) s\)")


def _guest_wav(folder: Path) -> tuple[Path, np.ndarray]:
    """The guest's answer: alsa-utils speech clips with 0.3 s pauses, as one wav; (path, samples at RATE)."""
    parts, rate = [], 0
    for name in CLIPS:
        if not (ALSA / name).is_file():
            pytest.skip("alsa-utils speech clips missing: apt-get install alsa-utils")
        rate, x = wavfile.read(ALSA / name)
        x = x.astype(np.float32) / 32768.0
        x = x.mean(axis=1) if x.ndim > 1 else x
        parts += [x, np.zeros(int(0.3 * rate), np.float32)]
    speech = np.concatenate(parts)
    path = folder / "guest.wav"
    wavfile.write(path, rate, (speech * 32767).astype(np.int16))
    g = gcd(rate, RATE)
    return path, resample_poly(speech, RATE // g, rate // g).astype(np.float32)


def _host_turns() -> list[np.ndarray]:
    """The host's turns as live speaks them (same voice, same deterministic synthesis), at RATE."""
    from studio.pipeline.interview import split_turns
    from studio.speech import SpeechSettings, synthesize

    out = []
    for text in split_turns(SCRIPT):
        utt = synthesize(text, None, SpeechSettings(onnx_threads=1))
        g = gcd(utt.sample_rate_hz, RATE)
        out.append(resample_poly(utt.audio, RATE // g, utt.sample_rate_hz // g).astype(np.float32))
    return out


def _decode_audio(path: Path) -> np.ndarray:
    with av.open(str(path)) as c:
        res = av.AudioResampler(format="flt", layout="mono", rate=RATE)
        chunks = [o.to_ndarray().reshape(-1) for f in c.decode(c.streams.audio[0]) for o in res.resample(f)]
        chunks += [o.to_ndarray().reshape(-1) for o in res.resample(None)]
    return np.concatenate(chunks)


def _find(recording: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(where ``ref`` starts in ``recording`` in s, the normalized correlation there)."""
    xc = correlate(recording, ref, mode="valid", method="fft")
    lag = int(np.argmax(np.abs(xc)))
    seg = recording[lag:lag + len(ref)]
    return lag / RATE, float(np.dot(seg, ref) / (np.linalg.norm(seg) * np.linalg.norm(ref) + 1e-12))


def _placed(ref: np.ndarray, at_s: float, n: int) -> np.ndarray:
    out = np.zeros(n, np.float32)
    a = int(round(at_s * RATE))
    out[a:a + len(ref)] = ref[:max(0, n - a)]
    return out


@pytest.mark.integration
def test_interview_mixes_both_voices_in_sync_and_takes_turns(pulse_sink: Path, play_into_sink,
                                                              tmp_path: Path) -> None:
    from studio.bench.lipsync import best_lag, frame_log_rms, lagged_correlations, mouth_openings

    wav, guest = _guest_wav(tmp_path)
    out = tmp_path / "interview.mp4"
    proc = subprocess.Popen(
        [sys.executable, "main.py", "live", "--interview", "--text", SCRIPT, "--seconds", "20", "--size", str(SIZE),
         "--device", "cpu", "--out", str(out)],
        cwd=REPO_ROOT, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    turns: dict[int, tuple[float, float]] = {}
    deadline = time.monotonic() + 240  # a bounded wait for start-up, not a timing assertion
    played = None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = TURN.match(line)
        if m:
            turns[int(m[1])] = (float(m[3]), float(m[4]))
            if int(m[1]) == 1:  # the guest answers once the host's question is over
                time.sleep(float(m[4]) + 0.8)
                played = play_into_sink(wav)
            else:
                break
    if 2 not in turns:
        proc.kill()
        pytest.fail("the host's turns never went on air:\n" + "".join(lines) + proc.communicate()[1][-3000:])
    played.wait(timeout=60)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr[-3000:]
    summary = [x for x in stdout.splitlines() if x.startswith("live: ")]
    assert summary and "interview: host turns on air 2 of 2" in summary[-1], stdout
    print(summary[-1])

    # the programme audio: each source intact, where it was put on the timeline (lag ~0 for the script)
    rec = _decode_audio(out)
    hosts = _host_turns()
    for i, ref in enumerate(hosts, 1):
        at_s, r = _find(rec, ref)
        print(f"host turn {i}: announced at {turns[i][0]:.3f} s, found at {at_s:.4f} s (r {r:.3f})")
        assert r > 0.9, r
        assert abs(at_s - turns[i][0]) < 0.005
    guest_at, r = _find(rec, guest)
    print(f"guest: found at {guest_at:.4f} s (r {r:.3f})")
    assert r > 0.9, r
    voiced = np.flatnonzero(np.abs(guest) > 0.02)
    answer = (guest_at + voiced[0] / RATE, guest_at + voiced[-1] / RATE)
    assert turns[1][0] + turns[1][1] <= answer[0]  # the guest answered after the question,
    assert turns[2][0] >= answer[1] + 0.3  # and the host waited for the answer and its pause

    # each anchor's mouth follows its own voice at lag ~0; the host's rests through the answer
    n = len(rec)
    host_audio = sum(_placed(ref, turns[i][0], n) for i, ref in enumerate(hosts, 1))
    guest_audio = _placed(guest, guest_at, n)
    lags = {}
    for row, audio in ((0, host_audio), (1, guest_audio)):
        opening, starts, fps = mouth_openings(out, (row * SIZE, 0, (row + 1) * SIZE, SIZE))
        assert np.isfinite(opening).all(), "a face was lost"
        env = frame_log_rms(audio, RATE, 0.0, starts, 1.0 / fps)
        corr, lag = best_lag(lagged_correlations(opening, env, 5), 5)
        lags[row] = (corr, lag)
        if row == 0:
            host_open = opening
    print(f"mouth against its voice (corr, lag in frames): host {lags[0]}, guest {lags[1]}")
    assert lags[0][0] >= 0.5 and abs(lags[0][1]) <= 1
    assert lags[1][0] >= 0.4 and abs(lags[1][1]) <= 3
    frames = np.arange(len(host_open)) / FPS
    during_answer = (frames >= answer[0]) & (frames < answer[1])
    host_turn = (frames >= turns[1][0]) & (frames < turns[1][0] + turns[1][1])
    rest, talk = np.percentile(host_open[during_answer], 95), np.percentile(host_open[host_turn], 75)
    print(f"host mouth opening: 95th percentile through the answer {rest:.4f}, 75th in its own turn {talk:.4f}")
    assert rest < 0.5 * talk


@pytest.mark.integration
def test_an_interview_without_a_microphone_says_so(tmp_path: Path) -> None:
    """No sound server: one line that the guest needs a microphone, a non-zero exit, no traceback, no file."""
    out = tmp_path / "none.mp4"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path),
           "PULSE_SERVER": f"unix:{tmp_path}/no-such-socket"}
    proc = subprocess.run(
        [sys.executable, "main.py", "live", "--interview", "--text", "Good evening.", "--seconds", "2", "--out",
         str(out)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    if "listening" in proc.stderr:
        pytest.skip("this machine has an audio input without a sound server")
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: The interview's guest needs a microphone. No microphone"), \
        proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.integration
@pytest.mark.parametrize("args, words", [
    (["--interview"], "--interview needs the host's script"),
    (["--text", "Hello."], "--text is for the interview mode"),
])
def test_interview_flags_are_checked_in_one_line(args: list[str], words: str) -> None:
    proc = subprocess.run([sys.executable, "main.py", "live", *args, "--seconds", "1"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0], proc.stderr
