"""The program's sound and clocks: the audio timeline every mode places speech on, and what says "now".

- ``ProgramAudio``: clips placed at sample positions of the program timeline; silence elsewhere.
- ``MonotonicClock``: program time from the monotonic clock (no audio output), pausable.
- ``AudioOutputClock``: plays the program audio through sounddevice; the sample being heard is the clock (audio-led).
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from studio.errors import AudioDeviceError
from studio.pipeline.telemetry import ClockSource

log = logging.getLogger(__name__)


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
