"""The core's supervisor: starts, stops and restarts the one core (``studio.pipeline.core``) on its own thread.

It owns what the core runs on: the anchor (or the rundown's cast, whose anchors are rows of one generator call: the
script mode shows it), the source and motion of the mode on air (the rundown's program on the program clock, or the
microphone), the preview and the outputs other rooms attach (the recorder, streams). A new anchor or cast, engine or
picture format, a mode switch and the async flag restart the core on the same source and outputs;
the other optimization flags change live. A core that fails is reported, closed (its engines, canvas and buffers let go
at once) and restarted after a back-off that doubles with each failure in a row; after ``restart_attempts`` restarts
that failed too it stays stopped and says so (``Restarts``), until the producer changes what it runs on. It also hands
freed heap memory back to the system and assembles the telemetry snapshot.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path

from studio.audio.settings import AudioEngine
from studio.contracts import CastLayout
from studio.errors import StudioError
from studio.pipeline import commands as cmd
from studio.pipeline.commands import PreviewMode
from studio.pipeline.settings import CoreSettings, Optimization
from studio.pipeline.telemetry import ClockSource, RuntimeState, TelemetryBus, TelemetrySnapshot
from studio.runtime.clock import ProgramClock
from studio.runtime.events import Outbox
from studio.runtime.settings import StudioSettings

log = logging.getLogger(__name__)

RESTART_ON_CHANGE = frozenset({Optimization.ASYNC_PIPELINE, Optimization.CUDA_GRAPHS})  # flags a core is built with


class CoreSupervisor:
    """See the module docstring. ``open()`` before use, ``close()`` at the end; only the control loop calls it."""

    def __init__(self, settings: StudioSettings, outbox: Outbox, bus: TelemetryBus) -> None:
        self.settings = settings
        self.core_settings: CoreSettings = settings.core
        self.outbox = outbox
        self.bus = bus
        self.anchor = None
        self.cast: tuple | None = None  # the cast's anchor packs (two or more), shown in the script mode
        self.cast_layout = CastLayout.TWO_SHOT
        self.mode = PreviewMode.SCRIPT
        self.audio_engine: AudioEngine = settings.audio_engine
        self.motion = None
        self.program_source = None  # the script mode's source, kept across mode switches
        self.mic_source = None
        self.interview_source = None  # the interview's source (the guest's microphone and the host's turns)
        self.interview_cast: tuple | None = None  # the interview's (host, guest) packs at the cast's presenter size
        self.clock: ProgramClock | None = None
        self.preview = None
        self.frame_listener = None  # the UI's wake-up when a new frame is the latest
        self.shutting_down = False
        self.core = None
        self._attached: list = []  # outputs besides the preview, attached by other rooms
        self.look: tuple = (None, ())  # the programme's graphics and each rundown row's (set on going live)
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None
        self._error: str | None = None  # why the core's run failed, as text (``poll`` says why)
        self._restart_at = 0.0
        self._started_at = 0.0  # time.monotonic() when the core on air started
        self.restarts = Restarts(settings)
        self._trim_at = time.monotonic() + settings.trim_memory_every_s

    def open(self) -> None:
        from studio.pipeline.outputs import PreviewOutput
        from studio.pipeline.sources import ProgramSource

        s = self.settings
        self.program_source = ProgramSource(clock=None, endless=True, gap_ms=s.segment_gap_ms,
                                            lead_ms=s.speech_lead_ms)
        self.clock = ProgramClock(self.program_source.program, s)
        self.program_source.clock = self.clock
        self.program_source.live = True
        self.outbox.emit(cmd.AudioOutputStatus(self.clock.source, self.clock.message))
        self.preview = PreviewOutput(clock=self.clock)
        self.preview.on_present = self.frame_listener

    def close(self) -> None:
        self.stop_core()
        if self.preview is not None:
            self.preview.close()
        if self.clock is not None:
            self.clock.close()

    def set_look(self, graphics, rows, segments) -> None:
        """The programme's and the segments' graphics, on the canvas from the next chunk (``studio.graphics``)."""
        from studio.graphics.look import Graphics, rows_graphics

        self.look = (graphics or Graphics(), rows_graphics(rows, segments))
        if self.restarts.halted:  # a new look may be the fix (a logo that went missing): try again
            self.start_core()
        elif self.core is not None:  # also a core whose canvas is not open yet (just restarted for a cast)
            # an interview's rows are its speakers' straps: there only the programme's look changes
            self.core.post.set_graphics(self.look[0], None if self.mode is PreviewMode.INTERVIEW else self.look[1])

    def clock_s(self) -> float:
        """Programme time: the program clock's, or in an interview the microphone's timeline (its turns' slots)."""
        src = self.interview_source
        if self.mode is PreviewMode.INTERVIEW and src is not None and getattr(src, "fmt", None) is not None:
            return src.next_k / src.fmt.fps
        return self.clock.now_s() if self.clock is not None else 0.0

    def interview_settings(self, settings: CoreSettings | None = None) -> CoreSettings:
        """The core's settings for an interview: a two-shot of the host and the guest."""
        from studio.contracts import CastLayout
        from studio.pipeline.programme import programme_settings

        return programme_settings(settings or self.core_settings, 2, CastLayout.TWO_SHOT)

    # -- the core's life ----------------------------------------------------------------------------------------------

    def on_air(self) -> tuple[object, CoreSettings]:
        """The anchor pack the core runs on (the cast's packs in the script mode) and the core's settings for it."""
        from studio.pipeline.programme import programme_settings

        if self.cast is not None and self.mode is PreviewMode.SCRIPT:
            return self.cast, programme_settings(self.core_settings, len(self.cast), self.cast_layout)
        return self.anchor, self.core_settings

    def start_core(self, restart: bool = False) -> None:
        """(Re)start the core on the current source, motion, anchor (or cast), settings and outputs. ``restart``: the
        supervisor's own restart of a failed core; any other start is the producer's change, which gives a core that
        kept failing its restarts again. StudioError when it cannot start."""
        from studio.pipeline.factory import make_core, usable_here
        from studio.pipeline.post import CanvasStyle
        from studio.pipeline.cast_motion import motion_fits, programme_motion

        if not restart:
            self.restarts.reset()
            self._restart_at = 0.0
        if self.anchor is None:
            return
        self.stop_core()
        self.core_settings = replace(self.core_settings, optimizations=usable_here(
            self.core_settings.optimizations, self.core_settings.engine, self.core_settings.device))
        anchor, s = self.on_air()
        if self.mode is PreviewMode.MICROPHONE:
            source, motion = self.mic_source, self.motion
            self.preview.set_clock(None)
        elif self.mode is PreviewMode.INTERVIEW:
            source, motion, anchor = self.interview_source, self.motion, self.interview_cast
            s = self.interview_settings(s)
            self.preview.set_clock(None)
        else:
            if not motion_fits(self.motion, s.cast_size):  # one motion row per anchor
                self.motion = programme_motion(s.cast_size, self.audio_engine, s.seed)
            source, motion = self.program_source, self.motion
            self.preview.set_clock(self.clock)
        from studio.graphics.look import Graphics

        style = CanvasStyle(background_image=self.settings.canvas_background, graphics=self.look[0] or Graphics(),
                            segments=self.look[1])
        if self.mode is PreviewMode.INTERVIEW:
            from studio.pipeline.interview import interview_style

            style = interview_style(style, anchor[0].name, anchor[1].name)
        core = make_core(source, motion, s, anchor, [self.preview, *self._attached], bus=self.bus,
                         canvas_style=style)
        try:
            core.warm()
        except BaseException:
            core.close()
            raise
        for note in core.pool.engine_notes:  # which compiled engine runs, or why eager
            self.outbox.emit(cmd.Notice(note))
        stop = threading.Event()

        def work() -> None:
            try:
                core.run(stop)
            except BaseException as exc:  # reported by the control loop, which restarts the core
                self._error = _failure_text(exc, "the core failed")

        self.core, self._stop, self._error = core, stop, None
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=work, name="core", daemon=True)
        self._thread.start()

    def stop_core(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=30)
        if self._thread.is_alive():
            log.error("the core did not stop within 30 s")
        core = self.core
        self._thread = self.core = None
        if core is not None:
            core.close()
        self._trim_at = min(self._trim_at, time.monotonic() + 2.0)

    def poll(self) -> list:
        """Restart a failed core when its back-off is over; returns the outputs a core that ended had taken out of
        the program, as (output, why).

        A failure is kept as text: the error itself holds its traceback, whose frames hold the failed core (its
        engines, canvas and chunks) for as long as anything keeps the error, a log record included."""
        t = self._thread
        err, failed, ran_s = None, [], 0.0
        if t is None or t.is_alive():
            if self._restart_at and time.monotonic() >= self._restart_at and not self.shutting_down:
                self._restart_at = 0.0
                try:
                    self.start_core(restart=True)
                except Exception as exc:  # a restart that cannot start is one more failure, never the studio's end
                    err = _failure_text(exc, "the core did not restart")
        else:
            err, self._error = self._error, None
            core, self._thread = self.core, None
            if core is not None:
                failed = list(core.failed_outputs)
                core.close()  # the failed core's engines and buffers go now, not with the next start
                self.core = None
            ran_s = time.monotonic() - self._started_at
        if err is not None and not self.shutting_down:
            message, wait_s = self.restarts.failed(err, ran_s)
            self.outbox.fail(message)
            if wait_s is not None:
                self._restart_at = time.monotonic() + wait_s
        return failed

    def failure_of(self, out) -> str | None:
        """Why the running core took ``out`` out of the program, or None while it is in."""
        core = self.core
        return next((w for o, w in list(core.failed_outputs) if o is out), None) if core is not None else None

    def trim_heap(self) -> None:
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

    # -- outputs other rooms put on air -------------------------------------------------------------------------------

    def attach(self, out) -> None:
        """Put ``out`` on air now (opened at once) and in every core started later; StudioError when it cannot
        open."""
        if self.core is not None:
            self.core.add_output(out)
        self._attached.append(out)

    def detach(self, out):
        """Take ``out`` off air and close it; returns what its ``close()`` returns (a recording's path)."""
        if out in self._attached:
            self._attached.remove(out)
        if self.core is not None:
            return self.core.remove_output(out)
        return out.close()

    def forget(self, out) -> None:
        """Drop ``out`` (already taken out of the program by a failing core) without closing it."""
        if out in self._attached:
            self._attached.remove(out)

    # -- what drives the presenter ------------------------------------------------------------------------------------

    def set_anchor(self, anchor) -> None:
        self.anchor = anchor
        self.start_core()

    def set_cast(self, packs: tuple | None, layout: CastLayout) -> None:
        """The cast's anchor packs (None: the one anchor) shown as ``layout``, from a core started now. A cast the
        core cannot start with (an engine that draws one anchor) raises StudioError with what was on the programme
        back on it: the preview never goes black over a refused change."""
        before = (self.cast, self.cast_layout)
        self.cast, self.cast_layout = packs, layout
        self.preview.clear()  # the picture changes shape
        try:
            self.start_core()
        except StudioError:
            self.cast, self.cast_layout = before
            self.preview.clear()
            self.start_core()
            raise

    def drive_by_microphone(self, mic) -> str:
        """The microphone drives the presenter; returns the motion's note (which engine), or raises StudioError
        with the script mode back on air."""
        from studio.pipeline.motion import MicMotion
        from studio.pipeline.sources import MicSource

        self._stop_listening()
        self.mic_source = MicSource(mic)
        self.motion = MicMotion(engine=self.audio_engine)
        self.mode = PreviewMode.MICROPHONE
        self.preview.clear()
        try:
            self.start_core()
        except StudioError:
            self.mode = PreviewMode.SCRIPT
            self.start_core()
            raise
        return self.motion.note

    def drive_by_interview(self, mic, cast: tuple) -> str:
        """An interview: the host (``cast[0]``) speaks the rundown's turns, the guest (``cast[1]``) follows the
        microphone; returns the motion's note, or raises StudioError with the script mode back on air."""
        from studio.pipeline.interview import InterviewMotion, InterviewSource
        from studio.pipeline.sources import MicSource

        self._stop_listening()
        self.mic_source = MicSource(mic)
        self.interview_source = InterviewSource(self.mic_source, title="")
        self.interview_source.on_place = self._play_to_guest
        self.motion = InterviewMotion(self.audio_engine, seed=self.core_settings.seed)
        self.interview_cast = cast
        self.mode = PreviewMode.INTERVIEW
        self.preview.clear()
        try:
            self.start_core()
        except StudioError:
            self.drive_by_script()
            raise
        return self.motion.note

    def set_interview_cast(self, cast: tuple) -> None:
        """New packs for the interview on air (a new host portrait, guest or size)."""
        self.interview_cast = cast
        if self.mode is PreviewMode.INTERVIEW:
            self.start_core()

    def _play_to_guest(self, item) -> None:
        """A host turn going on air in an interview is played on the program clock's output too (the guest hears
        the question; the microphone is never played back)."""
        if self.clock is not None and self.program_source is not None:
            self.program_source.program.add(int(round(self.clock.now_s() * self.program_source.program.rate_hz)),
                                            item.program_audio)

    def drive_by_script(self) -> None:
        self._stop_listening()
        self.start_core()

    def _stop_listening(self) -> None:
        """End the microphone or interview mode (its core, motion and sources): the script mode, not started."""
        if self.mode.listens:
            self.stop_core()
            if self.motion is not None:
                self.motion.close()
            self.motion = None
            self.mic_source = self.interview_source = None
            self.preview.clear()
        self.mode = PreviewMode.SCRIPT

    def set_audio_engine(self, engine: AudioEngine) -> None:
        from studio.pipeline.motion import ProgramMotion

        self.audio_engine = engine
        for m in getattr(self.motion, "members", [self.motion]):  # a cast's motion: one ProgramMotion an anchor
            if isinstance(m, ProgramMotion):
                m.audio_engine = engine

    # -- the core's settings ------------------------------------------------------------------------------------------

    def set_optimizations(self, opts: frozenset) -> None:
        from studio.pipeline.factory import usable_here

        s = self.core_settings
        opts = usable_here(opts, s.engine, s.device)
        restart = RESTART_ON_CHANGE & (opts ^ s.optimizations)
        self.core_settings = replace(s, optimizations=opts)
        if self.core is not None and not restart:
            self.core.set_optimizations(opts)
            self.core.s = replace(self.core.s, optimizations=opts)
        elif self.core is not None:
            self.start_core()

    def set_format(self, settings: CoreSettings, background: Path | None, busy: bool) -> None:
        """A new picture format, engine or device: refused while ``busy`` (on air or recording), and refused when
        this machine, measured now at that format, cannot keep up with its frame rate."""
        from studio.pipeline.factory import measure_format

        if busy:
            self._format_changed("Stop the rundown and the recording first: the picture format changes between "
                                 "shows.")
            return
        settings = replace(settings, optimizations=self.core_settings.optimizations,
                           measure_baseline=self.core_settings.measure_baseline)
        if self.anchor is not None and self.settings.check_format_speed:
            self.stop_core()  # measure on a quiet machine: the idle presenter would take half of it
            try:
                ms = measure_format(*self._measured(settings))
            except StudioError as exc:
                self.start_core()
                self._format_changed(f"Not applied: {exc}")
                return
            budget_ms = 0.9 * 1000.0 / settings.fps
            if ms > budget_ms:
                self.start_core()
                w, h = settings.output_size
                self._format_changed(
                    f"Not applied: at {w} x {h} this machine measured {ms:.0f} ms per frame just now; "
                    f"{settings.fps:g} fps needs under {budget_ms:.0f} ms. Choose a smaller picture, a lower "
                    "frame rate or sparser keyframes.")
                return
        self.core_settings = settings
        self.settings = replace(self.settings, canvas_background=background)
        self.preview.clear()
        if self.anchor is not None:
            self.start_core()
        self._format_changed("")

    def _measured(self, settings: CoreSettings) -> tuple[CoreSettings, object]:
        """What a new format is measured with: the cast on the programme (its settings), or the one anchor."""
        from studio.pipeline.programme import programme_settings

        if self.cast is not None and self.mode is PreviewMode.SCRIPT:
            return programme_settings(settings, len(self.cast), self.cast_layout), self.cast
        return settings, self.anchor

    def _format_changed(self, message: str) -> None:
        self.outbox.emit(cmd.FormatChanged(self.core_settings, message))

    # -- telemetry ----------------------------------------------------------------------------------------------------

    def telemetry(self, state: RuntimeState, anchor_name: str, word: tuple[int, int], recorder,
                  input_level_dbfs: float) -> TelemetrySnapshot:
        """One snapshot; ``word`` is the (rundown row, word) being spoken, ``recorder`` the recording or None."""
        core, prev, rec, s = self.core, self.preview, recorder, self.core_settings
        mic = self.mode.listens
        av, n_av = prev.av_offset_ms() if prev is not None else (math.nan, 0)
        lat = prev.latency_ms() if prev is not None else (math.nan, math.nan)
        sample = self.bus.latest("core")
        render_ms = math.nan
        if sample is not None and "generate" in sample.stages:
            gen, post = sample.stages["generate"], sample.stages.get("post")
            render_ms = (gen.median_ms + (post.median_ms if post else 0.0)) / max(1, s.chunk_frames)
        src = self.mic_source if mic else self.program_source
        clock_s = src.next_k / s.fps if mic and src is not None else self.clock_s()
        return TelemetrySnapshot(
            taken_s=time.monotonic(), state=state, device=self.device_label(), anchor_name=anchor_name,
            clock_source=self.clock.source if self.clock else ClockSource.MONOTONIC,
            audio_output=self.clock.message if self.clock else "", clock_s=clock_s, fps_target=s.fps,
            fps_shown=prev.shown.rate() if prev is not None else 0.0,
            frames_produced=core.produced if core is not None else 0,
            frames_dropped=(core.dropped if core is not None else 0) + (prev.superseded if prev else 0),
            frames_late=prev.late if prev is not None else 0, render_ms_per_frame=render_ms,
            av_offset_ms=av, av_offset_samples=n_av, segment_index=word[0], word_index=word[1],
            recording_path=str(rec.path) if rec is not None else "",
            recording_s=rec.duration_s if rec is not None else 0.0, input_level_dbfs=input_level_dbfs,
            last_error=self.outbox.last_error, mode=self.mode.value, latency_ms_median=lat[0],
            latency_ms_p95=lat[1])

    def device_label(self) -> str:
        d = self.core_settings.device
        if d.startswith("cuda"):
            import torch

            return torch.cuda.get_device_name(torch.device(d))
        return "CPU"


class Restarts:
    """When a failed core restarts: after a back-off that doubles with each failure in a row, up to
    ``restart_backoff_max_s``, at most ``restart_attempts`` times; then the core stays stopped (``halted`` says why)
    until the producer changes what it runs on (``reset``). A core that ran ``restart_reset_s`` before failing starts
    the count again."""

    def __init__(self, settings: StudioSettings) -> None:
        self.settings = settings
        self.failures = 0  # in a row
        self.halted = ""  # why the core stays stopped; "" while it runs or restarts

    def reset(self) -> None:
        self.failures, self.halted = 0, ""

    def failed(self, err: str, ran_s: float) -> tuple[str, float | None]:
        """A core failed with ``err`` ("Type: message") after running ``ran_s``: what the producer is told, and the
        wait before its restart (None: no restart, halted)."""
        s = self.settings
        if ran_s >= s.restart_reset_s:
            self.failures = 0
        self.failures += 1
        if self.failures > s.restart_attempts:
            self.halted = (f"The presenter pipeline failed {self.failures} times in a row ({err}). It is stopped: fix "
                           "the cause, then go live, load an anchor or change the picture format to start it again. "
                           "Recordings are kept.")
            log.error("the core is stopped after %d failures in a row", self.failures)
            return self.halted, None
        wait_s = min(s.restart_backoff_max_s, s.restart_backoff_s * 2 ** (self.failures - 1))
        return (f"The presenter pipeline failed ({err}); it restarts in {wait_s:g} s (restart {self.failures} of "
                f"{s.restart_attempts}). Recordings are kept."), wait_s


def _failure_text(exc: BaseException, what: str) -> str:
    """Log ``exc`` with its traceback as text and return "Type: message". Text only, in the record too: a record
    that keeps the error (a log window, the test runner's capture) keeps the failed core through its frames."""
    log.error("%s\n%s", what, "".join(traceback.format_exception(exc)).rstrip())
    return f"{type(exc).__name__}: {exc}"
