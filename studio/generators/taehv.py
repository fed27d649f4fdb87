"""TAEHV's decoder for Wan 2.1 latents (madebyollin/taehv, MIT; the release file ``taew2_1.pth``): a distilled tiny
video decoder that real-time Wan deployments (LightX2V's "tiny VAE") run instead of the Wan VAE's decoder.

Our module, in the release's key layout (``decoder.N...``, the indices of its sequential decoder), so that
``load_taehv`` reads ``taew2_1.pth`` strictly; the file's encoder half (``encoder.N...``) is not used here.

Facts read from the release (``taehv.py`` and the file's tensor shapes):
- input: the DiT's latents as they are (no ``latents_mean`` / ``latents_std`` applied), 16 channels; output RGB in
  0..1 (the Wan VAE's is -1..1);
- three stages of (3 MemBlocks, nearest 2x upsample, TGrow, 3 x 3 conv) at widths 256, 128, 64, then ReLU and a
  3 x 3 conv to RGB: 8x in space;
- a MemBlock sees its own input and the previous frame's (zeros before the first): relu(convs(x, past) + x);
- TGrow: a bias-free 1 x 1 conv to ``stride`` x the channels, each input frame becoming ``stride`` frames: strides
  1, 2, 2 (its ``decoder_time_upscale`` (False, True, True)), 4x in time;
- frames: F latent frames -> 4 F decoded frames, of which the release drops the first 3 (``frames_to_trim``), so that
  F = 21 gives 81 frames, the Wan VAE's 4 (F - 1) + 1.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from studio.generators.weights import load_strict, read_state, require_file

TAEHV_WEIGHTS = "taew2_1.pth"
LATENT_CHANNELS = 16
WIDTHS = (256, 128, 64)  # per stage; the last conv before RGB keeps 64
TIME_STRIDES = (1, 2, 2)  # TGrow per stage


def conv3(cin: int, cout: int, bias: bool = True) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, padding=1, bias=bias)


class SoftClamp(nn.Module):
    """Latents squashed into -3..3 (3 tanh(x / 3))."""

    def forward(self, x):
        return 3 * torch.tanh(x / 3)


class MemBlock(nn.Module):
    """relu(conv(relu(conv(relu(conv([x, past]))))) + x) at constant width; ``past``: the previous frame's ``x``."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(conv3(2 * width, width), nn.ReLU(), conv3(width, width), nn.ReLU(),
                                  conv3(width, width))

    def forward(self, x, past):
        return F.relu(self.conv(torch.cat([x, past], dim=1)) + x)


class TGrow(nn.Module):
    """(N T) x C x H x W -> (N T stride) x C x H x W: frame t becomes frames t stride .. t stride + stride - 1."""

    def __init__(self, width: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv2d(width, width * stride, 1, bias=False)

    def forward(self, x):
        n, c, h, w = x.shape
        return self.conv(x).reshape(n * self.stride, c, h, w)


class TAEHVDecoder(nn.Module):
    """Wan 2.1 latents B x 16 x F x h x w -> frames B x 3 x (4 F - 3) x 8h x 8w in 0..1, all frames at once."""

    def __init__(self, latent_channels: int = LATENT_CHANNELS, widths: tuple[int, ...] = WIDTHS,
                 time_strides: tuple[int, ...] = TIME_STRIDES) -> None:
        super().__init__()
        layers: list[nn.Module] = [SoftClamp(), conv3(latent_channels, widths[0]), nn.ReLU()]
        for i, (w, s) in enumerate(zip(widths, time_strides)):
            nxt = widths[i + 1] if i + 1 < len(widths) else widths[-1]
            layers += [MemBlock(w), MemBlock(w), MemBlock(w), nn.Upsample(scale_factor=2), TGrow(w, s),
                       conv3(w, nxt, bias=False)]
        layers += [nn.ReLU(), conv3(widths[-1], 3)]
        self.decoder = nn.Sequential(*layers)  # the release's indices: decoder.1, decoder.3.conv.0, decoder.7.conv
        self.trim = math.prod(time_strides) - 1  # leading frames the release drops

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        b, c, f, h, w = z.shape
        x = z.transpose(1, 2).reshape(b * f, c, h, w)  # (B T) x C x h x w, T = F until the TGrows
        for layer in self.decoder:
            if isinstance(layer, MemBlock):
                seq = x.view(b, -1, *x.shape[1:])  # B x T x C x H x W
                past = torch.cat([torch.zeros_like(seq[:, :1]), seq[:, :-1]], dim=1).view_as(x)
                x = layer(x, past)
            else:
                x = layer(x)
        frames = x.view(b, -1, *x.shape[1:])[:, self.trim:]  # B x (4 F - 3) x 3 x 8h x 8w
        return frames.clamp(0, 1).transpose(1, 2)


def load_taehv(folder: Path, engine: str) -> TAEHVDecoder:
    """The decoder half of the release's ``taew2_1.pth`` (in ``folder``), strictly; its encoder half is skipped."""
    path = require_file(folder, TAEHV_WEIGHTS, engine)
    model = TAEHVDecoder()
    load_strict(model, read_state(path, engine), f"{engine}: {TAEHV_WEIGHTS}", ignore_prefixes=("encoder.",))
    return model
