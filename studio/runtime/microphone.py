"""The microphone room: the selected input device (its level for the meter, its loss and return), the microphone
mode, where the person at the microphone drives the presenter instead of the rundown, and the interview mode, where
the presenter speaks the rundown while the person at the microphone drives a guest beside them.

Switching the mode restarts the core on the other source (``CoreSupervisor.drive_by_*``); a recording in progress
continues in a new file. The mode the producer asked for is kept: asked before there is a face or a device, the
microphone mode starts when both are there.
"""

from __future__ import annotations

import logging
import math
from typing import Callable

import numpy as np

from studio.audio.settings import AudioEngine
from studio.errors import AudioDeviceError, StudioError
from studio.pipeline import commands as cmd
from studio.pipeline.commands import PreviewMode
from studio.runtime.events import Outbox
from studio.runtime.interview import InterviewRoom
from studio.runtime.recording import RecordingRoom
from studio.runtime.rundown import RundownRoom
from studio.runtime.supervisor import CoreSupervisor

log = logging.getLogger(__name__)


class MicrophoneRoom:
    """See the module docstring. ``on_mode_changed()`` is called after each switch (the runtime's state)."""

    def __init__(self, supervisor: CoreSupervisor, rundown: RundownRoom, recording: RecordingRoom, outbox: Outbox,
                 interview: InterviewRoom, on_mode_changed: Callable[[], None] = lambda: None) -> None:
        self.supervisor = supervisor
        self.interview = interview
        self.rundown = rundown
        self.recording = recording
        self.outbox = outbox
        self.on_mode_changed = on_mode_changed
        self.mic = None  # MicCapture while a microphone is open (level meter, microphone mode)
        self.requested = PreviewMode.SCRIPT  # the mode the producer asked for
        self._name: str | None = None
        self._lost = False  # the capture's last reported state (``poll``)

    def input_level_dbfs(self) -> float:
        """Microphone level over the last 50 ms (dBFS); -inf with no microphone."""
        mic = self.mic
        if mic is None:
            return -math.inf
        x = mic.ring.latest(mic.ring.sample_rate_hz // 20)
        if len(x) == 0:
            return -math.inf
        rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))
        return 20.0 * math.log10(max(rms, 1e-7))

    def select(self, name: str | None) -> None:
        """Open the input device ``name`` (None: the default, "": none) in place of the one open."""
        from studio.audio.capture import MicCapture
        from studio.audio.settings import CaptureSettings

        if self.supervisor.mode.listens:
            self.set_mode(PreviewMode.SCRIPT, keep_request=True)
        self._name = name
        if self.mic is not None:
            self.mic.stop()
            self.mic = None
        if name == "":
            self.outbox.emit(cmd.MicrophoneStatus(False, "", "Microphone off."))
            return
        mic = MicCapture(CaptureSettings(device=name))
        try:
            mic.start()
        except AudioDeviceError as exc:
            self.outbox.emit(cmd.MicrophoneStatus(False, "", str(exc)))
            return
        self.mic, self._lost = mic, False
        self.outbox.emit(cmd.MicrophoneStatus(True, mic.device.name if mic.device else "default", "listening"))
        if self.requested.listens:
            self.set_mode(self.requested)

    def set_audio_engine(self, engine: AudioEngine) -> None:
        if engine == self.supervisor.audio_engine:
            return
        self.supervisor.set_audio_engine(engine)
        mode = self.supervisor.mode
        if mode.listens:  # restart the microphone or interview mode with the new engine
            self.set_mode(PreviewMode.SCRIPT, keep_request=True)
            self.set_mode(mode)

    def resume_requested(self) -> None:
        """Start the mode that was asked for before it could run (the anchor has just come)."""
        if self.requested != self.supervisor.mode:
            self.set_mode(self.requested)

    def set_mode(self, mode: PreviewMode, keep_request: bool = False) -> None:
        """Switch what drives the presenter. A recording in progress continues into a new file in the same
        folder."""
        if not keep_request:
            self.requested = mode
        sup = self.supervisor
        if mode == sup.mode:
            self.outbox.emit(cmd.ModeChanged(mode, sup.mode, ""))
            return
        message = ""

        def switch() -> None:
            nonlocal message
            if mode is PreviewMode.SCRIPT:
                sup.drive_by_script()
            elif mode is PreviewMode.MICROPHONE:
                message = self._start_mic_mode()
            else:
                message = self._start_interview()
            self.outbox.emit(cmd.ModeChanged(mode, sup.mode, message))
            self.on_mode_changed()

        self.recording.continue_across(switch)

    def _no_microphone(self, mode: PreviewMode) -> str | None:
        """Why ``mode`` cannot start now, or None when the anchor and an open microphone are there. A microphone
        chosen but not open is opened (``select`` comes back through ``set_mode``)."""
        from studio.audio.capture import list_input_devices

        sup = self.supervisor
        what = "the microphone mode" if mode is PreviewMode.MICROPHONE else "the interview"
        who = "The presenter keeps idling." if mode is PreviewMode.MICROPHONE else \
            "The interview's guest needs a microphone."
        if sup.anchor is None:
            return f"Waiting for the anchor: {what} starts when the face is ready."
        if self.mic is None:
            if self._name == "":
                return f"The microphone is off: choose one in the Microphone panel. {who}"
            if not list_input_devices():
                return f"No input device: connect a microphone or start a sound server. {who}"
            self.select(self._name)  # opens the device, then comes back here through set_mode
            if sup.mode is mode:
                return ""
            if self.mic is None or mode is PreviewMode.MICROPHONE:
                return f"The microphone would not open. {who}"
        return None

    def _start_interview(self) -> str:
        """Start the interview; returns "" or, when it cannot run (yet), why."""
        why = self._no_microphone(PreviewMode.INTERVIEW)
        if why is not None:
            return why
        cast = self.interview.cast()
        if cast is None:
            self.interview.prepare()  # the room's poll starts the interview when the faces are ready
            return "Preparing the host's and the guest's faces: the interview starts when they are ready."
        self.rundown.stop(quiet=True)  # the rundown stops speaking; Go live gives the host its turns
        try:
            note = self.supervisor.drive_by_interview(self.mic, cast)
        except StudioError as exc:
            return f"{exc} The presenter keeps idling."
        log.info("interview on %s (%s engine)", self.mic.device.name if self.mic.device else "default",
                 self.supervisor.audio_engine.value)
        return note

    def _start_mic_mode(self) -> str:
        """Start the microphone mode; returns "" or, when it cannot run, why (the presenter keeps idling)."""
        sup = self.supervisor
        why = self._no_microphone(PreviewMode.MICROPHONE)
        if why is not None:
            return why
        self.rundown.stop(quiet=True)  # the rundown stops speaking
        try:
            note = sup.drive_by_microphone(self.mic)
        except StudioError as exc:
            return f"{exc} The presenter keeps idling."
        log.info("microphone mode on %s (%s engine)", self.mic.device.name if self.mic.device else "default",
                 sup.audio_engine.value)
        return note

    def poll(self) -> None:
        """Say when the microphone stops delivering (device unplugged, sound server gone) and when it is back: the
        capture's watchdog reopens it on its own, the producer hears both."""
        from studio.audio.capture import CaptureStatus

        mic = self.mic
        if mic is None:
            return
        lost = mic.status is CaptureStatus.DEVICE_LOST
        if lost == self._lost:
            return
        self._lost = lost
        name = mic.device.name if mic.device else "default"
        if lost:
            self.outbox.emit(cmd.MicrophoneStatus(False, name, mic.last_error or f"Microphone '{name}' was lost; "
                                                                                 "retrying."))
        else:
            self.outbox.emit(cmd.MicrophoneStatus(True, name, "listening again"))

    def close(self) -> None:
        if self.mic is not None:
            self.mic.stop()
