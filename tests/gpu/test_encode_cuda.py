"""Colour conversion for the encoders on the GPU: NV12 / I420 made on the device equal the CPU's, match swscale's
BT.709 conversion, and a batch whose I420 was made on the GPU streams through the hub with the right colours.
Run on the device machine: python -m pytest tests/gpu/test_encode_cuda.py (PyAV carried as a wheel there)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from studio.encode.colour import rgb_to_i420, rgb_to_nv12

pytestmark = pytest.mark.gpu


def _blocks(h: int, w: int) -> np.ndarray:
    rgb = np.zeros((h, w, 3), np.uint8)
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (240, 200, 40), (30, 30, 30), (128, 128, 128)]
    step = w // len(colours) // 2 * 2
    for i, c in enumerate(colours):
        rgb[:, i * step:(i + 1) * step] = c
    return rgb


@pytest.mark.parametrize("fn", [rgb_to_nv12, rgb_to_i420], ids=["nv12", "i420"])
def test_gpu_conversion_equals_the_cpu(fn) -> None:
    gen = torch.Generator().manual_seed(0)
    rgb = torch.rand(2, 3, 720, 1280, generator=gen) * 255
    cpu = fn(rgb)
    gpu = fn(rgb.cuda()).cpu()
    assert gpu.shape == (2, 1080, 1280) and gpu.dtype == torch.uint8
    assert (gpu.int() - cpu.int()).abs().max().item() <= 1


def test_gpu_i420_matches_swscale_bt709() -> None:
    av = pytest.importorskip("av", reason="PyAV: carry its wheel to the device machine")
    rgb = _blocks(720, 1280)
    ours = rgb_to_i420(torch.from_numpy(rgb).permute(2, 0, 1)[None].float().cuda())[0].cpu().numpy()
    ref = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p", dst_colorspace="ITU709")
    ref = ref.to_ndarray()  # (H * 3 / 2) x W, I420 planes
    assert np.abs(ours[:720].astype(int) - ref[:720]).max() <= 1  # luma
    chroma = np.abs(ours[720:].astype(int) - ref[720:])
    assert np.median(chroma) <= 1  # block edges aside (swscale filters chroma, we average 2 x 2)


def test_gpu_i420_batch_streams_with_the_right_colours(tmp_path) -> None:
    pytest.importorskip("av", reason="PyAV: carry its wheel to the device machine")
    from studio.encode.recorder import RecorderOutput
    from studio.encode.synthetic import decode_media
    from studio.contracts import ProgramBatch, ProgramFormat

    fmt = ProgramFormat(1280, 720, 25.0)
    rgb = _blocks(720, 1280)
    frames = torch.from_numpy(rgb).permute(2, 0, 1)[None].float().cuda().repeat(25, 1, 1, 1)  # 25 x 3 x H x W
    yuv = rgb_to_i420(frames).cpu().numpy()
    slots = np.arange(25)
    out = RecorderOutput(tmp_path / "gpu.mp4", block=True)
    out.open(fmt)
    out.write(ProgramBatch(slots=slots, pts_s=slots / 25.0, frames=np.zeros((0, 720, 1280, 3), np.uint8),
                           audio=np.zeros(fmt.samples_at(25), np.float32), audio_start=0, yuv=yuv))
    path = out.close()
    assert decode_media(path).levels.size == 25
    import av

    with av.open(str(path)) as c:
        last = [f for f in c.decode(video=0)][-1].to_ndarray(format="rgb24", dst_colorspace="ITU709").astype(int)
    step = 1280 // 6 // 2 * 2
    for i in range(6):
        block = (slice(40, -40), slice(i * step + 20, (i + 1) * step - 20))
        assert np.abs(last[block].mean((0, 1)) - rgb[block].mean((0, 1))).max() < 6
