"""Phones -> visemes -> mouth coefficients (no TTS needed)."""

from __future__ import annotations

import numpy as np
import pytest

from studio.contracts.coeffs import MOUTH_COEFFS, N_COEFFS, Coeff
from studio.speech.types import PhonemeTiming as P
from studio.speech.visemes import (
    NEUTRAL_VISEME,
    Coarticulator,
    Viseme,
    mouth_track,
    stress_times,
    viseme_for_phone,
    viseme_targets,
)

FPS = 25.0


@pytest.mark.parametrize(
    ("phone", "viseme"),
    [
        ("p", Viseme.PBM), ("b", Viseme.PBM), ("m", Viseme.PBM), ("f", Viseme.FV), ("θ", Viseme.TH),
        ("ð", Viseme.TH), ("ɡ", Viseme.KG), ("ʃ", Viseme.SH_CH), ("tʃ", Viseme.SH_CH), ("ɹ", Viseme.R),
        ("w", Viseme.W_OO), ("uː", Viseme.W_OO), ("ˈuː", Viseme.W_OO), ("ɑː", Viseme.AA), ("aɪ", Viseme.AA),
        ("æ", Viseme.AE_EH), ("iː", Viseme.IH_IY), ("oːɹ", Viseme.AO_O), ("ɚ", Viseme.ER), ("ə", Viseme.UH),
        ("n̩", Viseme.DT_N_L), ("_", Viseme.SIL), ("", Viseme.SIL),
    ],
)  # fmt: skip
def test_ipa_mapping(phone: str, viseme: Viseme) -> None:
    assert viseme_for_phone(phone) is viseme


@pytest.mark.parametrize(
    ("phone", "viseme"),
    [
        ("AA", Viseme.AA), ("aa1", Viseme.AA), ("B", Viseme.PBM), ("M", Viseme.PBM), ("UW1", Viseme.W_OO),
        ("W", Viseme.W_OO), ("SH", Viseme.SH_CH), ("ch", Viseme.SH_CH), ("DH", Viseme.TH), ("NG", Viseme.KG),
        ("IY0", Viseme.IH_IY), ("ER2", Viseme.ER), ("SIL", Viseme.SIL), ("sil", Viseme.SIL),
        ("+NSN+", Viseme.SIL), ("+SPN+", Viseme.SIL), ("F", Viseme.FV), ("Y", Viseme.IH_IY),
    ],
)  # fmt: skip
def test_arpabet_mapping(phone: str, viseme: Viseme) -> None:
    assert viseme_for_phone(phone) is viseme


@pytest.mark.parametrize("phone", ["@@", "☃", "QQQQ", "123", "ˈ?x"])
def test_unknown_phone_never_raises(phone: str) -> None:
    assert isinstance(viseme_for_phone(phone), Viseme)
    assert viseme_for_phone("@@") is NEUTRAL_VISEME


def test_targets() -> None:
    pbm = viseme_targets(Viseme.PBM)
    assert pbm[Coeff.LIP_PRESS] == 1.0 and pbm[Coeff.JAW_OPEN] == 0.0 and pbm[Coeff.LIP_PART] == 0.0
    assert viseme_targets(Viseme.AA)[Coeff.JAW_OPEN] == pytest.approx(1.0)
    oo = viseme_targets(Viseme.W_OO)
    assert oo[Coeff.LIP_ROUND] >= 0.9 and oo[Coeff.JAW_OPEN] < 0.3
    assert not viseme_targets(Viseme.SIL).any()


def _frame_at(t_s: float) -> int:
    return int(t_s * FPS)  # the frame whose [i/fps, (i+1)/fps) contains t


@pytest.mark.parametrize("phone", ["b", "p", "m", "B"])
@pytest.mark.parametrize("offset_s", [0.0, 0.013, 0.027])
def test_short_bilabial_closes_fully(phone: str, offset_s: float) -> None:
    b0 = 0.3 + offset_s
    phones = [P("_", 0, 0.1), P("ɑ", 0.1, b0), P(phone, b0, b0 + 0.06), P("ɑ", b0 + 0.06, b0 + 0.3), P("_", b0 + 0.3, 1.2)]
    track = mouth_track(phones, FPS, 30)
    i = _frame_at(b0 + 0.03)
    assert track[i, Coeff.LIP_PRESS] > 0.95
    assert track[i, Coeff.JAW_OPEN] < 0.05 and track[i, Coeff.LIP_PART] < 0.05
    # ... while the vowels around it stay open (neighbours blend, but the closure is local)
    assert track[_frame_at(b0 - 0.12), Coeff.JAW_OPEN] > 0.6
    assert track[_frame_at(b0 + 0.18), Coeff.JAW_OPEN] > 0.6


def test_rounding_on_oo_and_w_and_anticipation() -> None:
    phones = [P("s", 0.0, 0.1), P("t", 0.1, 0.16), P("w", 0.16, 0.24), P("uː", 0.24, 0.44), P("_", 0.44, 1.0)]
    track = mouth_track(phones, 100.0, 100)
    assert track[20, Coeff.LIP_ROUND] > 0.6  # on /w/
    assert track[34, Coeff.LIP_ROUND] > 0.85  # on /u/
    assert track[34, Coeff.JAW_OPEN] < 0.3
    assert track[13, Coeff.LIP_ROUND] > 0.1  # already rounding during /t/, before the /w/
    spread = mouth_track([P("s", 0.0, 0.1), P("t", 0.1, 0.16), P("iː", 0.16, 0.44)], 100.0, 100)
    assert track[13, Coeff.LIP_ROUND] > spread[13, Coeff.LIP_ROUND] + 0.1


def test_silence_and_gaps_rest() -> None:
    phones = [P("ɑ", 0.0, 0.3), P("_", 0.3, 0.8), P("ɑ", 0.8, 1.0), P("ɑ", 1.5, 1.7)]  # 0.5 s gap at 1.0..1.5
    track = mouth_track(phones, FPS, 60)
    for t in (0.55, 1.25, 2.2):
        assert np.abs(track[_frame_at(t)]).max() < 1e-3, t
    assert track[_frame_at(0.15), Coeff.JAW_OPEN] > 0.8


def test_only_mouth_columns_and_range() -> None:
    phones = [P(p, 0.05 * i, 0.05 * (i + 1)) for i, p in enumerate("hɛloʊ wɜːld ðɪs ɪz ə tɛst".replace(" ", "_"))]
    track = mouth_track(phones, FPS, 40)
    assert track.shape == (40, N_COEFFS) and track.dtype == np.float32
    other = [c for c in range(N_COEFFS) if c not in {int(m) for m in MOUTH_COEFFS}]
    assert not track[:, other].any()
    assert track.min() >= 0.0 and track.max() <= 1.0


def test_loudness_scales_opening() -> None:
    phones = [P("ɑ", 0.0, 1.0)]
    loud = mouth_track(phones, FPS, 25, loudness=np.ones(25))
    quiet = mouth_track(phones, FPS, 25, loudness=np.zeros(25))
    assert quiet[12, Coeff.JAW_OPEN] < 0.8 * loud[12, Coeff.JAW_OPEN]
    assert loud[12, Coeff.JAW_OPEN] == pytest.approx(mouth_track(phones, FPS, 25)[12, Coeff.JAW_OPEN])


def test_coarticulator_matches_mouth_track() -> None:
    rng = np.random.default_rng(1)
    symbols = ["b", "ɑː", "m", "uː", "s", "t", "ɹ", "iː", "_", "w", "ɛ", "p", "ə", "f"]
    phones, t = [], 0.0
    for _ in range(80):
        d = float(rng.uniform(0.04, 0.2))
        phones.append(P(symbols[int(rng.integers(len(symbols)))], t, t + d))
        t += d + (0.2 if rng.random() < 0.05 else 0.0)
    n = int(t * FPS) + 10
    offline = mouth_track(phones, FPS, n)
    co = Coarticulator(FPS)
    k = 0
    for i in range(n):
        tf = (i + 0.5) / FPS
        while k < len(phones) and phones[k].start_s <= tf + co.lookahead_s:  # streaming: only what is known
            co.push(phones[k])
            k += 1
        np.testing.assert_allclose(co.frame(tf), offline[i], atol=1e-5)
    assert co.n_phones < 40  # old phones are forgotten
    co.reset()
    assert co.n_phones == 0 and not co.frame(1.0).any()


def test_stress_times() -> None:
    phones = [P("ɡ", 0, 0.1), P("ʊ", 0.1, 0.2, 1), P("d", 0.2, 0.3, 1), P("ɪ", 0.3, 0.4, 2), P("ə", 0.4, 0.5, 0)]
    assert stress_times(phones) == [0.1]
    assert stress_times(phones, level=2) == [0.1, 0.3]
