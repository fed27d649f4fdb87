"""Shared by the generator tests: a small stand-in anchor and a way to compare two generators' outputs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from studio.contracts.coeffs import N_COEFFS

EXTRA = "needs the 'engines' extra (NEWSSTUDIO_EXTRAS=engines ./installers/setup.sh)"


def small_anchor(size: int = 96, seed: int = 0) -> SimpleNamespace:
    """What the engines read of an anchor pack: the framed image and its 478 face landmarks (pixels)."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
    lm = np.zeros((478, 3), np.float32)
    lm[:, :2] = rng.uniform(size * 0.3, size * 0.7, (478, 2))
    return SimpleNamespace(image=img, landmarks=lm)


def motion(n: int, seed: int = 1) -> torch.Tensor:
    """n x N_COEFFS plausible coefficients (mouth and blinks 0..1, a few degrees of head turn)."""
    g = torch.Generator().manual_seed(seed)
    c = torch.rand((n, N_COEFFS), generator=g)
    c[:, 8:11] = (c[:, 8:11] - 0.5) * 6
    c[:, 11:] = (c[:, 11:] - 0.5) * 0.02
    return c
