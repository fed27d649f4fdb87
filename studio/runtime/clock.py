"""The program clock that the script source and the preview share."""

from __future__ import annotations

import logging

from studio.errors import AudioDeviceError
from studio.pipeline.telemetry import ClockSource
from studio.runtime.settings import AudioOutputMode, StudioSettings

log = logging.getLogger(__name__)


class ProgramClock:
    """The sound card's playback of the program audio when there is an output (and it is wanted), else the
    monotonic clock; ``message`` says which, in words for the producer."""

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
