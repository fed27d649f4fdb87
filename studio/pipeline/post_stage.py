"""Stage C of the core: the generated frames to the program pictures the outputs receive.

RIFE in-betweens where stage B generated keyframes alone (``Chunk.key_mask``), super-resolution to the presenter's
size, the 16:9 canvas with its lower third, and the colour conversion: on a GPU the pictures (and with GPU_ENCODE
their YUV 4:2:0 planes) are made on the device and copied to pinned host buffers; with CUDA_GRAPHS the canvas and the
conversion replay as one graph per frame shape.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from studio.contracts import CastLayout, Chunk, Layout, Output, ProgramBatch, ProgramFormat
from studio.pipeline.settings import CoreSettings, Optimization

O = Optimization


class PostStage:
    """The post stage of one core (module docstring); its tools are made on first use (or by ``warm``)."""

    def __init__(self, fmt: ProgramFormat, device: torch.device, settings: CoreSettings, warp_field: bool,
                 canvas_style=None, frame_channels: Callable[[], int] = lambda: 3) -> None:
        self.fmt = fmt
        self.frame_channels = frame_channels  # what the generator's frames carry: 3 (RGB) or 4 (RGB + matte)
        self.device = device
        self.cuda = device.type == "cuda"
        self.s = settings
        self.warp_field = warp_field  # the generator's frames come from a warp field (upscaled bicubic, not SPAN)
        self._canvas_style = canvas_style
        self.flow = None
        self._upscalers: dict[int, object] = {}
        self._canvas = None
        self._canvas_lock = threading.Lock()  # the look may change from another thread while the canvas opens
        self._post_graphs: dict = {}  # (frame shape, dtype, YUV too) -> Graphed (CUDA_GRAPHS)
        self._graph_stream = self._graph_pool = None
        self._pinned_bufs: dict = {}
        self.frames_interpolated = 0  # in-betweens made by RIFE

    def close(self) -> None:
        """Close the canvas (a set video's decoder) and the upscalers; let go of RIFE, the post graphs and the pinned
        buffers."""
        with self._canvas_lock:
            if self._canvas is not None:
                self._canvas.close()
                self._canvas = None
        for up in self._upscalers.values():
            up.close()
        self._upscalers.clear()
        self.flow = None
        self._post_graphs.clear()
        self._pinned_bufs.clear()
        self._graph_stream = self._graph_pool = None

    def warm(self, sizes: list[int], want_yuv: bool, flow: bool) -> None:
        """Capture the CUDA graphs a run at these generated ``sizes`` needs: the canvas and conversion, SPAN's and
        RIFE's graphs for each batch size."""
        p = self.fmt.presenter_px
        if self.fmt.layout is Layout.CANVAS:
            self.open_canvas().select("")
        # a cast cut to the speaker: one anchor's channels a frame (``Chunk.shown``); a two-shot: its picture
        cut = self.fmt.rows > 1 and self.fmt.cast_layout is CastLayout.CUT
        c = self.frame_channels() // (self.fmt.rows if cut else 1)
        with torch.inference_mode():
            example = torch.zeros((1, c, p, p), device=self.device)
            self.post_graph(self.cast_picture(example) if self.fmt.rows > 1 and not cut else example, want_yuv)
            for px in sizes:
                if px != p:
                    self.upscaler(p).warm(px, self.device)
                if flow:
                    self.flow_fill().warm(px, p if px != p else None, self.device)

    def prepare(self, on_air) -> None:
        """Draw what the first chunk shows before it comes: the canvas's set and the graphics of ``on_air`` (a driver
        calls it while other work goes on: ``render``, while the first sentence is spoken)."""
        if self.fmt.layout is Layout.CANVAS:
            self.open_canvas().select(on_air.title, on_air.row)

    def upscaler(self, target: int):
        up = self._upscalers.get(target)
        if up is None:
            from studio.pipeline.post import Upscaler, UpscaleRoute

            route = UpscaleRoute.BICUBIC if self.warp_field else UpscaleRoute.SPAN
            up = Upscaler(target, route)
            up.open(self.fmt, str(self.device))
            self._upscalers[target] = up
        return up

    def flow_fill(self):
        """The RIFE in-betweener of this core, made on first use (``warm`` or the first chunk with keyframes); a
        two-shot's fills each anchor's channels on their own (``RowsFlowFill``)."""
        if self.flow is None:
            from studio.pipeline.post import FlowFill, RowsFlowFill

            if self.fmt.rows > 1 and self.fmt.cast_layout is not CastLayout.CUT:
                self.flow = RowsFlowFill(str(self.device), self.fmt.rows)
            else:
                self.flow = FlowFill(str(self.device))
        return self.flow

    def upscale(self, frames: torch.Tensor, chunk: Chunk) -> torch.Tensor:
        """Generated frames to the presenter's size; a two-shot's (every anchor's channels in turn) anchor by anchor,
        as the upscaler takes one picture's channels."""
        up = self.upscaler(self.fmt.presenter_px)
        rows = self.fmt.rows if chunk.shown is None else 1
        if rows < 2:
            return up.process(frames, chunk)
        c = frames.shape[1] // rows
        return torch.cat([up.process(frames[:, i * c:(i + 1) * c], chunk) for i in range(rows)], 1)

    def program(self, chunk: Chunk, outputs: list[Output]) -> tuple[ProgramBatch, float]:
        """The chunk's program batch for ``outputs``, and the stage's time in ms (GPU time by events on CUDA)."""
        t0 = time.perf_counter()
        frames = chunk.frames
        ev0 = ev1 = None
        if self.cuda:
            stream = torch.cuda.current_stream()
            stream.wait_event(chunk.gen_events[1])
            frames.record_stream(stream)
            ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ev0.record(stream)
        key_mask = chunk.key_mask
        p = self.fmt.presenter_px
        if key_mask is not None:
            before = self.flow_fill().frames_interpolated
            # the keyframes alone are upscaled; the in-betweens are made at the presenter's size from their flows
            large = self.upscale(frames, chunk) if frames.shape[-1] != p else None
            frames = self.flow.fill(frames, key_mask, restart=chunk.restart,
                                     graphs=O.CUDA_GRAPHS in chunk.optimizations, large=large)
            self.frames_interpolated += self.flow.frames_interpolated - before
        if frames.shape[-1] != p:
            frames = self.upscale(frames, chunk)
        if self.fmt.rows > 1 and chunk.shown is None:  # else stage B made the rows on screen alone
            frames = self.cast_picture(frames)
        if self.fmt.layout is Layout.CANVAS:
            self.open_canvas().select(chunk.on_air.title, chunk.on_air.row, chunk.slots)
        need_rgb = any(o.needs_rgb for o in outputs) or not outputs
        need_yuv = any(o.wants_yuv for o in outputs)
        retain = any(o.retains_frames for o in outputs)
        rgb = yuv = None
        device_frames = None
        if self.cuda:
            # GPU_ENCODE: the YUV 4:2:0 planes are made on the GPU and only they cross PCIe for the encoders (half
            # the bytes of RGB); without it the RGB crosses and the encoder converts it on the CPU (in its own
            # process: studio.encode.encoder_process). With CUDA_GRAPHS the canvas and the conversion replay as one graph.
            want_yuv = need_yuv and O.GPU_ENCODE in chunk.optimizations
            if O.CUDA_GRAPHS in chunk.optimizations:
                got = self.post_graph(frames, want_yuv)(frames)
                pic, dev_yuv = got if want_yuv else (got, None)
            else:
                pic, dev_yuv = self.finish(frames, want_yuv)
            host_rgb = host_yuv = None
            if need_rgb or not want_yuv:
                host_rgb = self.pinned("rgb", pic.shape)
                host_rgb.copy_(pic, non_blocking=True)
            if want_yuv:
                host_yuv = self.pinned("yuv", dev_yuv.shape)
                host_yuv.copy_(dev_yuv, non_blocking=True)
            ev1.record(stream)
            ev1.synchronize()
            if host_rgb is not None:
                rgb = host_rgb.numpy().copy() if retain else host_rgb.numpy()
            if host_yuv is not None:
                yuv = host_yuv.numpy().copy() if retain else host_yuv.numpy()
            device_frames = pic.permute(0, 3, 1, 2)
        else:  # the encoders convert RGB in their own process: nothing to gain here on the CPU
            if self._canvas is not None and self.fmt.layout is Layout.CANVAS:
                frames = self._canvas.compose(frames)
            u8 = frames if frames.dtype == torch.uint8 else frames.clamp_(0, 255).to(torch.uint8)
            rgb = u8.permute(0, 2, 3, 1).contiguous().numpy()
        fps = self.fmt.fps
        batch = ProgramBatch(slots=chunk.slots, pts_s=chunk.slots / fps,
                             frames=rgb if rgb is not None else np.zeros((0, self.fmt.height, self.fmt.width, 3),
                                                                          np.uint8),
                             audio=chunk.audio, audio_start=chunk.audio_start, on_air=chunk.on_air,
                             heard_ns=chunk.heard_ns, device_frames=device_frames, yuv=yuv,
                             finished_ns=time.monotonic_ns())
        if self.cuda:
            return batch, ev0.elapsed_time(ev1)
        return batch, (time.perf_counter() - t0) * 1e3

    def cast_picture(self, frames: torch.Tensor) -> torch.Tensor:
        """A two-shot's frames (K x rows*C x p x p, each anchor's channels in turn) as the layout shows them: on the
        canvas as they are (the canvas sets each in its box); square, side by side (K x 3 x p x rows*p). A cast cut
        to the speaker comes from stage B as the shown rows alone (``Chunk.shown``)."""
        rows = self.fmt.rows
        c = frames.shape[1] // rows
        if self.fmt.layout is Layout.CANVAS:
            return frames
        return torch.cat([frames[:, i * c:i * c + 3] for i in range(rows)], 3)

    @property
    def canvas(self):
        """The canvas once a chunk or the warm-up opened it, else None."""
        return self._canvas

    def open_canvas(self):
        with self._canvas_lock:
            if self._canvas is None:
                from studio.pipeline.post import Canvas

                framed = self.frame_channels() != 4 * self.fmt.rows or not getattr(self._canvas_style, "use_matte",
                                                                                    True)
                self._canvas = Canvas(self._canvas_style, framed=framed)
                self._canvas.open(self.fmt, str(self.device))
            return self._canvas

    def set_graphics(self, graphics, segments: tuple | None) -> None:
        """The programme's and each rundown row's graphics (``segments`` None: the rows' kept), from any thread: the
        open canvas takes them between chunks, and a canvas not open yet (a core just started) opens with them. No
        canvas in this layout: nothing."""
        with self._canvas_lock:
            base = self._canvas.style if self._canvas is not None else self._canvas_style
            if base is None:
                return
            self._canvas_style = replace(base, graphics=graphics, segments=base.segments if segments is None else segments)
            if self._canvas is not None:
                self._canvas.restyle(self._canvas_style)

    def finish(self, frames: torch.Tensor, want_yuv: bool, i420=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Presenter frames -> (the program pictures, N x H x W x 3 uint8; their I420 planes with ``want_yuv``): the
        selected title's canvas, or the square frames rounded. ``i420``: the colour conversion to use (default
        ``rgb_to_i420``; the post graph's is compiled)."""
        from studio.encode.colour import rgb_to_i420

        i420 = i420 or rgb_to_i420

        if self.fmt.layout is Layout.CANVAS:
            pic = self._canvas.compose(frames)  # N x 3 x H x W view of an N x H x W x 3 uint8 buffer
            exact = pic
        else:
            exact = frames.clamp(0, 255)
            pic = exact.to(torch.uint8)  # frames carry +0.5: truncation rounds
        return pic.permute(0, 2, 3, 1), (i420(exact) if want_yuv else None)

    def post_graph(self, frames: torch.Tensor, want_yuv: bool):
        """``finish`` (its pictures alone without ``want_yuv``) as a CUDA graph at the core's batch size, per frame
        shape and dtype (made on first use, or by ``warm``). The graphs share one memory pool: each replay's outputs
        are cloned before the next replays."""
        from studio.generators.graphs import Graphed, graphed

        key = (tuple(frames.shape[1:]), frames.dtype, want_yuv)
        g = self._post_graphs.get(key)
        if g is None:
            if self._graph_stream is None:
                self._graph_stream = torch.cuda.Stream(self.device)
                self._graph_pool = torch.cuda.graph_pool_handle()
            if len(self._post_graphs) >= 4:
                self._post_graphs.clear()
            example = frames[:1].repeat(self.s.batch_frames, *([1] * (frames.dim() - 1)))
            if want_yuv:  # the colour conversion's passes over the whole picture fused by TorchInductor
                from studio.encode.colour import rgb_to_i420

                conv = torch.compile(rgb_to_i420, dynamic=False)
                g = graphed(lambda x: self.finish(x, True), (example,), self._graph_stream, compile=True,
                            compiled_fn=lambda x: self.finish(x, True, conv), pool=self._graph_pool,
                            thread_local=True, name="the colour conversion")
            else:
                g = Graphed(lambda x: self.finish(x, False)[0], (example,), self._graph_stream,
                            pool=self._graph_pool, thread_local=True)
            self._post_graphs[key] = g
        return g

    def pinned(self, key: str, shape) -> torch.Tensor:
        """A pinned host buffer for device-to-host copies, kept per frame shape and sized for the largest chunk so
        far (pinning memory costs milliseconds); returns its first ``shape[0]`` frames."""
        n, rest = shape[0], tuple(shape[1:])
        buf = self._pinned_bufs.get((key, rest))
        if buf is None or buf.shape[0] < n:
            if len(self._pinned_bufs) > 8:
                self._pinned_bufs.clear()
            buf = torch.empty((max(n, self.s.chunk_frames), *rest), dtype=torch.uint8, pin_memory=True)
            self._pinned_bufs[(key, rest)] = buf
        return buf[:n]
