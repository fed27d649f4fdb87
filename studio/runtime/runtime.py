"""The studio runtime: the command loop behind the window, routing each command to the room that handles it.

``StudioRuntime.run()`` is a blocking control loop (the window runs it inside a QThread). The UI talks to it only
through command objects (``submit``) and hears back through frozen events (``studio.pipeline.commands``) handed to a
callback; frames and telemetry are pulled (``latest_frame()``, ``telemetry()``, the bus), never pushed per frame.

The rooms, one module each in this package:
- ``supervisor``: the core's life (start, stop, restart after a failure), what it runs on, format and optimization
  changes, heap trimming, telemetry;
- ``anchor``: the face, built from a portrait on a worker;
- ``cast``: the rundown's cast of two or more on the programme, their faces built on a worker;
- ``rundown``: speech scheduling and the teleprompter's place;
- ``recording``: the program into MP4, and recovery of what a crash cut short;
- ``microphone``: the input device, the microphone mode and the interview mode;
- ``interview``: the interview's guest and the faces of its cast of two;
- ``outputs``: the live streams.
A failing stage never ends the studio: the error is reported and the core restarts.
"""

from __future__ import annotations

import logging
import math
import queue
from typing import Callable

from studio.errors import StudioError
from studio.pipeline import commands as cmd
from studio.pipeline.commands import PreviewMode
from studio.pipeline.motion import warm_microphone
from studio.pipeline.settings import CoreSettings
from studio.pipeline.telemetry import RuntimeState, TelemetryBus, TelemetrySnapshot
from studio.runtime.anchor import AnchorRoom
from studio.runtime.cast import CastRoom
from studio.runtime.events import Outbox
from studio.runtime.interview import InterviewRoom
from studio.runtime.microphone import MicrophoneRoom
from studio.runtime.outputs import LiveOutputsRoom
from studio.runtime.recording import RecordingRoom
from studio.runtime.rundown import RundownRoom
from studio.runtime.settings import StudioSettings
from studio.runtime.supervisor import CoreSupervisor
from studio.runtime.workers import warm_imports

log = logging.getLogger(__name__)


class StudioRuntime:
    """See the module docstring. Create, then call ``run()`` on a thread of its own."""

    def __init__(self, settings: StudioSettings | None = None,
                 on_event: Callable[[cmd.Event], None] = lambda e: None) -> None:
        settings = settings or StudioSettings()
        self._commands: queue.Queue = queue.Queue()
        self._state = RuntimeState.STARTING
        self._shutdown = False
        self.bus = TelemetryBus()
        self.outbox = Outbox(on_event)
        self.supervisor = CoreSupervisor(settings, self.outbox, self.bus)
        self.anchors = AnchorRoom(self.supervisor, self.outbox)
        self.rundown = RundownRoom(settings, self.supervisor, self.outbox)
        self.cast = CastRoom(self.supervisor, self.outbox)
        self.rundown.hold = lambda: self.cast.building  # a show waits for its cast's faces
        self.recording = RecordingRoom(settings, self.supervisor, self.outbox)
        self.streams = LiveOutputsRoom(self.supervisor, self.outbox)
        self.interview = InterviewRoom(self.supervisor, self.anchors, self.outbox)
        self.microphone = MicrophoneRoom(self.supervisor, self.rundown, self.recording, self.outbox, self.interview,
                                         on_mode_changed=lambda: self._update_state(self.clock_s()))
        self.routes: dict[type, Callable] = {  # command type -> the room that handles it
            cmd.Shutdown: self._on_shutdown,
            cmd.LoadAnchor: lambda c: self.anchors.load(c.path),
            cmd.GoLive: self._on_go_live,
            cmd.SetCast: lambda c: self.cast.set(c.members, c.layout),
            cmd.Stop: self._on_stop,
            cmd.SetPaused: lambda c: self.supervisor.clock.set_paused(c.paused),
            cmd.StartRecording: lambda c: self.recording.start(c.folder),
            cmd.StopRecording: lambda c: self.recording.stop(),
            cmd.RecoverRecordings: lambda c: self.recording.recover(c.folder),
            cmd.SetVoice: lambda c: setattr(self.rundown, "default_voice", c.voice),
            cmd.SetMicrophone: lambda c: self.microphone.select(c.name),
            cmd.SetMode: lambda c: self.microphone.set_mode(c.mode),
            cmd.SetGuestPortrait: lambda c: self.interview.set_guest(c.path),
            cmd.SetAudioEngine: lambda c: self.microphone.set_audio_engine(c.engine),
            cmd.SetOptimizations: lambda c: self.supervisor.set_optimizations(frozenset(c.optimizations)),
            cmd.SetFormat: self._on_set_format,
            cmd.StartOutput: lambda c: self.streams.start(c.url, c.allow_remote),
            cmd.StopOutput: lambda c: self.streams.stop(c.url),
        }

    # -- the UI's side (thread-safe, never blocks) --------------------------------------------------------------

    def submit(self, command) -> None:
        self._commands.put(command)

    @property
    def settings(self) -> StudioSettings:
        return self.supervisor.settings

    @property
    def core(self):
        """The core now running (read-only use: telemetry, its flags); None before the first anchor."""
        return self.supervisor.core

    @property
    def anchor(self):
        """The anchor pack on air (read-only data), or None before the first."""
        return self.supervisor.anchor

    @property
    def core_settings(self) -> CoreSettings:
        return self.supervisor.core_settings

    def latest_frame(self):
        p = self.supervisor.preview
        return p.latest_frame() if p is not None else None

    def set_frame_listener(self, listener) -> None:
        """``listener()`` is called (on the preview's present thread, so it must only post to its own thread) each
        time a new frame becomes the latest, so that a window can show it at once instead of at its next tick."""
        self.supervisor.frame_listener = listener
        if self.supervisor.preview is not None:
            self.supervisor.preview.on_present = listener

    def note_displayed(self, frame) -> None:
        if self.supervisor.preview is not None:
            self.supervisor.preview.note_displayed(frame)

    def clock_s(self) -> float:
        return self.supervisor.clock_s()

    def latency_ms(self) -> tuple[float, float]:
        p = self.supervisor.preview
        return p.latency_ms() if p is not None else (math.nan, math.nan)

    def input_level_dbfs(self) -> float:
        return self.microphone.input_level_dbfs()

    def outputs(self) -> list:
        core = self.supervisor.core
        return core.outputs() if core is not None else []

    def output_stats(self) -> list:
        return self.streams.stats()

    def telemetry(self) -> TelemetrySnapshot:
        mic = self.supervisor.mode is PreviewMode.MICROPHONE
        word = (-1, -1) if mic else self.rundown.current_word(self.clock_s())
        return self.supervisor.telemetry(self._state, self.anchors.name, word, self.recording.recorder,
                                         self.microphone.input_level_dbfs())

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
            self.outbox.emit(cmd.Error(f"The studio stopped: {exc}. Restart it; recordings so far are kept."))
            raise
        finally:
            self._teardown()

    def _start(self) -> None:
        self.outbox.emit(cmd.StateChanged(self._state))
        self.supervisor.open()
        self.rundown.open()
        self.anchors.background(warm_imports)
        if self.settings.warm_up_microphone:  # before the anchor, so before the core: nothing on air to disturb
            self.anchors.background(warm_microphone, self.supervisor.audio_engine)

    def _teardown(self) -> None:
        self.recording.stop()
        self.streams.stop_all()
        self.supervisor.close()
        self.rundown.close()
        self.anchors.close()
        self.cast.close()
        self.microphone.close()
        self._state = RuntimeState.STOPPED
        self.outbox.emit(cmd.StateChanged(RuntimeState.STOPPED))

    def _step(self) -> None:
        if self.anchors.poll():
            self.interview.refresh()  # an interview on air gets the new host's face
            self.microphone.resume_requested()  # the microphone mode was asked for before there was a face
        self.cast.poll()
        if self.interview.poll():
            self.microphone.resume_requested()  # the interview was asked for before its faces were ready
        self.recording.poll()
        for out, why in self.supervisor.poll():
            self.recording.lost(out, why)
        self.microphone.poll()
        self.supervisor.trim_heap()
        now = self.clock_s()
        self.rundown.poll()
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

    def _handle(self, c) -> None:
        log.debug("command %s", c)
        route = self.routes.get(type(c))
        if route is None:
            raise TypeError(f"unknown command {c!r}")
        try:
            route(c)
        except StudioError as exc:
            self.outbox.fail(str(exc))

    # -- commands that concern more than one room ---------------------------------------------------------------

    def _on_shutdown(self, c: cmd.Shutdown) -> None:
        self._shutdown = True
        self.supervisor.shutting_down = True

    def _on_go_live(self, c: cmd.GoLive) -> None:
        if self.supervisor.mode is PreviewMode.MICROPHONE:  # going live with the rundown ends the microphone mode
            self.microphone.set_mode(PreviewMode.SCRIPT)
        from studio.pipeline.programme import with_name_straps

        cast = self.cast.members
        self.supervisor.set_look(c.graphics, c.rundown_rows or tuple(range(len(c.segments))),
                                 with_name_straps(c.segments, cast))
        self.rundown.go_live(c, cast)
        self._update_state(self.clock_s())

    def _on_set_format(self, c: cmd.SetFormat) -> None:
        from studio.pipeline.factory import presenter_px

        if self.supervisor.mode is PreviewMode.INTERVIEW:  # its faces are framed at the two-shot's size
            self.outbox.emit(cmd.FormatChanged(self.supervisor.core_settings, "End the interview first: the picture "
                                                                               "format changes between shows."))
            return
        before = presenter_px(self.supervisor.core_settings)
        self.supervisor.set_format(c.settings, c.background,
                                   busy=self.rundown.live or self.recording.recorder is not None)
        if presenter_px(self.supervisor.core_settings) != before:
            self.anchors.rebuild_for_format()
        self.cast.refresh()  # its faces at the new format's presenter size

    def _on_stop(self, c: cmd.Stop) -> None:
        self.rundown.stop()
        self._update_state(self.clock_s())

    def _update_state(self, now_s: float) -> None:
        """Let the rundown move on to ``now_s``, then say what the studio is doing (an event when that changed)."""
        self.rundown.tick(now_s)
        sup = self.supervisor
        if sup.anchor is None:
            state = RuntimeState.STARTING if self.anchors.loading else RuntimeState.NO_ANCHOR
        elif sup.restarts.halted:
            state = RuntimeState.FAILED
        elif sup.mode is PreviewMode.MICROPHONE or (sup.mode is PreviewMode.INTERVIEW and not self.rundown.live):
            state = RuntimeState.MICROPHONE
        elif sup.clock is not None and sup.clock.paused:
            state = RuntimeState.PAUSED
        elif self.rundown.live:
            state = RuntimeState.LIVE if self.rundown.speaking(now_s) else RuntimeState.PREPARING
        else:
            state = RuntimeState.IDLE
        if state != self._state:
            self._state = state
            self.outbox.emit(cmd.StateChanged(state))
