"""CUDA paths of the built-in generator and the post stage: graph-captured rendering, YUV made on the GPU, RIFE and
SPAN in half precision (run on the device machine: `pytest -m gpu tests/gpu`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.gpu


def _motion(n: int) -> np.ndarray:
    from studio.bench.renderer_speed import _motion as m

    return m(n)


def _builtin(anchor, size: int, graphs: bool):
    from studio.generators.builtin import BuiltinGenerator
    from studio.contracts import GeneratorSettings

    gen = BuiltinGenerator()
    gen.open(anchor, GeneratorSettings(device="cuda", size_px=size, batch_frames=8, cuda_graphs=graphs))
    return gen


def test_graphed_generator_matches_eager(default_anchor):
    eager, graphed = _builtin(default_anchor, 256, False), _builtin(default_anchor, 256, True)
    c = torch.tensor(_motion(13), device="cuda")  # 13 frames: one full graph batch of 8 and a padded one of 5
    a, b = eager.generate(c), graphed.generate(c)
    assert b.shape == a.shape == (13, 3, 256, 256)
    assert float((b - a).abs().max()) < 1e-2
    strides = np.full(13, 2)
    fa, _ = eager.render_span(c, strides, None)  # keyframes + motion-space in-betweens, graphed field and compose
    fb, _ = graphed.render_span(c, strides, None)
    assert float((fb - fa).abs().max()) < 1e-2


def test_yuv_conversion_on_the_gpu_shape_and_range():
    from studio.encode.colour import rgb_to_i420, rgb_to_nv12

    frames = torch.full((2, 3, 64, 64), 255.0, device="cuda")
    for convert in (rgb_to_nv12, rgb_to_i420):
        yuv = convert(frames)
        assert yuv.shape == (2, 96, 64) and yuv.dtype == torch.uint8 and yuv.is_cuda
        assert int(yuv[:, :64].float().mean().round()) == 235  # white is Y = 235 in limited range


def test_rife_and_span_run_in_half_precision():
    from studio.enhance.rife import RifeInterpolator
    from studio.enhance.upscale import LearnedUpscaler

    ramp = torch.linspace(0, 255, 96, device="cuda")
    a = torch.stack([ramp.view(1, -1).expand(96, -1), ramp.view(-1, 1).expand(-1, 96),
                     255 - ramp.view(1, -1).expand(96, -1)])[None]
    mid = RifeInterpolator("cuda", half=True).between(a, a, 0.5)
    assert mid.shape == a.shape and float((mid - a).abs().mean()) < 3.0  # identical smooth inputs: the same frame back
    up = LearnedUpscaler("cuda", half=True)(a[:, :, :32, :32])
    assert up.shape == (1, 3, 128, 128)


def test_the_post_stages_span_keeps_the_portrait_within_45_db_of_fp32(default_anchor):
    """The upscaler in the form the core's post stage runs it on this GPU (reduced precision, NHWC) against SPAN in
    fp32 on the portrait's face, 270 -> 1080."""
    import torch.nn.functional as F

    from studio.enhance.quality import psnr
    from studio.enhance.upscale import LearnedUpscaler
    from studio.pipeline.post import span_for

    face = torch.as_tensor(np.asarray(default_anchor.image), dtype=torch.float32, device="cuda").permute(2, 0, 1)[None]
    small = F.interpolate(face, size=(270, 270), mode="area")
    span = span_for("cuda")
    got, ref = span(small), LearnedUpscaler("cuda")(small)
    assert span.dtype in (torch.bfloat16, torch.float16) and got.shape == ref.shape == (1, 3, 1080, 1080)
    assert psnr(got, ref) > 45.0


def test_graphed_flow_fill_at_the_presenter_size_gives_the_eager_frames(default_anchor):
    """The core's path with keyframes and an upscale: the in-betweens made at 1080 px from the 288-px keys' flows,
    eager and replayed as CUDA graphs (a chunk of 13 slots: one graph batch of 8 pairs and a padded one), agree."""
    import torch.nn.functional as F

    from studio.pipeline.post import FlowFill, span_for

    gen = _builtin(default_anchor, 288, False)
    keys = gen.generate(torch.tensor(_motion(16)[::4], device="cuda"))  # 4 keys, 4 slots apart
    mask = np.zeros(16, bool)
    mask[3::4] = True
    large = span_for("cuda")(F.interpolate(keys, size=(270, 270), mode="bicubic", antialias=True).clamp(0, 255))
    outs = []
    for graphs in (False, True):
        ff = FlowFill("cuda")
        outs.append(ff.fill(keys, mask, restart=True, graphs=graphs, large=large))
        assert ff.frames_interpolated == 9
    eager, graphed = outs
    assert eager.shape == (16, 3, 1080, 1080) and torch.equal(eager[3], large[0].float())
    assert float((graphed - eager).abs().max()) < 0.5


@pytest.mark.parametrize("graphs", [False, True])
def test_flow_fill_never_waits_for_the_gpu(default_anchor, graphs):
    """The post stage's in-betweens are queued without the host waiting for the GPU (no copy from pageable memory, no
    index list turned into a device tensor): CUDA's sync debug mode raises on any synchronizing call."""
    from studio.pipeline.post import FlowFill

    gen = _builtin(default_anchor, 288, False)
    keys = gen.generate(torch.tensor(_motion(16)[::4], device="cuda"))
    large = torch.nn.functional.interpolate(keys, scale_factor=2, mode="bilinear")
    mask = np.zeros(16, bool)
    mask[3::4] = True
    ff = FlowFill("cuda")
    ff.warm(288, 576, torch.device("cuda"))  # graph capture synchronizes: before the check
    ff.fill(keys, mask, restart=True, graphs=graphs, large=large)  # the eager path's first call (cuDNN set-up)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = ff.fill(keys, mask, restart=False, graphs=graphs, large=large)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert out.shape == (16, 3, 576, 576)
