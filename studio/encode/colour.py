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


_BT709 = ((0.1826, 0.6142, 0.0620), (-0.1006, -0.3386, 0.4392), (0.4392, -0.3989, -0.0403))  # rows: Y, U, V
_OFFSET = (16.0, 128.0, 128.0)


def rgb_to_i420(frames: torch.Tensor, channels_last: bool = False) -> torch.Tensor:
    """RGB frames (0..255, any dtype) -> N x (H * 3 / 2) x W uint8 planar YUV 4:2:0 (I420: Y, then U, then V; the
    layout PyAV's ``yuv420p`` frames take), BT.709 limited range. ``frames`` is N x 3 x H x W, or N x H x W x 3 with
    ``channels_last``. One matrix product over the pixels and a 2 x 2 mean for the chroma: torch releases the
    interpreter lock while it converts, unlike an encoder's own conversion (studio.encode.worker)."""
    x = frames if channels_last else frames.permute(0, 2, 3, 1)
    n, h, w, _ = x.shape
    m = torch.tensor(_BT709, dtype=torch.float32, device=x.device).t()  # 3 x 3
    yuv = torch.addmm(torch.tensor(_OFFSET, device=x.device).expand(n * h * w, 3),
                      x.reshape(-1, 3).to(torch.float32), m).view(n, h, w, 3)
    y = yuv[..., 0]
    uv = yuv[..., 1:].view(n, h // 2, 2, w // 2, 2, 2).mean((2, 4))  # N x H/2 x W/2 x 2
    planes = torch.cat([y.reshape(n, -1), uv.permute(0, 3, 1, 2).reshape(n, -1)], 1)
    return (planes + 0.5).clamp_(0, 255).to(torch.uint8).view(n, h * 3 // 2, w)
