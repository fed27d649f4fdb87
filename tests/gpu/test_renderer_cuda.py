"""The renderer's CUDA path gives the CPU's pixels (run on the device machine: `pytest -m gpu tests/gpu`)."""

from __future__ import annotations

import numpy as np
import pytest

from studio.contracts.coeffs import example_motion
from studio.presenter.renderer import Presenter, RenderSettings

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("size", [512, 1080])
def test_cuda_matches_cpu(default_anchor, size):
    c = example_motion(12)
    cpu = Presenter(default_anchor, RenderSettings(size_px=size, device="cpu")).render(c).astype(np.int16)
    gpu = Presenter(default_anchor, RenderSettings(size_px=size, device="cuda")).render(c).astype(np.int16)
    diff = np.abs(cpu - gpu)
    assert gpu.shape == cpu.shape
    assert diff.mean() < 0.25, diff.mean()
    assert np.percentile(diff, 99.9) <= 6, np.percentile(diff, 99.9)
