"""Settings of the pipeline core: the optimization flags and the one settings dataclass every mode fills in."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from studio.contracts import STREAM_FIRST_LATENTS, CastLayout, Layout


class Optimization(enum.Enum):
    """One flag per optimization of the core; the plain pipeline is the empty set."""

    PYRAMIDAL = "pyramidal"  # generate small (built-in: a low-resolution warp field), bring it up to size
    AUDIO_CACHE = "audio_cache"  # fingerprint cache in front of the audio encoders
    FRAME_INTERPOLATION = "frame_interpolation"  # sparse keyframes + interpolation (motion space or RIFE)
    KV_CACHE = "kv_cache"  # the motion model's sliding-window INT8 KV cache (plain: recompute the window)
    ASYNC_PIPELINE = "async_pipeline"  # stages A / B / C overlapped on three threads (CUDA: two streams)
    SILENCE_SIEVE = "silence_sieve"  # no work where nobody speaks: sparser keyframes, the audio model rests
    CUDA_GRAPHS = "cuda_graphs"  # generation replayed as CUDA graphs (or a compiled engine)
    GPU_ENCODE = "gpu_encode"  # colour conversion on the GPU (NV12 crosses PCIe), hardware encoder where it opens

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Optimization.PYRAMIDAL: "pyramidal",
    Optimization.AUDIO_CACHE: "audio cache",
    Optimization.FRAME_INTERPOLATION: "keyframes + interpolation",
    Optimization.KV_CACHE: "KV cache",
    Optimization.ASYNC_PIPELINE: "async stages",
    Optimization.SILENCE_SIEVE: "silence sieve",
    Optimization.CUDA_GRAPHS: "CUDA graphs / compiled",
    Optimization.GPU_ENCODE: "GPU / hardware encode",
}

ALL_OPTIMIZATIONS = frozenset(Optimization)


class QueuePolicy(enum.Enum):
    BLOCK = "block"  # offline / benchmark: every frame is produced
    DROP_OLDEST = "drop_oldest"  # live: a full queue discards its oldest item (counted)


@dataclass(frozen=True)
class CoreSettings:
    """How the core renders: the picture, the device, the chunking and the optimization flags."""

    size_px: int = field(default=512, metadata={"help": "The square presenter's size in pixels (64..2160, even)"})
    layout: Layout = field(default=Layout.SQUARE, metadata={"help": "Square presenter, or a 16:9 canvas"})
    canvas_height_px: int = field(default=720, metadata={"help": "Canvas height: 720 (1280x720) or 1080"})
    fps: float = field(default=25.0, metadata={"help": "Output frame rate: 25, 30, 50 or 60"})
    key_fps: float = field(default=0.0, metadata={"help": "Generated keyframe rate (0 = fps / the key stride)"})
    device: str = field(default="cpu", metadata={"help": "Resolved device: cpu, cuda, cuda:0"})
    engine: str = field(default="builtin", metadata={"help": "Generator registry name"})
    native_px: int = field(default=0, metadata={"help": "Generate at this size without PYRAMIDAL (0: the engine's "
                                                        "own)"})
    chunk_frames: int = field(default=8, metadata={"help": "Slots per chunk (offline); live sources ask for fewer"})
    batch_frames: int = field(default=8, metadata={"help": "Frames per generator call (and per CUDA graph)"})
    queue_depth: int = field(default=2, metadata={"help": "Chunks between two stages (bounded)"})
    optimizations: frozenset[Optimization] = frozenset()
    key_stride: int = field(default=2, metadata={"help": "One keyframe every N output frames"})
    silent_key_stride: int = field(default=4, metadata={"help": "Keyframe stride where the sieve hears no speech"})
    max_interp_error_px_at_512: float = field(default=2.0, metadata={"help": "Adaptive fallback threshold"})
    field_divisor: int = field(default=8, metadata={"help": "Built-in pyramidal route: warp field at size / this"})
    stream_first_latents: int = field(default=STREAM_FIRST_LATENTS, metadata={
        "help": "Window engines (video DiTs): latent frames of a stream's first, short window, so that the first frame "
                "comes after it (0: whole windows from the start)"})
    measure_baseline: bool = field(
        default=False, metadata={"help": "Interleave baseline chunks (flags off) to measure what each flag saves"})
    baseline_every: int = field(default=8, metadata={"help": "One baseline chunk in this many"})
    # a plain chunk comes about every 4 s in the studio (1 chunk in 8 of 4 frames at 25 fps is a baseline, and the
    # plain one takes its turn with each flag's): 48 pairs are the last 3 minutes, 12 the first 45 s
    baseline_pairs: int = field(default=48, metadata={
        "help": "Compute saved: the median over this many baseline chunks, each against its neighbours"})
    baseline_pairs_min: int = field(default=12, metadata={"help": "Baseline pairs before a figure is shown"})
    precision: str = field(default="auto", metadata={
        "help": "auto (bf16 for the neural engines on a GPU, fp32 otherwise: the built-in renderer keeps fp32 "
                "geometry), fp32, fp16 or bf16"})
    seed: int = 0
    cast_size: int = field(default=1, metadata={"help": "Anchors on the programme: rows of one generator call"})
    cast_layout: CastLayout = field(default=CastLayout.TWO_SHOT, metadata={
        "help": "A cast of several: all side by side (two-shot / roundtable), or cut to the speaker"})

    @property
    def two_shot(self) -> bool:
        """Several anchors shown side by side."""
        return self.cast_size > 1 and self.cast_layout is CastLayout.TWO_SHOT

    @property
    def output_size(self) -> tuple[int, int]:
        """(width, height) of the program picture (square layout, two-shot: the anchors' squares side by side)."""
        if self.layout is Layout.CANVAS:
            h = self.canvas_height_px
            return (h * 16 // 9 + (h * 16 // 9) % 2, h)
        if self.two_shot:
            return (self.size_px * self.cast_size, self.size_px)
        return (self.size_px, self.size_px)

    def has(self, opt: Optimization) -> bool:
        return opt in self.optimizations
