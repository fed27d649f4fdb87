"""Phones -> visemes -> mouth coefficients, with coarticulation.

Every phone (IPA from Piper / eSpeak NG, or ARPAbet from pocketsphinx) maps to a ``Viseme``; every viseme has a
target for the five mouth coefficients (see ``studio.contracts.coeffs``). The mouth at time ``t`` is a blend of the
targets of the phones around ``t``, weighted by dominance functions in the style of Cohen & Massaro (1993):

    D_k(t) = alpha_k * exp(-max(0, |t - centre_k| - plateau_k) / tau_k)     (per coefficient)
    mouth(t) = (sum_k D_k(t) * target_k + REST_DOMINANCE * 0) / (sum_k D_k(t) + REST_DOMINANCE)

``tau`` is longer before the phone than after it for rounded visemes, so rounding anticipates a coming /w/ or /u/.
Two hard constraints are applied on top of the blend, because a soft blend never quite reaches them:
bilabials (p, b, m) reach full closure over their closure (at least 50 ms wide, so that a frame grid of 25 fps
always samples it), and silences (pause phones, gaps between phones, before the first and after the last phone)
go to rest (lips closed, jaw relaxed).

One core function (`_evaluate`) serves both the offline `mouth_track` and the streaming `Coarticulator`: a phone
influences time ``t`` only if it starts at most ``lookahead_s`` after ``t`` (with a smooth taper) and ends at most
``REACH_S`` before ``t``, so the streaming path gives the same numbers once phones up to ``t + lookahead_s`` are in.
"""

from __future__ import annotations

import collections
import logging
import math
import re
import unicodedata
from dataclasses import dataclass
from enum import IntEnum
from typing import Sequence

import numpy as np

from studio.contracts.coeffs import MOUTH_COEFFS, N_COEFFS, Coeff
from studio.speech.types import PhonemeTiming

log = logging.getLogger(__name__)


class Viseme(IntEnum):
    """Mouth shape classes (after the Preston Blair / Disney set, refined for English)."""

    SIL = 0  # rest: lips closed, jaw relaxed
    PBM = 1  # p b m: lips pressed
    FV = 2  # f v: lower lip to upper teeth
    TH = 3  # th: tongue between the teeth
    DT_N_L = 4  # t d n l: tongue tip, mouth slightly open
    KG = 5  # k g ng: back of tongue, mouth open
    SZ = 6  # s z: teeth close, lips spread
    SH_CH = 7  # sh ch j zh: lips pushed out
    R = 8  # r: lips slightly rounded
    W_OO = 9  # w oo: strong round, small opening
    AA = 10  # a in "father": jaw wide open
    AE_EH = 11  # cat, bed: open and spread
    IH_IY = 12  # bit, beat, y: spread, small opening
    AO_O = 13  # thought, go: open and rounded
    ER = 14  # bird: slightly rounded, mid opening
    UH = 15  # schwa, "but": neutral mid opening (also the shape of unknown phones)


NEUTRAL_VISEME = Viseme.UH

# Targets: JAW_OPEN, LIP_PART, LIP_ROUND, LIP_SPREAD, LIP_PRESS (all 0..1, see coeffs.py).
_TARGETS: dict[Viseme, tuple[float, float, float, float, float]] = {
    Viseme.SIL: (0.0, 0.0, 0.0, 0.0, 0.0),
    Viseme.PBM: (0.0, 0.0, 0.0, 0.0, 1.0),
    Viseme.FV: (0.12, 0.2, 0.0, 0.2, 0.25),
    Viseme.TH: (0.2, 0.4, 0.0, 0.1, 0.0),
    Viseme.DT_N_L: (0.25, 0.45, 0.0, 0.15, 0.0),
    Viseme.KG: (0.3, 0.45, 0.0, 0.05, 0.0),
    Viseme.SZ: (0.1, 0.35, 0.0, 0.45, 0.0),
    Viseme.SH_CH: (0.15, 0.35, 0.7, 0.0, 0.0),
    Viseme.R: (0.2, 0.35, 0.45, 0.0, 0.0),
    Viseme.W_OO: (0.15, 0.2, 1.0, 0.0, 0.0),
    Viseme.AA: (1.0, 1.0, 0.0, 0.1, 0.0),
    Viseme.AE_EH: (0.65, 0.8, 0.0, 0.45, 0.0),
    Viseme.IH_IY: (0.3, 0.55, 0.0, 0.8, 0.0),
    Viseme.AO_O: (0.7, 0.75, 0.6, 0.0, 0.0),
    Viseme.ER: (0.35, 0.5, 0.35, 0.0, 0.0),
    Viseme.UH: (0.45, 0.6, 0.1, 0.05, 0.0),
}

# Column order of the 5-vectors above, in the full coefficient vector.
_MOUTH_IDX = np.array([int(c) for c in MOUTH_COEFFS])
_TARGET_TABLE = np.array([_TARGETS[v] for v in Viseme], np.float64)  # V x 5

_VOWELS = frozenset({Viseme.AA, Viseme.AE_EH, Viseme.IH_IY, Viseme.AO_O, Viseme.ER, Viseme.UH, Viseme.W_OO})
_ROUNDED = frozenset({Viseme.W_OO, Viseme.SH_CH, Viseme.R, Viseme.AO_O, Viseme.ER})


@dataclass(frozen=True)
class _Dominance:
    alpha: tuple[float, float, float, float, float]  # strength per mouth coefficient
    tau_before_s: tuple[float, float, float, float, float]  # decay before the phone (anticipation)
    tau_after_s: float  # decay after the phone (carry-over)
    plateau_frac: float  # half-width of the full-strength plateau, as a fraction of the duration


def _dominance_for(v: Viseme) -> _Dominance:
    if v is Viseme.SIL:
        return _Dominance((1.5,) * 5, (0.03,) * 5, 0.03, 0.5)
    if v is Viseme.PBM:
        return _Dominance((4.0, 4.0, 0.5, 0.5, 4.0), (0.025,) * 5, 0.025, 0.3)
    if v in _VOWELS:
        base = 1.0
    else:
        base = 0.7
    alpha = [base] * 5
    tau_before = [0.05] * 5
    if v in _ROUNDED:
        # Rounding spreads far ahead of the rounded phone (anticipatory coarticulation) and wins over neighbours.
        alpha[2] = 4.0
        tau_before[2] = 0.12
    if v in (Viseme.SZ, Viseme.IH_IY):
        alpha[3] = 2.0  # spreading is a strong feature of /s/ and /i/
    return _Dominance(tuple(alpha), tuple(tau_before), 0.05, 0.3)  # type: ignore[arg-type]


_DOM = {v: _dominance_for(v) for v in Viseme}
_ALPHA = np.array([_DOM[v].alpha for v in Viseme], np.float64)  # V x 5
_TAU_BEFORE = np.array([_DOM[v].tau_before_s for v in Viseme], np.float64)  # V x 5
_TAU_AFTER = np.array([_DOM[v].tau_after_s for v in Viseme], np.float64)  # V
_PLATEAU = np.array([_DOM[v].plateau_frac for v in Viseme], np.float64)  # V

REST_DOMINANCE = 0.02  # weak everywhere-present pull to rest: far from any phone the mouth closes
REACH_S = 0.5  # a phone that ended this long ago has no influence any more
LOOKAHEAD_S = 0.06  # default: a phone starting this long after t has no influence yet (tapered)
CLOSURE_MIN_HALF_S = 0.025  # bilabial closures last at least 50 ms
CLOSURE_RAMP_S = 0.04  # lips close / open over 40 ms around a bilabial closure
SILENCE_INSET_S = 0.03  # a pause is at rest from 30 ms after its start to 30 ms before its end ...
SILENCE_RAMP_S = 0.05  # ... and eases in / out over 50 ms
MIN_GAP_S = 0.005  # gaps shorter than this between phones are not pauses
TRAILING_SILENCE_S = 3600.0  # the rest after the last phone (finite: keeps the arithmetic NaN-free)
LOUDNESS_WEIGHT = 0.5  # share of the jaw opening driven by the loudness envelope

# --- phone -> viseme -------------------------------------------------------------------------------------------

_IPA: dict[str, Viseme] = {}


def _add(v: Viseme, *phones: str) -> None:
    for p in phones:
        _IPA[p] = v


_add(Viseme.SIL, "", "_", " ", "sil", "sp", "spn", "pau", "#", "^", "$", ",", ".", "!", "?", ";", ":", "-", "…")
_add(Viseme.PBM, "p", "b", "m", "ʙ")
_add(Viseme.FV, "f", "v", "ɱ", "ʋ", "ɸ", "β")
_add(Viseme.TH, "θ", "ð")
_add(Viseme.DT_N_L, "t", "d", "n", "l", "ɾ", "ɫ", "ɬ", "ɮ", "ʔ", "ʈ", "ɖ", "ɳ", "ɭ", "ɗ", "ɲ", "ʎ", "n̩", "l̩")
_add(Viseme.KG, "k", "g", "ɡ", "ŋ", "x", "ɣ", "c", "ɟ", "q", "ɢ", "χ", "ʁ", "ɴ")
_add(Viseme.SZ, "s", "z", "ts", "dz", "ʦ", "ʣ")
_add(Viseme.SH_CH, "ʃ", "ʒ", "tʃ", "dʒ", "t͡ʃ", "d͡ʒ", "ʧ", "ʤ", "ɕ", "ʑ", "ʂ", "ʐ", "ç")
_add(Viseme.R, "ɹ", "r", "ɻ", "ʀ", "ɹ̩")
_add(Viseme.W_OO, "w", "ʍ", "u", "ʊ", "ɯ", "ʉ", "ɥ")
_add(Viseme.AA, "ɑ", "a", "ɐ", "ä", "aɪ", "aʊ", "ɑɪ")
_add(Viseme.AE_EH, "æ", "ɛ", "e", "eɪ", "œ", "ø", "ɜ˞")
_add(Viseme.IH_IY, "ɪ", "i", "ᵻ", "j", "y", "ʏ", "ɨ", "ɪɹ", "iə")
_add(Viseme.AO_O, "ɔ", "o", "ɒ", "oʊ", "əʊ", "ɔɪ", "ɔː", "ɔɹ", "oːɹ")
_add(Viseme.ER, "ɚ", "ɝ", "ɜ", "ɜː", "ɜɹ", "əɹ")
_add(Viseme.UH, "ə", "ʌ", "h", "ɦ", "ɵ", "ɤ", "əl")

_ARPABET: dict[str, Viseme] = {
    "AA": Viseme.AA, "AE": Viseme.AE_EH, "AH": Viseme.UH, "AO": Viseme.AO_O, "AW": Viseme.AA, "AX": Viseme.UH,
    "AY": Viseme.AA, "B": Viseme.PBM, "CH": Viseme.SH_CH, "D": Viseme.DT_N_L, "DH": Viseme.TH, "DX": Viseme.DT_N_L,
    "EH": Viseme.AE_EH, "ER": Viseme.ER, "EY": Viseme.AE_EH, "F": Viseme.FV, "G": Viseme.KG, "HH": Viseme.UH,
    "IH": Viseme.IH_IY, "IX": Viseme.IH_IY, "IY": Viseme.IH_IY, "JH": Viseme.SH_CH, "K": Viseme.KG,
    "L": Viseme.DT_N_L, "M": Viseme.PBM, "N": Viseme.DT_N_L, "NG": Viseme.KG, "OW": Viseme.AO_O, "OY": Viseme.AO_O,
    "P": Viseme.PBM, "R": Viseme.R, "S": Viseme.SZ, "SH": Viseme.SH_CH, "T": Viseme.DT_N_L, "TH": Viseme.TH,
    "UH": Viseme.W_OO, "UW": Viseme.W_OO, "V": Viseme.FV, "W": Viseme.W_OO, "Y": Viseme.IH_IY, "Z": Viseme.SZ,
    "ZH": Viseme.SH_CH, "SIL": Viseme.SIL, "SP": Viseme.SIL, "SPN": Viseme.SIL, "PAU": Viseme.SIL,
}  # fmt: skip

_STRESS_AND_LENGTH = re.compile("[ˈˌ'ːˑ.‿|‖]")
_ARPABET_TOKEN = re.compile(r"^[A-Za-z]{1,3}[0-2]?$")


def viseme_for_phone(phone: str) -> Viseme:
    """The viseme of one phone: IPA (any diacritics, stress and length marks) or ARPAbet (any case, stress
    digits ignored, pocketsphinx fillers like ``+NSN+`` are silence). Unknown phones give ``NEUTRAL_VISEME``."""
    p = phone.strip()
    if not p:
        return Viseme.SIL
    if p.startswith("+") or p.startswith("<") or p.startswith("["):
        return Viseme.SIL  # pocketsphinx fillers (+NSN+, +SPN+, +BREATH+), <sil>, <s>, [NOISE]
    if _ARPABET_TOKEN.match(p):
        code = p.rstrip("012").upper()
        if len(code) > 1 and code in _ARPABET:
            return _ARPABET[code]
        if len(code) == 1 and p.lower() not in _IPA and code in _ARPABET:
            return _ARPABET[code]
        if len(code) == 1 and p.isupper() and p.lower() in _IPA:
            return _IPA[p.lower()]  # single ARPAbet letters mean the same as the IPA letter
    v = _IPA.get(p)
    if v is not None:
        return v
    bare = _STRESS_AND_LENGTH.sub("", unicodedata.normalize("NFC", p))
    v = _IPA.get(bare)
    if v is not None:
        return v
    # Drop combining diacritics (nasalisation, syllabic marks, ties ...) and try again, then the first symbol.
    bare = "".join(ch for ch in unicodedata.normalize("NFD", bare) if not unicodedata.combining(ch))
    v = _IPA.get(bare)
    if v is not None:
        return v
    for ch in bare:
        v = _IPA.get(ch)
        if v is not None and v is not Viseme.SIL:
            return v
    if not bare:
        return Viseme.SIL  # the phone was only a stress / length / boundary mark
    log.debug("unknown phone %r: neutral viseme", phone)
    return NEUTRAL_VISEME


def viseme_targets(viseme: Viseme) -> np.ndarray:
    """The full coefficient vector (N_COEFFS,) of a viseme's target shape; only the mouth coefficients are set."""
    out = np.zeros(N_COEFFS, np.float32)
    out[_MOUTH_IDX] = _TARGET_TABLE[int(viseme)]
    return out


def is_vowel(phone: str) -> bool:
    """Whether a phone (IPA or ARPAbet) is a vowel (the nucleus of a syllable)."""
    v = viseme_for_phone(phone)
    if v is Viseme.W_OO:
        return phone.strip().rstrip("012").upper() not in ("W",) and not phone.strip().startswith(("w", "ʍ"))
    if v is Viseme.IH_IY:
        return phone.strip().rstrip("012").upper() != "Y" and not phone.strip().startswith("j")
    return v in _VOWELS and phone.strip().rstrip("012").upper() != "HH" and phone.strip() not in ("h", "ɦ")


def stress_times(phonemes: Sequence[PhonemeTiming], level: int = 1) -> list[float]:
    """Start times (s) of the vowels carrying stress (``stress`` in 1..level; 1 = primary only)."""
    return [p.start_s for p in phonemes if 1 <= p.stress <= level and is_vowel(p.phoneme)]


# --- the coarticulation core ------------------------------------------------------------------------------------


def _phone_arrays(phones: Sequence[PhonemeTiming]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts_s, ends_s, visemes) for the phones plus a silence phone in every gap and after the last phone."""
    starts: list[float] = []
    ends: list[float] = []
    vis: list[int] = []
    prev_end: float | None = None
    for p in phones:
        if prev_end is not None and p.start_s - prev_end > MIN_GAP_S:
            starts.append(prev_end)
            ends.append(p.start_s)
            vis.append(int(Viseme.SIL))
        starts.append(p.start_s)
        ends.append(max(p.end_s, p.start_s))
        vis.append(int(viseme_for_phone(p.phoneme)))
        prev_end = max(p.end_s, prev_end) if prev_end is not None else p.end_s
    if prev_end is not None:
        # After the last phone: rest (for the streaming path, until the next phone arrives and replaces this).
        starts.append(prev_end)
        ends.append(prev_end + TRAILING_SILENCE_S)
        vis.append(int(Viseme.SIL))
    return np.asarray(starts, np.float64), np.asarray(ends, np.float64), np.asarray(vis, np.int64)


def _raised_ramp(x: np.ndarray) -> np.ndarray:
    """0 at x <= 0, 1 at x >= 1, smooth (raised cosine) in between."""
    x = np.clip(x, 0.0, 1.0)
    return 0.5 - 0.5 * np.cos(math.pi * x)


def _evaluate(
    starts_s: np.ndarray, ends_s: np.ndarray, vis: np.ndarray, t_s: np.ndarray, lookahead_s: float
) -> np.ndarray:
    """Mouth coefficients (T x 5: jaw, part, round, spread, press) at times ``t_s`` (T,) from phones (K,)."""
    out = np.zeros((len(t_s), 5), np.float64)
    if len(vis) == 0 or len(t_s) == 0:
        return out
    t = t_s[:, None]  # T x 1
    dur = ends_s - starts_s  # K
    centre = 0.5 * (starts_s + ends_s)
    # Which phones can see t: started at most lookahead after t (smooth taper), ended at most REACH_S before t.
    la = max(lookahead_s, 1e-3)
    gate = _raised_ramp((t - (starts_s - la)[None, :]) / la) * (ends_s[None, :] >= t - REACH_S)  # T x K
    plateau = _PLATEAU[vis] * dur  # K
    off = t - centre[None, :]  # T x K
    dist = np.maximum(np.abs(off) - plateau[None, :], 0.0)  # T x K
    before = off < 0  # t is before the phone's centre: anticipation
    tau = np.where(before[:, :, None], _TAU_BEFORE[vis][None, :, :], _TAU_AFTER[vis][None, :, None])  # T x K x 5
    dom = _ALPHA[vis][None, :, :] * np.exp(-dist[:, :, None] / tau) * gate[:, :, None]  # T x K x 5
    num = np.einsum("tkc,kc->tc", dom, _TARGET_TABLE[vis])
    den = dom.sum(axis=1) + REST_DOMINANCE
    out = num / den

    # Hard constraints: full closure on bilabials, rest in pauses.
    is_pbm = vis == int(Viseme.PBM)
    if is_pbm.any():
        half = np.maximum(0.5 * dur[is_pbm], CLOSURE_MIN_HALF_S)
        d = np.abs(t - centre[is_pbm][None, :]) - half[None, :]  # T x Kp, <= 0 inside the closure
        w = (1.0 - _raised_ramp(d / CLOSURE_RAMP_S)) * gate[:, is_pbm]
        w = w.max(axis=1)[:, None]  # T x 1
        out = (1.0 - w) * out + w * _TARGET_TABLE[int(Viseme.PBM)][None, :]
    is_sil = vis == int(Viseme.SIL)
    if is_sil.any():
        a = starts_s[is_sil] + SILENCE_INSET_S
        b = ends_s[is_sil] - SILENCE_INSET_S
        inside = (t >= a[None, :]) & (t <= b[None, :]) & (a <= b)[None, :]
        d = np.where(t < a[None, :], a[None, :] - t, t - b[None, :])  # distance outside the rest interval
        d = np.where(a[None, :] <= b[None, :], d, np.abs(t - centre[is_sil][None, :]) + 0.5 * (a - b)[None, :])
        w = np.where(inside, 1.0, 1.0 - _raised_ramp(d / SILENCE_RAMP_S)) * gate[:, is_sil]
        w = w.max(axis=1)[:, None]
        out = (1.0 - w) * out  # rest is all zeros
    return out


def _to_track(mouth: np.ndarray) -> np.ndarray:
    """T x 5 mouth values -> T x N_COEFFS float32 with only the mouth coefficients set."""
    track = np.zeros((mouth.shape[0], N_COEFFS), np.float32)
    track[:, _MOUTH_IDX] = np.clip(mouth, 0.0, 1.0)
    return track


def _apply_loudness(mouth: np.ndarray, loudness: np.ndarray) -> np.ndarray:
    """Let the speech energy (T,) 0..1 drive part of the jaw opening and lip parting."""
    g = np.clip(loudness.astype(np.float64), 0.0, 1.0)
    mouth = mouth.copy()
    mouth[:, 0] *= 1.0 - LOUDNESS_WEIGHT + LOUDNESS_WEIGHT * g
    mouth[:, 1] *= 1.0 - 0.5 * LOUDNESS_WEIGHT + 0.5 * LOUDNESS_WEIGHT * g
    return mouth


def mouth_track(
    phonemes: Sequence[PhonemeTiming],
    fps: float,
    n_frames: int,
    loudness: np.ndarray | None = None,
    *,
    lookahead_s: float = LOOKAHEAD_S,
) -> np.ndarray:
    """Mouth coefficients for ``n_frames`` frames at ``fps`` (T x N_COEFFS float32, only mouth columns set),
    sampled at frame centres ``(i + 0.5) / fps``. ``loudness`` (T,) 0..1 optionally scales the opening."""
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    if loudness is not None and len(loudness) != n_frames:
        raise ValueError(f"loudness must have one value per frame ({n_frames}), got {len(loudness)}")
    t_s = (np.arange(n_frames, dtype=np.float64) + 0.5) / fps
    starts, ends, vis = _phone_arrays(phonemes)
    mouth = np.zeros((n_frames, 5), np.float64)
    # Evaluate in blocks of frames against the phones that can reach them (bounded memory for long scripts).
    block = max(1, int(round(4.0 * fps)))
    for i0 in range(0, n_frames, block):
        tb = t_s[i0 : i0 + block]
        sel = (starts <= tb[-1] + lookahead_s) & (ends >= tb[0] - REACH_S)
        mouth[i0 : i0 + block] = _evaluate(starts[sel], ends[sel], vis[sel], tb, lookahead_s)
    if loudness is not None:
        mouth = _apply_loudness(mouth, np.asarray(loudness))
    return _to_track(mouth)


class Coarticulator:
    """Streaming mouth shapes for phones that arrive one by one (e.g. from a live phone recognizer).

    ``frame(t)`` equals ``mouth_track`` at ``t`` for the same phones, as soon as every phone that starts before
    ``t + lookahead_s`` has been pushed: render about ``lookahead_s`` behind the newest phone. Phones are expected in
    time order; phones that ended more than ``history_s`` before the latest frame are forgotten.
    """

    def __init__(self, fps: float, lookahead_s: float = LOOKAHEAD_S, history_s: float = 2.0) -> None:
        self.fps = fps
        self.lookahead_s = lookahead_s
        self.history_s = max(history_s, REACH_S + 0.1)
        self._phones: collections.deque[PhonemeTiming] = collections.deque()
        self._cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def push(self, phone: PhonemeTiming) -> None:
        """Add the next recognized / synthesized phone."""
        self._phones.append(phone)
        self._cache = None

    def reset(self) -> None:
        """Forget every phone (e.g. a new utterance with a new time origin)."""
        self._phones.clear()
        self._cache = None

    @property
    def n_phones(self) -> int:
        """Phones currently remembered (bounded by ``history_s``)."""
        return len(self._phones)

    @property
    def latest_end_s(self) -> float:
        """End time of the newest phone, or -inf when none."""
        return self._phones[-1].end_s if self._phones else float("-inf")

    def frame(self, t_s: float) -> np.ndarray:
        """Mouth coefficients (N_COEFFS,) float32 at time ``t_s`` (only the mouth coefficients set)."""
        while self._phones and self._phones[0].end_s < t_s - self.history_s:
            self._phones.popleft()
            self._cache = None
        if self._cache is None:
            self._cache = _phone_arrays(list(self._phones))
        starts, ends, vis = self._cache
        sel = (starts <= t_s + self.lookahead_s) & (ends >= t_s - REACH_S)
        mouth = _evaluate(starts[sel], ends[sel], vis[sel], np.array([t_s], np.float64), self.lookahead_s)
        return _to_track(mouth)[0]
