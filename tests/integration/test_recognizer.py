"""Streaming phone recognition, forced alignment and mic-driven motion on a recorded human voice."""

from __future__ import annotations

import time
from math import gcd
from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile
from scipy.signal import resample_poly

from studio.audio.capture import MicCapture
from studio.audio.settings import CaptureSettings
from studio.audio.mic_motion import MicMotionSource
from studio.audio.recognizer import StreamingPhoneRecognizer, align
from studio.audio.ringbuffer import AudioRing
from studio.errors import SpeechError
from studio.contracts.coeffs import Coeff

CLIP = Path("/usr/share/sounds/alsa/Front_Center.wav")  # a woman saying "Front center"
RATE = 16000
EXPECTED = {"F", "R", "EH", "AH", "N", "T", "S", "ER"}

pytestmark = pytest.mark.skipif(not CLIP.exists(), reason="alsa-utils sound clips not installed")


def _clip_16k() -> np.ndarray:
    rate, x = wavfile.read(CLIP)
    x = x.astype(np.float32) / 32768.0
    g = gcd(rate, RATE)
    return resample_poly(x, RATE // g, rate // g).astype(np.float32)


def _speech_labels(phones) -> list[str]:
    return [p.phoneme for p in phones if p.phoneme not in ("SIL", "+NSN+", "+SPN+", "+BREATH+")]


def test_forced_alignment_of_a_human_clip() -> None:
    audio = _clip_16k()
    phones = align(audio, RATE, "Front center!")
    labels = _speech_labels(phones)
    assert labels[:2] == ["F", "R"] and labels[-2:] == ["T", "ER"]
    assert "S" in labels
    starts = [p.start_s for p in phones]
    assert starts == sorted(starts)
    assert all(p.end_s > p.start_s for p in phones)
    assert phones[-1].end_s <= len(audio) / RATE + 0.02


def test_alignment_refuses_unknown_words() -> None:
    with pytest.raises(SpeechError):
        align(_clip_16k(), RATE, "front qzxvbnt")


def test_streaming_emits_phones_during_the_utterance() -> None:
    audio = np.concatenate([np.zeros(RATE // 2, np.float32), _clip_16k(), np.zeros(RATE // 2, np.float32)])
    rec = StreamingPhoneRecognizer()
    rec.start(stream_sample=RATE)  # stream time 1.0 s at the first sample
    during = []
    for i in range(0, len(audio), 320):  # 20 ms chunks
        during += rec.feed(audio[i : i + 320])
    at_end = rec.finish()
    assert len(_speech_labels(during)) >= 6, "phones were only produced at utterance end"
    labels = _speech_labels(during + at_end)
    assert len(EXPECTED.intersection(labels)) >= 5, labels
    phones = during + at_end
    assert phones[0].start_s >= 1.0
    assert all(b.start_s >= a.end_s - 1e-9 for a, b in zip(phones, phones[1:])), "phones overlap"
    stats = rec.stats()
    assert stats.chunks > 0 and np.isfinite(stats.emit_delay_ms_median)
    assert stats.emit_delay_ms_median >= 0




def test_mic_motion_opens_the_mouth_only_for_speech() -> None:
    clip = _clip_16k()
    audio = np.concatenate([np.zeros(RATE, np.float32), clip, np.zeros(RATE, np.float32)])
    ring = AudioRing(RATE * 10, RATE)
    source = MicMotionSource(ring)
    fps, jaw, loud, t_all = 25.0, [], [], []
    delay_s = 0.3  # present frames this far behind the newest audio (recognition + lookahead)
    step = RATE // int(fps)
    for i in range(0, len(audio), step):  # audio arrives in real-time-sized blocks, one frame per block
        ring.write(audio[i : i + step])
        t = source.now_s - delay_s
        if t < 0:
            continue
        coeffs = source.frame(t)
        assert coeffs.shape == (len(Coeff),) and np.isfinite(coeffs).all()
        jaw.append(coeffs[Coeff.JAW_OPEN])
        loud.append(source.loudness(t))
        t_all.append(t)
    jaw_a, t_a = np.array(jaw), np.array(t_all)
    speech = (t_a > 1.0 + 0.05) & (t_a < 1.0 + len(clip) / RATE - 0.05)
    silence = (t_a < 0.9) | (t_a > 1.0 + len(clip) / RATE + 0.5)
    assert np.all(jaw_a[silence] == 0.0), "lips must rest closed in silence"
    assert (jaw_a[speech] > 0.05).mean() > 0.5
    assert np.corrcoef(jaw_a[speech], np.array(loud)[speech])[0, 1] > 0.3
    stats = source.stats()
    assert stats.phones > 0
    assert stats.sieve.frames_skipped > 0 and stats.recognizer_share < 0.8


@pytest.mark.integration
def test_live_phones_from_the_virtual_microphone(pulse_sink: Path, play_into_sink) -> None:
    """Play the clip into the sound server; phones come out while it plays; the sieve skips the silences."""
    cap = MicCapture(CaptureSettings(ring_rate_hz=16000))  # the recognizer's rate, read here directly
    cap.start()
    try:
        end = time.monotonic() + 10.0
        while cap.ring.total_written == 0 and time.monotonic() < end:
            time.sleep(0.02)
        source = MicMotionSource(cap.ring)
        time.sleep(0.5)  # silence before
        source.pump()
        phones_while_playing = []
        player = play_into_sink(CLIP)
        while player.poll() is None:
            phones_while_playing += source.pump()
            time.sleep(0.02)
        time.sleep(1.0)  # silence after
        tail = source.pump()
    finally:
        cap.stop()
    assert player.returncode == 0
    labels = _speech_labels(phones_while_playing + tail)
    assert len(EXPECTED.intersection(labels)) >= 4, labels
    assert _speech_labels(phones_while_playing), "no phone came out while the clip was playing"
    stats = source.stats()
    assert stats.sieve.frames_gated > 0  # the null sink's silence never reached the VAD
    assert stats.samples_sent_to_recognizer < stats.samples_processed
    assert not source.recognizer.in_utterance
