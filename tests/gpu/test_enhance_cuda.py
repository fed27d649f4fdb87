"""CUDA paths of the real-time pipeline: graph-captured rendering, NV12 output, RIFE and SPAN on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def anchor():
    from studio.presenter.anchor import build_anchor

    return build_anchor()


def _motion(n: int) -> np.ndarray:
    from studio.bench.renderer_speed import _motion as m

    return m(n)


def test_graphed_renderer_matches_eager(anchor):
    from studio.pipeline.stages import EncoderKind, Optimization, Pipeline, PipelineSettings, _Graphed

    p = Pipeline(anchor, PipelineSettings(size_px=256, device="cuda", encoder=EncoderKind.NV12_HOST,
                                          optimizations=frozenset({Optimization.CUDA_GRAPHS})))
    c = torch.tensor(_motion(13), device="cuda")  # 13 frames: one full graph batch of 8 and a padded one of 5
    with torch.inference_mode():
        p.presenter.module.static_shapes = False
        eager = p.presenter.module(c)
        graphed = p._full_graph(c)
    assert isinstance(p._full_graph, _Graphed)
    assert graphed.shape == eager.shape
    assert float((graphed - eager).abs().max()) < 1e-2


def test_nv12_conversion_shape_and_range():
    from studio.pipeline.stages import rgb_to_nv12

    frames = torch.full((2, 3, 64, 64), 255.0, device="cuda")
    nv12 = rgb_to_nv12(frames)
    assert nv12.shape == (2, 96, 64) and nv12.dtype == torch.uint8
    assert int(nv12[:, :64].float().mean().round()) == 235  # white is Y = 235 in limited range


def test_rife_and_span_run_in_half_precision(anchor):
    from studio.enhance.rife import RifeInterpolator
    from studio.enhance.upscale import LearnedUpscaler

    ramp = torch.linspace(0, 255, 96, device="cuda")
    a = torch.stack([ramp.view(1, -1).expand(96, -1), ramp.view(-1, 1).expand(-1, 96), 255 - ramp.view(1, -1).expand(96, -1)])[None]
    mid = RifeInterpolator("cuda", half=True).between(a, a, 0.5)
    assert mid.shape == a.shape and float((mid - a).abs().mean()) < 3.0  # identical smooth inputs: the same frame back
    up = LearnedUpscaler("cuda", half=True)(a[:, :, :32, :32])
    assert up.shape == (1, 3, 128, 128)
