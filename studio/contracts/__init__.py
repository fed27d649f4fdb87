"""The role interfaces of the pipeline core, the data that flows between them, and their registries.

One frame loop (``studio.pipeline.core.Core``) drives every mode; a mode only picks a source, a motion source, a
generator, post-processors and outputs::

    Source --chunk--> MotionSource --coeffs--> Generator --frames--> PostProcessor* --frames--> Output*
    (stage A: audio, motion, audio features)   (stage B)             (stage C: post + encode)

- ``Source``: what is said and when. It paces the loop: ``next_chunk`` blocks until the next frame slots are due
  (the studio's program clock, the microphone's arrival of audio) or returns them at once (``render``, ``bench``).
  A chunk carries the program audio of its span (48 kHz, contiguous across chunks, also over skipped slots) and the
  same span at 16 kHz for analysis.
- ``MotionSource``: turns a chunk into motion coefficients (``studio.presenter.coeffs``), one row per slot.
- ``Generator``: pixels from motion and / or audio features, on its device (``GeneratorInfo`` says what it needs).
- ``PostProcessor``: frames to frames on the device (flow interpolation, super-resolution, the broadcast canvas).
- ``Output``: frames + audio leave the core (preview, recorder, streams). ``write`` never blocks the loop for long:
  an output that falls behind drops (and counts) frames, never audio.

Frames are ``N x 3 x H x W`` float tensors in 0..255 on the generator's device until the outputs; outputs get
``ProgramBatch`` (uint8 RGB on the host, and the device tensor for encoders that take it there).
"""

from __future__ import annotations

import abc
import enum
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import numpy as np

if TYPE_CHECKING:  # torch and the anchor are heavy: imported by the implementations, not by this contract
    import torch

    from studio.presenter.anchor import AnchorPack

PROGRAM_RATE_HZ = 48_000  # program audio: what is played, recorded and streamed (broadcast rate)
ANALYSIS_RATE_HZ = 16_000  # what motion sources, the silence sieve and the audio encoders hear


# -- formats ------------------------------------------------------------------------------------------------------------

class Layout(enum.Enum):
    """What the program picture is."""

    SQUARE = "square"  # the presenter alone, size x size
    CANVAS = "canvas"  # 16:9: the presenter over a background, with a lower third


@dataclass(frozen=True)
class ProgramFormat:
    """The program's picture and sound, as every output receives it."""

    width: int
    height: int
    fps: float
    audio_rate_hz: int = PROGRAM_RATE_HZ
    layout: Layout = Layout.SQUARE
    presenter_px: int = 512  # the square presenter's size (on a canvas: its size inside the canvas)

    @property
    def frame_s(self) -> float:
        return 1.0 / self.fps

    def samples_at(self, slot: int) -> int:
        """Program sample where frame slot ``slot`` starts (slot k is shown at k / fps)."""
        return int(round(slot * self.audio_rate_hz / self.fps))


@dataclass(frozen=True)
class OnAir:
    """What is on air during a chunk (the lower third's title, the rundown row, the words being spoken)."""

    title: str = ""
    row: int = -1  # rundown row; -1: none (idle, microphone, a file)


# -- what flows through the loop --------------------------------------------------------------------------------------

@dataclass
class Chunk:
    """A run of output frame slots on its way through the core.

    Made by the source (slots, audio), completed by stage A (coeffs, speaking, strides, features), stage B (frames)
    and stage C (the program frames handed to the outputs). Slots ascend; they are contiguous unless the source
    skipped some (``skipped`` counts the slots passed over since the previous chunk: frames dropped because the loop
    fell behind).
    """

    index: int
    slots: np.ndarray  # K int64 frame slots; slot k is presented at k / fps
    audio: np.ndarray  # program audio (float32 mono, PROGRAM_RATE_HZ) of [audio_start, audio_start + len)
    audio_start: int  # program sample of audio[0]; consecutive chunks' audio is contiguous
    analysis: np.ndarray  # the same span at ANALYSIS_RATE_HZ (float32 mono)
    analysis_start: int  # analysis sample of analysis[0]
    on_air: OnAir = OnAir()
    skipped: int = 0
    heard_ns: np.ndarray | None = None  # K int64: monotonic ns when the sound slot k shows arrived (microphone)
    seg_start: bool = False  # the first chunk of a new program item: no keyframe is carried over from before
    created_ns: int = 0  # monotonic ns when the source made it
    items: tuple = ()  # program items overlapping the chunk (script / file sources; the motion source reads them)
    optimizations: frozenset = frozenset()  # the flags this chunk is produced with (set by the core)
    # stage A
    coeffs: np.ndarray | None = None  # K x N_COEFFS float32
    speaking: np.ndarray | None = None  # K bool (the silence sieve's decision; all True without the sieve)
    strides: np.ndarray | None = None  # K int: keyframe stride wanted at each slot (1 = every frame generated)
    features: np.ndarray | None = None  # K x ... the generator's audio features per slot (via the fingerprint cache)
    # stage B
    frames: "torch.Tensor | None" = None  # K x 3 x h x w float 0..255 on the device (not clamped)
    ready: object = None  # CUDA event recorded after generation (stage C waits on it)
    timings_ms: dict[str, float] = field(default_factory=dict)  # measured cost of each stage for this chunk
    plain: bool = False  # generated by the interleaved plain baseline (every optimization off)
    baseline_of: str = ""  # generated with one optimization off to measure its share ("" = normal chunk)

    @property
    def n(self) -> int:
        return int(len(self.slots))


@dataclass(frozen=True)
class ProgramBatch:
    """What outputs receive: finished program frames with their audio, in order."""

    slots: np.ndarray  # K int64 frame slots (ascending; gaps = dropped slots, an output repeats the last picture)
    pts_s: np.ndarray  # K float64: presentation time of each frame on the program clock
    frames: np.ndarray  # K x H x W x 3 uint8 RGB (host)
    audio: np.ndarray  # program audio of [audio_start, audio_start + len) (float32 mono), contiguous across batches
    audio_start: int
    on_air: OnAir = OnAir()
    heard_ns: np.ndarray | None = None  # microphone: when the sound each frame shows arrived
    device_frames: "torch.Tensor | None" = None  # K x 3 x H x W 0..255 on the GPU, for encoders that take it there
    yuv: np.ndarray | None = None  # K x (H * 3 / 2) x W uint8 planar YUV 4:2:0 (I420, BT.709), for encoders
    finished_ns: int = 0  # monotonic ns when stage C finished the batch


# -- the roles ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pacing:
    """What the core tells the source when it asks for the next chunk."""

    max_frames: int  # slots per chunk at most
    cost_s_per_frame: float  # the loop's measured cost per frame (the source schedules far enough ahead)
    stop: threading.Event


class Source(abc.ABC):
    """What is said and when; paces the loop (see the module docstring)."""

    name: ClassVar[str] = "source"
    live: ClassVar[bool] = False  # True: real-time (drop when behind); False: every frame is produced (offline)
    # True: ask for a chunk only when the next stage is free (the sound arrives now, e.g. a microphone): what arrives
    # meanwhile waits in the source and joins the next chunk instead of waiting in a queue as a stale chunk.
    just_in_time: ClassVar[bool] = False

    def open(self, fmt: ProgramFormat) -> None:
        """Prepare for a run at ``fmt`` (called by the core before the first ``next_chunk``)."""
        self.fmt = fmt

    @abc.abstractmethod
    def next_chunk(self, pace: Pacing) -> Chunk | None:
        """The next slots to produce, with their audio; blocks until they are due. None: the program has ended
        (or ``pace.stop`` was set)."""

    def close(self) -> None:
        """End of the run (the core calls it once, also after an error)."""

    def progress(self) -> float:
        """0..1 of a finite program produced so far; nan for an endless one."""
        return float("nan")


class MotionSource(abc.ABC):
    """Motion coefficients for a chunk's slots."""

    name: ClassVar[str] = "motion"

    def open(self, fmt: ProgramFormat, source: Source) -> None:
        self.fmt = fmt

    @abc.abstractmethod
    def motion(self, chunk: Chunk) -> np.ndarray:
        """K x N_COEFFS float32 for ``chunk.slots`` (idle motion included: it never stops)."""

    def speaking(self, chunk: Chunk) -> np.ndarray | None:
        """K bool: whether someone speaks at each slot, when this source knows (else None: the sieve decides)."""
        return None

    def close(self) -> None:
        pass

    def stats(self) -> dict[str, float]:
        """Measured figures for the HUD (e.g. model ms per frame, cache bytes); empty by default."""
        return {}


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

    @property
    def label(self) -> str:
        return self.info.label + (" — timing twin (weights not installed)" if self.twin else "")

    @property
    def precision_label(self) -> str:
        """The precision a leaderboard row states: ``settings.precision``, and what part of the network runs in
        another (or why it does not) where an engine says so."""
        return self.settings.precision

    @abc.abstractmethod
    def open(self, anchor: "AnchorPack", settings: GeneratorSettings) -> None:
        """Load weights (``settings.weights_dir``) or build the timing twin, prepare the anchor, warm up."""

    @abc.abstractmethod
    def generate(self, coeffs: "torch.Tensor", features: "torch.Tensor | None") -> "torch.Tensor":
        """B x N_COEFFS motion (and B x ... audio features when ``info.audio`` is set), on the device ->
        B x 3 x S x S frames in 0..255 (float, not clamped), S = ``settings.size_px``."""

    def compile_targets(self) -> list[CompileTarget]:
        """The networks a compiler may build engines for (empty: nothing to compile)."""
        return []

    def install_engine(self, name: str, fn: Callable) -> None:
        """Call ``fn`` instead of the eager module of target ``name`` from now on."""
        raise NotImplementedError(f"{self.info.name} has no compile target {name!r}")

    def close(self) -> None:
        pass


class PostProcessor(abc.ABC):
    """Frames to frames on the device (stage C, before the outputs)."""

    name: ClassVar[str] = "post"

    def open(self, fmt: ProgramFormat, device: str) -> None:
        self.fmt = fmt

    @abc.abstractmethod
    def process(self, frames: "torch.Tensor", chunk: Chunk) -> "torch.Tensor":
        """N x 3 x h x w in 0..255 -> N x 3 x h' x w' in 0..255."""

    def close(self) -> None:
        pass


class OutputState(enum.Enum):
    """The status light of an output."""

    OFF = "off"
    STARTING = "starting"
    ON = "on"
    RECONNECTING = "reconnecting"
    FAILED = "failed"


@dataclass(frozen=True)
class OutputStats:
    name: str
    state: OutputState
    frames: int = 0
    dropped: int = 0  # frames the output could not take in time (counted, never queued without limit)
    repeated: int = 0  # slots that repeat the previous picture (dropped upstream, or dropped here)
    bitrate_kbps: float = float("nan")
    fps: float = float("nan")
    detail: str = ""  # where it goes (a path, a URL) or, when failed, the last error in words


class Output(abc.ABC):
    """Frames and audio leave the core (see the module docstring)."""

    name: ClassVar[str] = "output"
    needs_rgb: ClassVar[bool] = True  # False: the output does not read ``ProgramBatch.frames``
    wants_yuv: ClassVar[bool] = False  # True: with GPU_ENCODE on a GPU the core makes ``ProgramBatch.yuv`` (I420)
    retains_frames: ClassVar[bool] = True  # False: the output is done with the arrays when ``write`` returns

    def open(self, fmt: ProgramFormat) -> None:
        self.fmt = fmt

    @abc.abstractmethod
    def write(self, batch: ProgramBatch) -> None:
        """Take one batch; never blocks the loop for long (drop and count instead)."""

    def close(self) -> object:
        """Finish (a recorder finalizes its file and returns its path); safe to call more than once."""
        return None

    def stats(self) -> OutputStats:
        return OutputStats(self.name, OutputState.ON)


# -- registries ---------------------------------------------------------------------------------------------------------

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> factory. ``register`` is a decorator; implementations register where they are defined and the
    registry imports their modules on first use (``modules``), so that nothing heavy loads until it is needed."""

    def __init__(self, kind: str, modules: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}
        self._modules = modules
        self._loaded = False
        self._lock = threading.Lock()

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            self._factories[name] = factory
            return factory

        return deco

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
        import importlib
        import logging

        for mod in self._modules:
            try:
                importlib.import_module(mod)
            except ImportError as exc:  # an optional extra that is not installed: its entries are simply absent
                logging.getLogger(__name__).info("%s registry: %s not available (%s)", self.kind, mod, exc)

    def names(self) -> tuple[str, ...]:
        self._load()
        return tuple(self._factories)

    def get(self, name: str) -> Callable[..., T]:
        self._load()
        try:
            return self._factories[name]
        except KeyError:
            from studio.errors import InputError

            raise InputError(f"Unknown {self.kind} '{name}': use one of {', '.join(self.names())}.") from None

    def create(self, name: str, *args, **kwargs) -> T:
        return self.get(name)(*args, **kwargs)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


SOURCES: Registry[Source] = Registry("source", ("studio.pipeline.sources",))
MOTION_SOURCES: Registry[MotionSource] = Registry("motion source", ("studio.pipeline.motion",))
GENERATORS: Registry[Generator] = Registry("engine", ("studio.generators.builtin", "studio.generators.musetalk",
                                                      "studio.generators.wav2lip", "studio.generators.liveportrait",
                                                      "studio.generators.ditto", "studio.generators.wan_dit"))
POST_PROCESSORS: Registry[PostProcessor] = Registry("post-processor", ("studio.pipeline.post",))
OUTPUTS: Registry[Output] = Registry("output", ("studio.pipeline.outputs", "studio.encode.recorder",
                                                "studio.encode.streams"))
