"""The mouth interior on CUDA: capturable in a CUDA graph with static shapes (no host sync), same pixels as eager,
for a photo with teeth (the default) and one without (Grace Hopper). Run on the device machine: `pytest tests/gpu`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from studio.presenter.anchor import build_anchor
from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.presenter.renderer import Presenter, RenderSettings

pytestmark = pytest.mark.gpu


def _mouths(n: int = 8) -> torch.Tensor:
    rng = np.random.default_rng(3)
    c = np.zeros((n, N_COEFFS), np.float32)
    c[:, Coeff.JAW_OPEN] = np.linspace(0, 1, n)
    c[:, Coeff.LIP_PART] = rng.uniform(0, 0.6, n)
    c[:, Coeff.HEAD_YAW_DEG] = rng.uniform(-2, 2, n)
    c[:, Coeff.SHIFT_Y] = rng.uniform(-0.01, 0.01, n)
    return torch.tensor(c, device="cuda")


@pytest.mark.parametrize("size", [512, 1080])
@pytest.mark.parametrize("portrait", ["default", "hopper"])
def test_mouth_interior_in_a_cuda_graph_matches_eager(default_anchor, hopper_path, size, portrait):
    anchor = default_anchor if portrait == "default" else build_anchor(hopper_path)
    module = Presenter(anchor, RenderSettings(size_px=size, device="cuda")).module
    module.static_shapes = True
    c = _mouths()
    static_in = c.clone()
    with torch.inference_mode():
        eager = module(c).clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                module(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = module(static_in)
        static_in.copy_(c)
        graph.replay()
        torch.cuda.synchronize()
    assert torch.isfinite(static_out).all()
    torch.testing.assert_close(static_out, eager, rtol=0, atol=0.05)
