"""Named motion coefficients: the contract between motion sources and the renderer.

A motion track is a ``T x N_COEFFS`` float32 array, one row per keyframe. Units:
- JAW_OPEN, LIP_PART, LIP_ROUND, LIP_SPREAD, LIP_PRESS, BLINK_L, BLINK_R: 0..1
  (0 = rest with lips closed / eyes open; JAW_OPEN 1 = a wide "aa").
- BROW: -1..1 (raise > 0).
- HEAD_YAW_DEG, HEAD_PITCH_DEG, HEAD_ROLL_DEG: degrees (pitch > 0 = nod down, yaw > 0 = turn to image right).
- SHIFT_X, SHIFT_Y: head translation in face widths (0.01 = 1 % of the face width; y > 0 = down).
BLINK_L is the eye on the image's left.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np


class Coeff(IntEnum):
    JAW_OPEN = 0
    LIP_PART = 1
    LIP_ROUND = 2
    LIP_SPREAD = 3
    LIP_PRESS = 4
    BLINK_L = 5
    BLINK_R = 6
    BROW = 7
    HEAD_YAW_DEG = 8
    HEAD_PITCH_DEG = 9
    HEAD_ROLL_DEG = 10
    SHIFT_X = 11
    SHIFT_Y = 12


N_COEFFS = len(Coeff)
MOUTH_COEFFS = (Coeff.JAW_OPEN, Coeff.LIP_PART, Coeff.LIP_ROUND, Coeff.LIP_SPREAD, Coeff.LIP_PRESS)
# The coefficients that open the lips: where they are all at rest the mouth is closed, whatever LIP_SPREAD (a closed
# smile) and LIP_PRESS (lips thinned) do to its shape.
OPENING_COEFFS = (Coeff.JAW_OPEN, Coeff.LIP_PART, Coeff.LIP_ROUND)


@dataclass(frozen=True)
class MotionTrack:
    """Coefficients per keyframe at ``fps``."""

    fps: float
    values: np.ndarray  # T x N_COEFFS, float32

    def __post_init__(self) -> None:
        if self.values.ndim != 2 or self.values.shape[1] != N_COEFFS:
            raise ValueError(f"motion values must be T x {N_COEFFS}, got {self.values.shape}")

    @property
    def n_frames(self) -> int:
        return int(self.values.shape[0])

    @property
    def duration_s(self) -> float:
        return self.n_frames / self.fps

    @staticmethod
    def zeros(n_frames: int, fps: float) -> "MotionTrack":
        return MotionTrack(fps=fps, values=np.zeros((n_frames, N_COEFFS), np.float32))


def example_motion(n: int, seed: int = 7) -> np.ndarray:
    """n x N_COEFFS random motion inside the rig's range (speech, blinks, a few degrees of head turn): inputs for
    compiling and verifying engines that exercise every path of the renderer."""
    rng = np.random.default_rng(seed)
    c = np.zeros((n, N_COEFFS), np.float32)
    c[:, Coeff.JAW_OPEN] = rng.uniform(0, 1, n)
    c[:, Coeff.LIP_PART] = rng.uniform(0, 0.6, n)
    c[:, Coeff.LIP_ROUND] = rng.uniform(0, 1, n) * (rng.uniform(0, 1, n) > 0.5)
    c[:, Coeff.LIP_PRESS] = rng.uniform(0, 1, n) > 0.7
    c[:, Coeff.BLINK_L] = c[:, Coeff.BLINK_R] = rng.uniform(0, 1, n)
    c[:, Coeff.HEAD_YAW_DEG:Coeff.HEAD_ROLL_DEG + 1] = rng.uniform(-2, 2, (n, 3))
    c[:, Coeff.SHIFT_X:] = rng.uniform(-0.01, 0.01, (n, 2))
    return c
