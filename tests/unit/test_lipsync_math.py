"""The lip-sync evaluator's math on synthetic arrays (no video, no MediaPipe)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import numpy as np
import pytest

from studio.bench.lipsync import (
    LipSyncReport,
    PhoneClass,
    PhoneStats,
    best_lag,
    classify_phone,
    frame_log_rms,
    frame_phone_classes,
    lagged_correlations,
    phone_stats,
    phonemes_from_json,
    utterance_timings_to_json,
)
from studio.speech.types import PhonemeTiming, Utterance, WordTiming

FPS = 25


def envelope(n: int = 250, seed: int = 0) -> np.ndarray:
    """A speech-like loudness curve: smoothed noise."""
    rng = np.random.default_rng(seed)
    return np.convolve(rng.standard_normal(n + 4), np.ones(5) / 5, mode="valid")


def test_mouth_two_frames_late_reports_lag_two() -> None:
    env = envelope()
    opening = np.roll(env, 2)  # opening[i] = env[i - 2]: the mouth follows the sound by two frames
    opening[:2] = np.nan  # the wrapped-around frames: like frames without a face
    corrs = lagged_correlations(opening, env, max_lag_frames=5)
    corr, lag = best_lag(corrs, 5)
    assert lag == 2
    assert corr == pytest.approx(1.0, abs=1e-9)


def test_mouth_ahead_reports_negative_lag() -> None:
    env = envelope()
    corr, lag = best_lag(lagged_correlations(env[3:], env[:-3], 5), 5)  # opening[i] = env[i + 3]
    assert (lag, round(corr, 6)) == (-3, 1.0)


def test_shuffled_opening_correlates_poorly() -> None:
    env = envelope()
    shuffled = np.random.default_rng(1).permutation(env)
    corr, _ = best_lag(lagged_correlations(shuffled, env, 5), 5)
    assert corr is not None and corr < 0.3


def test_constant_opening_gives_no_correlation() -> None:
    corrs = lagged_correlations(np.full(100, 0.1), envelope(100), 2)
    assert np.isnan(corrs).all()
    assert best_lag(corrs, 2) == (None, None)


def test_frame_log_rms_uses_the_frame_interval() -> None:
    rate = 16_000
    audio = np.zeros(rate, np.float32)
    audio[4 * 640 : 5 * 640] = 0.5  # loud exactly while frame 4 is shown (640 samples per frame at 25 fps)
    starts = np.arange(FPS) / FPS
    env = frame_log_rms(audio, rate, 0.0, starts, 1 / FPS)
    assert int(np.argmax(env)) == 4
    assert env[4] == pytest.approx(math.log(0.5))
    assert env[3] == env[5] == pytest.approx(math.log(1e-4))
    # An audio track that starts 1 frame late moves the loud frame one later.
    assert int(np.argmax(frame_log_rms(audio, rate, 1 / FPS, starts, 1 / FPS))) == 5


@pytest.mark.parametrize(
    ("symbol", "kind"),
    [
        ("p", PhoneClass.PBM), ("b", PhoneClass.PBM), ("m", PhoneClass.PBM), ("pʰ", PhoneClass.PBM),
        ("M", PhoneClass.PBM), ("B", PhoneClass.PBM),
        ("a", PhoneClass.OPEN), ("ɑː", PhoneClass.OPEN), ("ˈæ", PhoneClass.OPEN), ("aɪ", PhoneClass.OPEN),
        ("ʌ", PhoneClass.OPEN), ("AA1", PhoneClass.OPEN), ("AY2", PhoneClass.OPEN), ("AH1", PhoneClass.OPEN),
        ("AH0", PhoneClass.OTHER), ("ə", PhoneClass.OTHER), ("s", PhoneClass.OTHER), ("IY1", PhoneClass.OTHER),
        ("_", PhoneClass.PAUSE), (" ", PhoneClass.PAUSE), (",", PhoneClass.PAUSE), ("SIL", PhoneClass.PAUSE),
        ("sp", PhoneClass.PAUSE),
    ],
)
def test_classify_phone(symbol: str, kind: PhoneClass) -> None:
    assert classify_phone(symbol) is kind


def test_frame_phone_classes_use_frame_centres_and_long_pauses() -> None:
    phones = [
        PhonemeTiming("m", 0.20, 0.30),  # centres 0.22, 0.26 -> frames 5, 6
        PhonemeTiming("a", 0.30, 0.40),  # frames 7, 8, 9 (centre 0.38)
        PhonemeTiming("_", 0.40, 0.45),  # a short silence phone: not a pause
        PhonemeTiming("t", 0.45, 0.50),
        PhonemeTiming("_", 0.50, 0.60),  # silence phone + gap 0.60-0.80: a 0.3 s pause
        PhonemeTiming("b", 0.80, 0.84),
    ]
    centres = (np.arange(25) + 0.5) / FPS
    classes = frame_phone_classes(phones, centres, end_s=1.0)
    assert list(np.flatnonzero(classes == PhoneClass.PBM)) == [5, 6, 20]
    assert list(np.flatnonzero(classes == PhoneClass.OPEN)) == [7, 8, 9]
    # 0.00-0.20 leading silence (frames 0-4), 0.50-0.80 (frames 12-19), 0.84-1.00 trailing (frames 21-24)
    assert list(np.flatnonzero(classes == PhoneClass.PAUSE)) == [0, 1, 2, 3, 4, *range(12, 20), 21, 22, 23, 24]


def test_phone_stats_ratios_above_second_percentile() -> None:
    classes = np.array(
        [PhoneClass.PAUSE] * 50 + [PhoneClass.PBM] * 10 + [PhoneClass.OPEN] * 10 + [PhoneClass.OTHER] * 5
    )
    opening = np.concatenate([np.full(50, 0.01), np.full(10, 0.02), np.full(10, 0.11), [np.nan] * 5])
    stats = phone_stats(opening, classes)
    assert stats.opening_p2 == pytest.approx(0.01)
    assert (stats.n_pause_frames, stats.n_pbm_frames, stats.n_open_frames) == (50, 10, 10)
    assert stats.pbm_over_open == pytest.approx(0.1)
    assert stats.pause_over_open == pytest.approx(0.0)


def _report(best_corr: float | None, lag: int | None, pbm_ratio: float | None, no_face: int = 0) -> LipSyncReport:
    phones = PhoneStats(0.0, 1, 1, 1, 0.0, 1.0, 0.0, pbm_ratio, 0.0)
    return LipSyncReport("x.mp4", 25.0, 100, no_face, 4.0, 5, (best_corr,), best_corr, lag, 0.05, True, phones)


def test_passes_applies_every_threshold() -> None:
    assert _report(0.8, 1, 0.1).passes()
    assert not _report(0.4, 1, 0.1).passes()
    assert _report(0.4, 1, 0.1).passes(min_corr=0.3)
    assert not _report(0.8, 3, 0.1).passes()
    assert not _report(0.8, 0, 0.5).passes()
    assert _report(0.8, 0, None).passes()  # p/b/m not measurable: not judged
    assert not _report(None, None, None).passes()
    assert not _report(0.8, 0, 0.1, no_face=50).passes()
    json.dumps(asdict(_report(0.8, 1, 0.1)), allow_nan=False)


def test_timings_round_trip_through_json() -> None:
    phones = (PhonemeTiming("h", 0.0, 0.05, 0), PhonemeTiming("ə", 0.05, 0.1, 1))
    utt = Utterance(np.zeros(2205, np.float32), 22050, phones, (WordTiming("ha", 0.0, 0.1, 0, 2),), "piper:joe", "ha")
    data = json.loads(json.dumps(utterance_timings_to_json(utt)))
    assert phonemes_from_json(data) == phones
    assert phonemes_from_json(data["phonemes"]) == phones
    assert data["words"][0]["text"] == "ha"
