"""Live microphone capture: one PortAudio input stream, downmixed and resampled into an ``AudioRing``.

The stream is opened once and kept open (the first open of a process takes 0.6-2 s before audio flows). A watchdog
thread notices a lost device (stream finished, PortAudio error, callbacks stalled), reports ``DEVICE_LOST`` with a
message, and tries to reopen at a bounded rate, so capture resumes when the device (or sound server) returns or
``set_device()`` picks another. With no sound server at all ``start()`` raises ``AudioDeviceError``; nothing crashes.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from dataclasses import dataclass
from math import gcd

import numpy as np

from studio.audio.ringbuffer import AudioRing
from studio.audio.settings import CaptureSettings
from studio.errors import AudioDeviceError

log = logging.getLogger(__name__)

_NO_MIC_HELP = (
    "connect a microphone, or start a sound server (PulseAudio/PipeWire; for a virtual one run "
    "installers/pulse-null-sink.sh), then choose the device in Settings > Audio"
)


@dataclass(frozen=True)
class InputDevice:
    index: int
    name: str
    channels: int
    default_rate_hz: int


class CaptureStatus(enum.Enum):
    STOPPED = "stopped"
    RUNNING = "running"
    NO_DEVICE = "no_device"
    DEVICE_LOST = "device_lost"


@dataclass(frozen=True)
class CaptureStats:
    status: CaptureStatus
    device_name: str
    device_rate_hz: int
    callbacks: int
    input_overflows: int  # PortAudio reported lost input (we were too slow)
    device_losses: int
    reopen_attempts: int
    samples_written: int
    ring_overwritten_samples: int


def _sd():
    """The sounddevice module; raises AudioDeviceError when PortAudio itself is missing."""
    try:
        import sounddevice
    except OSError as exc:  # libportaudio2 missing
        raise AudioDeviceError(f"No microphone found: PortAudio is not installed ({exc}). "
                               "Install libportaudio2.") from exc
    return sounddevice


def list_input_devices() -> list[InputDevice]:
    """Input-capable devices PortAudio sees now (empty without a sound card or sound server)."""
    try:
        sd = _sd()
        devices = sd.query_devices()
    except Exception as exc:  # PortAudioError or AudioDeviceError: no devices to offer
        log.warning("cannot list audio devices: %s", exc)
        return []
    return [
        InputDevice(int(d["index"]), str(d["name"]), int(d["max_input_channels"]), int(round(d["default_samplerate"])))
        for d in devices
        if int(d["max_input_channels"]) > 0
    ]


def rescan_devices() -> None:
    """Make PortAudio enumerate devices again (it caches the list at start).

    This re-initializes PortAudio, which closes every open stream of the process: only call it when no stream is
    in use (here: when the wanted input is missing, i.e. the sound server went away and took the streams with it).
    """
    sd = _sd()
    try:
        sd._terminate()  # documented way to refresh the device list in sounddevice
        sd._initialize()
    except Exception as exc:
        log.warning("PortAudio rescan failed: %s", exc)


def _pick_device(devices: list[InputDevice], wanted: str | None) -> InputDevice:
    if not devices:
        raise AudioDeviceError(f"No microphone found: no audio input device is available; {_NO_MIC_HELP}.")
    if wanted is None:
        sd = _sd()
        try:
            default_index = int(sd.default.device[0])
        except Exception:
            default_index = -1
        for d in devices:
            if d.index == default_index:
                return d
        for d in devices:  # PortAudio's ALSA default is often unset: prefer the sound server's virtual devices
            if d.name in ("default", "pulse", "pipewire"):
                return d
        return devices[0]
    exact = [d for d in devices if d.name == wanted]
    partial = [d for d in devices if wanted.lower() in d.name.lower()]
    if exact or partial:
        return (exact or partial)[0]
    names = ", ".join(d.name for d in devices)
    raise AudioDeviceError(f"No microphone found: no input device named '{wanted}' (available: {names}); "
                           "pick one in Settings > Audio.")


class StreamingResampler:
    """Polyphase FIR resampler that keeps its state between blocks (same filter as scipy's resample_poly).

    Output sample m is aligned in time with input position m * in_rate / out_rate (the filter delay is
    compensated); output is produced as soon as the input it needs has arrived.
    """

    def __init__(self, in_rate_hz: int, out_rate_hz: int) -> None:
        from scipy.signal import firwin

        g = gcd(int(in_rate_hz), int(out_rate_hz))
        self.up = int(out_rate_hz) // g
        self.down = int(in_rate_hz) // g
        self.passthrough = self.up == self.down
        if self.passthrough:
            return
        max_rate = max(self.up, self.down)
        half_len = 10 * max_rate
        h = firwin(2 * half_len + 1, 1.0 / max_rate, window=("kaiser", 5.0)) * self.up
        self.taps = -(-h.shape[0] // self.up)  # L: taps per phase
        hpad = np.zeros(self.taps * self.up)
        hpad[: h.shape[0]] = h
        self._h = hpad.reshape(self.taps, self.up).T.astype(np.float32)  # up x L: [phase, j] = h[phase + j*up]
        self._delay = half_len  # in upsampled samples
        self._x = np.zeros(self.taps, np.float32)  # history; self._x[0] is input index self._x0
        self._x0 = -self.taps
        self._n_in = 0
        self._m = 0  # next output index

    def process(self, x: np.ndarray) -> np.ndarray:
        """Feed input samples (N,) float32; returns the output samples now computable."""
        x = np.asarray(x, np.float32).reshape(-1)
        if self.passthrough:
            return x
        self._x = np.concatenate([self._x, x])
        self._n_in += x.shape[0]
        m_last = (self._n_in * self.up - 1 - self._delay) // self.down
        if m_last < self._m:
            return np.zeros(0, np.float32)
        ms = np.arange(self._m, m_last + 1, dtype=np.int64)
        n = ms * self.down + self._delay  # positions in the upsampled stream
        base = n // self.up - self._x0  # index into history of the newest input each output needs
        idx = base[:, None] - np.arange(self.taps)[None, :]  # M x L
        y = np.einsum("ml,ml->m", self._h[n % self.up], self._x[idx]).astype(np.float32)
        self._m = m_last + 1
        keep_from = (self._m * self.down + self._delay) // self.up - (self.taps - 1)  # oldest input still needed
        drop = max(0, keep_from - self._x0)
        if drop:
            self._x = self._x[drop:]
            self._x0 += drop
        return y


class MicCapture:
    """Records the chosen (or default) input device into ``ring`` at its rate (the program's by default)."""

    def __init__(self, settings: CaptureSettings | None = None, ring: AudioRing | None = None) -> None:
        self.settings = settings or CaptureSettings()
        s = self.settings
        self.ring = ring or AudioRing(int(s.ring_seconds * s.ring_rate_hz), s.ring_rate_hz)
        self._status = CaptureStatus.STOPPED
        self.last_error = ""
        self._lock = threading.RLock()
        self._stream = None
        self._device: InputDevice | None = None
        self._wanted = s.device
        self._resampler: StreamingResampler | None = None
        self._finished = threading.Event()
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._last_callback_ns = 0
        self._callbacks = 0
        self._overflows = 0
        self._losses = 0
        self._reopen_attempts = 0
        self._callback_error = ""

    @property
    def status(self) -> CaptureStatus:
        return self._status

    @property
    def device(self) -> InputDevice | None:
        return self._device

    def start(self) -> None:
        """Open the stream and begin writing into the ring; raises AudioDeviceError when no device can be opened."""
        with self._lock:
            if self._status in (CaptureStatus.RUNNING, CaptureStatus.DEVICE_LOST):
                return
            try:
                self._open()
            except AudioDeviceError as exc:
                self._status = CaptureStatus.NO_DEVICE
                self.last_error = str(exc)
                raise
            self._status = CaptureStatus.RUNNING
            self._stop.clear()
            self._watchdog = threading.Thread(target=self._watch, name="mic-watchdog", daemon=True)
            self._watchdog.start()

    def stop(self) -> None:
        """Close the stream and the watchdog; the ring keeps its audio."""
        self._stop.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout=5.0)
        self._watchdog = None
        with self._lock:
            self._close()
            self._status = CaptureStatus.STOPPED

    def set_device(self, name: str | None) -> None:
        """Switch to another input device (None = default); when running, reopens now (or keeps retrying)."""
        with self._lock:
            self._wanted = name
            if self._status in (CaptureStatus.RUNNING, CaptureStatus.DEVICE_LOST):
                self._close()
                try:
                    self._open()
                    self._status = CaptureStatus.RUNNING
                    self.last_error = ""
                except AudioDeviceError as exc:
                    self._mark_lost(str(exc))

    def stats(self) -> CaptureStats:
        d = self._device
        return CaptureStats(
            status=self._status,
            device_name=d.name if d else "",
            device_rate_hz=d.default_rate_hz if d else 0,
            callbacks=self._callbacks,
            input_overflows=self._overflows,
            device_losses=self._losses,
            reopen_attempts=self._reopen_attempts,
            samples_written=self.ring.total_written,
            ring_overwritten_samples=self.ring.overwritten_samples,
        )

    # -- stream -------------------------------------------------------------------------------------------------

    def _open(self, rescan: bool = False) -> None:
        sd = _sd()
        devices = list_input_devices()
        if self._wanted is not None and not any(self._wanted.lower() in d.name.lower() for d in devices):
            devices = []
        if (rescan or not devices) and self._stream is None:
            rescan_devices()  # the list is cached by PortAudio: a sound server that came back is only seen now
            devices = list_input_devices()
        device = _pick_device(devices, self._wanted)
        rate = device.default_rate_hz
        block = max(1, int(round(rate * self.settings.block_ms / 1000.0)))
        last_exc: Exception | None = None
        for channels in sorted({1, min(2, device.channels)}):
            try:
                stream = sd.InputStream(
                    device=device.index,
                    channels=channels,
                    samplerate=rate,
                    blocksize=block,
                    dtype="float32",
                    latency=self.settings.latency,
                    callback=self._callback,
                    finished_callback=self._finished.set,
                )
                break
            except Exception as exc:  # sd.PortAudioError, ValueError for bad parameters
                last_exc = exc
        else:
            raise AudioDeviceError(f"No microphone found: cannot open '{device.name}' ({last_exc}); "
                                   f"{_NO_MIC_HELP}.") from last_exc
        self._resampler = StreamingResampler(rate, self.ring.sample_rate_hz)
        self._finished.clear()
        self._callback_error = ""
        self._last_callback_ns = time.monotonic_ns()  # the stall clock starts at open
        try:
            stream.start()
        except Exception as exc:
            stream.close(ignore_errors=True)
            raise AudioDeviceError(f"No microphone found: '{device.name}' would not start ({exc}); "
                                   f"{_NO_MIC_HELP}.") from exc
        self._stream = stream
        self._device = device
        log.info("microphone open: %s at %d Hz, %d ch, block %d", device.name, rate, channels, block)

    def _close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.abort(ignore_errors=True)
                stream.close(ignore_errors=True)
            except Exception as exc:
                log.debug("closing input stream: %s", exc)

    def _callback(self, indata: np.ndarray, frames: int, time_info, status) -> None:
        """PortAudio thread: downmix, clip, resample, write. Never raises (an exception would kill the stream)."""
        try:
            now_ns = time.monotonic_ns()
            self._last_callback_ns = now_ns
            self._callbacks += 1
            if status.input_overflow:
                self._overflows += 1
            x = indata.mean(axis=1) if indata.shape[1] > 1 else indata[:, 0]  # frames, float32
            x = np.clip(x, -1.0, 1.0)
            resampler = self._resampler
            if resampler is not None:
                self.ring.write(resampler.process(x), arrival_ns=now_ns)
        except Exception as exc:  # keep the stream alive; the watchdog reports it
            self._callback_error = f"{type(exc).__name__}: {exc}"

    # -- watchdog -----------------------------------------------------------------------------------------------

    def _mark_lost(self, why: str) -> None:
        if self._status != CaptureStatus.DEVICE_LOST:
            self._losses += 1
            log.warning("microphone lost: %s", why)
        self._status = CaptureStatus.DEVICE_LOST
        name = self._device.name if self._device else (self._wanted or "default")
        self.last_error = f"Microphone '{name}' stopped delivering audio ({why}); retrying. Reconnect it or pick " \
                          "another input in Settings > Audio."

    def _watch(self) -> None:
        s = self.settings
        next_retry = 0.0
        while not self._stop.wait(s.supervise_interval_ms / 1000.0):
            with self._lock:
                if self._stop.is_set():
                    return
                if self._status == CaptureStatus.RUNNING:
                    stalled_ms = (time.monotonic_ns() - self._last_callback_ns) / 1e6
                    if self._finished.is_set():
                        why = "the stream ended: device unplugged or sound server gone"
                    elif stalled_ms > s.stall_timeout_ms:
                        why = f"no audio for {stalled_ms:.0f} ms"
                    else:
                        continue
                    self._close()
                    self._mark_lost(why)
                    next_retry = time.monotonic() + s.retry_interval_ms / 1000.0
                elif self._status == CaptureStatus.DEVICE_LOST and time.monotonic() >= next_retry:
                    next_retry = time.monotonic() + s.retry_interval_ms / 1000.0
                    self._reopen_attempts += 1
                    try:
                        self._open(rescan=True)
                    except AudioDeviceError as exc:
                        log.debug("reopen failed: %s", exc)
                        continue
                    self._status = CaptureStatus.RUNNING
                    self.last_error = ""
                    log.info("microphone back")
