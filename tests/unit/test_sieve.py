"""SilenceSieve: silence costs no VAD work, speech (synthesized and recorded) is detected."""

from __future__ import annotations

import shutil
import subprocess
from math import gcd
from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile
from scipy.signal import resample_poly

from studio.audio.settings import SieveSettings
from studio.audio.sieve import SilenceSieve

RATE = 16000
ALSA_CLIP = Path("/usr/share/sounds/alsa/Front_Center.wav")


def _load_16k(path: Path) -> np.ndarray:
    rate, x = wavfile.read(path)
    x = x.astype(np.float32) / (32768.0 if x.dtype == np.int16 else 1.0)
    if x.ndim > 1:
        x = x.mean(axis=1)
    g = gcd(rate, RATE)
    return resample_poly(x, RATE // g, rate // g).astype(np.float32)


@pytest.fixture(scope="module")
def sieve() -> SilenceSieve:
    return SilenceSieve()


def _speaking_per_frame(sieve: SilenceSieve, audio: np.ndarray) -> np.ndarray:
    sieve.reset()
    n = sieve.settings.frame_samples
    return np.array([sieve.process(audio[i : i + n]) for i in range(0, len(audio) - n + 1, n)])


def test_digital_silence_never_reaches_the_vad(sieve: SilenceSieve) -> None:
    before = sieve.stats()
    speaking = _speaking_per_frame(sieve, np.zeros(RATE * 2, np.float32))
    after = sieve.stats()
    assert not speaking.any()
    assert after.vad_calls == before.vad_calls
    assert after.frames_gated - before.frames_gated == len(speaking)


def test_steady_noise_passes_the_gate_but_is_not_speech(sieve: SilenceSieve) -> None:
    noise = np.random.default_rng(0).standard_normal(RATE * 2).astype(np.float32) * 0.03  # about -30 dBFS
    before = sieve.stats()
    speaking = _speaking_per_frame(sieve, noise)
    after = sieve.stats()
    assert after.vad_calls - before.vad_calls == len(speaking)
    assert speaking.mean() < 0.2


def _check_speech_found(sieve: SilenceSieve, speech: np.ndarray) -> None:
    pad = np.zeros(RATE, np.float32)
    audio = np.concatenate([pad, speech, pad])
    speaking = _speaking_per_frame(sieve, audio)
    n = sieve.settings.frame_samples
    lead = len(pad) // n
    speech_frames = speaking[lead + 2 : (len(pad) + len(speech)) // n - 2]
    assert not speaking[: lead - 1].any(), "silence before the speech was not skipped"
    hangover = int(np.ceil(sieve.settings.hangover_ms / 1000 * RATE / n))
    assert not speaking[(len(pad) + len(speech)) // n + hangover + 2 :].any(), "silence after was not skipped"
    assert speech_frames.mean() > 0.6, f"speech detected on only {speech_frames.mean():.0%} of its frames"


@pytest.mark.skipif(not ALSA_CLIP.exists(), reason="alsa-utils sound clips not installed")
def test_recorded_speech_is_detected(sieve: SilenceSieve) -> None:
    _check_speech_found(sieve, _load_16k(ALSA_CLIP))


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_synthesized_speech_is_detected(sieve: SilenceSieve, tmp_path: Path) -> None:
    wav = tmp_path / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), "Good evening, here is the news."], check=True)
    _check_speech_found(sieve, _load_16k(wav))


def test_gate_threshold_is_a_setting() -> None:
    quiet_tone = 0.01 * np.sin(2 * np.pi * 220 * np.arange(RATE) / RATE).astype(np.float32)  # about -43 dBFS
    strict = SilenceSieve(SieveSettings(rms_gate_dbfs=-30.0))
    strict.process(quiet_tone)
    assert strict.stats().vad_calls == 0
    lenient = SilenceSieve(SieveSettings(rms_gate_dbfs=-60.0))
    lenient.process(quiet_tone)
    assert lenient.stats().vad_calls == lenient.stats().frames_seen > 0


def test_chunks_of_any_length_are_buffered(sieve: SilenceSieve) -> None:
    sieve.reset()
    before = sieve.stats().frames_seen
    for size in (100, 700, 30, 1200):
        sieve.process(np.zeros(size, np.float32))
    assert sieve.stats().frames_seen - before == (100 + 700 + 30 + 1200) // 512
