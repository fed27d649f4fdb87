"""Image quality against a reference: PSNR and SSIM on the whole frame or the face box (numpy/torch, no skimage)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def face_box(landmarks_px: np.ndarray, size_px: int, margin: float = 0.15) -> tuple[int, int, int, int]:
    """x0, x1, y0, y1 of the face (478 x 2+ landmarks, pixels) with a margin, clipped to the frame."""
    x0, y0 = landmarks_px[:, 0].min(), landmarks_px[:, 1].min()
    x1, y1 = landmarks_px[:, 0].max(), landmarks_px[:, 1].max()
    mx, my = margin * (x1 - x0), margin * (y1 - y0)
    return (int(max(0, x0 - mx)), int(min(size_px, x1 + mx)), int(max(0, y0 - my)), int(min(size_px, y1 + my)))


def _crop(x: torch.Tensor, box: tuple[int, int, int, int] | None) -> torch.Tensor:
    if box is None:
        return x
    x0, x1, y0, y1 = box
    return x[..., y0:y1, x0:x1]


def psnr(a: torch.Tensor, b: torch.Tensor, box: tuple[int, int, int, int] | None = None) -> float:
    """PSNR in dB of N x 3 x H x W frames in 0..255 (capped at 100 dB for identical frames)."""
    mse = float(((_crop(a.float(), box) - _crop(b.float(), box)) ** 2).mean())
    return 100.0 if mse <= 1e-10 else float(10 * np.log10(255.0 ** 2 / mse))


def ssim(a: torch.Tensor, b: torch.Tensor, box: tuple[int, int, int, int] | None = None) -> float:
    """Mean SSIM (Gaussian window sigma 1.5, on luma) of N x 3 x H x W frames in 0..255."""
    w = torch.tensor([0.299, 0.587, 0.114], dtype=torch.float32, device=a.device).view(1, 3, 1, 1)
    x = (_crop(a.float(), box) * w).sum(1, keepdim=True)
    y = (_crop(b.float(), box) * w).sum(1, keepdim=True)
    g = torch.exp(-((torch.arange(11, dtype=torch.float32, device=a.device) - 5) ** 2) / (2 * 1.5 ** 2))
    g = g / g.sum()
    k = (g[:, None] * g[None, :]).view(1, 1, 11, 11)

    def blur(t: torch.Tensor) -> torch.Tensor:
        return F.conv2d(t, k)

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, my = blur(x), blur(y)
    sxx, syy, sxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(s.mean())
