"""The three-stage overlapped pipeline: motion for chunk t+1, generation for chunk t, post-processing + encoding for
chunk t-1, all on one frame clock.

- Stage A (``motion``): the silence sieve over the chunk's audio and the motion coefficients (per segment, sliced
  per chunk), plus the keyframe stride of every frame.
- Stage B (``generate``): frames on the device: every frame in full (plain), or keyframes + motion-space interpolation
  (``studio.enhance.interp``), at a full or low-resolution warp field (pyramidal), optionally as CUDA graphs.
- Stage C (``post_encode``): clamp and convert (CPU: RGB uint8 -> libx264 MP4 through ``Mp4Writer``; CUDA: RGB -> NV12
  on the GPU and a copy into pinned host memory, which is where a hardware encoder would take it).

``Optimization`` members switch each optimization on; the empty set is the plain pipeline (eager, synchronous, full
resolution, every frame generated, no sieve). With ``ASYNC_PIPELINE`` the stages run on three threads behind bounded
queues (on CUDA: generation and post-processing on separate streams, ordered by events, frames stay on the GPU).
"""

from __future__ import annotations

import enum
import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from studio.enhance.interp import MotionSpaceInterpolator, max_error_px
from studio.enhance.settings import EnhanceSettings
from studio.errors import RenderError
from studio.presenter.anchor import AnchorPack
from studio.presenter.coeffs import N_COEFFS
from studio.presenter.renderer import Presenter, RenderSettings
from studio.pipeline.telemetry import StageTiming, TelemetryBus, TelemetrySample, stage_timing
from studio.speech.types import PhonemeTiming

log = logging.getLogger(__name__)

RATE_HZ = 16000  # program audio rate (the sieve's rate)


class Optimization(enum.Enum):
    PYRAMIDAL = "pyramidal"
    FRAME_INTERPOLATION = "frame_interpolation"
    ASYNC_PIPELINE = "async_pipeline"
    SILENCE_SIEVE = "silence_sieve"
    CUDA_GRAPHS = "cuda_graphs"
    GPU_ENCODE = "gpu_encode"


class QueuePolicy(enum.Enum):
    BLOCK = "block"  # offline / benchmark: every frame is produced
    DROP_OLDEST = "drop_oldest"  # live: a full queue discards its oldest item (counted)


class EncoderKind(enum.Enum):
    X264 = "libx264"  # CPU H.264 through PyAV
    HARDWARE = "hardware"  # a hardware H.264 encoder that opens on this machine (h264_nvenc, ...)
    NV12_HOST = "nv12_host"  # no encoder library: colour conversion to NV12 on the device + copy to host (measured)


@dataclass(frozen=True)
class PipelineSettings:
    size_px: int = 512
    fps: float = 30.0  # output frame rate (the frame clock)
    device: str = "cpu"
    chunk_frames: int = 16  # frames per chunk (a multiple of the keyframe strides)
    batch_frames: int = 8  # frames per renderer call (and per CUDA graph)
    queue_depth: int = 2
    queue_policy: QueuePolicy = QueuePolicy.BLOCK
    encoder: EncoderKind = EncoderKind.X264
    hardware_codec: str = ""  # with EncoderKind.HARDWARE
    optimizations: frozenset[Optimization] = frozenset()
    enhance: EnhanceSettings = field(default_factory=EnhanceSettings)
    out_path: Path | None = None  # MP4 output (X264 / HARDWARE); None = a temporary file


@dataclass(frozen=True)
class Segment:
    """One item of the program: 16 kHz mono audio (trailing pause included) and its phone timings."""

    audio: np.ndarray
    phonemes: tuple[PhonemeTiming, ...]
    title: str = ""


@dataclass
class Chunk:
    index: int
    frame0: int  # program frame index of the first frame
    coeffs: np.ndarray  # (T + 1) x N_COEFFS: the chunk's frames plus the next frame (the next span's keyframe)
    strides: np.ndarray  # T + 1 keyframe strides
    audio: np.ndarray  # the chunk's audio samples (16 kHz)
    seg_start: bool = False  # first chunk of a segment (no keyframe field carried over)
    frames: torch.Tensor | None = None  # T x 3 x S x S (device), set by stage B
    ready: object = None  # CUDA event after generation


StageStats = StageTiming  # one form of stage timings for the report, the bus and the HUD


@dataclass(frozen=True)
class PipelineReport:
    """What one run measured; the HUD and the benchmark read the same fields."""

    optimizations: tuple[str, ...]
    n_frames: int
    wall_s: float
    ms_per_frame: float  # wall time per output frame
    stages: dict[str, StageStats]  # per chunk timings (CUDA: GPU time by events for generate / post)
    queue_depth_max: dict[str, int]
    drops: dict[str, int]
    frames_full: int
    frames_interpolated: int
    frames_fallback: int
    silent_frames: int
    gpu_mem_peak_mb: float
    output: str


class BoundedQueue:
    """A bounded FIFO with a policy for a full queue; counts drops and the deepest it got."""

    def __init__(self, maxsize: int, policy: QueuePolicy) -> None:
        self._q: deque = deque()
        self._cv = threading.Condition()
        self.maxsize, self.policy = maxsize, policy
        self.drops = 0
        self.max_depth = 0

    def put(self, item) -> None:
        with self._cv:
            while len(self._q) >= self.maxsize:
                if self.policy is QueuePolicy.DROP_OLDEST:
                    self._q.popleft()
                    self.drops += 1
                else:
                    self._cv.wait()
            self._q.append(item)
            self.max_depth = max(self.max_depth, len(self._q))
            self._cv.notify_all()

    @property
    def depth(self) -> int:
        with self._cv:
            return len(self._q)

    def get(self):
        with self._cv:
            while not self._q:
                self._cv.wait()
            item = self._q.popleft()
            self._cv.notify_all()
            return item


class FrameClock:
    """One clock for the program: frame i is presented at i / fps; audio sample k at k / RATE_HZ."""

    def __init__(self, fps: float) -> None:
        self.fps = fps

    def pts_s(self, frame: int) -> float:
        return frame / self.fps

    def frames_for(self, n_samples: int) -> int:
        return max(1, math.ceil(n_samples / RATE_HZ * self.fps - 1e-9))

    def sample_at(self, frame: int) -> int:
        return int(round(frame / self.fps * RATE_HZ))


class _Graphed:
    """A CUDA-graph version of ``fn(*tensors)`` for a fixed batch: inputs are copied into static buffers (padded by
    repeating the last row), the graph replays, outputs are sliced (valid until the next replay)."""

    def __init__(self, fn: Callable, examples: tuple[torch.Tensor, ...], stream: torch.cuda.Stream) -> None:
        self.static_in = [e.clone() for e in examples]
        self.batch = examples[0].shape[0]
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up (allocator, lazy init) off the default stream
                fn(*self.static_in)
        stream.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=stream):
            out = fn(*self.static_in)
        self.static_out = out if isinstance(out, tuple) else (out,)
        self.single = not isinstance(out, tuple)

    def __call__(self, *inputs: torch.Tensor):
        n = inputs[0].shape[0]
        outs = []
        for i in range(0, n, self.batch):
            part = [x[i:i + self.batch] for x in inputs]
            k = part[0].shape[0]
            for buf, x in zip(self.static_in, part):
                buf[:k].copy_(x)
                if k < self.batch:
                    buf[k:].copy_(x[-1:].expand(self.batch - k, *x.shape[1:]))
            self.graph.replay()
            outs.append([o[:k].clone() for o in self.static_out])
        res = tuple(torch.cat([o[j] for o in outs]) if len(outs) > 1 else outs[0][j]
                    for j in range(len(self.static_out)))
        return res[0] if self.single else res


class _GraphedInterpolator(MotionSpaceInterpolator):
    def __init__(self, module, max_err: float, field_graph: _Graphed, compose_graph: _Graphed) -> None:
        super().__init__(module, max_err)
        self._field, self._compose = field_graph, compose_graph

    def warp_field(self, coeffs):
        return self._field(coeffs)

    def compose(self, coeffs, grid, mask):
        return self._compose(coeffs, grid, mask)


def rgb_to_nv12(frames: torch.Tensor) -> torch.Tensor:
    """N x 3 x H x W RGB (0..255 float) -> N x (H * 3 / 2) x W uint8 NV12 (BT.709 limited range), on the device."""
    r, g, b = frames[:, 0], frames[:, 1], frames[:, 2]
    y = 16 + (0.1826 * r + 0.6142 * g + 0.0620 * b)
    u = 128 + (-0.1006 * r - 0.3386 * g + 0.4392 * b)
    v = 128 + (0.4392 * r - 0.3989 * g - 0.0403 * b)
    n, h, w = y.shape
    uv = torch.stack([u, v], 1)  # N x 2 x H x W
    uv = torch.nn.functional.avg_pool2d(uv, 2)  # N x 2 x H/2 x W/2
    uv = uv.permute(0, 2, 3, 1).reshape(n, h // 2, w)  # interleaved U, V
    return (torch.cat([y, uv], 1) + 0.5).clamp_(0, 255).to(torch.uint8)  # +0.5: truncation rounds


class Pipeline:
    """Runs a program of segments through the three stages (see module docstring) and reports what it measured."""

    def __init__(self, anchor: AnchorPack, settings: PipelineSettings, bus: TelemetryBus | None = None) -> None:
        self.s = settings
        self.bus = bus  # a sample is published after every chunk leaves stage C, and one at the end of ``run``
        self._queues: dict[str, BoundedQueue] = {}
        self._frames_done = 0
        opts = settings.optimizations
        e = settings.enhance
        base = RenderSettings(size_px=settings.size_px, device=settings.device, batch_frames=settings.batch_frames)
        if Optimization.PYRAMIDAL in opts:
            from studio.enhance.upscale import warp_field_settings

            base = warp_field_settings(base, e.field_divisor)
        self.presenter = Presenter(anchor, base)
        self.device = self.presenter.device
        self.cuda = self.device.type == "cuda"
        if Optimization.CUDA_GRAPHS in opts and not self.cuda:
            raise RenderError("CUDA graphs need a CUDA device.")
        self.clock = FrameClock(settings.fps)
        self.interpolating = bool(opts & {Optimization.FRAME_INTERPOLATION, Optimization.SILENCE_SIEVE})
        self.gen_stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.post_stream = torch.cuda.Stream(self.device) if self.cuda else None
        self._field_graph = self._compose_graph = None
        if Optimization.CUDA_GRAPHS in opts:
            self._build_graphs()
        err = max_error_px(e.max_interp_error_px_at_512, settings.size_px)
        if self._field_graph is not None:
            self.interp = _GraphedInterpolator(self.presenter.module, err, self._field_graph, self._compose_graph)
        else:
            self.interp = MotionSpaceInterpolator(self.presenter.module, err)
        self._timings: dict[str, list[float]] = {"motion": [], "generate": [], "post_encode": []}
        self._events: dict[str, list] = {"generate": [], "post_encode": []}
        self.silent_frames = 0
        self._sieve = None

    # -- set-up -----------------------------------------------------------------------------------------------------

    def _build_graphs(self) -> None:
        m = self.presenter.module
        m.static_shapes = True
        b, dev = self.s.batch_frames, self.device
        c = torch.zeros((b, N_COEFFS), device=dev)
        with torch.inference_mode():
            grid, mask = m.warp_field(c)
            self._field_graph = _Graphed(m.warp_field, (c,), self.gen_stream)
            self._compose_graph = _Graphed(m.compose, (c, grid, mask), self.gen_stream)
            self._full_graph = _Graphed(m.forward, (c,), self.gen_stream)

    # -- stage A ------------------------------------------------------------------------------------------------------

    def _chunks(self, program: list[Segment]):
        """Yields chunks lazily; the motion of a segment is computed when its first chunk is asked for."""
        from studio.presenter.motion import script_motion

        e, s = self.s.enhance, self.s
        opts = s.optimizations
        idx = 0
        frame0 = 0
        for seg in program:
            t0 = time.perf_counter()
            n = self.clock.frames_for(len(seg.audio))
            motion = script_motion(seg.phonemes, seg.audio, RATE_HZ, s.fps, n + 1).values  # +1: next keyframe
            stride = np.full(n + 1, e.key_stride if Optimization.FRAME_INTERPOLATION in opts else 1, np.int64)
            if Optimization.SILENCE_SIEVE in opts:
                speaking = self._speaking(seg.audio, n)
                self.silent_frames += int((~speaking).sum())
                stride[:n][~speaking] = max(e.silent_key_stride, stride[0])
            spent = time.perf_counter() - t0
            for a in range(0, n, s.chunk_frames):
                t1 = time.perf_counter()
                z = min(n, a + s.chunk_frames)
                chunk = Chunk(idx, frame0 + a, motion[a:z + 1], stride[a:z + 1],
                              seg.audio[self.clock.sample_at(a):self.clock.sample_at(z)], seg_start=a == 0)
                self._timings["motion"].append((time.perf_counter() - t1 + spent) * 1e3)
                spent = 0.0
                idx += 1
                yield chunk
            frame0 += n

    def _speaking(self, audio: np.ndarray, n_frames: int) -> np.ndarray:
        """n_frames bool: the sieve's decision at each output frame (32 ms VAD frames mapped to the frame clock)."""
        from studio.audio.sieve import SilenceSieve

        if self._sieve is None:
            self._sieve = SilenceSieve()  # one ONNX session per pipeline
        sieve = self._sieve
        sieve.reset()
        hop = 512
        flags = []
        for i in range(0, len(audio) - hop + 1, hop):
            flags.append(sieve.process(audio[i:i + hop]))
        flags = np.array(flags or [False])
        t = (np.arange(n_frames) / self.s.fps * RATE_HZ / hop).astype(int).clip(0, len(flags) - 1)
        return flags[t]

    # -- stage B ------------------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def _generate(self, chunk: Chunk, carry: dict) -> Chunk:
        t0 = time.perf_counter()
        ev0 = ev1 = None
        if self.cuda:
            ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ev0.record(torch.cuda.current_stream())
        c = torch.as_tensor(chunk.coeffs, device=self.device)
        if self.interpolating:
            first = None if chunk.seg_start else carry.get("field")
            frames, carry["field"] = self.interp.render_span(c, chunk.strides, first)
        else:
            m = self.presenter.module
            fn = self._full_graph if self._field_graph is not None else m
            n = c.shape[0] - 1
            frames = torch.cat([fn(c[i:min(n, i + self.s.batch_frames)]) for i in range(0, n, self.s.batch_frames)])
            self.interp.frames_full += n
        chunk.frames = frames
        if self.cuda:
            ev1.record(torch.cuda.current_stream())
            chunk.ready = ev1
            self._events["generate"].append((ev0, ev1))
        else:
            self._timings["generate"].append((time.perf_counter() - t0) * 1e3)
        return chunk

    # -- stage C ------------------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def _post(self, chunk: Chunk, sink) -> None:
        t0 = time.perf_counter()
        frames = chunk.frames
        if self.cuda:
            stream = torch.cuda.current_stream()
            stream.wait_event(chunk.ready)
            frames.record_stream(stream)
            ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ev0.record(stream)
            if self.s.encoder is EncoderKind.NV12_HOST:
                nv12 = rgb_to_nv12(frames.clamp(0, 255))
                host = torch.empty(nv12.shape, dtype=torch.uint8, pin_memory=True)
                host.copy_(nv12, non_blocking=True)
            else:
                host = torch.empty((frames.shape[0], frames.shape[2], frames.shape[3], 3), dtype=torch.uint8,
                                   pin_memory=True)
                host.copy_(frames.clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1), non_blocking=True)
            ev1.record(stream)
            ev1.synchronize()  # the host side of this stage needs the bytes
            self._events["post_encode"].append((ev0, ev1))
            if sink is not None:
                sink.write_video(host.numpy())
        else:
            u8 = frames.clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()
            if sink is not None:
                sink.write_video(u8)
            self._timings["post_encode"].append((time.perf_counter() - t0) * 1e3)
        self._frames_done += frames.shape[0]
        chunk.frames = None
        if self.bus is not None:
            self._publish()

    def _publish(self, window: int = 120) -> None:
        """The bus sample: stage timings over the last ``window`` chunks (CPU clocks; on CUDA the GPU-timed stages
        join at the end of the run), queue depths now, drops so far, peak GPU memory."""
        qs = dict(self._queues)
        self.bus.publish(TelemetrySample(
            taken_s=time.monotonic(), source="pipeline", frames_produced=self._frames_done,
            frames_dropped=sum(q.drops for q in qs.values()), fps_target=self.s.fps,
            stages={k: stage_timing(v[-window:]) for k, v in self._timings.items() if v},
            queue_depths={k: q.depth for k, q in qs.items()}, drops={k: q.drops for k, q in qs.items()},
            gpu_mem_mb=torch.cuda.max_memory_allocated(self.device) / 2 ** 20 if self.cuda else math.nan))

    def _open_sink(self, audio: np.ndarray):
        if self.s.encoder is EncoderKind.NV12_HOST:
            return None, ""
        import tempfile

        from studio.encode import Mp4Writer
        from studio.encode.settings import EncodeSettings

        path = self.s.out_path or Path(tempfile.mkdtemp(prefix="bench_")) / "out.mp4"
        codec = self.s.hardware_codec if self.s.encoder is EncoderKind.HARDWARE else "libx264"
        writer = Mp4Writer(path, self.s.size_px, self.s.size_px, self.s.fps, RATE_HZ,
                           EncodeSettings(video_codec=codec))
        writer.write_audio(audio)
        return writer, str(path)

    # -- run ------------------------------------------------------------------------------------------------------------

    def run(self, program: list[Segment]) -> PipelineReport:
        """Render and encode the whole program; returns the measurements."""
        n_frames = sum(self.clock.frames_for(len(s.audio)) for s in program)
        audio = np.concatenate([s.audio for s in program]).astype(np.float32)
        audio = np.pad(audio, (0, max(0, self.clock.sample_at(n_frames) - len(audio))))
        sink, out = self._open_sink(audio)
        queues: dict[str, BoundedQueue] = {}
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        t0 = time.perf_counter()
        try:
            if Optimization.ASYNC_PIPELINE in self.s.optimizations:
                queues = self._run_async(program, sink)
            else:
                carry: dict = {}
                for chunk in self._chunks(program):
                    self._post(self._generate(chunk, carry), sink)
            if sink is not None:
                sink.close()
        except BaseException:
            if sink is not None:
                sink.abort()
            raise
        if self.cuda:
            torch.cuda.synchronize(self.device)
        wall = time.perf_counter() - t0
        for name, evs in self._events.items():
            self._timings[name].extend(a.elapsed_time(b) for a, b in evs)
        stages = {k: _stats(v) for k, v in self._timings.items() if v}
        if self.bus is not None:
            self._publish(window=10 ** 9)
        it = self.interp
        return PipelineReport(
            optimizations=tuple(sorted(o.value for o in self.s.optimizations)), n_frames=n_frames, wall_s=wall,
            ms_per_frame=wall * 1e3 / n_frames, stages=stages,
            queue_depth_max={k: q.max_depth for k, q in queues.items()}, drops={k: q.drops for k, q in queues.items()},
            frames_full=it.frames_full, frames_interpolated=it.frames_interpolated, frames_fallback=it.frames_fallback,
            silent_frames=self.silent_frames,
            gpu_mem_peak_mb=torch.cuda.max_memory_allocated(self.device) / 2 ** 20 if self.cuda else 0.0, output=out)

    def _run_async(self, program: list[Segment], sink) -> dict[str, BoundedQueue]:
        policy, depth = self.s.queue_policy, self.s.queue_depth
        q_motion, q_frames = BoundedQueue(depth, policy), BoundedQueue(depth, policy)
        self._queues = {"motion->generate": q_motion, "generate->post": q_frames}
        errors: list[BaseException] = []
        done = object()

        def stage_a() -> None:
            try:
                for chunk in self._chunks(program):
                    if errors:
                        return
                    q_motion.put(chunk)
            except BaseException as exc:
                errors.append(exc)
            finally:
                q_motion.put(done)

        def stage_b() -> None:
            carry: dict = {}
            try:
                ctx = torch.cuda.stream(self.gen_stream) if self.cuda else _nullctx()
                with ctx:
                    while (chunk := q_motion.get()) is not done:
                        if not errors:
                            q_frames.put(self._generate(chunk, carry))
            except BaseException as exc:
                errors.append(exc)
                while q_motion.get() is not done:  # let stage A finish
                    pass
            finally:
                q_frames.put(done)

        threads = [threading.Thread(target=stage_a, name="stage-motion", daemon=True),
                   threading.Thread(target=stage_b, name="stage-generate", daemon=True)]
        for t in threads:
            t.start()
        try:
            ctx = torch.cuda.stream(self.post_stream) if self.cuda else _nullctx()
            with ctx:
                while (chunk := q_frames.get()) is not done:
                    if not errors:
                        self._post(chunk, sink)
        except BaseException as exc:
            errors.append(exc)
            while q_frames.get() is not done:
                pass
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return {"motion->generate": q_motion, "generate->post": q_frames}


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def _stats(values_ms: list[float]) -> StageStats:
    return stage_timing(values_ms)
