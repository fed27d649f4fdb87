"""Post-processors of the core (stage C): flow interpolation between keyframes, super-resolution, the canvas.

All work on ``N x 3 x H x W`` float tensors in 0..255 on the generator's device.
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from studio.errors import InputError
from studio.contracts import Chunk, OnAir, PostProcessor, ProgramFormat

log = logging.getLogger(__name__)


class UpscaleRoute(enum.Enum):
    BICUBIC = "bicubic"
    # SPAN x4 (studio.enhance.upscale) onto the exact size: a larger frame is first resized to a quarter of the target
    # (288 -> 270 -> 1080), so that SPAN lands on the target with no full-size resize after it
    SPAN = "span"


def span_for(device: str):
    """SPAN in the form the post stage runs it on ``device``: on CUDA NHWC activations in bf16 where the GPU has bf16
    tensor cores (the fastest form measured, 52.7 dB against fp32 on the portrait, on an H100), else fp16;
    fp32 on the CPU."""
    from studio.enhance.upscale import LearnedUpscaler

    cuda = str(device).startswith("cuda")
    bf16 = cuda and torch.cuda.is_bf16_supported()
    return LearnedUpscaler(device, half=cuda, channels_last=cuda, dtype=torch.bfloat16 if bf16 else None)


class Upscaler(PostProcessor):
    """Frames of any size -> ``target_px`` square (bicubic, or SPAN x4 where the weights load)."""

    name = "upscale"

    def __init__(self, target_px: int, route: UpscaleRoute = UpscaleRoute.BICUBIC) -> None:
        self.target_px = target_px
        self.route = route
        self._span = None
        self.note = ""
        self._graphs: dict = {}  # input shape -> SPAN's CUDA graphs (CUDA_GRAPHS)

    def open(self, fmt: ProgramFormat, device: str) -> None:
        super().open(fmt, device)
        if self.route is UpscaleRoute.SPAN:
            from studio.errors import ModelLoadError

            try:
                self._span = span_for(device)
            except ModelLoadError as exc:
                self.note = f"SPAN unavailable ({exc}); bicubic instead"
                log.warning("%s", self.note)
                self.route = UpscaleRoute.BICUBIC

    @torch.inference_mode()
    def process(self, frames: torch.Tensor, chunk: Chunk | None = None) -> torch.Tensor:
        s = self.target_px
        if frames.shape[-1] == s and frames.shape[-2] == s:
            return frames
        x = frames
        if self._span is not None and frames.shape[-1] * 2 <= s:
            q = self._span_input_px()
            if frames.shape[-1] > q:
                x = F.interpolate(frames.clamp(0, 255), size=(q, q), mode="bicubic", align_corners=False,
                                  antialias=True)
            x = self._span_call(x.clamp(0, 255), chunk)
        if x.shape[-1] != s:
            x = F.interpolate(x, size=(s, s), mode="bicubic", align_corners=False, antialias=x.shape[-1] > s)
        return x


    def warm(self, in_px: int, device: torch.device) -> None:
        """Capture SPAN's CUDA graphs for frames of ``in_px`` (every batch size a chunk may bring), as ``process``
        would make them on first use."""
        if self._span is None or in_px * 2 > self.target_px:
            return
        q = self._span_input_px()
        self._graph_set(torch.zeros((1, 3, min(q, in_px), min(q, in_px)), device=device)).capture_all()

    def _span_input_px(self) -> int:
        """The input size whose x4 covers the target (a larger frame is resized to it first)."""
        return -(-self.target_px // self._span.scale)

    def _graph_set(self, x: torch.Tensor):
        key = tuple(x.shape[1:])
        g = self._graphs.get(key)
        if g is None:
            from studio.generators.graphs import GraphSet

            example = x[:1].clone()
            g = self._graphs[key] = GraphSet(self._span, lambda n: (example.repeat(n, 1, 1, 1),), x.device,
                                             GRAPH_BATCH)
        return g

    def _span_call(self, x: torch.Tensor, chunk: Chunk | None) -> torch.Tensor:
        """SPAN, replayed as CUDA graphs (up to ``GRAPH_BATCH`` frames a replay) when the chunk runs with CUDA
        graphs."""
        if not (_graphs_on(chunk) and x.is_cuda):
            return self._span(x)
        return self._graph_set(x)(x)


GRAPH_BATCH = 8  # most frames a replay of the post stage's graphed networks (SPAN, RIFE): bounds their memory


def _graphs_on(chunk: Chunk | None) -> bool:
    from studio.pipeline.settings import Optimization

    return chunk is not None and Optimization.CUDA_GRAPHS in chunk.optimizations


# RIFE's flows come from keyframes no larger than this (shrunk by a whole factor), which then warp the full-size keys:
# at 1080 px, flows from the keys at 270 px matched the true frames as well as RIFE at 1080 did (30.65 dB against 30.74)
FLOW_MAX_PX = 320


def _flow_divisor(px: int) -> int:
    """The whole factor that shrinks keys of ``px`` to at most ``FLOW_MAX_PX`` for RIFE's flows."""
    return math.ceil(px / FLOW_MAX_PX)


class FlowFill:
    """RIFE between consecutive generated keyframes: fills the slots a flow-interpolating generator left out.

    ``fill(keys, key_mask, restart)``: ``keys`` are the chunk's generated frames (at the True positions of
    ``key_mask``, whose last entry is always True); returns every slot's frame. The last keyframe of a chunk is kept
    for the next one (``restart`` drops it: a new program item, or skipped slots). With ``large`` (the keys upscaled)
    the in-betweens are made at the large size from the generated keys' flows (``RifeInterpolator.between_large``):
    the upscaler then runs on the keyframes alone. Keys larger than ``FLOW_MAX_PX`` are their own ``large``: the
    flows come from a shrunk copy."""

    def __init__(self, device: str, batch: int = 8) -> None:
        from studio.enhance.rife import RifeInterpolator

        self.rife = RifeInterpolator(device, half=str(device).startswith("cuda"))
        self.batch = batch  # in-betweens per RIFE call (bounds the memory at large sizes)
        self._last: torch.Tensor | None = None
        self._last_large: torch.Tensor | None = None
        self.frames_interpolated = 0
        self._graphs: dict = {}  # frame shapes -> RIFE's CUDA graphs, up to ``batch`` pairs a replay (CUDA_GRAPHS)

    def _between(self, a: torch.Tensor, b: torch.Tensor, t: torch.Tensor, graphs: bool,
                 large: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        args = (a, b) if large is None else (a, b, *large)
        if not (graphs and a.is_cuda):
            return self._net(args)(*args, t)
        return self._graph_set(args)(*args, t.to(a.device))

    def _net(self, args: tuple[torch.Tensor, ...]):
        """RIFE's call for these inputs: two keys, or two keys and their large frames (``between_large``)."""
        return self.rife.between if len(args) == 2 else self.rife.between_large

    def _graph_set(self, args: tuple[torch.Tensor, ...]):
        key = tuple((tuple(x.shape[1:]), x.dtype) for x in args)
        g = self._graphs.get(key)
        if g is None:
            from studio.generators.graphs import GraphSet

            fn = self._net(args)
            ex = tuple(x[:1].clone() for x in args)
            dev = args[0].device
            g = self._graphs[key] = GraphSet(
                fn, lambda n: tuple(x.repeat(n, 1, 1, 1) for x in ex) + (torch.full((n,), 0.5, device=dev),),
                dev, self.batch)
        return g

    def warm(self, key_px: int, large_px: int | None, device: torch.device) -> None:
        """Capture RIFE's CUDA graphs for keys of ``key_px`` (in-betweens made at ``large_px`` where given, and for
        keys larger than ``FLOW_MAX_PX``), every batch size, as ``fill`` would make them on first use."""
        if large_px is None and key_px > FLOW_MAX_PX:
            large_px, key_px = key_px, key_px // _flow_divisor(key_px)
        keys = torch.zeros((1, 3, key_px, key_px), device=device)
        args = (keys, keys) if large_px is None else (
            keys, keys, *(torch.zeros((1, 3, large_px, large_px), device=device),) * 2)
        self._graph_set(args).capture_all()

    @torch.inference_mode()
    def fill(self, keys: torch.Tensor, key_mask: np.ndarray, restart: bool, graphs: bool = False,
             large: torch.Tensor | None = None) -> torch.Tensor:
        """``graphs``: RIFE replayed as a CUDA graph (the chunk runs with CUDA_GRAPHS). ``large``: the keys upscaled
        (one per key): every slot's frame is then returned at their size."""
        if restart:
            self._last = self._last_large = None
        keys = keys.float()  # one dtype for the graphs ``warm`` captured
        large = None if large is None else large.float()
        if large is None and keys.shape[-1] > FLOW_MAX_PX:  # frames made large (a face-pasting engine's)
            k = _flow_divisor(keys.shape[-1])
            large = keys
            keys = F.interpolate(keys, size=(keys.shape[-2] // k, keys.shape[-1] // k), mode="area")
        t = len(key_mask)
        ref = keys if large is None else large
        out = torch.empty((t, *ref.shape[1:]), device=ref.device, dtype=torch.float32 if large is not None
                          else ref.dtype)
        key_idx = np.flatnonzero(key_mask)
        at_keys = _on_device(key_idx, torch.long, ref.device)
        out.index_copy_(0, at_keys, ref.to(out.dtype))
        lo = None  # the generated keys by slot (their flows) where the in-betweens are made large
        if large is not None:
            lo = torch.empty((t, *keys.shape[1:]), device=keys.device, dtype=keys.dtype)
            lo.index_copy_(0, at_keys, keys)
            if self._last is not None and self._last_large is None:
                self._last = None  # the last chunk ran without ``large``: no large frame to warp from
        anchors = ([-1] if self._last is not None else []) + list(key_idx)
        pairs = [(k0, k1, i) for k0, k1 in zip(anchors[:-1], anchors[1:]) for i in range(k0 + 1, k1)]
        src = out if lo is None else lo
        for j in range(0, len(pairs), self.batch):  # every in-between of the chunk, a batch of pairs per call
            part = pairs[j:j + self.batch]
            a = torch.cat([self._last if k0 < 0 else src[k0:k0 + 1] for k0, _, _ in part])
            b = torch.cat([src[k1:k1 + 1] for _, k1, _ in part])
            big = None
            if lo is not None:
                big = (torch.cat([self._last_large if k0 < 0 else out[k0:k0 + 1] for k0, _, _ in part]),
                       torch.cat([out[k1:k1 + 1] for _, k1, _ in part]))
            t = _on_device([(i - k0) / (k1 - k0) for k0, k1, i in part], torch.float32, out.device)
            out.index_copy_(0, _on_device([i for _, _, i in part], torch.long, out.device),
                            self._between(a, b, t, graphs, big).to(out.dtype))
            self.frames_interpolated += len(part)
        if not key_mask[0] and self._last is None:  # nothing to interpolate from: hold the first keyframe
            first = int(key_idx[0])
            out[:first] = out[first:first + 1]
            if lo is not None:
                lo[:first] = lo[first:first + 1]
        self._last = (out if lo is None else lo)[-1:].clone()
        self._last_large = out[-1:].clone() if lo is not None else None
        return out


def _on_device(values, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A few host numbers (indices, times) as a tensor on ``device`` without waiting for it: a copy from pageable
    memory (``tensor.to``, or indexing a CUDA tensor with a list) waits for all the stream's earlier work, so the GPU
    would idle while the host prepares the next batch of in-betweens; a copy from pinned memory does not wait."""
    x = torch.as_tensor(np.asarray(values), dtype=dtype)
    if device.type != "cuda":
        return x
    return x.pin_memory().to(device, non_blocking=True)


@dataclass(frozen=True)
class CanvasStyle:
    """The 16:9 program: a background (plain colour or an image), the square presenter in a box, a lower third."""

    background_rgb: tuple[int, int, int] = (16, 28, 48)
    background_image: Path | None = None
    accent_rgb: tuple[int, int, int] = (200, 30, 45)
    show_lower_third: bool = True


class Canvas(PostProcessor):
    """The presenter (``presenter_px`` square) over a background at the program's size, with a lower third showing
    what is on air (``OnAir.title``). Returns uint8 frames: the program picture is final here.

    ``select(title)`` copies that title's static picture (background + lower third, drawn once per title) into the
    canvas's current buffers; ``compose(frames)`` reads only those buffers and the frames, so one CUDA graph of it
    serves every title (``studio.pipeline.core``: the post stage with CUDA graphs). ``process`` does both."""

    name = "canvas"

    def __init__(self, style: CanvasStyle | None = None) -> None:
        self.style = style or CanvasStyle()
        self._titles: dict[str, tuple[torch.Tensor, torch.Tensor] | None] = {}
        self._statics: dict[str, tuple[torch.Tensor, ...]] = {}
        self._selected: str | None = None

    def open(self, fmt: ProgramFormat, device: str) -> None:
        super().open(fmt, device)
        self.device = torch.device(device)
        w, h = fmt.width, fmt.height
        self.bg = self._background(w, h).to(self.device)  # 3 x H x W, 0..255
        p = fmt.presenter_px
        if p > h:
            raise InputError(f"The presenter ({p} px) does not fit a {w}x{h} canvas: choose a smaller size.")
        # Presenter box: right of centre, standing on the lower third's top edge region, full height when it fits.
        self.x0 = int(round(w * 0.56 - p / 2))
        self.x0 = max(0, min(w - p, self.x0))
        self.y0 = h - p
        self._edge = self._box_edge(p).to(self.device)  # 1 x p x p: a soft edge so the box does not look cut out
        self._ring = int(math.ceil(max(2.0, p / 120))) + 1  # pixels from the box's edge where the edge is soft
        self._bar_h = max(24, round(h * 0.11))
        ly = self._lt_y(self._bar_h)
        self._band = (max(ly, self.y0), min(ly + self._bar_h, self.y0 + p))  # canvas rows where the bar covers the box
        a, b = self._band
        rows = max(0, b - a)
        # what compose reads: the selected title's picture (fixed tensors, filled by select)
        self.cur_static = torch.zeros((h, w, 3), dtype=torch.uint8, device=self.device)
        self.cur_box_bg = torch.zeros((1, 3, p, p), device=self.device)
        self.cur_bar_rgb = torch.zeros((1, 3, rows, p), device=self.device)
        self.cur_bar_alpha = torch.zeros((1, 1, rows, p), device=self.device)
        self._selected = None

    def _background(self, w: int, h: int) -> torch.Tensor:
        st = self.style
        if st.background_image is not None:
            from PIL import Image, UnidentifiedImageError

            try:
                with Image.open(st.background_image) as im:
                    im = im.convert("RGB")
                    scale = max(w / im.width, h / im.height)
                    im = im.resize((max(w, round(im.width * scale)), max(h, round(im.height * scale))),
                                   Image.LANCZOS)
                    left, top = (im.width - w) // 2, (im.height - h) // 2
                    arr = np.asarray(im.crop((left, top, left + w, top + h)), np.float32)
            except (OSError, UnidentifiedImageError) as exc:
                raise InputError(f"Cannot use {st.background_image} as the background ({exc}): choose a JPEG or "
                                 "PNG image, or a plain colour.") from exc
            return torch.from_numpy(arr).permute(2, 0, 1).contiguous()
        # A plain colour with a gentle vertical gradient and vignette (a studio wall, not a flat fill).
        y = torch.linspace(0, 1, h).view(h, 1)
        x = torch.linspace(-1, 1, w).view(1, w)
        shade = (1.15 - 0.35 * y) * (1 - 0.18 * x * x)
        base = torch.tensor(st.background_rgb, dtype=torch.float32).view(3, 1, 1)
        return (base * shade).clamp(0, 255)

    @staticmethod
    def _box_edge(p: int) -> torch.Tensor:
        r = max(2.0, p / 120)
        i = torch.arange(p, dtype=torch.float32)
        d = torch.minimum(i, p - 1 - i)
        e = ((d + 0.5) / r).clamp(0, 1)
        return (e.view(p, 1) * e.view(1, p))[None]

    def _lower_third(self, title: str) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(RGB 3 x h x W, alpha 1 x h x W) of the lower third for ``title``, drawn once per title."""
        if not title or not self.style.show_lower_third:
            return None
        if title in self._titles:
            return self._titles[title]
        from PIL import Image, ImageDraw

        w = self.fmt.width
        bar_h = self._bar_h
        img = Image.new("RGBA", (w, bar_h), (0, 0, 0, 0))
        d = ImageDraw.Draw(img)
        pad = round(w * 0.05)
        accent = round(bar_h * 0.12)
        d.rectangle([pad, 0, w - pad, bar_h - 1], fill=(12, 16, 24, 225))
        d.rectangle([pad, 0, w - pad, accent], fill=(*self.style.accent_rgb, 255))
        font = _font(round(bar_h * 0.45))
        text = title.upper()
        max_w = w - 2 * pad - round(bar_h * 0.6)
        while font.getlength(text) > max_w and len(text) > 4:  # too long for the bar: shorten with an ellipsis
            text = text[:-2].rstrip() + "…"
        ty = accent + (bar_h - accent - font.size) // 2 - round(font.size * 0.1)
        d.text((pad + round(bar_h * 0.3), ty), text, font=font, fill=(245, 245, 245, 255))
        arr = torch.from_numpy(np.asarray(img, np.float32)).permute(2, 0, 1)
        pair = (arr[:3].to(self.device), (arr[3:4] / 255.0).to(self.device))
        if len(self._titles) > 64:
            self._titles.clear()
        self._titles[title] = pair
        return pair

    def _static(self, title: str) -> tuple[torch.Tensor, ...]:
        """The title's picture without the presenter, made once per title: the canvas (background + lower third,
        H x W x 3 uint8), the canvas under the presenter's box (1 x 3 x p x p float, for the soft edge) and the bar
        where it covers the box (RGB and alpha; alpha 0 without a lower third)."""
        got = self._statics.get(title)
        if got is None:
            out = self.bg.clone()
            lt = self._lower_third(title)
            ly = self._lt_y(self._bar_h)
            if lt is not None:
                rgb, alpha = lt
                out[:, ly:ly + self._bar_h] = torch.lerp(out[:, ly:ly + self._bar_h], rgb, alpha)
            static = (out + 0.5).clamp(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous()  # H x W x 3
            p, y0, x0 = self.fmt.presenter_px, self.y0, self.x0
            box_bg = static[y0:y0 + p, x0:x0 + p].permute(2, 0, 1).float().unsqueeze(0)
            a, b = self._band
            if lt is not None and b > a:
                bar_rgb = rgb[:, a - ly:b - ly, x0:x0 + p].unsqueeze(0)
                bar_alpha = alpha[:, a - ly:b - ly, x0:x0 + p].unsqueeze(0)
            else:
                bar_rgb, bar_alpha = torch.zeros_like(self.cur_bar_rgb), torch.zeros_like(self.cur_bar_alpha)
            got = (static, box_bg, bar_rgb, bar_alpha)
            if len(self._statics) > 16:
                self._statics.clear()
            self._statics[title] = got
        return got

    def _lt_y(self, bar_h: int) -> int:
        return self.fmt.height - bar_h - round(self.fmt.height * 0.06)

    @torch.inference_mode()
    def select(self, title: str) -> None:
        """Make ``title``'s picture the one ``compose`` draws (copies on the current stream, only when it changes)."""
        if title == self._selected:
            return
        static, box_bg, bar_rgb, bar_alpha = self._static(title)
        self.cur_static.copy_(static)
        self.cur_box_bg.copy_(box_bg)
        self.cur_bar_rgb.copy_(bar_rgb)
        self.cur_bar_alpha.copy_(bar_alpha)
        self._selected = title

    @torch.inference_mode()
    def compose(self, frames: torch.Tensor) -> torch.Tensor:
        """N x 3 x p x p presenter frames -> N x 3 x H x W uint8 program frames of the selected title (a view of an
        N x H x W x 3 buffer, the layout outputs take). Only the presenter's box is blended per frame; the rest is the
        static canvas."""
        n, _, p, _ = frames.shape
        static, box_bg = self.cur_static, self.cur_box_bg
        y0, x0 = self.y0, self.x0
        out = torch.empty((n, *static.shape), dtype=torch.uint8, device=frames.device)
        out.copy_(static.unsqueeze(0).expand_as(out))
        region = out[:, y0:y0 + p, x0:x0 + p]
        region.copy_(frames.clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1))  # frames carry +0.5: truncation rounds
        r = self._ring
        for sl in ((slice(None), slice(0, r)), (slice(None), slice(p - r, p)),  # soft edges of the box only
                   (slice(0, r), slice(r, p - r)), (slice(p - r, p), slice(r, p - r))):
            rows, cols = sl
            edge = self._edge[:, rows, cols]
            mixed = torch.lerp(box_bg[:, :, rows, cols], frames[:, :, rows, cols].clamp(0, 255), edge)
            region[:, rows, cols].copy_(mixed.permute(0, 2, 3, 1))
        a, b = self._band
        if b > a:  # the lower third lies over the presenter's box too (alpha 0: no bar, the same pixels)
            part = region[:, a - y0:b - y0].permute(0, 3, 1, 2).float()
            mixed = torch.lerp(part, self.cur_bar_rgb, self.cur_bar_alpha)
            region[:, a - y0:b - y0].copy_(mixed.add_(0.5).clamp_(0, 255).permute(0, 2, 3, 1))
        return out.permute(0, 3, 1, 2)

    @torch.inference_mode()
    def process(self, frames: torch.Tensor, chunk: Chunk | None = None) -> torch.Tensor:
        """``select`` the chunk's title, then ``compose``."""
        self.select((chunk.on_air if chunk is not None else OnAir()).title)
        return self.compose(frames)


def _font(size_px: int):
    """DejaVu Sans Bold from matplotlib's wheel (always installed with the studio), else PIL's default."""
    from PIL import ImageFont

    try:
        import matplotlib

        path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans-Bold.ttf"
        return ImageFont.truetype(str(path), size_px)
    except (ImportError, OSError):
        return ImageFont.load_default(size_px)
