"""Post-processors of the core (stage C): flow interpolation between keyframes, super-resolution, the canvas.

All work on ``N x 3 x H x W`` float tensors in 0..255 on the generator's device.
"""

from __future__ import annotations

import enum
import logging
import math

import numpy as np
import torch
import torch.nn.functional as F

from studio.contracts import Chunk, OnAir, PostProcessor, ProgramFormat
from studio.graphics.compositor import ProgramCompositor
from studio.graphics.look import CanvasStyle

__all__ = ["Canvas", "CanvasStyle", "FlowFill", "RowsFlowFill", "Upscaler", "UpscaleRoute", "span_for"]

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

    def __init__(self, device: str, batch: int = 8, share: FlowFill | None = None) -> None:
        if share is None:
            from studio.enhance.rife import RifeInterpolator

            self.rife = RifeInterpolator(device, half=str(device).startswith("cuda"))
            self._graphs: dict = {}  # frame shapes -> RIFE's CUDA graphs, up to ``batch`` pairs a replay
        else:  # another FlowFill's RIFE and graphs (``RowsFlowFill``): only the carried keyframe is this one's own
            self.rife, self._graphs = share.rife, share._graphs
        self.batch = batch  # in-betweens per RIFE call (bounds the memory at large sizes)
        self._last: torch.Tensor | None = None
        self._last_large: torch.Tensor | None = None
        self.frames_interpolated = 0

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


class RowsFlowFill:
    """A two-shot's in-betweens: frames carry every anchor's RGB in turn (K x rows*3), and each anchor's channels are
    filled by a ``FlowFill`` of its own, which carries that anchor's last keyframe to the next chunk; all share one
    RIFE network and its graphs. The same ``fill`` / ``warm`` / ``frames_interpolated`` as ``FlowFill``; ``large``
    (the keys upscaled) carries every anchor's channels in turn too."""

    def __init__(self, device: str, rows: int, batch: int = 8) -> None:
        first = FlowFill(device, batch)
        self.fills = [first] + [FlowFill(device, batch, share=first) for _ in range(rows - 1)]
        self.frames_interpolated = 0  # program frames made in between (every anchor's rows of one frame: one)

    def warm(self, key_px: int, large_px: int | None, device: torch.device) -> None:
        """``FlowFill.warm`` (the graphs serve every anchor)."""
        self.fills[0].warm(key_px, large_px, device)

    @torch.inference_mode()
    def fill(self, keys: torch.Tensor, key_mask: np.ndarray, restart: bool, graphs: bool = False,
             large: torch.Tensor | None = None) -> torch.Tensor:
        n = len(self.fills)
        c = keys.shape[1] // n
        big = None if large is None else large.shape[1] // n
        before = self.fills[0].frames_interpolated
        out = [f.fill(keys[:, i * c:(i + 1) * c], key_mask, restart, graphs,
                      None if large is None else large[:, i * big:(i + 1) * big]) for i, f in enumerate(self.fills)]
        self.frames_interpolated += self.fills[0].frames_interpolated - before
        return torch.cat(out, 1)


def _on_device(values, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A few host numbers (indices, times) as a tensor on ``device`` without waiting for it: a copy from pageable
    memory (``tensor.to``, or indexing a CUDA tensor with a list) waits for all the stream's earlier work, so the GPU
    would idle while the host prepares the next batch of in-betweens; a copy from pinned memory does not wait."""
    x = torch.as_tensor(np.asarray(values), dtype=dtype)
    if device.type != "cuda":
        return x
    return x.pin_memory().to(device, non_blocking=True)


class Canvas(ProgramCompositor, PostProcessor):
    """The 16:9 programme (``studio.graphics.compositor``): the set, the presenter (cut out by its matte, or the framed
    photo), the broadcast graphics. Returns uint8 frames: the programme picture is final here.

    ``select(title, row, slots)`` copies the selection's pictures into the canvas's fixed buffers; ``compose(frames)``
    reads only those buffers and the frames, so one CUDA graph of it serves every selection (``studio.pipeline.core``:
    the post stage with CUDA graphs). ``process`` does both."""

    name = "canvas"

    def __init__(self, style: CanvasStyle | None = None, framed: bool = False) -> None:
        ProgramCompositor.__init__(self, style)
        self.framed = framed

    def open(self, fmt: ProgramFormat, device: str) -> None:
        PostProcessor.open(self, fmt, device)
        ProgramCompositor.open(self, fmt, device)

    @torch.inference_mode()
    def process(self, frames: torch.Tensor, chunk: Chunk | None = None) -> torch.Tensor:
        """``select`` what the chunk has on air, then ``compose``."""
        on_air = chunk.on_air if chunk is not None else OnAir()
        slots = chunk.slots if chunk is not None else np.arange(frames.shape[0])
        self.select(on_air.title, on_air.row, slots)
        return self.compose(frames)

    def close(self) -> None:
        ProgramCompositor.close(self)
