"""The studio's runtime: the pipeline core behind the window, driven by commands, reporting by events. No Qt.

``StudioRuntime.run()`` is a blocking control loop (the window runs it inside a QThread). The UI talks to it only
through command objects (``submit``) and hears back through frozen events (``studio.pipeline.commands``) handed to a
callback; frames and telemetry are pulled (``latest_frame()``, ``telemetry()``, the bus), never pushed per frame.

The frames come from the one core (``studio.pipeline.core``), run on a thread of its own with:
- script mode: ``ProgramSource`` on the program clock (the sound card's playback of the program audio when there is
  an output, else the monotonic clock) + ``ProgramMotion``; the rundown's segments are spoken by a speech worker one
  ahead of the one on air and scheduled on the timeline as they are ready;
- microphone mode: ``MicSource`` + ``MicMotion`` on the selected microphone;
- outputs: the preview (always), the recorder (while recording), streams.
The optimization flags change live (the HUD's pills); a new anchor, engine or picture format, a mode switch and the
async flag restart the core on the same source and outputs (a recording goes on across a restart; a mode switch
continues it in a new file). A failing stage never ends the studio: the error is reported and the core restarts.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import queue
import threading
import time
from bisect import bisect_right
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Callable

import numpy as np

from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine
from studio.errors import AudioDeviceError, StudioError
from studio.pipeline import commands as cmd
from studio.pipeline.commands import PreviewMode
from studio.pipeline.motion import warm_microphone
from studio.contracts import OnAir
from studio.pipeline.settings import CoreSettings, Optimization
from studio.pipeline.telemetry import ClockSource, RuntimeState, TelemetryBus, TelemetrySnapshot

log = logging.getLogger(__name__)


class AudioOutputMode:
    AUTO = "auto"  # play through the default output device when there is one
    NONE = "none"  # never open an output device (kiosks, tests): the preview runs on its own clock


@dataclass(frozen=True)
class StudioSettings:
    """How the studio runtime renders, paces and records (the core's settings are ``core``)."""

    core: CoreSettings = CoreSettings(size_px=512, fps=25.0, device="cpu", chunk_frames=4, batch_frames=4,
                                      measure_baseline=True)
    audio_output: str = AudioOutputMode.AUTO
    output_latency_s: float = 0.08  # PortAudio latency hint for playback
    speech_lead_ms: float = 250.0  # a segment starts at least this long after it is ready (audio buffers ahead)
    segment_gap_ms: float = 500.0  # silence between two segments
    record_preset: str = "ultrafast"  # libx264 preset for live recordings (leave CPU to the renderer)
    record_threads: int = 1  # libx264 threads for live recordings (one core stays free for the GUI and audio)
    record_queue_frames: int = 100  # recorder backlog before frames are dropped (and repeated in the file)
    audio_engine: AudioEngine = DEFAULT_AUDIO_ENGINE
    default_voice: str = "piper:joe"
    warm_up_voice: bool = True  # speak one word at start-up so that loading the voice model never stalls a show
    warm_up_microphone: bool = True  # load the microphone's audio engine at start-up, so that the switch is instant
    trim_memory_every_s: float = 10.0  # hand freed heap memory back to the system this often (0: never; ~20 ms)
    canvas_background: Path | None = None
    restart_backoff_s: float = 1.0  # after a core failure, wait this long before restarting it


def recording_name(now: datetime | None = None) -> str:
    return f"NewsStudio-{(now or datetime.now()).strftime('%Y-%m-%d_%H-%M-%S')}.mp4"


def recover_recordings(folder: Path) -> list[Path]:
    """Turn partial recordings a crash left in ``folder`` into visible playable files (``studio.encode.recovery``:
    never over an existing file; unplayable leftovers removed with a note); returns the recovered files."""
    from studio.encode.recovery import RecoveryAction, recover_folder

    if not folder.is_dir():
        return []
    return [n.path for n in recover_folder(folder) if n.action is RecoveryAction.RECOVERED and n.path is not None]


def lower_thread_priority(nice: int = 10) -> None:
    """Make the calling thread yield the CPU to the core and the GUI (Linux: per-thread nice; elsewhere a no-op).

    On a 2-core machine the speech and anchor workers otherwise compete with the frames the producer watches."""
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
        import studio.encode.recorder  # noqa: F401  (PyAV's encoders and muxer)
        import studio.neural.mic  # noqa: F401
    except ImportError as exc:  # reported when the feature is used
        log.warning("warming imports: %s", exc)
    log.info("imports for recording and the microphone mode warmed in %.0f ms", (time.perf_counter() - t0) * 1e3)


class _Clock:
    """The program clock the script source and the preview share: the audio output, or the monotonic clock."""

    def __init__(self, program, settings: StudioSettings) -> None:
        from studio.pipeline.clock import AudioOutputClock, MonotonicClock

        self.inner = MonotonicClock()
        self.message = "No audio output (turned off): the preview runs on its own clock, silently."
        if settings.audio_output == AudioOutputMode.AUTO:
            try:
                self.inner = AudioOutputClock(program, settings.output_latency_s)
                self.message = self.inner.device_name
            except AudioDeviceError as exc:
                self.message = "No audio output: the preview runs on its own clock, silently."
                log.info("%s (%s)", self.message, exc)

    @property
    def source(self) -> ClockSource:
        return self.inner.source

    def now_s(self) -> float:
        return self.inner.now_s()

    def set_paused(self, paused: bool) -> None:
        self.inner.set_paused(paused)

    @property
    def paused(self) -> bool:
        c = self.inner
        return getattr(c, "_paused_at", None) is not None if c.source is ClockSource.MONOTONIC else c._paused

    def close(self) -> None:
        self.inner.close()


class StudioRuntime:
    """See the module docstring. Create, then call ``run()`` on a thread of its own."""

    def __init__(self, settings: StudioSettings | None = None,
                 on_event: Callable[[cmd.Event], None] = lambda e: None) -> None:
        self.settings = settings or StudioSettings()
        self._on_event = on_event
        self._commands: queue.Queue = queue.Queue()
        self.bus = TelemetryBus()
        self._state = RuntimeState.STARTING
        self._core_settings = self.settings.core
        self._anchor = None
        self._anchor_name = ""
        self._anchor_path: Path | None = None
        self._anchor_future: cf.Future | None = None
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="speech", initializer=lower_thread_priority)
        self._anchor_pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="anchor",
                                                  initializer=lower_thread_priority)
        self._default_voice = self.settings.default_voice
        self._audio_engine = self.settings.audio_engine
        self._speech: list[tuple[int, cf.Future]] = []  # (rundown row, speech future) not yet scheduled
        self._waiting: list[tuple[int, str, str, str]] = []  # (row, title, text, voice) not yet handed to the worker
        self._items: list = []  # ProgramItems scheduled by this show (rundown order)
        self._live = False
        self._shutdown = False
        self._last_error = ""
        self._mic_lost = False  # the capture's last reported state (``_poll_mic``)
        self._mode = PreviewMode.SCRIPT
        self._requested_mode = PreviewMode.SCRIPT
        self._mic = None  # MicCapture while a microphone is open (level meter, microphone mode)
        self._mic_name: str | None = None
        self._recorder = None
        self._record_folder: Path | None = None
        self._core = None
        self._core_thread: threading.Thread | None = None
        self._core_stop: threading.Event | None = None
        self._core_error: BaseException | None = None
        self._restart_at = 0.0
        self._trim_at = time.monotonic() + self.settings.trim_memory_every_s
        self._source = None
        self._motion = None
        self._program_source = None  # the script mode's source, kept across mode switches
        self._mic_source = None
        self._clock: _Clock | None = None
        self._preview = None
        self._frame_listener = None  # the UI's wake-up when a new frame is the latest (set_frame_listener)
        self._shows_mic = False
        self._streams: dict[str, object] = {}  # url -> the stream output on air

    # -- the UI's side (thread-safe, never blocks) --------------------------------------------------------------

    def submit(self, command) -> None:
        self._commands.put(command)

    def latest_frame(self):
        p = self._preview
        return p.latest_frame() if p is not None else None

    def set_frame_listener(self, listener) -> None:
        """``listener()`` is called (on the preview's present thread, so it must only post to its own thread) each
        time a new frame becomes the latest, so that a window can show it at once instead of at its next tick."""
        self._frame_listener = listener
        if self._preview is not None:
            self._preview.on_present = listener

    def note_displayed(self, frame) -> None:
        if self._preview is not None:
            self._preview.note_displayed(frame)

    def clock_s(self) -> float:
        return self._clock.now_s() if self._clock is not None else 0.0

    def latency_ms(self) -> tuple[float, float]:
        return self._preview.latency_ms() if self._preview is not None else (math.nan, math.nan)

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

    @property
    def core(self):
        """The core now running (read-only use: telemetry, its flags); None before the first anchor."""
        return self._core

    @property
    def anchor(self):
        """The anchor pack on air (read-only data), or None before the first."""
        return self._anchor

    @property
    def core_settings(self) -> CoreSettings:
        return self._core_settings

    def outputs(self) -> list:
        core = self._core
        return core.outputs() if core is not None else []

    def telemetry(self) -> TelemetrySnapshot:
        core, prev, rec = self._core, self._preview, self._recorder
        s = self._core_settings
        mic = self._mode is PreviewMode.MICROPHONE
        now = self.clock_s()
        row, word = (-1, -1) if mic else self._current_word(now)
        av, n_av = prev.av_offset_ms() if prev is not None else (math.nan, 0)
        lat = prev.latency_ms() if prev is not None else (math.nan, math.nan)
        sample = self.bus.latest("core")
        render_ms = math.nan
        if sample is not None and "generate" in sample.stages:
            gen, post = sample.stages["generate"], sample.stages.get("post")
            per = max(1, s.chunk_frames)
            render_ms = (gen.median_ms + (post.median_ms if post else 0.0)) / per
        src = self._mic_source if mic else self._program_source
        clock_s = (src.next_k / s.fps if mic and src is not None else now)
        return TelemetrySnapshot(
            taken_s=time.monotonic(), state=self._state, device=self._device_label(),
            anchor_name=self._anchor_name, clock_source=self._clock.source if self._clock else ClockSource.MONOTONIC,
            audio_output=self._clock.message if self._clock else "", clock_s=clock_s, fps_target=s.fps,
            fps_shown=prev.shown.rate() if prev is not None else 0.0,
            frames_produced=core.produced if core is not None else 0,
            frames_dropped=(core.dropped if core is not None else 0) + (prev.superseded if prev else 0),
            frames_late=prev.late if prev is not None else 0, render_ms_per_frame=render_ms,
            av_offset_ms=av, av_offset_samples=n_av, segment_index=row, word_index=word,
            recording_path=str(rec.path) if rec is not None else "",
            recording_s=rec.duration_s if rec is not None else 0.0, input_level_dbfs=self.input_level_dbfs(),
            last_error=self._last_error, mode=self._mode.value, latency_ms_median=lat[0], latency_ms_p95=lat[1])

    def _device_label(self) -> str:
        d = self._core_settings.device
        if d.startswith("cuda"):
            import torch

            return torch.cuda.get_device_name(torch.device(d))
        return "CPU"

    # -- the loop -------------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Blocking control loop; returns after ``Shutdown`` (the recording, if any, is closed into a playable
        file)."""
        try:
            self._start()
            while not self._shutdown:
                self._step()
        except BaseException as exc:
            log.exception("the studio runtime failed")
            self._emit(cmd.Error(f"The studio stopped: {exc}. Restart it; recordings so far are kept."))
            raise
        finally:
            self._teardown()

    def _emit(self, event) -> None:
        try:
            self._on_event(event)
        except Exception:  # a broken listener must not stop the studio
            log.exception("event listener failed on %s", type(event).__name__)

    def _set_state(self, state: RuntimeState) -> None:
        if state != self._state:
            self._state = state
            self._emit(cmd.StateChanged(state))

    def _start(self) -> None:
        from studio.pipeline.outputs import PreviewOutput
        from studio.pipeline.sources import ProgramSource

        self._emit(cmd.StateChanged(self._state))
        s = self.settings
        self._program_source = ProgramSource(clock=None, endless=True, gap_ms=s.segment_gap_ms,
                                             lead_ms=s.speech_lead_ms)
        self._clock = _Clock(self._program_source.program, s)
        self._program_source.clock = self._clock
        self._program_source.live = True
        self._emit(cmd.AudioOutputStatus(self._clock.source, self._clock.message))
        self._preview = PreviewOutput(clock=self._clock)
        self._preview.on_present = self._frame_listener
        self._pool.submit(self._list_voices)
        self._anchor_pool.submit(_warm_imports)
        if self.settings.warm_up_microphone:  # before the anchor, so before the core: nothing on air to disturb
            self._anchor_pool.submit(warm_microphone, self._audio_engine)

    def _list_voices(self) -> None:
        from studio.speech import list_voices

        try:
            voices = tuple(list_voices())
        except Exception as exc:  # a broken engine must not hide the others; listed as none
            log.exception("listing voices failed")
            self._emit(cmd.Error(f"No voices could be listed ({exc}); check the speech packages."))
            return
        self._emit(cmd.VoicesListed(voices))
        if self.settings.warm_up_voice and any(v.name == self._default_voice for v in voices):
            try:
                self._prepare("Ready.", self._default_voice, "", -1)
            except StudioError as exc:
                log.warning("warming up %s failed: %s", self._default_voice, exc)

    def _teardown(self) -> None:
        self._stop_recording()
        for url in list(self._streams):
            self._stop_output(url)
        self._stop_core()
        if self._preview is not None:
            self._preview.close()
        for _, fut in self._speech:
            fut.cancel()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._anchor_pool.shutdown(wait=True, cancel_futures=True)
        if self._mic is not None:
            self._mic.stop()
        if self._clock is not None:
            self._clock.close()
        self._state = RuntimeState.STOPPED
        self._emit(cmd.StateChanged(RuntimeState.STOPPED))

    def _step(self) -> None:
        self._poll_anchor()
        self._poll_core()
        self._poll_mic()
        self._poll_heap()
        now = self.clock_s()
        self._poll_speech(now)
        self._update_state(now)
        try:
            c = self._commands.get(timeout=0.02)
        except queue.Empty:
            return
        self._handle(c)
        while not self._shutdown:
            try:
                self._handle(self._commands.get_nowait())
            except queue.Empty:
                break

    # -- the core ---------------------------------------------------------------------------------------------------

    def _start_core(self) -> None:
        """(Re)start the core on the current source, motion, anchor, settings and outputs."""
        from studio.pipeline.factory import make_core, usable_here
        from studio.pipeline.motion import ProgramMotion
        from studio.pipeline.post import CanvasStyle

        if self._anchor is None:
            return
        self._stop_core()
        s = self._core_settings = replace(self._core_settings, optimizations=usable_here(
            self._core_settings.optimizations, self._core_settings.engine, self._core_settings.device))
        if self._mode is PreviewMode.MICROPHONE:
            source, motion = self._mic_source, self._motion
            self._preview.set_clock(None)
        else:
            if not isinstance(self._motion, ProgramMotion):
                self._motion = ProgramMotion(audio_engine=self._audio_engine, seed=s.seed)
            source, motion = self._program_source, self._motion
            self._preview.set_clock(self._clock)
        outputs = [self._preview] + ([self._recorder] if self._recorder is not None else []) + list(
            self._streams.values())
        style = CanvasStyle(background_image=self.settings.canvas_background) \
            if self.settings.canvas_background else None
        core = make_core(source, motion, s, self._anchor, outputs, bus=self.bus, canvas_style=style)
        core.warm()
        for note in core.pool.engine_notes:  # which compiled engine runs, or why eager
            self._emit(cmd.Notice(note))
        stop = threading.Event()

        def work() -> None:
            try:
                core.run(stop)
            except BaseException as exc:  # reported by the control loop, which restarts the core
                log.exception("the core failed")
                self._core_error = exc

        self._core, self._core_stop, self._core_error = core, stop, None
        self._core_thread = threading.Thread(target=work, name="core", daemon=True)
        self._core_thread.start()

    def _stop_core(self) -> None:
        if self._core_thread is None:
            return
        self._core_stop.set()
        self._core_thread.join(timeout=30)
        if self._core_thread.is_alive():
            log.error("the core did not stop within 30 s")
        core = self._core
        self._core_thread = None
        if core is not None:
            core.pool.close()
        self._trim_at = min(self._trim_at, time.monotonic() + 2.0)

    def _poll_heap(self) -> None:
        """Hand freed memory back every ``trim_memory_every_s``, and soon after a core stopped (its engines' buffers
        are free then): over a day on air the resident size then follows what is in use."""
        from studio.pipeline import heap

        every = self.settings.trim_memory_every_s
        now = time.monotonic()
        if every <= 0 or now < self._trim_at:
            return
        self._trim_at = now + every
        ms = heap.trim()
        if math.isfinite(ms):
            log.debug("heap trimmed in %.1f ms", ms)

    def _poll_mic(self) -> None:
        """Say when the microphone stops delivering (device unplugged, sound server gone) and when it is back: the
        capture's watchdog reopens it on its own, the producer hears both."""
        from studio.audio.capture import CaptureStatus

        mic = self._mic
        if mic is None:
            return
        lost = mic.status is CaptureStatus.DEVICE_LOST
        if lost == self._mic_lost:
            return
        self._mic_lost = lost
        name = mic.device.name if mic.device else "default"
        if lost:
            self._emit(cmd.MicrophoneStatus(False, name, mic.last_error or f"Microphone '{name}' was lost; retrying."))
        else:
            self._emit(cmd.MicrophoneStatus(True, name, "listening again"))

    def _poll_core(self) -> None:
        rec, core = self._recorder, self._core
        why = next((w for o, w in list(core.failed_outputs) if o is rec), None) if core and rec else None
        if why is not None:  # the core took the recorder out of the program: the producer hears now, not at stop
            self._recorder = None
            try:
                rec.close()  # keeps what was written where the encoder still can
            except Exception as exc:  # the error that failed it, again
                log.info("closing the failed recording: %s", exc)
            self._emit(cmd.RecordingFailed(_with_salvage(why, rec)))
        t = self._core_thread
        if t is None or t.is_alive():
            if self._restart_at and time.monotonic() >= self._restart_at:
                self._restart_at = 0.0
                self._start_core()
            return
        err, self._core_error = self._core_error, None  # its traceback holds the failed core's frames
        core = self._core
        self._core_thread = None
        if core is not None:
            for out, why in core.failed_outputs:
                if out is self._recorder:
                    self._recorder = None
                    self._emit(cmd.RecordingFailed(_with_salvage(why, out)))
            core.pool.close()  # the failed core's engines go now, not with the next start
            self._core = None
        if err is None or self._shutdown:
            return
        msg = (f"The presenter pipeline failed ({type(err).__name__}: {err}); it restarts in "
               f"{self.settings.restart_backoff_s:g} s. Recordings are kept.")
        self._last_error = msg
        self._emit(cmd.Error(msg))
        self._restart_at = time.monotonic() + self.settings.restart_backoff_s

    # -- commands ---------------------------------------------------------------------------------------------------

    def _handle(self, c) -> None:
        log.debug("command %s", c)
        try:
            if isinstance(c, cmd.Shutdown):
                self._shutdown = True
            elif isinstance(c, cmd.LoadAnchor):
                self._load_anchor(c.path)
            elif isinstance(c, cmd.GoLive):
                self._go_live(c)
            elif isinstance(c, cmd.Stop):
                self._stop_live()
            elif isinstance(c, cmd.SetPaused):
                self._clock.set_paused(c.paused)
            elif isinstance(c, cmd.StartRecording):
                self._start_recording(c.folder)
            elif isinstance(c, cmd.StopRecording):
                self._stop_recording()
            elif isinstance(c, cmd.SetVoice):
                self._default_voice = c.voice
            elif isinstance(c, cmd.SetMicrophone):
                self._set_microphone(c.name)
            elif isinstance(c, cmd.SetMode):
                self._set_mode(c.mode)
            elif isinstance(c, cmd.SetAudioEngine):
                self._set_audio_engine(c.engine)
            elif isinstance(c, cmd.SetOptimizations):
                self._set_optimizations(frozenset(c.optimizations))
            elif isinstance(c, cmd.SetFormat):
                self._set_format(c.settings, c.background)
            elif isinstance(c, cmd.StartOutput):
                self._start_output(c.url, c.allow_remote)
            elif isinstance(c, cmd.StopOutput):
                self._stop_output(c.url)
            elif isinstance(c, cmd.RecoverRecordings):
                got = recover_recordings(c.folder)
                if got:
                    self._emit(cmd.RecordingsRecovered(tuple(got)))
            else:
                raise TypeError(f"unknown command {c!r}")
        except StudioError as exc:
            self._last_error = str(exc)
            self._emit(cmd.Error(str(exc)))

    def _set_optimizations(self, opts: frozenset) -> None:
        from studio.pipeline.factory import usable_here

        s = self._core_settings
        opts = usable_here(opts, s.engine, s.device)
        restart = {Optimization.ASYNC_PIPELINE, Optimization.CUDA_GRAPHS} & (opts ^ s.optimizations)
        self._core_settings = replace(s, optimizations=opts)
        if self._core is not None and not restart:
            self._core.set_optimizations(opts)
            self._core.s = replace(self._core.s, optimizations=opts)
        elif self._core is not None:
            self._start_core()

    def _set_format(self, settings: CoreSettings, background: Path | None) -> None:
        """A new picture format, engine or device: refused while on air or recording, and refused when this machine,
        measured now at that format, cannot keep up with its frame rate."""
        from studio.pipeline.factory import measure_format

        if self._live or self._recorder is not None:
            self._emit(cmd.FormatChanged(self._core_settings, "Stop the rundown and the recording first: the "
                                                              "picture format changes between shows."))
            return
        settings = replace(settings, optimizations=self._core_settings.optimizations,
                           measure_baseline=self._core_settings.measure_baseline)
        if self._anchor is not None:
            self._stop_core()  # measure on a quiet machine: the idle presenter would take half of it
            try:
                ms = measure_format(settings, self._anchor)
            except StudioError as exc:
                self._start_core()
                self._emit(cmd.FormatChanged(self._core_settings, f"Not applied: {exc}"))
                return
            budget = 1000.0 / settings.fps
            if ms > 0.9 * budget:
                self._start_core()
                w, h = settings.output_size
                self._emit(cmd.FormatChanged(self._core_settings, (
                    f"Not applied: at {w} x {h} this machine measured {ms:.0f} ms per frame just now; "
                    f"{settings.fps:g} fps needs under {0.9 * budget:.0f} ms. Choose a smaller picture, a lower "
                    "frame rate or sparser keyframes.")))
                return
        self._core_settings = settings
        self.settings = replace(self.settings, canvas_background=background)
        self._preview.clear()
        if self._anchor is not None:
            self._start_core()
        self._emit(cmd.FormatChanged(self._core_settings, ""))

    # anchor

    def _load_anchor(self, path: Path | None) -> None:
        from studio.pipeline.factory import presenter_px
        from studio.presenter.anchor import build_anchor

        if self._anchor_future is not None:
            self._anchor_future.cancel()
        self._anchor_path = path
        progress = lambda f, m: self._emit(cmd.AnchorProgress(float(f), str(m)))  # noqa: E731
        self._anchor_future = self._anchor_pool.submit(build_anchor, path, progress=progress,
                                                       output_px=presenter_px(self._core_settings))

    def _poll_anchor(self) -> None:
        fut = self._anchor_future
        if fut is None or not fut.done():
            return
        self._anchor_future = None
        path = self._anchor_path
        try:
            anchor = fut.result()
        except cf.CancelledError:
            return
        except (StudioError, ValueError, OSError) as exc:
            msg = str(exc) if isinstance(exc, StudioError) else f"Cannot use this portrait ({exc}): try another."
            self._last_error = msg
            self._emit(cmd.AnchorFailed(path, msg, self._anchor_name))
            return
        self._anchor = anchor
        self._anchor_name = anchor.name
        try:
            self._start_core()
        except StudioError as exc:
            self._last_error = str(exc)
            self._emit(cmd.AnchorFailed(path, str(exc), ""))
            return
        self._emit(cmd.AnchorLoaded(anchor.name, path))
        if self._requested_mode != self._mode:  # the microphone mode was asked for before there was a face
            self._set_mode(self._requested_mode)

    # the rundown

    def _go_live(self, c: cmd.GoLive) -> None:
        if self._mode is PreviewMode.MICROPHONE:  # going live with the rundown ends the microphone mode
            self._set_mode(PreviewMode.SCRIPT)
        self._stop_live(quiet=True)
        rows = c.rundown_rows or tuple(range(len(c.segments)))
        self._waiting = [(row, seg.title, seg.text, seg.voice or self._default_voice)
                         for row, seg in zip(rows, c.segments)]
        self._submit_speech()
        self._live = bool(self._speech)
        self._update_state(self.clock_s())

    def _submit_speech(self) -> None:
        """Keep the speech worker one segment ahead: the next is prepared while the current one plays (all of them
        at once would take the CPU from the renderer on a small machine)."""
        while self._waiting and len(self._speech) < 2:
            row, title, text, voice = self._waiting.pop(0)
            self._speech.append((row, self._pool.submit(self._prepare, text, voice, title, row)))

    def _prepare(self, text: str, voice: str, title: str, row: int):
        """Speech worker: synthesize and make the program item (both audio rates)."""
        from studio.pipeline.sources import item_from_utterance
        from studio.speech import SpeechSettings, synthesize

        # one thread: the other core renders; 48 kHz: the program's rate
        utt = synthesize(text, voice, SpeechSettings(onnx_threads=1), sample_rate_hz=48000)
        for w in getattr(utt, "warnings", ()):
            self._emit(cmd.Error(f"Segment {row + 1}: {w}"))
        item = item_from_utterance(utt, OnAir(title=title, row=row))
        return item

    def _stop_live(self, quiet: bool = False) -> None:
        for _, fut in self._speech:
            fut.cancel()
        self._speech.clear()
        self._waiting.clear()
        src = self._program_source
        if src is not None:
            fps = self._core_settings.fps
            slot = src.cut(int(self.clock_s() * fps) + 1)
            self._items = [x for x in self._items if x.start_slot < slot]  # a cut segment never starts on air
        self._live = False
        if not quiet:
            self._update_state(self.clock_s())

    def _poll_speech(self, now: float) -> None:
        """Place prepared speech on the timeline, in rundown order, as soon as it is ready."""
        while self._speech and self._speech[0][1].done():
            row, fut = self._speech.pop(0)
            try:
                item = fut.result()
            except cf.CancelledError:
                continue
            except StudioError as exc:
                self._emit(cmd.SegmentFailed(row, str(exc)))
                continue
            except Exception as exc:  # the speech engine failed in a way it did not translate
                self._emit(cmd.SegmentFailed(row, f"Speech failed ({exc}); try another voice."))
                continue
            if self._mode is PreviewMode.MICROPHONE:
                continue
            self._program_source.schedule(item)
            self._items.append(item)
            log.info("segment %d scheduled at slot %d (%.2f s long)", row, item.start_slot, item.duration_s)
        self._submit_speech()

    def _item_at(self, t_s: float):
        slot = int(t_s * self._core_settings.fps)
        for it in self._items:
            if it.start_slot <= slot < it.end_slot:
                return it
        return None

    def _current_word(self, t_s: float) -> tuple[int, int]:
        it = self._item_at(t_s)
        if it is None:
            return -1, -1
        starts = [w.start_s for w in it.words]
        return it.on_air.row, bisect_right(starts, t_s - it.start_slot / self._core_settings.fps) - 1

    def _update_state(self, now: float) -> None:
        fps = self._core_settings.fps
        it = self._item_at(now)
        if it is not None and not it.started:
            it.started = True
            from studio.speech.types import WordTiming  # noqa: F401  (events carry them)

            self._emit(cmd.SegmentStarted(it.on_air.row, it.text, tuple(it.words)))
        now_slot = int(now * fps)
        done = now_slot - 2 * round(fps)
        self._items = [x for x in self._items if x.end_slot > done]
        if self._program_source is not None and done > 0:
            self._program_source.prune(max(0, done - 10 * round(fps)))
        if self._live and not self._speech and not self._waiting and not any(x.end_slot > now_slot
                                                                              for x in self._items):
            self._live = False
            self._emit(cmd.RundownFinished())
        if self._anchor is None:
            state = RuntimeState.STARTING if self._anchor_future is not None else RuntimeState.NO_ANCHOR
        elif self._mode is PreviewMode.MICROPHONE:
            state = RuntimeState.MICROPHONE
        elif self._clock is not None and self._clock.paused:
            state = RuntimeState.PAUSED
        elif self._live:
            state = RuntimeState.LIVE if it is not None or any(x.start_slot > now_slot for x in self._items) \
                else RuntimeState.PREPARING
        else:
            state = RuntimeState.IDLE
        self._set_state(state)

    # -- stream outputs ---------------------------------------------------------------------------------------------

    def _start_output(self, url: str, allow_remote: bool) -> None:
        from studio.encode.streams import output_for_url

        url = url.strip()
        if not url or url in self._streams:
            return
        try:
            if allow_remote and url.startswith(("ws://", "http://")):
                from studio.encode.websocket import WebSocketOutput

                out = WebSocketOutput.from_url(url, allow_remote=True)
            else:
                out = output_for_url(url)
            if self._core is not None:
                self._core.add_output(out)
                out._opened = True  # type: ignore[attr-defined]
        except StudioError as exc:
            self._emit(cmd.OutputsChanged(tuple(self._streams), f"{url}: {exc}"))
            return
        self._streams[url] = out
        self._emit(cmd.OutputsChanged(tuple(self._streams), ""))

    def _stop_output(self, url: str) -> None:
        out = self._streams.pop(url, None)
        if out is None:
            return
        try:
            if self._core is not None:
                self._core.remove_output(out)
            else:
                out.close()
        except StudioError as exc:
            self._emit(cmd.OutputsChanged(tuple(self._streams), f"{url}: {exc}"))
            return
        self._emit(cmd.OutputsChanged(tuple(self._streams), ""))

    def output_stats(self) -> list:
        """(url, OutputStats) of every stream output (the Outputs panel polls it on the window's timer)."""
        return [(url, out.stats()) for url, out in list(self._streams.items())]

    # -- recording --------------------------------------------------------------------------------------------------

    def _start_recording(self, folder: Path) -> None:
        from studio.encode.recorder import RecorderOutput
        from studio.encode.settings import EncodeSettings
        from studio.errors import OutputPathError

        if self._recorder is not None:
            return
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise OutputPathError(f"The folder {folder} does not exist: choose another recording folder.")
        recovered = recover_recordings(folder)
        if recovered:
            self._emit(cmd.RecordingsRecovered(tuple(recovered)))
        path = folder / recording_name()
        n = 2
        while path.exists():
            path = folder / f"{path.stem.split('_n')[0]}_n{n}.mp4"
            n += 1
        self._record_folder = folder
        s = self.settings
        rec = RecorderOutput(path, fragmented=True, queue_frames=s.record_queue_frames,
                             settings=EncodeSettings(preset=s.record_preset, encoder_threads=s.record_threads))
        try:
            if self._core is not None:
                self._core.add_output(rec)
                rec._opened = True  # type: ignore[attr-defined]
        except StudioError as exc:
            self._emit(cmd.RecordingFailed(str(exc)))
            return
        self._recorder = rec
        self._emit(cmd.RecordingStarted(path))

    def _stop_recording(self) -> None:
        rec, self._recorder = self._recorder, None
        if rec is None:
            return
        duration_s = rec.duration_s
        try:
            if self._core is not None:
                path = self._core.remove_output(rec)
            else:
                path = rec.close()
        except Exception as exc:  # EncoderError, or what the encoder thread raised
            msg = str(exc) if isinstance(exc, StudioError) else f"Recording failed: {exc}"
            self._emit(cmd.RecordingFailed(_with_salvage(msg, rec)))
            return
        if path is None:
            self._emit(cmd.RecordingFailed("Nothing was recorded: record for longer."))
            return
        self._emit(cmd.RecordingStopped(Path(path), duration_s, rec.repeated))

    # -- microphone -------------------------------------------------------------------------------------------------

    def _set_microphone(self, name: str | None) -> None:
        from studio.audio.capture import MicCapture
        from studio.audio.settings import CaptureSettings

        mic_mode = self._mode is PreviewMode.MICROPHONE
        if mic_mode:
            self._set_mode(PreviewMode.SCRIPT, keep_request=True)
        self._mic_name = name
        if self._mic is not None:
            self._mic.stop()
            self._mic = None
        if name == "":
            self._emit(cmd.MicrophoneStatus(False, "", "Microphone off."))
            return
        mic = MicCapture(CaptureSettings(device=name))
        try:
            mic.start()
        except AudioDeviceError as exc:
            self._emit(cmd.MicrophoneStatus(False, "", str(exc)))
            return
        self._mic, self._mic_lost = mic, False
        self._emit(cmd.MicrophoneStatus(True, mic.device.name if mic.device else "default", "listening"))
        if mic_mode or self._requested_mode is PreviewMode.MICROPHONE:
            self._set_mode(PreviewMode.MICROPHONE)

    def _set_audio_engine(self, engine: AudioEngine) -> None:
        if engine == self._audio_engine:
            return
        self._audio_engine = engine
        from studio.pipeline.motion import ProgramMotion

        if isinstance(self._motion, ProgramMotion):
            self._motion.audio_engine = engine
        if self._mode is PreviewMode.MICROPHONE:  # restart the microphone mode with the new engine
            self._set_mode(PreviewMode.SCRIPT, keep_request=True)
            self._set_mode(PreviewMode.MICROPHONE)

    def _set_mode(self, mode: PreviewMode, keep_request: bool = False) -> None:
        """Switch what drives the presenter. A recording in progress continues into a new file in the same
        folder."""
        if not keep_request:
            self._requested_mode = mode
        if mode == self._mode:
            self._emit(cmd.ModeChanged(mode, self._mode, ""))
            return
        folder = self._record_folder if self._recorder is not None else None
        if folder is not None:
            self._stop_recording()
        message = ""
        if mode is PreviewMode.SCRIPT:
            self._stop_mic_mode()
            self._mode = PreviewMode.SCRIPT
            self._start_core()
        else:
            message = self._start_mic_mode()
        self._emit(cmd.ModeChanged(mode, self._mode, message))
        self._update_state(self.clock_s())
        if folder is not None:
            self._start_recording(folder)

    def _start_mic_mode(self) -> str:
        """Start the microphone mode; returns "" or, when it cannot run, why (the presenter keeps idling)."""
        from studio.audio.capture import list_input_devices
        from studio.pipeline.motion import MicMotion
        from studio.pipeline.sources import MicSource

        if self._anchor is None:
            return "Waiting for the anchor: the microphone mode starts when the face is ready."
        if self._mic is None:
            if self._mic_name == "":
                return "The microphone is off: choose one in the Microphone panel. The presenter keeps idling."
            if not list_input_devices():
                return "No input device: connect a microphone or start a sound server. The presenter keeps idling."
            self._set_microphone(self._mic_name)  # opens the device, then comes back here through _set_mode
            return "" if self._mode is PreviewMode.MICROPHONE else \
                "The microphone would not open. The presenter keeps idling."
        self._stop_live(quiet=True)  # the rundown stops speaking
        self._mic_source = MicSource(self._mic)
        self._motion = MicMotion(engine=self._audio_engine)
        self._mode = PreviewMode.MICROPHONE
        self._preview.clear()
        try:
            self._start_core()
        except StudioError as exc:
            self._mode = PreviewMode.SCRIPT
            self._start_core()
            return f"{exc} The presenter keeps idling."
        log.info("microphone mode on %s (%s engine)", self._mic.device.name if self._mic.device else "default",
                 self._audio_engine.value)
        return self._motion.note

    def _stop_mic_mode(self) -> None:
        if self._mode is not PreviewMode.MICROPHONE:
            return
        self._stop_core()
        if self._motion is not None:
            self._motion.close()
        self._motion = None
        self._mic_source = None
        self._preview.clear()


def _with_salvage(why: str, rec) -> str:
    """A recording's failure, and where what was recorded until then is kept (when the encoder could keep it)."""
    kept = getattr(rec, "salvaged", None)
    if kept is None:
        return why
    return f"{why} The recording up to that moment is kept in {kept}."
