"""Enhancement: the ncnn reader, RIFE's IFNet, keyframe planning, motion-space interpolation, quality metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from studio.enhance.interp import MotionSpaceInterpolator, plan_keys
from studio.enhance.ncnn import NcnnNet, load_weights, parse_param
from studio.enhance.quality import psnr, ssim
from studio.errors import ModelLoadError


def _fp16_blob(values: np.ndarray) -> bytes:
    raw = values.astype(np.float16).tobytes()
    raw += b"\0" * ((-len(raw)) % 4)
    return np.array([0x01306B47], np.uint32).tobytes() + raw


def test_ncnn_reader_runs_a_tiny_graph():
    param = """7767517
4 4
Input in 0 1 data
Convolution conv 1 1 data c 0=2 1=1 5=1 6=6
Split sp 1 2 c c0 c1
BinaryOp add 2 1 c0 c1 out 0=0
"""
    w = np.arange(6, dtype=np.float32).reshape(2, 3, 1, 1)
    bias = np.array([1.0, -1.0], np.float32)
    layers = parse_param(param)
    net = NcnnNet(layers, load_weights(layers, _fp16_blob(w) + bias.tobytes()))
    x = torch.ones(1, 3, 2, 2)
    y = net(x)
    expect = 2 * (torch.nn.functional.conv2d(x, torch.from_numpy(w), torch.from_numpy(bias)))
    assert torch.allclose(y, expect)


def test_ncnn_reader_rejects_wrong_sizes_and_layers():
    layers = parse_param("7767517\n2 2\nInput in 0 1 data\nConvolution conv 1 1 data c 0=2 1=1 5=0 6=6\n")
    with pytest.raises(ModelLoadError):
        load_weights(layers, b"\0" * 3 * 4)  # tag + 2 floats: too short for 6 weights... and misaligned
    with pytest.raises(ModelLoadError):
        NcnnNet(parse_param("7767517\n1 1\nDeconvolution d 0 1 x\n"), {})


def test_ifnet_accepts_the_4x_state_dict_layout():
    from studio.enhance.rife import IFNet

    net = IFNet().eval()
    names = set(net.state_dict())
    assert "block0.conv0.0.0.weight" in names and "block3.lastconv.0.weight" in names
    assert net.state_dict()["block0.lastconv.0.weight"].shape == (192, 24, 4, 4)
    a = torch.rand(1, 3, 64, 64)
    with torch.inference_mode():
        out = net(a, a, 0.5)
    assert out.shape == a.shape


def test_plan_keys_strides_and_adaptive_fallback():
    t = 9
    lm = torch.zeros(t, 4, 2)
    lm[:, :, 0] = torch.arange(t, dtype=torch.float32).view(-1, 1)  # linear motion: interpolation is exact
    plan = plan_keys(lm, np.full(t, 2), max_error_px=0.1)
    assert plan.full.tolist() == [True, False] * 4 + [True]
    assert plan.fallback_frames == 0
    lm[3, :, 1] = 5.0  # a jump inside the gap 2..4
    plan = plan_keys(lm, np.full(t, 2), max_error_px=0.1)
    assert plan.full[3] and plan.fallback_frames == 1
    assert plan.prev[5] == 4 and plan.next[5] == 6 and abs(plan.weight[5] - 0.5) < 1e-6


@pytest.fixture(scope="module")
def module():
    from studio.presenter.anchor import build_anchor
    from studio.presenter.renderer import Presenter, RenderSettings

    return Presenter(build_anchor(), RenderSettings(size_px=128)).module


def test_motion_space_interpolation_is_close_to_generated_frames(module):
    from studio.bench.renderer_speed import _motion

    c = torch.tensor(_motion(9)) * 0.3  # gentle motion
    with torch.inference_mode():
        ref = module(c).clamp(0, 255)
        interp = MotionSpaceInterpolator(module, max_error_px=100.0)
        out, last = interp.render_span(c, np.full(9, 2))
    assert out.shape[0] == 8 and last[0].shape == (1, 128, 128, 2)
    assert interp.frames_interpolated == 4
    assert torch.equal(out[::2].clamp(0, 255), ref[:8:2])  # keyframes are generated frames
    assert psnr(out.clamp(0, 255)[1::2], ref[1:8:2]) > 35.0


def test_a_span_of_keyframes_only_is_the_generated_frames(module):
    """Stride 1 everywhere (speech under the silence sieve alone): every frame generated, the next span's field kept."""
    from studio.bench.renderer_speed import _motion

    c = torch.tensor(_motion(9)) * 0.3
    with torch.inference_mode():
        ref = module(c).clamp(0, 255)
        interp = MotionSpaceInterpolator(module, max_error_px=1.0)
        out, last = interp.render_span(c, np.ones(9, np.int64))
        grid, mask = module.warp_field(c[8:])
    assert out.shape[0] == 8 and interp.frames_full == 8 and interp.frames_interpolated == 0
    assert torch.equal(out.clamp(0, 255), ref[:8])
    assert torch.equal(last[0], grid) and torch.equal(last[1], mask)


def test_static_shapes_render_the_same_pixels(module):
    from studio.bench.renderer_speed import _motion

    c = torch.tensor(_motion(6))
    c[2, :] = c[2, :]
    with torch.inference_mode():
        module.static_shapes = False
        a = module(c)
        module.static_shapes = True
        b = module(c)
        module.static_shapes = False
    assert torch.equal(a, b)


def test_quality_metrics():
    a = torch.rand(1, 3, 32, 32) * 255
    assert psnr(a, a) == 100.0 and abs(ssim(a, a) - 1.0) < 1e-5
    noisy = (a + 8 * torch.randn_like(a)).clamp(0, 255)
    assert 20 < psnr(noisy, a) < 40 and ssim(noisy, a) < 0.999
    assert psnr(noisy, a, (0, 16, 0, 16)) < 60


def test_causal_keys_count_back_from_the_last_frame():
    from studio.enhance.interp import key_positions

    assert key_positions(np.full(5, 2), have_carry=True).tolist() == [True, False, True, False, True]
    assert key_positions(np.full(4, 2), have_carry=True).tolist() == [False, True, False, True]
    assert key_positions(np.full(4, 2), have_carry=False).tolist() == [True, True, False, True]
    assert key_positions(np.array([4, 4, 4, 4, 4, 4]), have_carry=True).tolist() == [False, True, False, False,
                                                                                        False, True]


def test_causal_spans_match_generated_keyframes_and_carry_on(module):
    """Two spans rendered causally: keyframes are the generated frames, in-betweens close to them, and the second span
    interpolates from the first span's carried last keyframe."""
    from studio.bench.renderer_speed import _motion

    c = torch.tensor(_motion(8)) * 0.3
    with torch.inference_mode():
        ref = module(c).clamp(0, 255)
        interp = MotionSpaceInterpolator(module, max_error_px=100.0)
        a, carry = interp.render_causal(c[:4], np.full(4, 2), None)
        b, carry2 = interp.render_causal(c[4:], np.full(4, 2), carry)
    out = torch.cat([a, b]).clamp(0, 255)
    assert out.shape[0] == 8
    # keys: 0 (no carry), then every 2nd from the end; generated in other batches than ``ref``, so equal up to float
    # rounding (BLAS sums a batch in another order)
    torch.testing.assert_close(out[[0, 1, 3, 5, 7]], ref[[0, 1, 3, 5, 7]], rtol=0, atol=1e-2)
    assert interp.frames_interpolated == 3  # frames 2, 4 (from the carry) and 6
    assert psnr(out[[2, 4, 6]], ref[[2, 4, 6]]) > 35.0
    assert torch.equal(carry2.landmarks, module.landmarks(c[7:])[0])


def test_flow_fill_batches_every_in_between_of_a_chunk_and_keeps_their_times():
    """RIFE in-betweens of a chunk in batches (the core's FlowFill) are the frames one pair at a time gives, at each
    slot's own time, across the carried keyframe of the previous chunk."""
    from studio.pipeline.post import FlowFill

    y, x = torch.meshgrid(torch.arange(64.0), torch.arange(64.0), indexing="ij")

    def frame(shift: float) -> torch.Tensor:  # a smooth pattern moving right
        return (127 + 100 * torch.sin((x - shift) / 6) * torch.cos(y / 9)).expand(1, 3, 64, 64)

    mask1 = np.array([False, True, False, False, True])  # keys at 1 and 4: slot 0 held, 2 and 3 in between
    mask2 = np.array([False, True, False, True])  # after the carry (4): slot 0 between 4 and 1 of this chunk
    keys1, keys2 = torch.cat([frame(1), frame(4)]), torch.cat([frame(6), frame(8)])
    batched, single = FlowFill("cpu", batch=8), FlowFill("cpu", batch=1)
    for ff in (batched, single):
        ff.out1 = ff.fill(keys1, mask1, restart=True)
        ff.out2 = ff.fill(keys2, mask2, restart=False)
    for a, b in ((batched.out1, single.out1), (batched.out2, single.out2)):
        assert float((a - b).abs().max()) < 0.5
    assert batched.frames_interpolated == single.frames_interpolated == 2 + 2
    assert torch.equal(batched.out1[0], batched.out1[1]) and torch.equal(batched.out2[1], keys2[0])
    # each in-between at its own time: slot 2 (1/3 of the way from 1 to 4) is nearer frame(1) than slot 3 is
    d2, d3 = (batched.out1[2] - frame(1)[0]).abs().mean(), (batched.out1[3] - frame(1)[0]).abs().mean()
    assert d2 < d3


def test_rife_in_betweens_at_a_larger_size_follow_the_flow_of_the_generated_frames():
    """``between_large``: flows from the frames as generated warp their upscaled copies. With the same frames as the
    large ones it is ``between`` (the blend in float32); at 4x the size its in-between is the 4x copy of the motion:
    nearer the true moved pattern at the large size than either keyframe is."""
    from studio.enhance.rife import RifeInterpolator

    rife = RifeInterpolator("cpu")

    def pattern(size: int, shift: float) -> torch.Tensor:  # a smooth pattern moving right, shift in small pixels
        k = size / 64
        y, x = torch.meshgrid(torch.arange(size) / k, torch.arange(size) / k, indexing="ij")
        return (127 + 100 * torch.sin((x - shift) / 6) * torch.cos(y / 9)).expand(1, 3, size, size)

    a, b = pattern(64, 0), pattern(64, 4)
    assert float((rife.between(a, b, 0.5) - rife.between_large(a, b, a, b, 0.5)).abs().max()) < 0.05
    big = rife.between_large(a, b, pattern(256, 0), pattern(256, 4), torch.tensor([0.5]))
    assert big.shape == (1, 3, 256, 256)
    truth = pattern(256, 2)[..., 16:-16, 16:-16]
    err = (big[..., 16:-16, 16:-16] - truth).abs().mean()
    assert err < 0.3 * (pattern(256, 0)[..., 16:-16, 16:-16] - truth).abs().mean()


def test_flow_fill_at_the_large_size_keeps_the_upscaled_keys_and_carries_them():
    """With ``large`` the chunk's frames come back at the large size: its keyframes exactly, the in-betweens between
    them, and the last large keyframe carried into the next chunk."""
    from studio.pipeline.post import FlowFill

    y, x = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")

    def frame(shift: float) -> torch.Tensor:
        return (127 + 100 * torch.sin((x - shift) / 6) * torch.cos(y / 9)).expand(1, 3, 32, 32)

    def up(f: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(f, scale_factor=2, mode="bicubic", align_corners=False)

    ff = FlowFill("cpu")
    keys1, keys2 = torch.cat([frame(1), frame(4)]), torch.cat([frame(6)])
    out1 = ff.fill(keys1, np.array([False, True, False, False, True]), restart=True, large=up(keys1))
    out2 = ff.fill(keys2, np.array([False, True]), restart=False, large=up(keys2))
    assert out1.shape == (5, 3, 64, 64) and out2.shape == (2, 3, 64, 64)
    assert torch.equal(out1[4], up(keys1)[1]) and torch.equal(out2[1], up(keys2)[0])
    assert torch.equal(out1[0], out1[1])  # nothing before the first key: held
    assert ff.frames_interpolated == 3
    # slot 0 of the second chunk lies between the carried large key (frame 4) and frame 6
    d_prev, d_next = (out2[0] - up(frame(4))[0]).abs().mean(), (out2[0] - up(frame(6))[0]).abs().mean()
    assert 0 < d_prev and 0 < d_next and (out2[0] - up(frame(5))[0]).abs().mean() < min(d_prev, d_next)


def test_flow_fill_takes_the_flows_of_large_keys_from_a_shrunk_copy(monkeypatch):
    """Keys larger than FLOW_MAX_PX (a face-pasting engine's 1080-px frames) keep their size; RIFE sees them shrunk by
    a whole factor, and its flows warp the full-size keys."""
    import studio.pipeline.post as post
    from studio.enhance.rife import RifeInterpolator

    monkeypatch.setattr(post, "FLOW_MAX_PX", 48)  # small frames for the CPU: 128 px keys, flows from 42 px
    seen = []
    real = RifeInterpolator.between_large

    def spy(self, f0, f1, l0, l1, t):
        seen.append((tuple(f0.shape[-2:]), tuple(l0.shape[-2:])))
        return real(self, f0, f1, l0, l1, t)

    monkeypatch.setattr(RifeInterpolator, "between_large", spy)
    y, x = torch.meshgrid(torch.arange(128.0) / 2, torch.arange(128.0) / 2, indexing="ij")

    def frame(shift: float) -> torch.Tensor:
        return (127 + 100 * torch.sin((x - shift) / 6) * torch.cos(y / 9)).expand(1, 3, 128, 128)

    out = post.FlowFill("cpu").fill(torch.cat([frame(0), frame(4)]), np.array([True, False, True]), restart=True)
    assert out.shape == (3, 3, 128, 128) and seen == [((42, 42), (128, 128))]
    err = (out[1] - frame(2)[0])[..., 16:-16, 16:-16].abs().mean()
    assert err < 0.3 * (frame(0)[0] - frame(2)[0])[..., 16:-16, 16:-16].abs().mean()


def test_span_lands_on_the_target_size_from_a_larger_frame():
    """The pyramidal 288 px frames to the 1080 presenter: resized to 270 first, SPAN x4 makes 1080 (no full-size
    resize after SPAN); a frame smaller than a quarter of the target goes to SPAN as it is."""
    from studio.pipeline.post import Upscaler, UpscaleRoute

    seen = []

    class Spy:
        scale = 4

        def __call__(self, x):
            seen.append(tuple(x.shape[-2:]))
            return torch.nn.functional.interpolate(x, scale_factor=4, mode="nearest")

    up = Upscaler(1080, UpscaleRoute.SPAN)
    up._span = Spy()
    assert up.process(torch.rand(2, 3, 288, 288) * 255).shape == (2, 3, 1080, 1080) and seen == [(270, 270)]
    up2 = Upscaler(720, UpscaleRoute.SPAN)
    up2._span = Spy()
    assert up2.process(torch.rand(1, 3, 96, 96) * 255).shape == (1, 3, 720, 720) and seen[-1] == (96, 96)


def test_graph_set_batches_cover_every_row_once_with_no_padding():
    """The replays a GraphSet makes: whole batches of the largest graph, then the remainder's binary digits."""
    from studio.generators.graphs import batch_spans

    assert batch_spans(13, 8) == [(0, 8, 8), (8, 12, 4), (12, 13, 1)]
    assert batch_spans(21, 8) == [(0, 16, 8), (16, 20, 4), (20, 21, 1)]
    assert batch_spans(4, 8) == [(0, 4, 4)] and batch_spans(0, 8) == []
    for n in range(40):
        spans = batch_spans(n, 8)
        assert sum(b - a for a, b, _ in spans) == n and all(s in (1, 2, 4, 8) for _, _, s in spans)
        assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))
