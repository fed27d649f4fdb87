"""Fingerprint cache: hits on repeated audio windows, LRU eviction, counts, stride of the windows."""

from __future__ import annotations

import numpy as np

from studio.audio.fingerprint import WINDOW_MEL, FingerprintCache, fingerprint, window_ends


def _win(seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((WINDOW_MEL, 40)) * 3 - 5).astype(np.float32)


def test_repeats_hit_and_skip_the_encoder() -> None:
    calls = []
    c = FingerprintCache(100)

    def enc(w: np.ndarray) -> np.ndarray:
        calls.append(1)
        return w.mean(0)

    first = [c.get_or_compute(_win(i), enc) for i in range(5)]
    second = [c.get_or_compute(_win(i), enc) for i in range(5)]
    assert len(calls) == 5
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    st = c.stats()
    assert (st.hits, st.misses, st.entries) == (5, 5, 5)
    assert st.hit_rate == 0.5
    assert st.encoder_ms_saved == st.hits * st.encoder_ms_per_miss


def test_lru_evicts_least_recently_used() -> None:
    c = FingerprintCache(2)
    f = lambda w: w[0]  # noqa: E731
    c.get_or_compute(_win(1), f)
    c.get_or_compute(_win(2), f)
    c.get_or_compute(_win(1), f)  # 1 is now the most recent
    c.get_or_compute(_win(3), f)  # evicts 2
    assert _win(1) in c and _win(3) in c and _win(2) not in c
    assert c.stats().evictions == 1 and len(c) == 2


def test_key_ignores_tiny_differences_but_not_real_ones() -> None:
    w = np.full((WINDOW_MEL, 40), -5.3, np.float32)
    assert fingerprint(w) == fingerprint(w + 1e-4)
    assert fingerprint(w) != fingerprint(w + 2.0)


def test_windows_overlap_at_133_ms_stride() -> None:
    ends = window_ends(21, 2000)
    strides = np.diff(ends)
    assert set(strides.tolist()) <= {13, 14}
    assert abs(strides.mean() * 10 - 133.3) < 0.5  # ms
    assert WINDOW_MEL * 10 == 200


def test_a_cache_hit_is_worth_a_warm_encoder_call_not_the_first(monkeypatch):
    """What the audio cache saves per hit is the median of the encoder's calls after its first (which warms it up and
    is reported apart); the clock is the test's, so the verdict does not depend on the machine."""
    from types import SimpleNamespace

    import numpy as np

    from studio.pipeline import features

    clock = iter([0.0, 0.100, 1.0, 1.010, 2.0, 2.012, 3.0, 3.008])  # calls of 100, 10, 12 and 8 ms
    monkeypatch.setattr(features.time, "perf_counter", lambda: next(clock, 9.0))
    enc = SimpleNamespace(encode_window=lambda w: np.zeros((2, 4), np.float32))
    gen = SimpleNamespace(audio_encoder=lambda: enc, info=SimpleNamespace(audio=SimpleNamespace(shape_per_frame=(4,))))
    stage = features.FeatureStage(gen, SimpleNamespace(fps=25.0))
    for _ in range(4):
        stage._encode(np.zeros(320, np.float32))
    st = stage.stats()
    assert st["encoder_calls"] == 4 and abs(st["encoder_first_call_ms"] - 100.0) < 1e-6
    assert abs(st["encoder_ms_per_call"] - 10.0) < 1e-6  # the median of 10, 12 and 8


def test_the_cost_of_a_miss_is_a_warm_encoder_call(monkeypatch):
    """The neural engine's cache credits a hit with the median of its misses after the first (that one warms the
    encoder up); the clock is the test's."""
    import time

    import numpy as np

    from studio.audio.fingerprint import FingerprintCache

    clock = iter([0.0, 0.050, 1.0, 1.004, 2.0, 2.006, 3.0, 3.005])  # misses of 50, 4, 6 and 5 ms
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock, 9.0))
    cache = FingerprintCache(16)
    for i in range(4):
        cache.get_or_compute(np.full((8, 8), float(i), np.float32), lambda m: m.sum(keepdims=True))
    cache.get_or_compute(np.full((8, 8), 0.0, np.float32), lambda m: m)  # a hit: no clock read
    st = cache.stats()
    assert (st.hits, st.misses) == (1, 4) and abs(cache.first_miss_ms - 50.0) < 1e-6
    assert abs(st.encoder_ms_per_miss - 5.0) < 1e-6 and abs(st.encoder_ms_saved - 5.0) < 1e-6
