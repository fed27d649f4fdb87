"""The generator's contract: what it is and needs (``GeneratorInfo``), how it is opened, what the core calls."""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    import torch


STREAM_FIRST_LATENTS = 3  # the default short first window of a window engine's stream: 9 of its 81 frames


class InterpolationKind(enum.Enum):
    """How a generator's in-between frames are made when keyframes + interpolation is on."""

    MOTION_SPACE = "motion"  # the generator re-renders in-betweens from interpolated geometry (built-in warp)
    FLOW = "rife"  # RIFE optical flow between generated keyframes (engines that cannot re-render cheaply)


@dataclass(frozen=True)
class AudioFeatureSpec:
    """The audio encoder a generator needs; the core runs it (through the fingerprint cache) in stage A."""

    encoder: str  # registry name in studio.generators.audio_encoders: "whisper-tiny", "wav2vec2-base", ...
    dim: int  # feature size per slot after slicing (e.g. 50 x 384 for MuseTalk flattens to 19200)
    shape_per_frame: tuple[int, ...]  # the per-slot feature tensor's shape, e.g. (50, 384)


@dataclass(frozen=True)
class GeneratorInfo:
    """What a generator is and needs; the leaderboard, the compile panel and the core read it."""

    name: str  # registry key, e.g. "builtin", "musetalk-1.5", "wan2.1-1.3b"
    label: str  # shown to the producer
    family: str  # e.g. "mesh warp", "latent inpainting UNet", "video DiT"
    native_px: int  # the resolution it generates at (square)
    pyramidal_px: int = 0  # the lower resolution it generates at with PYRAMIDAL (0: the generator's own route)
    audio: AudioFeatureSpec | None = None  # None: driven by motion coefficients alone
    interpolation: InterpolationKind = InterpolationKind.FLOW
    batch_sizes: tuple[int, ...] = (1,)
    compile_backends: tuple[str, ...] = ()  # of "inductor", "cuda_graphs", "onnxruntime", "tensorrt"
    weights: tuple[str, ...] = ()  # files of the release layout, relative to the weights folder
    licence: str = ""
    needs_gpu_reason: str = ""  # non-empty: too heavy for the CPU, and why (shown instead of running it there)
    # capabilities the core reads instead of an engine's name
    warp_field: bool = False  # renders any size through a warp field; its pyramidal route is a coarser field at the
    #   same size (the factory takes ``field_divisor`` and ``max_interp_error_px_at_512``)
    pastes_face: bool = False  # makes a face crop at native_px, pasted into a frame of any size_px
    cast_rows: bool = False  # draws a cast of several anchors as rows of one call (``open`` takes their packs)
    cuda_precision: str = "bf16"  # what precision "auto" means on a GPU (tensor cores for the neural engines)
    # a window engine's streaming form: its factory takes ``stream_first_latents`` (latent frames of a stream's short
    # first window, 0: whole windows); ``first_window_frames`` is what that first window makes (0: a whole window),
    # and a run's first chunk asks for no more frames than that, so that the first frame waits for it alone
    stream_windows: bool = False
    first_window_frames: int = 0

    @property
    def any_size(self) -> bool:
        """Frames come at the presenter's size, whatever ``native_px`` (no upscaling after it)."""
        return self.warp_field or self.pastes_face

    @property
    def has_pyramidal_route(self) -> bool:
        """PYRAMIDAL can make this engine cheaper: a coarser field, or a smaller native size of its own."""
        return self.warp_field or bool(self.pyramidal_px)


@dataclass(frozen=True)
class GeneratorSettings:
    device: str = "cpu"  # resolved device: "cpu", "cuda", "cuda:0"
    size_px: int = 512  # the square size to generate at
    precision: str = "fp32"  # fp32, fp16, bf16 (what the device supports)
    batch_frames: int = 8  # frames per call (and per CUDA graph)
    weights_dir: Path | None = None  # the release's folder; None: a timing twin with seeded random weights
    cuda_graphs: bool = False
    engine_path: Path | None = None  # a compiled engine from engines/ (studio.compile), or None for eager
    seed: int = 0


@dataclass
class CompileTarget:
    """One network of a generator that ``studio.compile`` can build an engine for."""

    name: str  # unique within the generator, e.g. "renderer", "unet", "vae_decoder"
    module: "torch.nn.Module"  # a plain module on the generator's device, in eval mode
    example_inputs: tuple  # tensors of one call at the generator's batch size (shapes define the engine)
    dynamic_batch: bool = True  # dimension 0 of every input may vary across the batch profiles


class Generator(abc.ABC):
    """Pixels from motion and / or audio features; owns its modules, device, dtype and compiled engines.

    Compilation: ``compile_targets()`` lists the networks a compiler may replace; ``install_engine(name, fn)`` makes
    the generator call ``fn`` (same inputs and outputs as the module's forward) instead of the eager module.
    """

    info: ClassVar[GeneratorInfo]

    def __init__(self) -> None:
        self.twin = True  # True: random weights (timing twin), never put on air; loaders set it False
        self.settings = GeneratorSettings()
        # set before ``open`` on a canvas: frames may then carry the presenter's warped matte as a fourth channel
        self.emit_matte = False

    @property
    def out_channels(self) -> int:
        """Channels of the frames ``generate`` returns: 3 (RGB), or 4 where the engine carries the warped matte
        (``emit_matte`` asked for it and the anchor's matte is good)."""
        return 3

    @property
    def label(self) -> str:
        return self.info.label + (" — timing twin (weights not installed)" if self.twin else "")

    @property
    def precision_label(self) -> str:
        """The precision a leaderboard row states: ``settings.precision``, and what part of the network runs in
        another (or why it does not) where an engine says so."""
        return self.settings.precision

    @abc.abstractmethod
    def open(self, anchor: object, settings: GeneratorSettings) -> None:
        """Load weights (``settings.weights_dir``) or build the timing twin, prepare the anchor (a
        ``studio.presenter.anchor.AnchorPack``; an engine with ``info.cast_rows`` also takes a tuple of packs, a
        cast), warm up."""

    @abc.abstractmethod
    def generate(self, coeffs: "torch.Tensor", features: "torch.Tensor | None") -> "torch.Tensor":
        """B x N_COEFFS motion (and B x ... audio features when ``info.audio`` is set), on the device ->
        B x 3 x S x S frames in 0..255 (float, not clamped), S = ``settings.size_px``.

        An engine opened on a cast (several anchors: B x A x N_COEFFS motion, frames with every anchor's channels in
        turn) also takes ``shown`` (B ints, the anchor each frame shows) when the picture shows one anchor a frame
        (cut to the speaker): it then returns each frame's shown anchor alone, B x C x S x S, and makes no pixels
        of the others. The core passes ``shown`` to a cast only."""

    def render_span(self, coeffs: "torch.Tensor", strides: np.ndarray, carry: object | None
                    ) -> tuple["torch.Tensor", object]:
        """Keyframes + in-betweens re-rendered from interpolated geometry (``info.interpolation`` MOTION_SPACE):
        K x N_COEFFS motion and K keyframe strides -> K frames, and the carry (the last keyframe's state) for the
        next contiguous span (``carry`` None: start afresh). A cast takes ``shown`` here too (``generate``)."""
        raise NotImplementedError(f"{self.info.name} makes no motion-space in-betweens (its interpolation is "
                                  f"{self.info.interpolation.value})")

    def new_stream(self) -> None:
        """A new program starts (the core calls it before a run's first chunk for this engine): frames made ahead
        and state carried from the previous call belong to the old one and are dropped; a window engine starts again
        with its first window (the short one where it streams)."""

    def counts(self) -> tuple[int, int, int]:
        """Frames ``render_span`` has made so far: (generated in full, interpolated, fallen back to full)."""
        return (0, 0, 0)

    def compile_targets(self) -> list[CompileTarget]:
        """The networks a compiler may build engines for (empty: nothing to compile)."""
        return []

    def install_engine(self, name: str, fn: Callable) -> None:
        """Call ``fn`` instead of the eager module of target ``name`` from now on."""
        raise NotImplementedError(f"{self.info.name} has no compile target {name!r}")

    def graphs_off(self) -> tuple[str, str]:
        """Why this opened form runs eager although CUDA graphs (on the CPU: a compiled engine) were asked for, as
        (what, why), e.g. ("off for a cast of 2", "..."); ("", "") when they apply. The core reports it where the
        flag is listed (``studio.pipeline.pool.graphs_off_line``): no silent fallback."""
        return "", ""

    def close(self) -> None:
        pass
