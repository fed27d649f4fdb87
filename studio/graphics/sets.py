"""The set behind the presenter: the project's own virtual news studio (drawn here, no art from elsewhere), a plain
colour, the producer's image, or the producer's video played in a loop.

Pictures are H x W x 3 float32 arrays in 0..255 at the canvas size.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from studio.errors import InputError

log = logging.getLogger(__name__)


def colour_set(w: int, h: int, rgb: tuple[int, int, int]) -> np.ndarray:
    """A plain colour, exactly."""
    return np.broadcast_to(np.asarray(rgb, np.float32), (h, w, 3)).copy()


def image_set(w: int, h: int, path: Path) -> np.ndarray:
    """The image, scaled to cover the canvas and centred."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return _cover(im.convert("RGB"), w, h)
    except (OSError, UnidentifiedImageError) as exc:
        raise InputError(f"Cannot use {path} as the set ({exc}): choose a JPEG or PNG image, a video file, or a "
                         "colour like #10203a.") from exc


def _cover(im, w: int, h: int) -> np.ndarray:
    from PIL import Image

    scale = max(w / im.width, h / im.height)
    im = im.resize((max(w, round(im.width * scale)), max(h, round(im.height * scale))), Image.LANCZOS)
    left, top = (im.width - w) // 2, (im.height - h) // 2
    return np.asarray(im.crop((left, top, left + w, top + h)), np.float32)


def _smooth(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    t = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    return t * t * (3 - 2 * t)


def _screen(img: np.ndarray, x0: float, x1: float, y0: float, y1: float, skew: float, seed: int) -> None:
    """A video wall panel in perspective (its far edge ``skew`` shorter), glowing blue with a world of light lines."""
    h, w, _ = img.shape
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    u = (xs - x0) / (x1 - x0)  # 0..1 across the panel
    inset = skew * (u if skew > 0 else (u - 1))  # the far side shrinks toward the middle
    top, bottom = y0 + np.abs(inset) * (y1 - y0) * 0.5, y1 - np.abs(inset) * (y1 - y0) * 0.5
    v = (ys - top) / np.maximum(bottom - top, 1)
    inside = (u >= 0) & (u <= 1) & (v >= 0) & (v <= 1)
    rng = np.random.default_rng(seed)
    waves = sum(np.sin(u * f * 6.28 + rng.uniform(0, 6.28)) * np.cos(v * g * 6.28 + rng.uniform(0, 6.28))
                for f, g in ((3, 2), (5, 3), (2, 5)))
    glow = 0.55 + 0.12 * waves / 3
    lines = (np.abs(np.sin(v * 18 * np.pi)) < 0.05) | (np.abs(np.sin(u * 26 * np.pi)) < 0.04)
    panel = np.stack([18 + 30 * glow, 60 + 70 * glow, 120 + 110 * glow], -1)
    panel = panel + lines[..., None] * np.array([30, 60, 80], np.float32)
    bezel = inside & ((u < 0.012) | (u > 0.988) | (v < 0.02) | (v > 0.98))
    img[inside] = panel[inside]
    img[bezel] = (22, 26, 34)


def builtin_set(w: int, h: int, accent: tuple[int, int, int] = (200, 30, 45)) -> np.ndarray:
    """The project's virtual news studio: a deep blue back wall with light columns, two video walls angled toward
    the camera, a light band at the horizon, a glossy floor and a soft key light behind the presenter."""
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    x, y = xs / w, ys / h
    horizon = 0.66
    # back wall: dark navy, lighter toward the middle, vertical light columns (depth by spacing and fade)
    wall = np.stack([10 + 18 * (1 - y), 22 + 30 * (1 - y), 48 + 52 * (1 - y)], -1)
    cols = np.abs(((x - 0.5) * 11) % 1.0 - 0.5)
    column_light = _smooth(0.06 - cols, 0.0, 0.06) * (1 - _smooth(y, 0.1, horizon)) * 0.9
    wall = wall + column_light[..., None] * np.array([40, 70, 110], np.float32)
    # a band of light along the horizon and the accent's stripe below it
    band = np.exp(-((y - horizon + 0.045) / 0.018) ** 2)
    wall = wall + band[..., None] * np.array([60, 110, 170], np.float32)
    stripe = (y > horizon - 0.012) & (y < horizon - 0.004)
    wall[stripe] = wall[stripe] * 0.3 + np.asarray(accent, np.float32) * 0.7
    # floor: glossy dark, reflecting the band, receding (lighter lines closer together toward the horizon)
    floor_y = _smooth(y, horizon, horizon + 0.01)
    depth = np.maximum(y - horizon, 1e-3)
    floor = np.stack([8 + 20 * depth, 14 + 30 * depth, 26 + 50 * depth], -1)
    planks = (np.abs(np.sin(0.9 / depth)) < 0.06) * (depth > 0.03)
    floor = floor + planks[..., None] * np.array([10, 18, 30], np.float32)
    floor = floor + np.exp(-((y - horizon - 0.03) / 0.03) ** 2)[..., None] * np.array([30, 55, 85], np.float32)
    img = wall * (1 - floor_y[..., None]) + floor * floor_y[..., None]
    _screen(img, 0.02 * w, 0.30 * w, 0.12 * h, 0.56 * h, 0.22, 1)
    _screen(img, 0.70 * w, 0.98 * w, 0.12 * h, 0.56 * h, -0.22, 2)
    # key light on the wall behind the presenter, and a vignette (the corners fall off like a lit studio)
    key = np.exp(-(((x - 0.5) / 0.22) ** 2 + ((y - 0.38) / 0.35) ** 2))
    img = img * (1 + 0.45 * key[..., None]) + key[..., None] * np.array([8, 12, 18], np.float32)
    vignette = 1 - 0.35 * (((x - 0.5) * 2) ** 2 * 0.6 + ((y - 0.45) * 2) ** 2 * 0.4)
    return np.clip(img * vignette[..., None], 0, 255).astype(np.float32)


def desk_layer(w: int, h: int, centre_x: float, accent: tuple[int, int, int] = (200, 30, 45)) -> np.ndarray:
    """The anchor desk in front of the presenter: H x W x 4 float32 (RGB 0..255, alpha 0..1), a curved slab with a
    lit top edge and the accent's strip, its width about half the canvas."""
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    half = 0.27 * w
    u = (xs - centre_x) / half  # -1..1 across the desk
    top = h * (0.86 - 0.02 * (1 - u * u))  # the front curves toward the camera in the middle
    inside = (np.abs(u) <= 1) & (ys >= top)
    edge = np.clip(1 - np.abs(u) ** 8, 0, 1)  # rounded ends
    shade = 0.55 + 0.45 * (1 - u * u)
    body = np.stack([28 * shade + 10, 34 * shade + 12, 48 * shade + 16], -1)
    lip = (ys >= top) & (ys < top + max(2, h * 0.008))
    body[lip] = (190, 205, 225)
    strip = (ys >= top + h * 0.045) & (ys < top + h * 0.053)
    body[strip] = accent
    alpha = inside * edge
    return np.concatenate([body, alpha[..., None]], -1).astype(np.float32)


class VideoSet:
    """The producer's video as the set, looped, one source frame per programme frame (PyAV)."""

    def __init__(self, path: Path, w: int, h: int) -> None:
        import av

        self.path, self.w, self.h = Path(path), w, h
        try:
            self._c = av.open(str(self.path))
            self._stream = self._c.streams.video[0]
        except (OSError, av.error.FFmpegError, IndexError) as exc:
            raise InputError(f"Cannot play {path} as the set ({exc}): choose an MP4 or WebM video, an image, or a "
                             "colour like #10203a.") from exc
        self._frames = self._c.decode(self._stream)
        self.loops = 0

    def _next(self) -> np.ndarray:
        import av

        for _ in range(2):
            try:
                f = next(self._frames)
                return self._fit(f)
            except StopIteration:
                self.loops += 1
                self._c.seek(0)
                self._frames = self._c.decode(self._stream)
            except av.error.FFmpegError as exc:
                raise InputError(f"The set video {self.path.name} cannot be decoded ({exc}): re-encode it as "
                                 "H.264 MP4.") from exc
        raise InputError(f"The set video {self.path.name} has no frames: choose another video.")

    def _fit(self, frame) -> np.ndarray:
        sw, sh = frame.width, frame.height
        scale = max(self.w / sw, self.h / sh)
        tw, th = max(self.w, round(sw * scale)), max(self.h, round(sh * scale))
        rgb = frame.to_ndarray(width=tw, height=th, format="rgb24")
        x0, y0 = (tw - self.w) // 2, (th - self.h) // 2
        return rgb[y0:y0 + self.h, x0:x0 + self.w]

    def frames(self, n: int) -> np.ndarray:
        """The next ``n`` frames, N x H x W x 3 uint8."""
        return np.stack([self._next() for _ in range(n)])

    def first(self) -> np.ndarray:
        """One frame (H x W x 3 float32) to stand for the set where a still is needed; the loop restarts after."""
        f = self._next().astype(np.float32)
        self._c.seek(0)
        self._frames = self._c.decode(self._stream)
        return f

    def close(self) -> None:
        self._c.close()
