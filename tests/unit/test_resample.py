"""The numpy resampler gives scipy.signal.resample_poly's samples."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize(("up", "down", "beta"), [(48000, 22050, 10.0), (16000, 48000, 5.0), (48000, 16000, 5.0),
                                                  (16000, 22050, 5.0), (3, 1, 5.0)])
@pytest.mark.parametrize("n", [0, 1, 146, 22050 + 7])
def test_the_resampler_gives_scipys_samples(up: int, down: int, beta: float, n: int) -> None:
    from scipy.signal import resample_poly as scipy_resample_poly

    from studio.resample import resample_poly

    x = np.random.default_rng(n).normal(size=n)
    want = scipy_resample_poly(x, up, down, window=("kaiser", beta))
    got = resample_poly(x, up, down, beta=beta)
    assert got.shape == want.shape
    assert np.abs(got - want).max(initial=0.0) < 1e-12


def test_a_tone_keeps_its_pitch_and_level() -> None:
    from studio.resample import resample_poly

    t = np.arange(22050) / 22050
    y = resample_poly(np.sin(2 * np.pi * 440 * t), 48000, 22050, beta=10.0)
    spectrum = np.abs(np.fft.rfft(y[4800:43200] * np.hanning(38400)))
    assert abs(np.argmax(spectrum) * 48000 / 38400 - 440) < 2
    assert abs(np.abs(y[4800:43200]).max() - 1.0) < 0.01

