"""The programme picture on the generator's device: the set, the presenter cut out by its matte (or the framed photo),
the broadcast graphics, the ticker's crawl and the dissolve between segments, composited as torch tensors.

Everything that changes rarely (set, graphics, clock) is drawn once per change into tensors on the device
(``select``); ``compose`` then only blends the presenter's box, crawls the ticker and dissolves, per frame. Presenter
frames come as N x 3 x p x p (no matte: the framed photo) or N x 4 x p x p (RGB + the warped matte, 0..255).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
import torch

from studio.errors import InputError
from studio.graphics import layers
from studio.graphics.look import CanvasStyle, Graphics
from studio.graphics.sets import VideoSet, builtin_set, colour_set, desk_layer, image_set

log = logging.getLogger(__name__)

TICKER_PX_S_PER_WIDTH = 0.11  # the crawl's speed: 11 % of the canvas width per second
CLOCK_AHEAD_S = 20.0  # the next minute's clock is drawn this long before it shows


@dataclass
class _Drawn:
    """One selection's pictures on the host, before they go to the device."""

    static: np.ndarray  # H x W x 3 uint8
    behind: np.ndarray  # B x p x p x 3 float
    front: list  # per box: p x p x 4 float (premultiplied RGB, alpha)
    strip: np.ndarray | None
    transition: str


@dataclass
class _State:
    """One selection's pictures on the device."""

    static: torch.Tensor  # H x W x 3 uint8: set, box, graphics (no presenter)
    behind: torch.Tensor  # B x 3 x p x p float: what is behind each presenter's box (B: anchors side by side)
    front: list  # per box: [(rows slice, premultiplied 1 x 3 x r x p, alpha 1 x 1 x r x p)] over it
    strip: np.ndarray | None  # band x L x 3 uint8: the ticker's text (the crawl's band is cut on the host)
    transition: str


class ProgramCompositor:
    """See the module docstring. ``open`` once per format; ``select`` per chunk; ``compose`` per batch of frames."""

    def __init__(self, style: CanvasStyle | None = None, matte_note: str = "") -> None:
        self.style = style or CanvasStyle()
        self.matte_note = matte_note
        self._states: dict[tuple, _State] = {}
        self._key: tuple | None = None
        self._video: VideoSet | None = None
        self._pending: CanvasStyle | None = None
        self._ahead: dict[tuple, tuple[int, _Drawn]] = {}  # drawn on the drawing thread: (generation, pictures)
        self._drawing: threading.Thread | None = None
        self._generation = 0  # a new format or look: what was drawn ahead for the old one is not used
        self.framed = False  # True: the presenter is shown as a framed photo (no matte, or a poor one)

    # -- set-up ----------------------------------------------------------------------------------------------------

    def open(self, fmt, device: str) -> None:
        self.fmt = fmt
        self.device = torch.device(device)
        w, h, p = fmt.width, fmt.height, fmt.presenter_px
        if p > h:
            raise InputError(f"The presenter ({p} px) does not fit a {w}x{h} canvas: choose a smaller size.")
        self.geo = layers.Geometry(w, h)
        st = self.style
        if st.place not in ("centre", "left", "right"):
            raise InputError(f"Unknown placement {st.place!r}: use centre, left or right.")
        cx = {"centre": w / 2, "left": w / 3, "right": 2 * w / 3}[st.place]
        self.cx = cx
        self.x0 = int(max(0, min(w - p, round(cx - p / 2))))
        self.y0 = h - p
        self.boxes = [self.x0]  # each presenter's box (x of its left edge); a two-shot: the cast side by side
        rows = getattr(fmt, "rows", 1)
        if rows > 1 and getattr(fmt, "cast_layout", None) is not None and fmt.cast_layout.value == "two-shot":
            gap = (w - rows * p) / (rows + 1)
            self.boxes = [int(round(gap + i * (p + gap))) for i in range(rows)]
            self.cx = w / 2
        kind = st.set_kind
        if kind == "video":
            self._video = VideoSet(st.background_image, w, h)
            base = self._video.first()
        elif kind == "image":
            base = image_set(w, h, st.background_image)
        elif kind == "colour":
            base = colour_set(w, h, st.background_rgb)
        else:
            base = builtin_set(w, h, st.accent_rgb)
        self._base = base
        desk_cx = self.x0 + p / 2 if len(self.boxes) == 1 else w / 2
        self._desk = desk_layer(w, h, desk_cx, st.accent_rgb) if kind == "builtin" else None
        self._edge = self._box_edge(p).to(self.device)
        ramp = ((torch.minimum(torch.arange(p), p - 1 - torch.arange(p)).float() + 0.5) / max(4.0, p * 0.06))
        # a cut-out fades out at the box's sides (and the matte's 0..255 becomes 0..1 in the same multiply)
        self._sides = (ramp.clamp(0, 1) / 255.0).view(1, 1, 1, p).to(self.device)
        self.fixed = self.device.type == "cuda"
        self.cur_static = None
        self.cur_band = None
        self._front_pre = None
        self._front_key = None
        self.cur_fade = torch.ones(64, device=self.device)
        self._cursor = torch.zeros((), dtype=torch.long, device=self.device)
        self.last_out = torch.zeros((h, w, 3), dtype=torch.uint8, device=self.device)
        self._fading = self._fade_now = self._ticker_on = False
        self._row = None
        self._seg_slot = 0
        self._states.clear()
        self._ahead.clear()
        self._generation += 1
        self._key = None

    @staticmethod
    def _box_edge(p: int) -> torch.Tensor:
        """The framed photo's soft border: 1 x 1 x p x p, 0 at the box's edge to 1 a few pixels in."""
        r = max(2.0, p / 120)
        i = torch.arange(p, dtype=torch.float32)
        d = torch.minimum(i, p - 1 - i)
        e = ((d + 0.5) / r).clamp(0, 1)
        return (e.view(p, 1) * e.view(1, p))[None, None]

    def _state(self, key: tuple, title: str, g: Graphics, clock_text: str) -> _State:
        got = self._states.get(key)
        if got is not None:
            return got
        ahead = self._ahead.pop(key, None)
        drawn = ahead[1] if ahead is not None and ahead[0] == self._generation else None
        got = self._upload(drawn or self._draw(self.style, title, g, clock_text))
        if len(self._states) > 16:
            self._states.clear()
        self._states[key] = got
        return got

    def _draw(self, st: CanvasStyle, title: str, g: Graphics, clock_text: str) -> _Drawn:
        """A selection's pictures on the host (numpy only, so that it may run on the drawing thread)."""
        geo = self.geo
        p, y0 = self.fmt.presenter_px, self.y0
        behind = self._base.copy()
        box = layers.shoulder_box(geo, g, self.cx, st.accent_rgb)
        if box is not None:
            rgba, _ = box
            behind = behind * (1 - rgba[..., 3:]) + rgba[..., :3]
        if self.framed:  # a thin light frame around the photo's box, on the set
            b = max(2, round(geo.h * 0.004))
            for x0 in self.boxes:
                behind[y0:, max(0, x0 - b):x0] = (225, 230, 240)
                behind[y0:, x0 + p:min(geo.w, x0 + p + b)] = (225, 230, 240)
        front, _ = layers.front_layer(geo, g, title, clock_text, st.accent_rgb, st.show_lower_third)
        if self._desk is not None:  # the desk sits in front of the presenter, under the graphics
            d = self._desk
            a = front[..., 3:]
            front = np.concatenate([front[..., :3] + (1 - a) * d[..., :3] * d[..., 3:],
                                    a + (1 - a) * d[..., 3:]], -1)
        static = behind * (1 - front[..., 3:]) + front[..., :3]
        strip = None
        if g.ticker:
            strip = np.ascontiguousarray(layers.ticker_strip(geo, g.ticker, st.accent_rgb))
        return _Drawn(static=(static + 0.5).clip(0, 255).astype(np.uint8),
                      behind=np.ascontiguousarray(np.stack([behind[y0:y0 + p, x:x + p] for x in self.boxes]) + 0.5),
                      front=[front[y0:y0 + p, x:x + p] for x in self.boxes], strip=strip,
                      transition=g.transition or "cut")

    def _upload(self, d: _Drawn) -> _State:
        dev = self.device
        return _State(static=torch.from_numpy(d.static).to(dev),
                      behind=torch.from_numpy(d.behind).permute(0, 3, 1, 2).to(dev).contiguous(),
                      front=[self._front_runs(f) for f in d.front], strip=d.strip, transition=d.transition)

    def _draw_ahead(self, title: str, row: int, g: Graphics) -> None:
        """Shortly before the minute turns, draw the next minute's clock on a thread of its own, so that the chunk
        that shows it only uploads it (drawn on the chunk, it made a CPU's live frames late)."""
        now = time.time()
        left = 60.0 - now % 60.0
        if left > CLOCK_AHEAD_S or (self._drawing is not None and self._drawing.is_alive()):
            return
        clock_text = time.strftime("%H:%M", time.localtime(now + left + 0.5))
        key = (title, row, clock_text)
        if key in self._states or key in self._ahead:
            return
        style, generation = self.style, self._generation

        def work() -> None:
            try:
                drawn = self._draw(style, title, g, clock_text)
            except Exception:  # drawn on the chunk instead, where an error is the chunk's
                log.exception("drawing the next minute's graphics failed")
                return
            if len(self._ahead) > 4:
                self._ahead.clear()
            self._ahead[key] = (generation, drawn)

        self._drawing = threading.Thread(target=work, name="graphics-ahead", daemon=True)
        self._drawing.start()

    def _front_runs(self, front_box: np.ndarray) -> list:
        """The front layer over one presenter's box as runs of rows (only the columns each covers)."""
        dev = self.device
        rows = np.flatnonzero(front_box[..., 3].max(axis=1) > 0)
        runs = []
        if len(rows):
            cuts = np.flatnonzero(np.diff(rows) > 1)
            starts = np.concatenate([[rows[0]], rows[cuts + 1]])
            ends = np.concatenate([rows[cuts], [rows[-1]]]) + 1
            for a, b in zip(starts, ends):
                cols = np.flatnonzero(front_box[a:b, :, 3].max(axis=0) > 0)  # only the columns it covers
                c0, c1 = int(cols[0]), int(cols[-1]) + 1
                part = torch.from_numpy(np.ascontiguousarray(front_box[a:b, c0:c1])).permute(2, 0, 1)[None].to(dev)
                keep = 1 - part[:, 3:]  # what shows through; the graphics carry the +0.5 of rounding too
                runs.append(((slice(int(a), int(b)), slice(c0, c1)), (part[:, :3] + 0.5 * (1 - keep)).contiguous(),
                             keep.contiguous()))
        return runs

    def restyle(self, style: CanvasStyle) -> None:
        """Use ``style``'s graphics from the next chunk on (the set and placement stay as opened)."""
        self._pending = style

    # -- per chunk -------------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def select(self, title: str, row: int = -1, slots: np.ndarray | None = None) -> None:
        """The pictures of what is on air (``title``, rundown ``row``) for the frames of ``slots``: the selection's
        set and graphics (drawn once per change), the ticker's band per frame, the set video's frames and the
        dissolve's weights, copied into the fixed buffers ``compose`` reads (one CUDA graph of it serves every
        selection)."""
        pending = self._pending
        if pending is not None:  # a new look from another thread takes effect here, between chunks
            self._pending = None
            self.style = pending
            self._states.clear()
            self._ahead.clear()
            self._generation += 1
            self._key = None
        st = self.style
        g = st.graphics_for(row)
        clock_text = time.strftime("%H:%M", time.localtime(time.time())) if g.clock else ""
        key = (title, row, clock_text)
        state = self._state(key, title, g, clock_text)
        if g.clock:
            self._draw_ahead(title, row, g)
        s = np.arange(1) if slots is None or not len(slots) else np.asarray(slots)
        n = len(s)
        self._ensure(n)
        if key != self._key:
            self.cur_static.copy_(state.static)
            self.cur_behind.copy_(state.behind)
            self._static_np = state.static.cpu().numpy()
            self.cur = state
            self._key = key
        fps = self.fmt.fps
        if row != self._row:
            if self._row is not None and state.transition == "dissolve":
                self._seg_slot = int(s[0])
                self._fading = True
            self._row = row
        w = np.ones(n, np.float32)
        if self._fading:
            k = max(1, round(st.dissolve_s * fps))
            w = np.clip((s - self._seg_slot + 1) / k, 0.0, 1.0).astype(np.float32)
        self._fade_now = bool((w < 1).any())
        self._fading = self._fade_now
        self.cur_fade[:n].copy_(torch.from_numpy(w))
        self._cursor.zero_()  # compose reads the chunk's per-frame buffers from here on, batch after batch
        tx0, ty0, tx1, ty1 = self.geo.ticker_box
        self._ticker_on = state.strip is not None
        if self._ticker_on:
            band = np.repeat(self._static_np[None, ty0:ty1], n, 0)
            x0 = self.geo.clock_w if g.clock else 0
            width = self.geo.w - x0
            length = state.strip.shape[1]
            off = np.floor(s / fps * TICKER_PX_S_PER_WIDTH * self.geo.w).astype(np.int64)
            idx = (off[:, None] + np.arange(width)[None, :]) % length
            band[:, :, x0:] = np.transpose(state.strip[:, idx], (1, 0, 2, 3))
            self.cur_band[:n].copy_(torch.from_numpy(band))
        elif self.fixed:
            self.cur_band[:n].copy_(self.cur_static[ty0:ty1].unsqueeze(0).expand(n, -1, -1, -1))
        if self._video is not None:
            self.cur_video[:n].copy_(torch.from_numpy(self._video.frames(n)))
        if self.fixed:  # rows past the chunk repeat its last frame's (a graph pads a short batch with the last row)
            self.cur_fade[n:].fill_(float(w[-1]))
            self.cur_band[n:].copy_(self.cur_band[n - 1:n].expand(len(self.cur_band) - n, -1, -1, -1))
            if self._video is not None:
                self.cur_video[n:].copy_(self.cur_video[n - 1:n].expand(len(self.cur_video) - n, -1, -1, -1))

    def _ensure(self, n: int) -> None:
        """The fixed buffers, for batches of up to ``n`` frames."""
        h, w, p = self.geo.h, self.geo.w, self.fmt.presenter_px
        if getattr(self, "cur_static", None) is None:
            dev = self.device
            self.cur_static = torch.zeros((h, w, 3), dtype=torch.uint8, device=dev)
            self.cur_behind = torch.zeros((len(self.boxes), 3, p, p), device=dev)
        if len(self.cur_fade) < n or getattr(self, "cur_band", None) is None or self.cur_band.shape[0] < n:
            m = max(n, 64)
            tx0, ty0, tx1, ty1 = self.geo.ticker_box
            self.cur_fade = torch.ones(m, device=self.device)
            self.cur_band = torch.zeros((m, ty1 - ty0, w, 3), dtype=torch.uint8, device=self.device)
            if self._video is not None:
                self.cur_video = torch.zeros((m, h, w, 3), dtype=torch.uint8, device=self.device)

    # -- per frame -------------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def compose(self, frames: torch.Tensor) -> torch.Tensor:
        """N x 3|4 x p x p presenter frames -> N x 3 x H x W uint8 programme frames (a view of an N x H x W x 3
        buffer, the layout outputs take). On CUDA every step runs whatever is selected (no host decision: one CUDA
        graph serves every selection); on the CPU steps with nothing to do are skipped."""
        if not self.fixed:
            return self._compose_host(frames)
        n, c, p, _ = frames.shape
        y0 = self.y0
        fixed = self.fixed
        # this batch's rows of the chunk's per-frame buffers (a chunk may come in several batches: CUDA graphs)
        at = (self._cursor + torch.arange(n, device=self._cursor.device)).clamp_(max=len(self.cur_fade) - 1)
        self._cursor.add_(n)
        out = torch.empty((n, *self.cur_static.shape), dtype=torch.uint8, device=frames.device)
        if self._video is not None:
            out.copy_(self.cur_video.index_select(0, at))
        else:
            out.copy_(self.cur_static.unsqueeze(0).expand_as(out))
        ce = c // len(self.boxes)  # each presenter's channels (a two-shot: the cast's frames side by side)
        fronts = self._front_fixed() if fixed else self.cur.front
        for i, x0 in enumerate(self.boxes):
            if self._video is not None:
                behind = out[:, y0:y0 + p, x0:x0 + p].permute(0, 3, 1, 2).float().add_(0.5)
            else:
                behind = self.cur_behind[i:i + 1]
            rgb = frames[:, i * ce:i * ce + 3]  # presenter and set both carry +0.5, so truncation to uint8 rounds
            if ce == 4 and not self.framed:
                alpha = frames[:, i * ce + 3:i * ce + 4].mul(self._sides).clamp_(0, 1)
            else:
                alpha = self._edge
            box = torch.lerp(behind, rgb, alpha)
            for (rows, cols), pre, a in fronts[i]:  # the graphics (and desk) in front of it: a = what shows through
                part = box[:, :, rows, cols]
                part.mul_(a).add_(pre)
            region = out[:, y0:y0 + p, x0:x0 + p]
            region.copy_(box.clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1))
        if fixed or self._ticker_on:
            tx0, ty0, tx1, ty1 = self.geo.ticker_box
            out[:, ty0:ty1].copy_(self.cur_band.index_select(0, at))
        w = self.cur_fade.index_select(0, at).view(n, 1, 1, 1)
        if fixed or self._fade_now:
            mixed = torch.lerp(self.last_out.unsqueeze(0).float(), out.float(), w)
            out.copy_(mixed.add_(0.5).clamp_(0, 255).to(torch.uint8))
        # the picture a dissolve starts from: the last frame shown once no dissolve is under way (decided on the
        # device, so that a graph of this keeps it as the eager form does)
        settled = (w[-1] >= 1).to(torch.float32)
        self.last_out.copy_(torch.lerp(self.last_out.float(), out[-1].float(), settled).to(torch.uint8))
        return out.permute(0, 3, 1, 2)

    def _compose_host(self, frames: torch.Tensor) -> torch.Tensor:
        """``compose`` on the CPU, the same pixels: frame by frame (one frame's box, 6 MB at 720p, stays in cache
        where a batch of eight streams each pass through memory), steps with nothing to do skipped, the box rounded
        straight into the picture (one pass, no uint8 copy of it), and the dissolve's starting picture kept by a copy
        once none is under way (the device-side form exists for a CUDA graph)."""
        n, c, p, _ = frames.shape
        y0 = self.y0
        at = (self._cursor + torch.arange(n)).clamp_(max=len(self.cur_fade) - 1)
        self._cursor.add_(n)
        out = torch.empty((n, *self.cur_static.shape), dtype=torch.uint8)
        if self._video is not None:
            out.copy_(self.cur_video.index_select(0, at))
        else:
            out.copy_(self.cur_static.unsqueeze(0).expand_as(out))
        ce = c // len(self.boxes)  # each presenter's channels (a two-shot: the cast's frames side by side)
        cut_out = ce == 4 and not self.framed
        for i in range(n):
            for b, x0 in enumerate(self.boxes):
                region = out[i:i + 1, y0:y0 + p, x0:x0 + p]
                behind = region.permute(0, 3, 1, 2).float().add_(0.5) if self._video is not None \
                    else self.cur_behind[b:b + 1]
                face = frames[i:i + 1, b * ce:b * ce + ce]
                alpha = face[:, 3:4].mul(self._sides).clamp_(0, 1) if cut_out else self._edge
                box = torch.lerp(behind, face[:, :3], alpha)
                for (rows, cols), pre, a in self.cur.front[b]:
                    box[:, :, rows, cols].mul_(a).add_(pre)
                region.copy_(box.clamp_(0, 255).permute(0, 2, 3, 1))  # truncation rounds: both layers carry +0.5
        if self._ticker_on:
            tx0, ty0, tx1, ty1 = self.geo.ticker_box
            out[:, ty0:ty1].copy_(self.cur_band.index_select(0, at))
        w = self.cur_fade.index_select(0, at).view(n, 1, 1, 1)
        if self._fade_now:
            mixed = torch.lerp(self.last_out.unsqueeze(0).float(), out.float(), w)
            out.copy_(mixed.add_(0.5).clamp_(0, 255).to(torch.uint8))
        if float(w[-1]) >= 1:  # the picture a dissolve starts from: the last one shown once none is under way
            self.last_out.copy_(out[-1])
        return out.permute(0, 3, 1, 2)

    def _front_fixed(self) -> list:
        """The front layer over each whole box, from fixed buffers (CUDA: the same ops for every selection)."""
        p = self.fmt.presenter_px
        nb = len(self.boxes)
        if getattr(self, "_front_pre", None) is None:
            self._front_pre = torch.zeros((nb, 1, 3, p, p), device=self.device)
            self._front_a = torch.ones((nb, 1, 1, p, p), device=self.device)
        if getattr(self, "_front_key", None) != self._key:
            self._front_pre.zero_()
            self._front_a.fill_(1.0)
            for i, runs in enumerate(self.cur.front):
                for (rows, cols), pre, a in runs:
                    self._front_pre[i][:, :, rows, cols].copy_(pre)
                    self._front_a[i][:, :, rows, cols].copy_(a)
            self._front_key = self._key
        return [[((slice(0, p), slice(0, p)), self._front_pre[i], self._front_a[i])] for i in range(nb)]

    def close(self) -> None:
        if self._video is not None:
            self._video.close()
            self._video = None
