"""Idle behaviour that never stops: blinks, small head sway, breathing, and nods / brow raises on stress.

All of it is a function of time and a seed, so a track is repeatable and the streaming ``IdleMotion`` gives the
same frames as ``idle_track`` for the same inputs (``idle_track`` is built on it).
- Blinks: intervals drawn uniformly from 2-6 s, 15 % of them followed by a second blink 0.3-0.45 s later; the lids
  close over 120 ms (ease-in), stay shut 30 ms and open over 180 ms; both eyes together.
- Sway: per axis a sum of three slow sinusoids (0.05-0.35 Hz) with random phases: yaw/pitch/roll within about
  1.2 / 0.6 / 0.6 deg, shift within 0.006 face widths; 1.4x livelier while speaking (smoothed over ~0.5 s).
- Breathing: ~0.25 Hz, SHIFT_Y 0.002 face widths and 0.15 deg of pitch.
- Nods: +1..1.5 deg of pitch over 250 ms on a stressed syllable (at most one per 0.6 s), every other one with a
  brow raise of 0.25 over 400 ms.
Head angles are clipped to +-2 deg and shifts to +-0.01 face widths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from studio.contracts.coeffs import N_COEFFS, Coeff

BLINK_INTERVAL_S = (2.0, 6.0)
DOUBLE_BLINK_P = 0.15
BLINK_CLOSE_S = 0.12
BLINK_HOLD_S = 0.03
BLINK_OPEN_S = 0.18
NOD_DURATION_S = 0.25
NOD_MIN_GAP_S = 0.6
BROW_DURATION_S = 0.4
MAX_ANGLE_DEG = 2.0
MAX_SHIFT = 0.01
SPEAKING_GAIN = 1.4
GAIN_TIME_CONSTANT_S = 0.5

# Sway amplitude per axis (sum of the three sinusoids' amplitudes).
_SWAY_AMPLITUDE = {
    Coeff.HEAD_YAW_DEG: 1.2,
    Coeff.HEAD_PITCH_DEG: 0.6,
    Coeff.HEAD_ROLL_DEG: 0.6,
    Coeff.SHIFT_X: 0.006,
    Coeff.SHIFT_Y: 0.004,
}


@dataclass(frozen=True)
class _Nod:
    t_s: float
    pitch_deg: float
    brow: float


def _bump(x: float) -> float:
    """Raised-cosine bump: 0 outside 0..1, 1 at 0.5."""
    if x <= 0.0 or x >= 1.0:
        return 0.0
    return 0.5 - 0.5 * math.cos(2.0 * math.pi * x)


def _blink_shape(dt: float) -> float:
    """Lid closure 0..1 at ``dt`` s after a blink starts."""
    if dt < 0.0:
        return 0.0
    if dt < BLINK_CLOSE_S:
        x = dt / BLINK_CLOSE_S
        return x * x * (3.0 - 2.0 * x)
    dt -= BLINK_CLOSE_S
    if dt < BLINK_HOLD_S:
        return 1.0
    dt -= BLINK_HOLD_S
    if dt < BLINK_OPEN_S:
        x = 1.0 - dt / BLINK_OPEN_S
        return x * x * (3.0 - 2.0 * x)
    return 0.0


_BLINK_TOTAL_S = BLINK_CLOSE_S + BLINK_HOLD_S + BLINK_OPEN_S


class IdleMotion:
    """Streaming idle motion: ``frame(t)`` for increasing ``t`` (s), ``nod(t)`` on stressed syllables."""

    def __init__(self, fps: float, seed: int = 0) -> None:
        self.fps = fps
        rng = np.random.default_rng(seed)
        # Sway: axis -> three (amplitude, frequency Hz, phase) triples.
        self._sway: list[tuple[int, list[tuple[float, float, float]]]] = []
        for axis, amp in _SWAY_AMPLITUDE.items():
            weights = rng.uniform(0.5, 1.0, 3)
            weights = weights / weights.sum()
            freqs = rng.uniform(0.05, 0.35, 3)
            phases = rng.uniform(0, 2 * math.pi, 3)
            self._sway.append((int(axis), [(amp * w, f, p) for w, f, p in zip(weights, freqs, phases)]))
        self._breath_hz = float(rng.uniform(0.22, 0.28))
        self._breath_phase = float(rng.uniform(0, 2 * math.pi))
        self._blink_rng = np.random.default_rng(rng.integers(1 << 62))
        self._nod_rng = np.random.default_rng(rng.integers(1 << 62))
        self._blinks: list[float] = []  # blink start times (s), generated ahead of time, pruned behind
        self._next_blink_s = float(self._blink_rng.uniform(0.5, 2.5))
        self._nods: list[_Nod] = []
        self._n_nods = 0
        self._gain = 1.0
        self._gain_t_s: float | None = None

    def _schedule_blinks(self, until_s: float) -> None:
        while self._next_blink_s <= until_s:
            t = self._next_blink_s
            self._blinks.append(t)
            if self._blink_rng.random() < DOUBLE_BLINK_P:
                t += float(self._blink_rng.uniform(0.3, 0.45))
                self._blinks.append(t)
            self._next_blink_s = t + float(self._blink_rng.uniform(*BLINK_INTERVAL_S))

    def nod(self, t_s: float) -> None:
        """A small nod (and every other time a brow raise) starting at ``t_s``, e.g. on a stressed syllable."""
        if self._nods and t_s - self._nods[-1].t_s < NOD_MIN_GAP_S:
            return
        pitch = float(self._nod_rng.uniform(1.0, 1.5))
        brow = 0.25 if self._n_nods % 2 == 0 else 0.0
        self._n_nods += 1
        self._nods.append(_Nod(t_s, pitch, brow))

    @property
    def nod_count(self) -> int:
        """Nods placed so far (``nod`` calls closer than NOD_MIN_GAP_S to the last one place none)."""
        return self._n_nods

    def frame(self, t_s: float, speaking: bool = False) -> np.ndarray:
        """Idle coefficients (N_COEFFS,) float32 at ``t_s``: blinks, brow, head angles and shifts."""
        return self._frame(t_s, 1.0 if speaking else 0.0)

    def _frame(self, t_s: float, activity: float) -> np.ndarray:
        out = np.zeros(N_COEFFS, np.float32)
        # Blinks.
        self._schedule_blinks(t_s + 1.0)
        self._blinks = [b for b in self._blinks if b > t_s - _BLINK_TOTAL_S - 1.0]
        blink = max((_blink_shape(t_s - b) for b in self._blinks), default=0.0)
        out[Coeff.BLINK_L] = out[Coeff.BLINK_R] = blink
        # Livelier sway while speaking, smoothed so the head never jumps.
        target = 1.0 + (SPEAKING_GAIN - 1.0) * min(max(activity, 0.0), 1.0)
        if self._gain_t_s is None:
            self._gain = target
        else:
            dt = max(0.0, t_s - self._gain_t_s)
            self._gain += (target - self._gain) * (1.0 - math.exp(-dt / GAIN_TIME_CONSTANT_S))
        self._gain_t_s = t_s
        for axis, terms in self._sway:
            out[axis] = self._gain * sum(a * math.sin(2 * math.pi * f * t_s + p) for a, f, p in terms)
        # Breathing.
        breath = math.sin(2 * math.pi * self._breath_hz * t_s + self._breath_phase)
        out[Coeff.SHIFT_Y] += 0.002 * breath
        out[Coeff.HEAD_PITCH_DEG] += 0.15 * breath
        # Nods and brow raises.
        self._nods = [n for n in self._nods if n.t_s > t_s - 1.0]
        for n in self._nods:
            out[Coeff.HEAD_PITCH_DEG] += n.pitch_deg * _bump((t_s - n.t_s) / NOD_DURATION_S)
            out[Coeff.BROW] += n.brow * _bump((t_s - n.t_s) / BROW_DURATION_S)
        for axis in (Coeff.HEAD_YAW_DEG, Coeff.HEAD_PITCH_DEG, Coeff.HEAD_ROLL_DEG):
            out[axis] = min(max(out[axis], -MAX_ANGLE_DEG), MAX_ANGLE_DEG)
        for axis in (Coeff.SHIFT_X, Coeff.SHIFT_Y):
            out[axis] = min(max(out[axis], -MAX_SHIFT), MAX_SHIFT)
        out[Coeff.BROW] = min(max(out[Coeff.BROW], -1.0), 1.0)
        return out


def idle_track(
    n_frames: int,
    fps: float,
    seed: int = 0,
    speech_activity: np.ndarray | None = None,
    stress_times_s: Sequence[float] = (),
) -> np.ndarray:
    """Idle motion for ``n_frames`` at ``fps`` (T x N_COEFFS float32; only BLINK_L/R, BROW, HEAD_*, SHIFT_* set),
    sampled at frame centres. ``speech_activity`` (T,) 0..1 makes the sway livelier; ``stress_times_s`` get nods."""
    if speech_activity is not None and len(speech_activity) != n_frames:
        raise ValueError(f"speech_activity must have one value per frame ({n_frames}), got {len(speech_activity)}")
    motion = IdleMotion(fps, seed)
    stresses = sorted(float(s) for s in stress_times_s)
    k = 0
    out = np.zeros((n_frames, N_COEFFS), np.float32)
    for i in range(n_frames):
        t = (i + 0.5) / fps
        while k < len(stresses) and stresses[k] <= t:
            motion.nod(stresses[k])
            k += 1
        activity = float(speech_activity[i]) if speech_activity is not None else 0.0
        out[i] = motion._frame(t, activity)
    return out
