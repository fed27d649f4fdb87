"""The renderer's CUDA path gives the CPU's pixels (run on the device machine: `pytest -m gpu tests/gpu`)."""

from __future__ import annotations

import numpy as np
import pytest

from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.presenter.renderer import Presenter, RenderSettings

pytestmark = pytest.mark.gpu


def _motion(n: int = 12) -> np.ndarray:
    rng = np.random.default_rng(7)
    c = np.zeros((n, N_COEFFS), np.float32)
    c[:, Coeff.JAW_OPEN] = rng.uniform(0, 1, n)
    c[:, Coeff.LIP_PART] = rng.uniform(0, 0.6, n)
    c[:, Coeff.LIP_ROUND] = rng.uniform(0, 1, n) * (rng.uniform(0, 1, n) > 0.5)
    c[:, Coeff.LIP_PRESS] = rng.uniform(0, 1, n) > 0.7
    c[:, Coeff.BLINK_L] = c[:, Coeff.BLINK_R] = rng.uniform(0, 1, n)
    c[:, Coeff.HEAD_YAW_DEG:Coeff.HEAD_ROLL_DEG + 1] = rng.uniform(-2, 2, (n, 3))
    c[:, Coeff.SHIFT_X:] = rng.uniform(-0.01, 0.01, (n, 2))
    return c


@pytest.mark.parametrize("size", [512, 1080])
def test_cuda_matches_cpu(default_anchor, size):
    c = _motion()
    cpu = Presenter(default_anchor, RenderSettings(size_px=size, device="cpu")).render(c).astype(np.int16)
    gpu = Presenter(default_anchor, RenderSettings(size_px=size, device="cuda")).render(c).astype(np.int16)
    diff = np.abs(cpu - gpu)
    assert gpu.shape == cpu.shape
    assert diff.mean() < 0.25, diff.mean()
    assert np.percentile(diff, 99.9) <= 6, np.percentile(diff, 99.9)
