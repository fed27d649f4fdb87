"""The real-time presenter runtime behind the studio window: plain Python, no Qt.

``PresenterRuntime.run()`` is a blocking loop (the UI runs it inside a QThread) that owns the renderer. The UI talks
to it only through command objects put on a queue (``submit``) and hears back through frozen event objects handed to
a callback; frames and telemetry are *pulled* (``latest_frame()``, ``telemetry()``), never pushed per frame.

Threads, and why:
- run loop: commands, speech scheduling, motion, rendering (batches of frame slots chosen to finish in time);
- present: retires each rendered frame when the master clock reaches its time (``latest_frame`` then returns it),
  drops frames superseded before they were shown, counts late ones, and feeds the recorder;
- speech worker: text-to-speech of the next segments while the current one plays (never on the render path);
- anchor worker: anchor preparation (MediaPipe) while the previous anchor keeps idling on screen;
- recorder: H.264 + AAC encoding into a fragmented MP4, behind a bounded queue;
- the sound card's callback (sounddevice), which pulls program audio and is the master clock when there is an output.

The program timeline is divided into frame *slots* (slot ``k`` is shown at ``k / fps``); the program audio is a sum
of clips placed at sample positions of the same timeline, so picture and sound share one clock by construction.
"""

from __future__ import annotations

import concurrent.futures as cf
import enum
import logging
import math
import queue
import threading
import time
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Union

import numpy as np

from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine
from studio.pipeline.threads import ThreadChooser
from studio.errors import AnchorError, AudioDeviceError, StudioError
from studio.pipeline.rundown import Segment
from studio.pipeline.telemetry import (ClockSource, ComputeSaved, MedianWindow, OptimizationShare, OptimizationStatus,
                                      RateMeter, RuntimeState, StageWindow, TelemetryBus, TelemetrySample,
                                      TelemetrySnapshot)
from studio.speech.types import Utterance, VoiceInfo, WordTiming

log = logging.getLogger(__name__)


class PreviewMode(enum.Enum):
    """What drives the presenter."""

    SCRIPT = "script"  # the rundown, spoken by text-to-speech (idles between segments)
    MICROPHONE = "microphone"  # the person at the selected microphone, live (``studio.pipeline.live.LiveSession``)


class AudioOutputMode(enum.Enum):
    AUTO = "auto"  # play through the default output device when there is one
    NONE = "none"  # never open an output device (kiosks, tests): the preview runs on its own clock


@dataclass(frozen=True)
class RuntimeSettings:
    """How the live runtime renders, paces and records."""

    size_px: int = 512  # preview / program frames are size_px x size_px
    fps: float = 25.0  # output frame rate
    device: str = "auto"  # auto, cpu, cuda
    batch_frames: int = 4  # frames rendered per renderer call (amortizes per-call cost; adds latency)
    program_rate_hz: int = 48_000  # program audio rate (what is played and recorded)
    audio_output: AudioOutputMode = AudioOutputMode.AUTO
    output_latency_s: float = 0.08  # PortAudio latency hint for playback
    speech_lead_ms: float = 250.0  # a segment starts at least this long after it is ready (audio buffers ahead)
    segment_gap_ms: float = 500.0  # silence between two segments
    record_preset: str = "ultrafast"  # libx264 preset for live recordings (leave CPU to the renderer)
    record_threads: int = 1  # libx264 threads for live recordings (one core stays free for the GUI and audio)
    render_threads: int = -1  # torch intra-op threads of the renderer (CPU); -1 = adaptive, 0 = torch's default.
    # Adaptive, because neither choice wins everywhere (measured, 2 cores, 512 px): on a quiet machine two threads
    # keep 25 fps while one gives 19-22; when other programs load the CPU, two OpenMP threads stall (every op waits
    # for a descheduled worker) and fall to 2-5 fps while one keeps 15-20. The renderer keeps timing both and uses
    # the faster one (``ThreadChooser``).
    render_duty: float = 0.85  # when behind, the renderer rests this share of its time: (1 - duty) / duty x cost
    # Pyramidal rendering in the preview: after the plain renderer's calibration batches (the HUD's baseline), frames
    # come from the warp-field route, the field at size / field_divisor instead of size / 4 (face PSNR 40 dB, SSIM
    # 0.995 against the plain renderer at 384 px, results/cpu); the HUD shows the saving measured live. 4 = plain only.
    field_divisor: int = 8
    record_queue_frames: int = 100  # recorder backlog before frames are dropped (and repeated in the file)
    # What turns the microphone's voice into mouth motion; the default is studio.audio.settings.DEFAULT_AUDIO_ENGINE
    # (why: its comment); the other stays selectable in the Microphone panel.
    audio_engine: AudioEngine = DEFAULT_AUDIO_ENGINE
    default_voice: str = "piper:joe"
    warm_up_voice: bool = True  # speak one word at start-up so that loading the voice model never stalls a show
    seed: int = 0  # idle motion

    def __post_init__(self) -> None:
        if self.size_px < 64 or self.size_px % 2:
            raise ValueError(f"size_px must be even and >= 64, got {self.size_px}")
        if not 1 <= self.fps <= 120:
            raise ValueError(f"fps must be in 1..120, got {self.fps}")
        if self.batch_frames < 1:
            raise ValueError("batch_frames must be >= 1")
        if not 0.1 <= self.render_duty <= 1.0:
            raise ValueError(f"render_duty must be in 0.1..1, got {self.render_duty}")
        if self.field_divisor < 4:
            raise ValueError(f"field_divisor must be >= 4 (4 = the plain renderer's field), got {self.field_divisor}")


# -- commands (UI -> runtime) -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadAnchor:
    path: Path | None  # None = the built-in portrait


@dataclass(frozen=True)
class GoLive:
    segments: tuple[Segment, ...]
    rundown_rows: tuple[int, ...] = ()  # the rundown row of each segment (reported back for the teleprompter)


@dataclass(frozen=True)
class Stop:
    """Stop speaking now; the presenter goes back to idling."""


@dataclass(frozen=True)
class SetPaused:
    paused: bool


@dataclass(frozen=True)
class StartRecording:
    folder: Path


@dataclass(frozen=True)
class StopRecording:
    pass


@dataclass(frozen=True)
class SetVoice:
    voice: str  # used for segments whose voice is empty


@dataclass(frozen=True)
class SetMicrophone:
    name: str | None  # None = system default; "" = no microphone


@dataclass(frozen=True)
class SetMode:
    mode: PreviewMode


@dataclass(frozen=True)
class SetAudioEngine:
    """What turns the microphone's voice into mouth motion (the microphone mode restarts with it when running)."""

    engine: AudioEngine


@dataclass(frozen=True)
class RecoverRecordings:
    folder: Path


@dataclass(frozen=True)
class Shutdown:
    pass


Command = Union[LoadAnchor, GoLive, Stop, SetPaused, StartRecording, StopRecording, SetVoice, SetMicrophone,
                SetMode, RecoverRecordings, Shutdown]


# -- events (runtime -> UI) -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AnchorProgress:
    fraction: float
    message: str


@dataclass(frozen=True)
class AnchorLoaded:
    name: str
    path: Path | None


@dataclass(frozen=True)
class AnchorFailed:
    path: Path | None
    message: str
    kept_anchor: str  # name of the anchor still on air, "" if none


@dataclass(frozen=True)
class StateChanged:
    state: RuntimeState


@dataclass(frozen=True)
class AudioOutputStatus:
    clock_source: ClockSource
    message: str  # device name, or why there is no audio output


@dataclass(frozen=True)
class VoicesListed:
    voices: tuple[VoiceInfo, ...]


@dataclass(frozen=True)
class MicrophoneStatus:
    ok: bool
    device_name: str
    message: str


@dataclass(frozen=True)
class ModeChanged:
    requested: PreviewMode
    active: PreviewMode  # the mode in effect: SCRIPT (idling) when the microphone mode cannot run
    message: str  # "" when ``active == requested``; else why not, in words for the producer


@dataclass(frozen=True)
class SegmentStarted:
    rundown_row: int
    text: str
    words: tuple[WordTiming, ...]


@dataclass(frozen=True)
class SegmentFailed:
    rundown_row: int
    message: str


@dataclass(frozen=True)
class RundownFinished:
    pass


@dataclass(frozen=True)
class RecordingStarted:
    path: Path


@dataclass(frozen=True)
class RecordingStopped:
    path: Path
    duration_s: float
    frames_repeated: int  # slots where the recorder repeated the previous picture (renderer or encoder behind)


@dataclass(frozen=True)
class RecordingFailed:
    message: str


@dataclass(frozen=True)
class RecordingsRecovered:
    paths: tuple[Path, ...]


@dataclass(frozen=True)
class Error:
    message: str


Event = Union[AnchorProgress, AnchorLoaded, AnchorFailed, StateChanged, AudioOutputStatus, VoicesListed,
              MicrophoneStatus, ModeChanged, SegmentStarted, SegmentFailed, RundownFinished, RecordingStarted, RecordingStopped,
              RecordingFailed, RecordingsRecovered, Error]


@dataclass(frozen=True)
class VideoFrame:
    """One program frame: shown at ``pts_s`` on the program clock."""

    image: np.ndarray = field(repr=False)  # S x S x 3 uint8 RGB
    pts_s: float
    index: int  # frame slot
    heard_ns: int | None = None  # microphone mode: time.monotonic_ns() when the sound it shows entered the ring


# -- program audio and clocks -----------------------------------------------------------------------------------------

class ProgramAudio:
    """The program's sound: clips placed at sample positions of the program timeline; silence elsewhere."""

    def __init__(self, rate_hz: int) -> None:
        self.rate_hz = rate_hz
        self._clips: list[tuple[int, np.ndarray]] = []  # (start sample, N float32)
        self._lock = threading.Lock()

    def add(self, start_sample: int, samples: np.ndarray) -> None:
        with self._lock:
            self._clips.append((int(start_sample), np.asarray(samples, np.float32)))

    def cut(self, from_sample: int) -> None:
        """Silence everything from ``from_sample`` on (clips are shortened or removed)."""
        with self._lock:
            kept = []
            for start, clip in self._clips:
                if start >= from_sample:
                    continue
                kept.append((start, clip[: max(0, from_sample - start)]))
            self._clips = kept

    def prune(self, before_sample: int) -> None:
        with self._lock:
            self._clips = [(s, c) for s, c in self._clips if s + len(c) > before_sample]

    def read(self, start: int, n: int) -> np.ndarray:
        """Samples [start, start + n) as float32 (n,)."""
        out = np.zeros(n, np.float32)
        with self._lock:
            for s, clip in self._clips:
                a, b = max(start, s), min(start + n, s + len(clip))
                if a < b:
                    out[a - start : b - start] += clip[a - s : b - s]
        np.clip(out, -1.0, 1.0, out=out)
        return out


class MonotonicClock:
    """Program time from the monotonic clock (no audio output), pausable."""

    source = ClockSource.MONOTONIC
    device_name = ""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._paused_at: float | None = None

    def now_s(self) -> float:
        t = self._paused_at if self._paused_at is not None else time.monotonic()
        return t - self._t0

    def set_paused(self, paused: bool) -> None:
        now = time.monotonic()
        if paused and self._paused_at is None:
            self._paused_at = now
        elif not paused and self._paused_at is not None:
            self._t0 += now - self._paused_at
            self._paused_at = None

    def close(self) -> None:
        pass


class AudioOutputClock:
    """Plays the program audio through sounddevice; the sample being heard now is the program clock.

    The callback hands the device samples [pos, pos + frames); PortAudio says when the first of them reaches the DAC
    (``outputBufferDacTime``), which anchors sample ``pos`` to a monotonic instant. ``now_s`` interpolates from the
    newest anchor, never runs past what was handed out, and never goes backwards.
    """

    source = ClockSource.AUDIO_OUTPUT

    def __init__(self, program: ProgramAudio, latency_s: float) -> None:
        try:
            import sounddevice as sd
        except OSError as exc:
            raise AudioDeviceError(f"No audio output: PortAudio is missing ({exc}). Install libportaudio2.") from exc
        self._program = program
        self.rate_hz = program.rate_hz
        self._lock = threading.Lock()
        self._pos = 0
        self._anchor: tuple[int, float, int] | None = None  # (sample, monotonic s when heard, frames)
        self._last_s = 0.0
        self._paused = False
        self._frozen_s: float | None = None
        self.underflows = 0
        try:
            outputs = [d for d in sd.query_devices() if d["max_output_channels"] > 0]
            if not outputs:
                raise AudioDeviceError("No audio output: this machine has no sound device or sound server.")
            self._stream = sd.OutputStream(samplerate=self.rate_hz, channels=1, dtype="float32",
                                           latency=latency_s, callback=self._callback)
            self._stream.start()
            self.device_name = str(sd.query_devices(self._stream.device)["name"])
        except AudioDeviceError:
            raise
        except Exception as exc:  # sd.PortAudioError, ValueError for a rate the device refuses
            raise AudioDeviceError(f"No audio output: the sound device would not open ({exc}).") from exc

    def _callback(self, outdata: np.ndarray, frames: int, time_info, status) -> None:
        if status.output_underflow:
            self.underflows += 1
        if self._paused:
            outdata.fill(0.0)
            return
        outdata[:, 0] = self._program.read(self._pos, frames)
        dac, cur = time_info.outputBufferDacTime, time_info.currentTime
        ahead_s = dac - cur if dac > 0 and cur > 0 and 0 <= dac - cur < 2.0 else float(self._stream.latency)
        with self._lock:
            self._anchor = (self._pos, time.monotonic() + ahead_s, frames)
            self._pos += frames

    def now_s(self) -> float:
        if self._frozen_s is not None:
            return self._frozen_s
        with self._lock:
            if self._anchor is None:
                return 0.0
            pos, heard_at, frames = self._anchor
            heard = pos + (time.monotonic() - heard_at) * self.rate_hz
            t = min(heard, pos + frames) / self.rate_hz
            self._last_s = max(self._last_s, t)
            return self._last_s

    def set_paused(self, paused: bool) -> None:
        if paused:
            self._frozen_s = self.now_s()
            self._paused = True
        else:
            self._paused = False
            self._frozen_s = None

    def close(self) -> None:
        try:
            self._stream.abort(ignore_errors=True)
            self._stream.close(ignore_errors=True)
        except Exception as exc:  # PortAudio may already be gone at exit
            log.debug("closing the output stream: %s", exc)


# -- recorder ---------------------------------------------------------------------------------------------------------

def recording_name(now: datetime | None = None) -> str:
    return f"NewsStudio-{(now or datetime.now()).strftime('%Y-%m-%d_%H-%M-%S')}.mp4"


def recover_recordings(folder: Path) -> list[Path]:
    """Turn partial recordings a crash left in ``folder`` into playable ``*-recovered.mp4`` files."""
    from studio.encode import recover_partial

    out: list[Path] = []
    if not folder.is_dir():
        return out
    for part in sorted(folder.glob(".*.mp4.part")):
        target = folder / part.name[1 : -len(".part")]
        try:
            got = recover_partial(target)
        except OSError as exc:
            log.warning("could not recover %s: %s", part, exc)
            continue
        if got is not None:
            out.append(got)
    return out


class _Recorder:
    """Writes what is shown and heard, slot by slot, into a fragmented MP4 on its own thread.

    Frames arrive from the present thread; a slot with no frame (renderer behind, or the queue full) repeats the
    previous picture, so the video always covers the timeline and stays in step with the audio.
    """

    def __init__(self, path: Path, size_px: int, fps: float, program: ProgramAudio, preset: str,
                 queue_frames: int, encoder_threads: int = 1) -> None:
        from studio.encode import EncodeSettings, Mp4Writer

        self.path = path
        self.fps = fps
        self.program = program
        self.writer = Mp4Writer(path, size_px, size_px, fps, program.rate_hz,
                                settings=EncodeSettings(preset=preset, encoder_threads=encoder_threads),
                                fragmented=True)
        self.q: queue.Queue[VideoFrame | int] = queue.Queue(maxsize=queue_frames)
        self.first_slot: int | None = None
        self.next_slot = 0
        self.repeated = 0
        self.error: BaseException | None = None
        self._last_image: np.ndarray | None = None
        self.thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self.thread.start()

    def offer(self, frame: VideoFrame) -> None:
        try:
            self.q.put_nowait(frame)
        except queue.Full:
            pass  # the slot will repeat the previous picture (counted in ``repeated``)

    def finish(self, until_slot: int) -> None:
        """Write up to and including ``until_slot``, then close the file (blocks until done)."""
        self.q.put(until_slot)
        self.thread.join()

    @property
    def duration_s(self) -> float:
        return 0.0 if self.first_slot is None else (self.next_slot - self.first_slot) / self.fps

    def _slot_audio(self, slot: int) -> np.ndarray:
        rate = self.program.rate_hz
        a, b = round(slot * rate / self.fps), round((slot + 1) * rate / self.fps)
        return self.program.read(a, b - a)

    def _write_slot(self, slot: int, image: np.ndarray) -> None:
        self.writer.write_video(image)
        self.writer.write_audio(self._slot_audio(slot))
        self.next_slot = slot + 1

    def _run(self) -> None:
        # Not niced: this thread takes the GIL between encoder calls, and a niced GIL holder preempted by other
        # processes stalls every thread of the studio (measured: fps 24 -> 16 while recording on a busy machine).
        try:
            while True:
                item = self.q.get()
                if isinstance(item, int):
                    if self._last_image is not None:
                        while self.next_slot <= item:
                            self.repeated += 1
                            self._write_slot(self.next_slot, self._last_image)
                    break
                if self.first_slot is None:
                    self.first_slot = self.next_slot = item.index
                if item.index < self.next_slot:
                    continue
                while self.next_slot < item.index and self._last_image is not None:
                    self.repeated += 1
                    self._write_slot(self.next_slot, self._last_image)
                self._write_slot(item.index, item.image)
                self._last_image = item.image
            self.writer.close()
        except BaseException as exc:  # reported by the runtime as RecordingFailed
            self.error = exc
            log.exception("recording failed")
            self.writer.abort()
            while True:  # unblock a finish() that is waiting
                try:
                    self.q.get_nowait()
                except queue.Empty:
                    break


# -- the runtime ------------------------------------------------------------------------------------------------------

def _resample(audio: np.ndarray, from_hz: int, to_hz: int) -> np.ndarray:
    """Mono float32 audio from ``from_hz`` to ``to_hz`` (FFmpeg's swresample: light to import, unlike scipy)."""
    if from_hz == to_hz:
        return audio.astype(np.float32)
    import av

    resampler = av.AudioResampler(format="flt", layout="mono", rate=to_hz)
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(audio, np.float32)[None, :], format="flt", layout="mono")
    frame.sample_rate = from_hz
    chunks = [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]
    chunks += [f.to_ndarray().reshape(-1) for f in resampler.resample(None)]
    out = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    n = round(len(audio) * to_hz / from_hz)
    return np.pad(out, (0, max(0, n - len(out))))[:n].astype(np.float32)


@dataclass(frozen=True)
class _Prepared:
    """A segment ready to go on air (made by the speech worker)."""

    utterance: Utterance
    audio: np.ndarray  # N float32 at the program rate
    n_slots: int
    mouth: np.ndarray  # n_slots x N_COEFFS (mouth columns)
    stress_s: list[float]  # seconds from the segment's start


@dataclass
class _Scheduled:
    """A segment placed on the program timeline."""

    row: int
    utterance: Utterance
    start_slot: int
    n_slots: int
    mouth: np.ndarray  # n_slots x N_COEFFS (mouth columns)
    stress_s: list[float]  # program seconds of stressed syllables
    started: bool = False

    @property
    def end_slot(self) -> int:
        return self.start_slot + self.n_slots


def lower_thread_priority(nice: int = 10) -> None:
    """Make the calling thread yield the CPU to the renderer and the GUI (Linux: per-thread nice; elsewhere a no-op).

    On a 2-core machine the speech worker and the encoder otherwise compete with the frames the producer watches.
    """
    import os

    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except (AttributeError, OSError) as exc:
        log.debug("cannot lower the priority of %s: %s", threading.current_thread().name, exc)


def _warm_imports() -> None:
    """Import what recording and the microphone mode need while nothing is on air: a first import holds the GIL for
    100-300 ms on a busy 2-core machine, which froze the window when recording started."""
    t0 = time.perf_counter()
    try:
        import studio.audio.mic_motion  # noqa: F401  (recognizer, silence sieve: pocketsphinx, onnxruntime)
        import studio.encode  # noqa: F401  (PyAV's encoders and muxer)
        import studio.pipeline.live  # noqa: F401
    except ImportError as exc:  # reported when the feature is used
        log.warning("warming imports: %s", exc)
    log.info("imports for recording and the microphone mode warmed in %.0f ms", (time.perf_counter() - t0) * 1e3)


def _device_label(device) -> str:
    if device.type == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    return "CPU"


def _gpu_mem_mb(device) -> float:
    if getattr(device, "type", "cpu") != "cuda":
        return math.nan
    import torch

    return torch.cuda.memory_allocated(device) / 2 ** 20


CALIBRATION_BATCHES = 20  # the first batches rendered after an anchor is installed: the HUD's plain baseline


LIVE_WINDOW_BATCHES = 60  # the pyramidal renderer's cost: median over its last this many batches
PLAIN_EVERY = 8  # after calibration, every 8th batch is rendered plainly: the baseline is re-measured live, under
# the same load and thread count as the pyramidal batches around it (about 3 % of the pyramidal saving is spent on it)


def _calibration(device_kind: str, pyramidal: bool = False) -> tuple[str, tuple]:
    """Baseline of the HUD's compute saved: the plain renderer's cost per frame over its first CALIBRATION_BATCHES
    live batches on this machine (same load as later: GUI, speech, present thread); the pills of the optimizations
    the preview does not use take their measured fractions from this machine's last bench JSON when there is one
    (the pyramidal pill's fraction is measured live, see ``PresenterRuntime._publish``)."""
    from studio.pipeline.telemetry import last_bench_path, load_bench, shares_from

    kind = "cuda" if device_kind == "cuda" else "cpu"
    bench = load_bench(last_bench_path(kind))
    unavailable = {} if kind == "cuda" else {"cuda_graphs": "no CUDA GPU", "gpu_encode": "no GPU / no NVENC"}
    shares = shares_from(("pyramidal",) if pyramidal else (), bench, unavailable, inactive_reason="not in live preview")
    when = time.strftime("%H:%M:%S")
    source = f"calibration from {when}: plain renderer, " + (
        f"its first {CALIBRATION_BATCHES} live batches" if pyramidal else
        f"median of its first {CALIBRATION_BATCHES} live batches")
    if bench is not None:
        source += f"; pill fractions: bench of {bench.get('finished', '?')} on this machine"
    return source, shares


class PresenterRuntime:
    """The live presenter: see the module docstring. Create, then call ``run()`` on a thread of its own."""

    def __init__(self, settings: RuntimeSettings | None = None,
                 on_event: Callable[[Event], None] = lambda e: None) -> None:
        self.settings = settings or RuntimeSettings()
        self._on_event = on_event
        self._commands: queue.Queue[Command] = queue.Queue()
        s = self.settings
        self.program = ProgramAudio(s.program_rate_hz)
        self._clock: MonotonicClock | AudioOutputClock = MonotonicClock()
        self._audio_message = "no audio output"
        self._state = RuntimeState.STARTING
        self._device_label = "CPU"
        self._presenter = None
        self._anchor_name = ""
        self._anchor_future: cf.Future | None = None
        self._anchor_path: Path | None = None
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="speech", initializer=lower_thread_priority)
        self._anchor_pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="anchor",
                                                  initializer=lower_thread_priority)
        self._default_voice = s.default_voice
        # Live session.
        self._session: list[tuple[int, cf.Future]] = []  # (rundown row, speech future) not yet scheduled
        self._waiting: list[tuple[int, str, str]] = []  # (rundown row, text, voice) not yet handed to the worker
        self._scheduled: list[_Scheduled] = []
        self._live = False
        # Rendering.
        from studio.presenter.idle import IdleMotion

        self._idle = IdleMotion(s.fps, seed=s.seed)
        self._stress_done = 0.0  # program s up to which stresses were handed to the idle motion
        self._next_slot = 0
        self._frame_s_ema: float | None = None
        # Telemetry bus (the HUD pulls it): per-frame stage costs, and the plain renderer's cost measured at start.
        self.bus = TelemetryBus()
        self._stage_ms = StageWindow(120)
        self._compute_base: tuple[str, tuple] | None = None  # (baseline source, pills), set with each anchor
        self._fast_presenter = None  # the pyramidal renderer, used once the plain one is calibrated
        self._live_ms: deque[float] = deque(maxlen=LIVE_WINDOW_BATCHES)  # its cost per frame, batch by batch
        self._plain_ms: deque[float] = deque(maxlen=CALIBRATION_BATCHES)  # the plain renderer's recent batches
        self._plain_batches = 0  # plain batches timed since the anchor was installed (the first ones calibrate)
        self._batches = 0
        # Present thread state.
        self._cond = threading.Condition()
        self._pending: deque[VideoFrame] = deque()
        self._latest: VideoFrame | None = None
        self._present_stop = threading.Event()
        self._present_thread: threading.Thread | None = None
        # Counters (written by one thread each; read for snapshots).
        self._produced = 0
        self._dropped_render = 0  # run loop: slots never rendered
        self._dropped_present = 0  # present thread: rendered but superseded before being shown
        self._late = 0
        self._shown = RateMeter()
        self._av = MedianWindow(50)
        self._last_error = ""
        # Recording, microphone.
        self._recorder: _Recorder | None = None
        self._record_folder: Path | None = None
        self._mic = None
        self._mic_name: str | None = None  # as last chosen: None = system default, "" = off
        self._shutdown = False
        self._rest_until_s = 0.0  # monotonic s: the renderer rests until then (pacing when behind)
        # Microphone mode: one LiveSession (the same live loop as ``python main.py live``) while it is on.
        self._mode = PreviewMode.SCRIPT
        self._requested_mode = PreviewMode.SCRIPT
        self._live_session = None  # studio.pipeline.live.LiveSession while the microphone mode runs
        self._audio_engine = self.settings.audio_engine
        self._mic_slot_base = 0  # frame index of the session's slot 0 (indices keep growing across modes)
        self._mic_clock_s = 0.0
        self._latency_lock = threading.Lock()
        self._latency_ms: deque[float] = deque(maxlen=250)  # sound to screen of the last ~10 s of shown frames

    # -- the UI's side (thread-safe, never blocks) --------------------------------------------------------------

    def submit(self, command: Command) -> None:
        self._commands.put(command)

    def latest_frame(self) -> VideoFrame | None:
        return self._latest

    def clock_s(self) -> float:
        return self._clock.now_s()

    def note_displayed(self, frame: VideoFrame) -> None:
        """The UI calls this when ``frame`` first reaches the screen: measures the A/V offset there (script mode) or
        the sound-to-pixel latency (microphone mode: from the sample entering the ring to now)."""
        if frame.heard_ns is not None:
            with self._latency_lock:
                self._latency_ms.append((time.monotonic_ns() - frame.heard_ns) / 1e6)
            return
        self._av.add((self._clock.now_s() - frame.pts_s) * 1000.0)

    def latency_ms(self) -> tuple[float, float]:
        """Sound-to-screen latency of the microphone mode over the last ~10 s: (median, 95th percentile); NaN before
        any frame that showed heard sound reached the screen."""
        with self._latency_lock:
            vals = np.asarray(self._latency_ms, np.float64)
        if vals.size == 0:
            return math.nan, math.nan
        return float(np.median(vals)), float(np.percentile(vals, 95))

    def input_level_dbfs(self) -> float:
        """Microphone level over the last 50 ms (dBFS); -inf with no microphone."""
        mic = self._mic
        if mic is None:
            return -math.inf
        x = mic.ring.latest(mic.ring.sample_rate_hz // 20)
        if len(x) == 0:
            return -math.inf
        rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))
        return 20.0 * math.log10(max(rms, 1e-7))

    def telemetry(self) -> TelemetrySnapshot:
        now = self._clock.now_s()
        row, word = self._current_word(now)
        av, n_av = self._av.median()
        rec = self._recorder
        session = self._live_session
        lat_med, lat_p95 = self.latency_ms()
        if session is not None:  # microphone mode: the session's audio clock and counters
            rec_path = str(session.recorder.path) if session.recorder is not None else ""
            return TelemetrySnapshot(
                taken_s=time.monotonic(), state=self._state, device=self._device_label, anchor_name=self._anchor_name,
                clock_source=self._clock.source, audio_output=self._audio_message, clock_s=self._mic_clock_s,
                fps_target=self.settings.fps, fps_shown=self._shown.rate(),
                frames_produced=session.frames_shown, frames_dropped=session.frames_dropped,
                frames_late=session.frames_late, render_ms_per_frame=(self._frame_s_ema or 0.0) * 1000.0,
                av_offset_ms=math.nan, av_offset_samples=0, segment_index=-1, word_index=-1,
                recording_path=rec_path, recording_s=session.recording_s,
                input_level_dbfs=self.input_level_dbfs(), last_error=self._last_error,
                mode=PreviewMode.MICROPHONE.value, latency_ms_median=lat_med, latency_ms_p95=lat_p95,
            )
        return TelemetrySnapshot(
            taken_s=time.monotonic(), state=self._state, device=self._device_label, anchor_name=self._anchor_name,
            clock_source=self._clock.source, audio_output=self._audio_message, clock_s=now,
            fps_target=self.settings.fps, fps_shown=self._shown.rate(),
            frames_produced=self._produced, frames_dropped=self._dropped_render + self._dropped_present, frames_late=self._late,
            render_ms_per_frame=(self._frame_s_ema or 0.0) * 1000.0, av_offset_ms=av, av_offset_samples=n_av,
            segment_index=row, word_index=word,
            recording_path=str(rec.path) if rec else "", recording_s=rec.duration_s if rec else 0.0,
            input_level_dbfs=self.input_level_dbfs(), last_error=self._last_error,
            mode=PreviewMode.SCRIPT.value, latency_ms_median=lat_med, latency_ms_p95=lat_p95,
        )

    # -- the loop -----------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Blocking loop; returns after ``Shutdown`` (the recording, if any, is closed into a playable file)."""
        try:
            self._set_render_threads()
            self._start()
            while not self._shutdown:
                self._step()
        except BaseException as exc:
            log.exception("the presenter runtime failed")
            self._emit(Error(f"The presenter pipeline stopped: {exc}. Restart the studio; recordings so far are "
                             "kept."))
            raise
        finally:
            self._teardown()

    def _set_render_threads(self) -> None:
        """Torch intra-op threads for this (the renderer's) thread; see ``RuntimeSettings.render_threads``."""
        n = self.settings.render_threads
        if n == 0 or self.settings.device.startswith("cuda"):
            return
        import os

        import torch

        if n < 0:
            self._thread_chooser = ThreadChooser(max(1, min(2, os.cpu_count() or 1)))
            n = self._thread_chooser.current
        torch.set_num_threads(n)
        log.info("renderer: %d torch thread(s)%s", torch.get_num_threads(), " at first (adaptive)" if self.settings.render_threads < 0 else "")

    def _emit(self, event: Event) -> None:
        try:
            self._on_event(event)
        except Exception:  # a broken listener must not stop the pipeline
            log.exception("event listener failed on %s", type(event).__name__)

    def _set_state(self, state: RuntimeState) -> None:
        if state != self._state:
            self._state = state
            self._emit(StateChanged(state))

    def _start(self) -> None:
        self._emit(StateChanged(self._state))
        if self.settings.audio_output == AudioOutputMode.AUTO:
            try:
                self._clock = AudioOutputClock(self.program, self.settings.output_latency_s)
                self._audio_message = self._clock.device_name
            except AudioDeviceError as exc:
                self._audio_message = "No audio output: the preview runs on its own clock, silently."
                log.info("%s (%s)", self._audio_message, exc)
        else:
            self._audio_message = "No audio output (turned off): the preview runs on its own clock, silently."
        self._emit(AudioOutputStatus(self._clock.source, self._audio_message))
        self._present_thread = threading.Thread(target=self._present_loop, name="present", daemon=True)
        self._present_thread.start()
        self._pool.submit(self._list_voices)
        self._anchor_pool.submit(_warm_imports)

    def _list_voices(self) -> None:
        from studio.speech import list_voices

        try:
            voices = tuple(list_voices())
        except Exception as exc:  # a broken engine must not hide the others; listed as none
            log.exception("listing voices failed")
            self._emit(Error(f"No voices could be listed ({exc}); check the speech packages."))
            return
        self._emit(VoicesListed(voices))
        if self.settings.warm_up_voice and any(v.name == self._default_voice for v in voices):
            try:
                self._prepare_segment("Ready.", self._default_voice)
            except StudioError as exc:
                log.warning("warming up %s failed: %s", self._default_voice, exc)

    def _teardown(self) -> None:
        self._stop_recording()
        self._stop_mic_session()
        self._present_stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._present_thread is not None:
            self._present_thread.join(timeout=5)
        for _, fut in self._session:
            fut.cancel()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._anchor_pool.shutdown(wait=True, cancel_futures=True)
        if self._mic is not None:
            self._mic.stop()
        self._clock.close()
        self._state = RuntimeState.STOPPED
        self._emit(StateChanged(RuntimeState.STOPPED))

    def _step(self) -> None:
        wait_s = self._work_once()
        try:
            cmd = self._commands.get(timeout=wait_s) if wait_s > 0 else self._commands.get_nowait()
        except queue.Empty:
            return
        self._handle(cmd)
        while not self._shutdown:
            try:
                self._handle(self._commands.get_nowait())
            except queue.Empty:
                break

    def _work_once(self) -> float:
        """One round of work; returns how long the loop may wait for a command."""
        self._poll_anchor()
        now = self._clock.now_s()
        self._poll_speech(now)
        self._update_state(now)
        if self._presenter is None or self._state == RuntimeState.PAUSED:
            return 0.05
        if self._live_session is not None:
            return self._mic_step()
        rest = self._rest_until_s - time.monotonic()
        if rest > 0:
            return min(rest, 0.02)
        with self._cond:
            ahead = sum(1 for f in self._pending if f.pts_s > now)
        if ahead >= self.settings.batch_frames:
            return min(0.02, max(0.001, self._pending[0].pts_s - now)) if self._pending else 0.01
        self._render_batch(now)
        return 0.0

    # -- commands -----------------------------------------------------------------------------------------------

    def _handle(self, cmd: Command) -> None:
        log.debug("command %s", cmd)
        try:
            if isinstance(cmd, Shutdown):
                self._shutdown = True
            elif isinstance(cmd, LoadAnchor):
                self._load_anchor(cmd.path)
            elif isinstance(cmd, GoLive):
                self._go_live(cmd)
            elif isinstance(cmd, Stop):
                self._stop_live()
            elif isinstance(cmd, SetPaused):
                self._clock.set_paused(cmd.paused)
                self._update_state(self._clock.now_s())
            elif isinstance(cmd, StartRecording):
                self._start_recording(cmd.folder)
            elif isinstance(cmd, StopRecording):
                self._stop_recording()
            elif isinstance(cmd, SetVoice):
                self._default_voice = cmd.voice
            elif isinstance(cmd, SetMicrophone):
                self._set_microphone(cmd.name)
            elif isinstance(cmd, SetMode):
                self._set_mode(cmd.mode)
            elif isinstance(cmd, SetAudioEngine):
                self._set_audio_engine(cmd.engine)
            elif isinstance(cmd, RecoverRecordings):
                got = recover_recordings(cmd.folder)
                if got:
                    self._emit(RecordingsRecovered(tuple(got)))
            else:
                raise TypeError(f"unknown command {cmd!r}")
        except StudioError as exc:
            self._last_error = str(exc)
            self._emit(Error(str(exc)))

    # anchor

    def _load_anchor(self, path: Path | None) -> None:
        from studio.presenter.anchor import build_anchor

        if self._anchor_future is not None:
            self._anchor_future.cancel()
        self._anchor_path = path
        progress = lambda f, m: self._emit(AnchorProgress(float(f), str(m)))  # noqa: E731
        self._anchor_future = self._anchor_pool.submit(build_anchor, path, progress=progress)

    def _poll_anchor(self) -> None:
        fut = self._anchor_future
        if fut is None or not fut.done():
            return
        self._anchor_future = None
        path = self._anchor_path
        try:
            anchor = fut.result()
            self._install_presenter(anchor)
        except (StudioError, ValueError, OSError) as exc:
            msg = str(exc) if isinstance(exc, StudioError) else f"Cannot use this portrait ({exc}): try another."
            self._last_error = msg
            self._emit(AnchorFailed(path, msg, self._anchor_name))
            return
        except cf.CancelledError:
            return
        self._emit(AnchorLoaded(anchor.name, path))

    def _install_presenter(self, anchor) -> None:
        from studio.presenter.coeffs import N_COEFFS
        from studio.presenter.renderer import Presenter, RenderSettings

        s = self.settings
        base = RenderSettings(size_px=s.size_px, device=s.device, batch_frames=s.batch_frames)
        presenter = Presenter(anchor, base)
        warm = np.zeros((s.batch_frames, N_COEFFS), np.float32)
        presenter.render_batch(warm)  # first call allocates; measure the second
        t0 = time.perf_counter()
        presenter.render_batch(warm)
        self._frame_s_ema = (time.perf_counter() - t0) / s.batch_frames
        fast = None
        if s.field_divisor != 4:
            from studio.enhance.upscale import warp_field_settings

            fast = Presenter(anchor, warp_field_settings(base, s.field_divisor))
            fast.render_batch(warm)
        self._compute_base = _calibration(presenter.device.type, pyramidal=fast is not None)
        self._fast_presenter = fast
        self._live_ms.clear()
        self._plain_ms.clear()
        self._plain_batches = self._batches = 0
        if self._presenter is None:  # slots that passed before there was a face are not dropped frames
            self._next_slot = max(self._next_slot, int(self._clock.now_s() * s.fps) + 1)
        self._presenter = presenter
        if self._live_session is not None:
            self._live_session.presenter = fast or presenter
        self._anchor_name = anchor.name
        self._device_label = _device_label(presenter.device)
        log.info("anchor %s on %s: %.1f ms per frame", anchor.name, self._device_label, self._frame_s_ema * 1e3)
        if self._requested_mode != self._mode:  # the microphone mode was asked for before there was a face
            self._set_mode(self._requested_mode)

    # live session

    def _go_live(self, cmd: GoLive) -> None:
        if self._live_session is not None:  # going live with the rundown ends the microphone mode
            self._set_mode(PreviewMode.SCRIPT)
        self._stop_live(quiet=True)
        rows = cmd.rundown_rows or tuple(range(len(cmd.segments)))
        self._waiting = [(row, seg.text, seg.voice or self._default_voice) for row, seg in zip(rows, cmd.segments)]
        self._submit_speech()
        self._live = bool(self._session)
        self._update_state(self._clock.now_s())

    def _submit_speech(self) -> None:
        """Keep the speech worker one segment ahead: the next is prepared while the current one plays (all of them
        at once would take the CPU from the renderer on a small machine)."""
        while self._waiting and len(self._session) < 2:
            row, text, voice = self._waiting.pop(0)
            self._session.append((row, self._pool.submit(self._prepare_segment, text, voice)))

    def _prepare_segment(self, text: str, voice: str) -> _Prepared:
        """Speech worker: synthesize, resample to the program rate, and compute the mouth motion."""
        from studio.presenter.motion import loudness_envelope
        from studio.speech import SpeechSettings, synthesize
        from studio.speech.visemes import mouth_track, stress_times

        fps = self.settings.fps
        # One ONNX Runtime thread: the other core belongs to the renderer while on air.
        utt = synthesize(text, voice, SpeechSettings(onnx_threads=1))
        n_slots = max(1, math.ceil(utt.duration_s * fps - 1e-9))
        loud = loudness_envelope(utt.audio, utt.sample_rate_hz, fps, n_slots)
        mouth = mouth_track(utt.phonemes, fps, n_slots, loudness=loud)
        return _Prepared(utt, _resample(utt.audio, utt.sample_rate_hz, self.program.rate_hz), n_slots, mouth,
                         list(stress_times(utt.phonemes)))

    def _stop_live(self, quiet: bool = False) -> None:
        for _, fut in self._session:
            fut.cancel()
        self._session.clear()
        self._waiting.clear()
        now = self._clock.now_s()
        fps = self.settings.fps
        cut_slot = int(now * fps) + 1
        if any(s.end_slot > cut_slot for s in self._scheduled):
            self.program.cut(round(cut_slot * self.program.rate_hz / fps))
            for s in self._scheduled:
                s.n_slots = max(0, min(s.n_slots, cut_slot - s.start_slot))
                s.mouth = s.mouth[: s.n_slots]
            with self._cond:  # frames rendered ahead with the mouth still moving: render them again
                while self._pending and self._pending[-1].index >= cut_slot:
                    self._pending.pop()
            self._next_slot = min(self._next_slot, max(cut_slot, self._pending[-1].index + 1 if self._pending else 0))
        self._scheduled = [s for s in self._scheduled if s.n_slots > 0]
        self._live = False
        if not quiet:
            self._update_state(now)

    def _poll_speech(self, now: float) -> None:
        """Place prepared speech on the timeline, in rundown order, as soon as it is ready."""
        s = self.settings
        while self._session and self._session[0][1].done():
            row, fut = self._session.pop(0)
            try:
                prep: _Prepared = fut.result()
            except cf.CancelledError:
                continue
            except StudioError as exc:
                self._emit(SegmentFailed(row, str(exc)))
                continue
            except Exception as exc:  # the speech engine failed in a way it did not translate
                self._emit(SegmentFailed(row, f"Speech failed ({exc}); try another voice."))
                continue
            prev_end = max((x.end_slot for x in self._scheduled), default=0)
            gap = 0 if not self._scheduled else round(s.segment_gap_ms / 1000.0 * s.fps)
            start = max(self._next_slot, math.ceil((now + s.speech_lead_ms / 1000.0) * s.fps), prev_end + gap)
            t0 = start / s.fps
            self.program.add(round(start * self.program.rate_hz / s.fps), prep.audio)
            self._scheduled.append(_Scheduled(row, prep.utterance, start, prep.n_slots, prep.mouth,
                                              [t0 + x for x in prep.stress_s]))
            log.info("segment %d scheduled at %.2f s (%.2f s long)", row, t0, prep.utterance.duration_s)
        self._submit_speech()

    def _segment_at(self, t_s: float) -> _Scheduled | None:
        slot = int(t_s * self.settings.fps)
        for seg in self._scheduled:
            if seg.start_slot <= slot < seg.end_slot:
                return seg
        return None

    def _current_word(self, t_s: float) -> tuple[int, int]:
        seg = self._segment_at(t_s)
        if seg is None:
            return -1, -1
        starts = [w.start_s for w in seg.utterance.words]
        return seg.row, bisect_right(starts, t_s - seg.start_slot / self.settings.fps) - 1

    def _update_state(self, now: float) -> None:
        fps = self.settings.fps
        seg = self._segment_at(now)
        if seg is not None and not seg.started:
            seg.started = True
            self._emit(SegmentStarted(seg.row, seg.utterance.text, seg.utterance.words))
        # Forget segments that have played and been recorded, and their audio.
        done_slot = int(now * fps) - 2 * round(fps)
        self._scheduled = [x for x in self._scheduled if x.end_slot > done_slot]
        self.program.prune(round(max(0, done_slot - 10 * round(fps)) * self.program.rate_hz / fps))
        if self._live and not self._session and not self._waiting and not any(x.end_slot > int(now * fps) for x in self._scheduled):
            self._live = False
            self._emit(RundownFinished())
        if self._presenter is None:
            state = RuntimeState.STARTING if self._anchor_future is not None and not self._anchor_name \
                else RuntimeState.NO_ANCHOR
        elif self._live_session is not None:
            state = RuntimeState.MICROPHONE
        elif self._clock_paused():
            state = RuntimeState.PAUSED
        elif self._live:
            state = RuntimeState.LIVE if seg is not None else RuntimeState.PREPARING
            if seg is None and any(x.start_slot > int(now * fps) for x in self._scheduled):
                state = RuntimeState.LIVE  # between two segments: still on air
        else:
            state = RuntimeState.IDLE
        self._set_state(state)

    def _clock_paused(self) -> bool:
        c = self._clock
        return c._paused_at is not None if isinstance(c, MonotonicClock) else c._paused

    # rendering

    def _motion_for(self, slots: list[int]) -> np.ndarray:
        from studio.presenter.coeffs import MOUTH_COEFFS

        fps = self.settings.fps
        cols = list(MOUTH_COEFFS)
        out = []
        for slot in slots:
            t = (slot + 0.5) / fps
            seg = None
            for x in self._scheduled:
                if x.start_slot <= slot < x.end_slot:
                    seg = x
                    for st in x.stress_s:
                        if self._stress_done < st <= t:
                            self._idle.nod(st)
            self._stress_done = max(self._stress_done, t)
            c = self._idle.frame(t, speaking=seg is not None)
            if seg is not None:
                c[cols] = seg.mouth[slot - seg.start_slot, cols]
            out.append(c)
        return np.stack(out).astype(np.float32)  # B x N_COEFFS

    def _render_batch(self, now: float) -> None:
        s = self.settings
        fps, b = s.fps, s.batch_frames
        frame_s = self._frame_s_ema or 0.05
        # Pick slots that will still be in the future when the batch is done; when the renderer is slower than the
        # output rate, space them out (the skipped slots are counted as dropped) instead of falling behind.
        earliest = math.ceil((now + 1.25 * frame_s * b + 0.005) * fps)
        first = max(self._next_slot, earliest)
        stride = max(1, math.ceil(frame_s / s.render_duty * fps * 1.05)) if frame_s * fps * 1.05 > 1 else 1
        slots = [first + i * stride for i in range(b)]
        t_m = time.perf_counter()
        coeffs = self._motion_for(slots)
        fast = self._fast_presenter
        plain = fast is None or self._plain_batches < CALIBRATION_BATCHES or self._batches % PLAIN_EVERY == 0
        self._batches += 1
        t0 = time.perf_counter()
        images = (self._presenter if plain else fast).render_batch(coeffs)  # B x S x S x 3 uint8
        cost = time.perf_counter() - t0
        per = cost / b
        chooser = getattr(self, "_thread_chooser", None)
        if chooser is not None:
            threads = chooser.record(per)
            if threads != chooser.previous:
                import torch

                torch.set_num_threads(threads)
        self._stage_ms.add("motion", (t0 - t_m) * 1e3 / b)
        self._stage_ms.add("render", per * 1e3)
        self._frame_s_ema = 0.8 * frame_s + 0.2 * per
        if stride > 1:  # behind: rest so that the GUI, speech, audio and the encoder get their share of the CPU
            self._rest_until_s = time.monotonic() + cost * (1.0 - s.render_duty) / s.render_duty
        self._dropped_render += (slots[-1] + 1 - self._next_slot) - b
        self._produced += b
        self._next_slot = slots[-1] + 1
        with self._cond:
            for slot, img in zip(slots, images):
                self._pending.append(VideoFrame(image=img, pts_s=slot / fps, index=slot))
            depth = len(self._pending)
            self._cond.notify_all()
        self._publish(depth, per * 1e3, plain)

    def _publish(self, pending: int, batch_ms_per_frame: float, plain: bool = True) -> None:
        """One bus sample per rendered batch: per-frame stage ms, the present queue, drops, and compute saved: the
        plain renderer's cost (its first CALIBRATION_BATCHES batches after an anchor loads, then every PLAIN_EVERY-th
        batch: median of its last CALIBRATION_BATCHES) against the pyramidal renderer's (median of its last
        LIVE_WINDOW_BATCHES), both measured live under the same conditions."""
        stages = self._stage_ms.timings()
        compute = None
        if self._compute_base is not None and "render" in stages:
            source, shares = self._compute_base
            fast = self._fast_presenter
            if not plain:
                self._live_ms.append(batch_ms_per_frame)
            elif fast is not None or self._plain_batches < CALIBRATION_BATCHES:  # plain only: the first ones
                self._plain_ms.append(batch_ms_per_frame)
                self._plain_batches += 1
            n_calib = min(self._plain_batches, CALIBRATION_BATCHES)
            base = float(np.median(self._plain_ms)) if n_calib == CALIBRATION_BATCHES else math.nan
            actual = float(np.median(self._live_ms)) if self._live_ms else stages["render"].median_ms
            if math.isnan(base):
                source += f" (calibrating: {n_calib}/{CALIBRATION_BATCHES})"
            if fast is not None:
                active = bool(self._live_ms)
                saved = (base - actual) / base if active and base > 0 else math.nan
                why = (f"measured live: field {fast.settings.field_px} px, median of its last {len(self._live_ms)} "
                       f"batches vs the plain renderer's last {len(self._plain_ms)}") if active \
                    else "starts after the plain renderer's calibration"
                shares = tuple(OptimizationShare(x.name, OptimizationStatus.ACTIVE if active else
                                                 OptimizationStatus.INACTIVE, saved, why)
                               if x.name == "pyramidal" else x for x in shares)
                if active:
                    source += (f", then every {PLAIN_EVERY}th batch (baseline: median of its last "
                               f"{len(self._plain_ms)}); the other batches by the pyramidal renderer (warp field at "
                               f"size / {self.settings.field_divisor})")
            compute = ComputeSaved(base, actual, source, shares)
        self.bus.publish(TelemetrySample(
            taken_s=time.monotonic(), source="runtime", frames_produced=self._produced,
            frames_dropped=self._dropped_render + self._dropped_present, fps_shown=self._shown.rate(),
            fps_target=self.settings.fps, stages=stages, queue_depths={"present": pending},
            drops={"render": self._dropped_render, "present": self._dropped_present},
            gpu_mem_mb=_gpu_mem_mb(getattr(self._presenter, "device", None)), compute=compute))

    # -- present thread -----------------------------------------------------------------------------------------

    def _present_loop(self) -> None:
        fps = self.settings.fps
        while not self._present_stop.is_set():
            with self._cond:
                now = self._clock.now_s()
                due = 0
                while due < len(self._pending) and self._pending[due].pts_s <= now:
                    due += 1
                if due == 0:
                    wait = 0.02 if not self._pending else min(0.02, max(0.0005, self._pending[0].pts_s - now))
                    self._cond.wait(wait)
                    continue
                shown = [self._pending.popleft() for _ in range(due)]
            self._dropped_present += len(shown) - 1  # rendered but superseded before they could be shown
            frame = shown[-1]
            if now - frame.pts_s > 0.5 / fps:
                self._late += 1
            self._latest = frame
            self._shown.tick()
            rec = self._recorder
            if rec is not None:
                rec.offer(frame)

    # -- recording ----------------------------------------------------------------------------------------------

    def _recording(self) -> bool:
        return self._recorder is not None or (self._live_session is not None and self._live_session.recorder is not None)

    def _start_recording(self, folder: Path) -> None:
        from studio.errors import OutputPathError

        if self._recording():
            return
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise OutputPathError(f"The folder {folder} does not exist: choose another recording folder.")
        recovered = recover_recordings(folder)
        if recovered:
            self._emit(RecordingsRecovered(tuple(recovered)))
        path = folder / recording_name()
        n = 2
        while path.exists():
            path = folder / f"{path.stem.split('_n')[0]}_n{n}.mp4"
            n += 1
        self._record_folder = folder
        try:
            if self._live_session is not None:  # microphone mode: the session records what is heard and shown
                self._live_session.start_recording(path)
            else:
                self._recorder = _Recorder(path, self.settings.size_px, self.settings.fps, self.program,
                                           self.settings.record_preset, self.settings.record_queue_frames,
                                           self.settings.record_threads)
        except StudioError as exc:
            self._emit(RecordingFailed(str(exc)))
            return
        self._emit(RecordingStarted(path))

    def _stop_recording(self) -> None:
        session = self._live_session
        if session is not None and session.recorder is not None:
            path, duration_s = session.recorder.path, session.recording_s
            try:
                session.stop_recording()
            except Exception as exc:  # EncoderError, or what the encoder thread raised
                msg = str(exc) if isinstance(exc, StudioError) else f"Recording failed: {exc}"
                self._emit(RecordingFailed(msg))
                return
            rec_stats = session.stats()
            self._emit(RecordingStopped(path, duration_s, rec_stats.recorder_frames_repeated))
            return
        rec, self._recorder = self._recorder, None
        if rec is None:
            return
        latest = self._latest
        until = latest.index if latest is not None else rec.next_slot
        rec.finish(until)
        if rec.error is not None:
            msg = str(rec.error) if isinstance(rec.error, StudioError) else f"Recording failed: {rec.error}"
            self._emit(RecordingFailed(msg))
        else:
            self._emit(RecordingStopped(rec.path, rec.duration_s, rec.repeated))

    # -- microphone ---------------------------------------------------------------------------------------------

    def _set_microphone(self, name: str | None) -> None:
        from studio.audio.capture import MicCapture
        from studio.audio.settings import CaptureSettings

        mic_mode = self._live_session is not None
        if mic_mode:
            self._stop_mic_session()
        self._mic_name = name
        if self._mic is not None:
            self._mic.stop()
            self._mic = None
        if name == "":
            self._emit(MicrophoneStatus(False, "", "Microphone off."))
            return
        mic = MicCapture(CaptureSettings(device=name))
        try:
            mic.start()
        except AudioDeviceError as exc:
            self._emit(MicrophoneStatus(False, "", str(exc)))
            return
        self._mic = mic
        self._emit(MicrophoneStatus(True, mic.device.name if mic.device else "default", "listening"))
        if mic_mode or self._requested_mode == PreviewMode.MICROPHONE:
            self._set_mode(PreviewMode.MICROPHONE)

    # -- microphone mode ----------------------------------------------------------------------------------------

    def _set_audio_engine(self, engine: AudioEngine) -> None:
        if engine == self._audio_engine:
            return
        self._audio_engine = engine
        if self._live_session is not None:  # restart the microphone mode with the new engine
            self._stop_mic_session()
            self._set_mode(PreviewMode.MICROPHONE)

    def _set_mode(self, mode: PreviewMode) -> None:
        """Switch what drives the presenter. A recording in progress continues into a new file in the same folder."""
        self._requested_mode = mode
        if mode == self._mode and (mode == PreviewMode.SCRIPT or self._live_session is not None):
            self._emit(ModeChanged(mode, self._mode, ""))
            return
        folder = self._record_folder if self._recording() else None
        if folder is not None:
            self._stop_recording()
        if mode == PreviewMode.SCRIPT:
            self._stop_mic_session()
            message = ""
        else:
            message = self._start_mic_session()
        self._emit(ModeChanged(mode, self._mode, message))
        self._update_state(self._clock.now_s())
        if folder is not None:
            self._start_recording(folder)

    def _start_mic_session(self) -> str:
        """Start the microphone mode; returns "" or, when it cannot run, why (the presenter keeps idling)."""
        from studio.audio.capture import list_input_devices
        from studio.pipeline.live import LiveSession, LiveSettings

        if self._presenter is None:
            return "Waiting for the anchor: the microphone mode starts when the face is ready."
        if self._mic is None:
            if self._mic_name == "":
                return "The microphone is off: choose one in the Microphone panel. The presenter keeps idling."
            if not list_input_devices():
                return ("No input device: connect a microphone or start a sound server. "
                        "The presenter keeps idling.")
            self._set_microphone(self._mic_name)  # opens the default (or chosen) device, then comes back here
            return "" if self._live_session is not None else \
                "The microphone would not open. The presenter keeps idling."
        self._stop_live(quiet=True)  # the rundown stops speaking
        with self._cond:
            self._pending.clear()
        s = self.settings
        session = LiveSession(settings=LiveSettings(fps=s.fps, size_px=s.size_px, device=s.device,
                                                    record_preset=s.record_preset, record_threads=s.record_threads,
                                                    seed=s.seed, audio_engine=self._audio_engine),
                              capture=self._mic, presenter=self._fast_presenter or self._presenter)
        session.thread_chooser = getattr(self, "_thread_chooser", None)  # one measured choice for both modes
        try:
            session.start()
        except AudioDeviceError as exc:
            return f"{exc} The presenter keeps idling."
        self._mic_slot_base = self._next_slot + 1
        self._live_session = session
        self._mode = PreviewMode.MICROPHONE
        with self._latency_lock:
            self._latency_ms.clear()
        log.info("microphone mode on %s (%s engine)", self._mic.device.name if self._mic.device else "default",
                 session.audio_engine.value)
        return session.engine_note  # "" unless the neural engine could not load (the phone recognizer runs instead)

    def _stop_mic_session(self) -> None:
        session, self._live_session = self._live_session, None
        self._mode = PreviewMode.SCRIPT
        if session is None:
            return
        session.stop(close_capture=False)  # the microphone stays open for the level meter
        log.info("microphone mode off: %s", session.stats().summary())
        # Script mode resumes at the program clock's next slot, after the frames the session showed.
        self._next_slot = max(self._next_slot, self._mic_slot_base + session.frames_shown + session.frames_dropped,
                              int(self._clock.now_s() * self.settings.fps) + 1)

    def _mic_step(self) -> float:
        """Microphone mode: render the frame that is due (LiveSession drops and counts the rest); returns the wait."""
        session = self._live_session
        t0 = time.perf_counter()
        f = session.step()
        if f is not None:
            self._frame_s_ema = 0.9 * (self._frame_s_ema or 0.0) + 0.1 * (time.perf_counter() - t0)
            heard_ns = None if f.latency_ms is None else f.presented_ns - int(f.latency_ms * 1e6)
            self._mic_clock_s = f.session_time_s
            self._latest = VideoFrame(image=f.pixels, pts_s=f.session_time_s, index=self._mic_slot_base + f.index,
                                      heard_ns=heard_ns)
            self._shown.tick()
        return min(0.005, max(0.0005, session.seconds_until_due()))
