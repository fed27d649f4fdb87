"""The data recipe's realistic channels keep the clip's length and timing and do what they say, measured on a
synthetic voice-like signal."""

from __future__ import annotations

import numpy as np
import pytest

from studio.neural.training import channel as ch


def _voice(seconds: float = 3.0, seed: int = 0) -> np.ndarray:
    """Harmonics of a gliding 110-160 Hz pitch under formant-like weights, in 4 Hz syllables."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * ch.RATE)) / ch.RATE
    f0 = 135 + 25 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / ch.RATE
    x = sum(np.sin(k * phase) * (np.exp(-((k * 135 - 700) / 300) ** 2) + 0.5 * np.exp(-((k * 135 - 1800) / 400) ** 2)
                                 + 0.05) for k in range(1, 40))
    env = np.clip(np.sin(2 * np.pi * 4 * t), 0, 1) ** 0.5
    x = x * env + 0.01 * rng.standard_normal(len(t))
    return (0.3 * x / np.abs(x).max()).astype(np.float32)


@pytest.mark.parametrize("codec", ch.CODECS)
def test_a_codec_round_trip_keeps_length_and_timing(codec):
    x = _voice()
    y = ch.codec_roundtrip(x, np.random.default_rng(1), codec)
    assert y.shape == x.shape and np.isfinite(y).all()
    # Lined up with the input (the codec's delay removed): the waveforms agree at lag 0, not one sample later.
    at0 = np.corrcoef(x, y)[0, 1]
    at_lag = np.corrcoef(x[:-8], y[8:])[0, 1]
    assert at0 > (0.6 if codec == "amr_nb" else 0.9), at0
    assert at0 > at_lag


@pytest.mark.parametrize("kind", ["music", "speech_noise", "hum"])
def test_a_background_sits_where_it_was_asked(kind):
    x = _voice()
    y = ch.add_bed(x, np.random.default_rng(2), 20.0, kind)
    ratio_db = 10 * np.log10(np.mean(x.astype(np.float64) ** 2) / np.mean((y - x).astype(np.float64) ** 2))
    assert abs(ratio_db - 20.0) < 0.5


def test_a_phone_line_keeps_only_the_telephone_band():
    x = _voice()
    y = ch.microphone(x, np.random.default_rng(3), "phone")
    spec = np.abs(np.fft.rfft(y)) ** 2
    f = np.fft.rfftfreq(len(y), 1 / ch.RATE)
    assert spec[f > 4000].sum() < 0.01 * spec.sum()
    assert spec[f < 200].sum() < 0.05 * spec.sum()


def test_a_room_response_decays_in_its_reverberation_time():
    rt60 = 0.5
    h = ch.room_impulse(np.random.default_rng(4), rt60, 5.0).astype(np.float64)
    energy = np.cumsum(h[::-1] ** 2)[::-1]  # Schroeder integral
    db = 10 * np.log10(energy / energy[0])
    t5, t25 = np.argmax(db < -5), np.argmax(db < -25)
    estimate = 3 * (t25 - t5) / ch.RATE  # T20 scaled to 60 dB
    assert 0.5 * rt60 < estimate < 1.3 * rt60, estimate


def test_the_chain_keeps_the_length_and_stays_finite():
    x = _voice()
    for seed in range(6):
        y = ch.realistic_channel(x, np.random.default_rng(seed))
        assert y.shape == x.shape and np.isfinite(y).all()
