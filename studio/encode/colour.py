"""Colour conversion for encoders: RGB -> NV12 on the device, so that only NV12 crosses PCIe to the encoder."""

from __future__ import annotations

import torch


def rgb_to_nv12(frames: torch.Tensor) -> torch.Tensor:
    """N x 3 x H x W RGB (0..255 float) -> N x (H * 3 / 2) x W uint8 NV12 (BT.709 limited range), on the device."""
    r, g, b = frames[:, 0], frames[:, 1], frames[:, 2]
    y = 16 + (0.1826 * r + 0.6142 * g + 0.0620 * b)
    u = 128 + (-0.1006 * r - 0.3386 * g + 0.4392 * b)
    v = 128 + (0.4392 * r - 0.3989 * g - 0.0403 * b)
    n, h, w = y.shape
    uv = torch.stack([u, v], 1)  # N x 2 x H x W
    uv = torch.nn.functional.avg_pool2d(uv, 2)  # N x 2 x H/2 x W/2
    uv = uv.permute(0, 2, 3, 1).reshape(n, h // 2, w)  # interleaved U, V
    return (torch.cat([y, uv], 1) + 0.5).clamp_(0, 255).to(torch.uint8)  # +0.5: truncation rounds


def rgb_to_i420(frames: torch.Tensor, channels_last: bool = False) -> torch.Tensor:
    """RGB frames (0..255, any dtype) -> N x (H * 3 / 2) x W uint8 planar YUV 4:2:0 (I420: Y, then U, then V; the
    layout PyAV's ``yuv420p`` frames take), BT.709 limited range. ``frames`` is N x 3 x H x W, or N x H x W x 3 with
    ``channels_last``. The chroma is converted from the 2 x 2 mean of the RGB (the conversion is linear: the same
    result as subsampling the converted chroma, for a quarter of the work). Torch releases the interpreter lock while
    it converts, unlike an encoder's own conversion (studio.encode.encoder_process)."""
    x = (frames if channels_last else frames.permute(0, 2, 3, 1)).to(torch.float32)  # N x H x W x 3
    n, h, w, _ = x.shape
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    y = 16.5 + 0.1826 * r + 0.6142 * g + 0.0620 * b  # +0.5: truncation rounds
    m = x.view(n, h // 2, 2, w // 2, 2, 3).mean((2, 4))  # N x H/2 x W/2 x 3
    mr, mg, mb = m[..., 0], m[..., 1], m[..., 2]
    u = 128.5 - 0.1006 * mr - 0.3386 * mg + 0.4392 * mb
    v = 128.5 + 0.4392 * mr - 0.3989 * mg - 0.0403 * mb
    planes = torch.cat([y.reshape(n, -1), u.reshape(n, -1), v.reshape(n, -1)], 1)
    return planes.clamp_(0, 255).to(torch.uint8).view(n, h * 3 // 2, w)
