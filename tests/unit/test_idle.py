"""Idle motion: blinks, sway, breathing, nods."""

from __future__ import annotations

import numpy as np

from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.presenter.idle import IdleMotion, idle_track

FPS = 25.0
IDLE_COLUMNS = {Coeff.BLINK_L, Coeff.BLINK_R, Coeff.BROW, Coeff.HEAD_YAW_DEG, Coeff.HEAD_PITCH_DEG,
                Coeff.HEAD_ROLL_DEG, Coeff.SHIFT_X, Coeff.SHIFT_Y}  # fmt: skip


def _blink_onsets(track: np.ndarray) -> np.ndarray:
    b = track[:, Coeff.BLINK_L]
    return np.flatnonzero((b[1:] > 0.5) & (b[:-1] <= 0.5)) + 1


def test_blink_statistics() -> None:
    track = idle_track(int(300 * FPS), FPS, seed=7)  # five minutes
    onsets = _blink_onsets(track) / FPS
    gaps = np.diff(onsets)
    assert 50 <= len(onsets) <= 170  # 2-6 s apart, with some double blinks
    singles = gaps[gaps > 1.0]
    assert singles.min() >= 1.9 and singles.max() <= 6.1
    doubles = gaps[gaps <= 1.0]
    assert 0 < len(doubles) < 0.35 * len(gaps)  # occasional double blinks
    np.testing.assert_array_equal(track[:, Coeff.BLINK_L], track[:, Coeff.BLINK_R])  # both eyes together
    assert track[:, Coeff.BLINK_L].max() > 0.9


def test_blink_shape_closes_faster_than_it_opens() -> None:
    m = IdleMotion(1000.0, seed=0)
    t = np.arange(0, 4, 0.001)  # the first blink starts within 0.5-2.5 s
    b = np.array([m.frame(float(x))[Coeff.BLINK_L] for x in t])
    first = np.flatnonzero(b > 0.01)[0]
    seg = b[first : first + 600]
    peak = int(np.argmax(seg > 0.99))
    closing_ms = peak
    opening_ms = int(np.argmax(seg[peak:] < 0.01))
    assert 80 <= closing_ms <= 160
    assert opening_ms > closing_ms


def test_deterministic_and_seed_dependent() -> None:
    a = idle_track(500, FPS, seed=3, stress_times_s=[1.0, 5.0])
    b = idle_track(500, FPS, seed=3, stress_times_s=[1.0, 5.0])
    c = idle_track(500, FPS, seed=4, stress_times_s=[1.0, 5.0])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_bounds_columns_and_smoothness() -> None:
    activity = (np.arange(3000) // 100 % 2).astype(np.float32)
    track = idle_track(3000, FPS, seed=1, speech_activity=activity, stress_times_s=np.arange(0.5, 120, 0.7))
    assert track.shape == (3000, N_COEFFS) and track.dtype == np.float32
    other = [c for c in range(N_COEFFS) if c not in {int(x) for x in IDLE_COLUMNS}]
    assert not track[:, other].any()
    for c in (Coeff.HEAD_YAW_DEG, Coeff.HEAD_PITCH_DEG, Coeff.HEAD_ROLL_DEG):
        assert np.abs(track[:, c]).max() <= 2.0
        assert np.abs(track[:, c]).max() > 0.2  # it does move
    for c in (Coeff.SHIFT_X, Coeff.SHIFT_Y):
        assert np.abs(track[:, c]).max() <= 0.01
    assert np.abs(np.diff(track[:, Coeff.HEAD_YAW_DEG])).max() < 0.2  # no jumps, also when speech starts
    assert track[:, Coeff.BLINK_L].min() >= 0 and track[:, Coeff.BLINK_L].max() <= 1


def test_nods_and_brow_on_stress() -> None:
    plain = idle_track(250, FPS, seed=2)
    stressed = idle_track(250, FPS, seed=2, stress_times_s=[4.0])
    diff = stressed - plain
    i = int(4.125 * FPS)
    assert 0.8 <= diff[i, Coeff.HEAD_PITCH_DEG] <= 2.0  # nod down ~1-1.5 deg
    assert diff[i, Coeff.BROW] > 0.1
    assert np.abs(diff[: int(3.9 * FPS)]).max() == 0  # nothing before the stress
    assert np.abs(diff[int(4.5 * FPS) :]).max() < 1e-6  # a short gesture


def test_streaming_matches_track() -> None:
    track = idle_track(300, FPS, seed=5, stress_times_s=[2.0])
    m = IdleMotion(FPS, seed=5)
    for i in range(300):
        t = (i + 0.5) / FPS
        if i == int(2.0 * FPS):
            m.nod(2.0)
        np.testing.assert_array_equal(m.frame(t), track[i])
