"""The broadcast graphics drawn as RGBA pictures (PIL), once per change: the front layer (name strap, segment title,
channel logo, clock), the over-the-shoulder box (behind the presenter) and the ticker's text strip.

Everything stays inside the title-safe area (5 % of the width and height in from each edge) except the ticker's bar,
which runs the full width inside the action-safe height. Text is fitted with ``studio.graphics.text``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from studio.errors import InputError
from studio.graphics.look import Graphics
from studio.graphics.text import fit_lines, font_for

log = logging.getLogger(__name__)

SAFE = 0.05  # title-safe margin, as a share of the width and of the height
TICKER_SEP = "   •   "


@dataclass(frozen=True)
class Geometry:
    """Where things go on a W x H canvas."""

    w: int
    h: int

    @property
    def mx(self) -> int:
        return round(self.w * SAFE)

    @property
    def my(self) -> int:
        return round(self.h * SAFE)

    @property
    def ticker_box(self) -> tuple[int, int, int, int]:
        """x0, y0, x1, y1 of the ticker's bar."""
        bh = round(self.h * 0.058)
        y1 = self.h - round(self.h * 0.035)
        return 0, y1 - bh, self.w, y1

    @property
    def clock_w(self) -> int:
        return round(self.w * 0.11)


def _rgba(w: int, h: int):
    from PIL import Image

    return Image.new("RGBA", (w, h), (0, 0, 0, 0))


def _text(draw, xy, lines: list[str], font, fill, spacing: float = 1.18) -> None:
    x, y = xy
    for line in lines:
        draw.text((x, y), line, font=font, fill=fill)
        y += round(font.size * spacing)


def load_logo(path: str | Path, max_w: int, max_h: int):
    """The channel logo scaled into ``max_w`` x ``max_h`` (RGBA)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im = im.convert("RGBA")
            k = min(max_w / im.width, max_h / im.height)
            return im.resize((max(1, round(im.width * k)), max(1, round(im.height * k))), Image.LANCZOS)
    except (OSError, UnidentifiedImageError) as exc:
        raise InputError(f"Cannot use {path} as the channel logo ({exc}): choose a PNG (transparent) or JPEG "
                         "image.") from exc


def front_layer(geo: Geometry, g: Graphics, title: str, clock_text: str, accent: tuple[int, int, int],
                show_title: bool) -> tuple[np.ndarray, list[tuple[int, int, int, int]]]:
    """The front graphics: H x W x 4 float32 (premultiplied RGB 0..255, alpha 0..1) and the rectangles it covers
    (x0, y0, x1, y1)."""
    from PIL import ImageDraw

    w, h = geo.w, geo.h
    img = _rgba(w, h)
    d = ImageDraw.Draw(img)
    rects: list[tuple[int, int, int, int]] = []
    mx, my = geo.mx, geo.my
    tx0, ty0, tx1, ty1 = geo.ticker_box
    ticker_on = bool(g.ticker)
    bottom = (ty0 if ticker_on else h - my) - round(h * 0.02)
    # name strap: the name on the accent bar, the role on a dark bar below, lower left
    if g.name:
        name_px, role_px = round(h * 0.05), round(h * 0.033)
        box_w = round(w * 0.46)
        pad = round(h * 0.016)
        nf = font_for(g.name, name_px)
        name_lines = fit_lines(g.name, nf, box_w - 2 * pad, 1)
        role_lines = []
        rf = None
        if g.role:
            rf = font_for(g.role, role_px, bold=False)
            role_lines = fit_lines(g.role, rf, box_w - 2 * pad, 2)
        nh = round(name_px * 1.45)
        rh = round(role_px * 1.25) * len(role_lines) + (pad if role_lines else 0)
        y1 = bottom
        y0 = y1 - nh - rh
        d.rectangle([mx, y0, mx + box_w, y0 + nh], fill=(*accent, 240))
        _text(d, (mx + pad, y0 + round((nh - name_px * 1.16) / 2)), name_lines, nf, (255, 255, 255, 255))
        if role_lines:
            d.rectangle([mx, y0 + nh, mx + box_w, y1], fill=(14, 18, 28, 228))
            _text(d, (mx + pad, y0 + nh + pad // 2), role_lines, rf, (225, 230, 240, 255), 1.25)
        rects.append((mx, y0, mx + box_w + 1, y1 + 1))
        bottom = y0 - round(h * 0.012)
    # segment title: a bar above the strap (or at the bottom without one), two lines at most
    if show_title and title:
        t_px = round(h * 0.036)
        box_w = round(w * 0.62)
        pad = round(h * 0.014)
        tf = font_for(title, t_px)
        lines = fit_lines(title, tf, box_w - 2 * pad - round(h * 0.012), 2)
        th = round(t_px * 1.22) * len(lines) + 2 * pad
        y0 = bottom - th
        d.rectangle([mx, y0, mx + box_w, bottom], fill=(12, 16, 24, 220))
        d.rectangle([mx, y0, mx + round(h * 0.008), bottom], fill=(*accent, 255))
        _text(d, (mx + pad + round(h * 0.012), y0 + pad), lines, tf, (245, 245, 245, 255), 1.22)
        rects.append((mx, y0, mx + box_w + 1, bottom + 1))
    # clock: at the ticker's left end, or top left without a ticker
    if g.clock and clock_text:
        c_px = round(h * 0.034)
        cf = font_for(clock_text, c_px)
        if ticker_on:
            box = (0, ty0, geo.clock_w, ty1)
        else:
            box = (mx, my, mx + geo.clock_w, my + round(h * 0.058))
        d.rectangle([box[0], box[1], box[2] - 1, box[3] - 1], fill=(*accent, 255))
        tw = cf.getlength(clock_text)
        d.text((box[0] + (box[2] - box[0] - tw) / 2, box[1] + (box[3] - box[1] - c_px * 1.16) / 2), clock_text,
               font=cf, fill=(255, 255, 255, 255))
        rects.append(box)
    # logo: top right, inside title safe
    if g.logo:
        logo = load_logo(g.logo, round(w * 0.12), round(h * 0.12))
        x0, y0 = w - mx - logo.width, my
        img.alpha_composite(logo, (x0, y0))
        rects.append((x0, y0, x0 + logo.width, y0 + logo.height))
    arr = np.asarray(img, np.float32)
    alpha = arr[..., 3:] / 255.0
    return np.concatenate([arr[..., :3] * alpha, alpha], -1), rects


def ticker_strip(geo: Geometry, lines: tuple[str, ...], accent: tuple[int, int, int]) -> np.ndarray:
    """The crawl: one long RGB picture (band height x length, uint8) of the lines one after another on the ticker's
    bar, built to repeat seamlessly (its length is one cycle; the compositor reads it modulo that length)."""
    from PIL import Image, ImageDraw

    x0, y0, x1, y1 = geo.ticker_box
    bh = y1 - y0
    text = TICKER_SEP.join(" ".join(t.split()) for t in lines if t.strip()) + TICKER_SEP
    f = font_for(text, round(bh * 0.56), bold=False)
    length = max(int(np.ceil(f.getlength(text))), 1)
    img = Image.new("RGB", (length, bh), (240, 242, 246))
    d = ImageDraw.Draw(img)
    d.text((0, (bh - f.size * 1.16) / 2), text, font=f, fill=(16, 20, 30))
    d.rectangle([0, 0, length, max(1, bh // 14)], fill=accent)
    return np.array(img, np.uint8)


def shoulder_box(geo: Geometry, g: Graphics, presenter_cx: float, accent: tuple[int, int, int]
                 ) -> tuple[np.ndarray, tuple[int, int, int, int]] | None:
    """The over-the-shoulder box on the side away from the presenter (an image, or the headline), H x W x 4
    premultiplied like ``front_layer``, and its rectangle; None without one."""
    if not (g.box_image or g.headline):
        return None
    from PIL import Image, ImageDraw

    w, h = geo.w, geo.h
    bw, bh = round(w * 0.34), round(w * 0.34 * 9 / 16)
    left = presenter_cx > w / 2
    x0 = geo.mx + round(w * 0.02) if left else w - geo.mx - round(w * 0.02) - bw
    y0 = round(h * 0.2)  # below the logo
    img = _rgba(w, h)
    d = ImageDraw.Draw(img)
    border = max(2, round(h * 0.005))
    d.rectangle([x0 - border, y0 - border, x0 + bw + border - 1, y0 + bh + border - 1], fill=(230, 235, 245, 255))
    if g.box_image:
        pic = load_logo(g.box_image, bw, bh).convert("RGB")
        from studio.graphics.sets import _cover

        cover = _cover(pic, bw, bh).astype(np.uint8)
        img.paste(Image.fromarray(cover).convert("RGBA"), (x0, y0))
    else:
        d.rectangle([x0, y0, x0 + bw - 1, y0 + bh - 1], fill=(16, 30, 60, 255))
        d.rectangle([x0, y0 + bh - round(bh * 0.06), x0 + bw - 1, y0 + bh - 1], fill=(*accent, 255))
        size = round(bh * 0.16)
        f = font_for(g.headline, size)
        pad = round(bw * 0.06)
        lines = fit_lines(g.headline, f, bw - 2 * pad, 2)
        total = round(size * 1.2) * len(lines)
        _text(d, (x0 + pad, y0 + (bh - total) / 2 - size * 0.1), lines, f, (255, 255, 255, 255), 1.2)
    arr = np.asarray(img, np.float32)
    alpha = arr[..., 3:] / 255.0
    return (np.concatenate([arr[..., :3] * alpha, alpha], -1),
            (x0 - border, y0 - border, x0 + bw + border, y0 + bh + border))
