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


def rgb_to_i420(frames: torch.Tensor) -> torch.Tensor:
    """N x 3 x H x W RGB (0..255 float) -> N x (H * 3 / 2) x W uint8 planar YUV 4:2:0 (I420: Y, then U, then V;
    the layout PyAV's ``yuv420p`` frames take), BT.709 limited range. Torch releases the interpreter lock while it
    converts, unlike an encoder's own conversion (studio.encode.worker)."""
    r, g, b = frames[:, 0], frames[:, 1], frames[:, 2]
    y = 16 + (0.1826 * r + 0.6142 * g + 0.0620 * b)
    uv = torch.stack([128 + (-0.1006 * r - 0.3386 * g + 0.4392 * b),
                      128 + (0.4392 * r - 0.3989 * g - 0.0403 * b)], 1)  # N x 2 x H x W
    uv = torch.nn.functional.avg_pool2d(uv, 2)  # N x 2 x H/2 x W/2
    n, h, w = y.shape
    planes = torch.cat([y.reshape(n, -1), uv.reshape(n, -1)], 1)  # Y, U, V planes one after the other
    return (planes + 0.5).clamp_(0, 255).to(torch.uint8).reshape(n, h * 3 // 2, w)
