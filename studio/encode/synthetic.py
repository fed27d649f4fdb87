"""A synthetic program in the style of OBS's sync test (a flash frame and a beep at known times) and the measurement
of what a receiver decoded: A/V offset by cross-correlation with the source audio and by flash / beep onsets.

Used by the stream tests and the stream check script (``python -m studio.encode.check``): outputs are tested
without the pipeline core, fed ``ProgramBatch``es exactly as the core makes them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import scipy.signal

from studio.contracts import ProgramBatch, ProgramFormat

_MOTION_PERIOD_FRAMES = 50
BEEP_HZ = 1000.0
BEEP_S = 0.03


def _hash_noise(n: np.ndarray, seed: int) -> np.ndarray:
    """White noise in -0.5..0.5 as a function of the sample index: never repeats, any span can be made alone."""
    h = (n.astype(np.uint64) + np.uint64(seed) * np.uint64(0x632BE5AB)) * np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return (h >> np.uint64(40)).astype(np.float64) / float(1 << 24) - 0.5


class SyncSource:
    """Program pictures and audio with a white frame and a 1 kHz beep every ``period_s`` from ``first_flash_s``.

    The picture between flashes is a moving, textured scene (a portrait on a gradient) so that the encoder does real
    work; the audio is a quiet 440 Hz tone plus noise (makes the cross-correlation unambiguous) plus the beeps.
    """

    def __init__(self, fmt: ProgramFormat, period_s: float = 1.0, first_flash_s: float = 0.5, seed: int = 0) -> None:
        self.fmt = fmt
        self.period_s = period_s
        self.first_flash_s = first_flash_s
        rng = np.random.default_rng(seed)
        self._seed = seed
        h, w = fmt.height, fmt.width
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack([40 + 60 * xx / w, 50 + 40 * yy / h, 90 + 50 * (xx + yy) / (w + h)], -1)
        base += rng.normal(0, 3, base.shape)  # a little grain: texture the encoder has to spend bits on
        try:
            from skimage.data import astronaut

            face = astronaut()
            s = min(h, w, face.shape[0]) * 3 // 4
            idx = (np.arange(s) * face.shape[0] / s).astype(int)
            face = face[idx][:, idx]
            y0, x0 = (h - s) // 2, (w - s) // 2
            base[y0:y0 + s, x0:x0 + s] = face
        except ImportError:  # scikit-image is a dependency; without it the gradient alone
            pass
        self._base = np.clip(base, 0, 255).astype(np.uint8)  # H x W x 3
        self._moving: dict[int, np.ndarray] = {}

    # -- the program ------------------------------------------------------------------------------------------------

    def flash_slots(self, n_slots: int) -> np.ndarray:
        """Slots of the white frames among the first ``n_slots``."""
        times = np.arange(self.first_flash_s, n_slots / self.fmt.fps, self.period_s)
        return np.round(times * self.fmt.fps).astype(np.int64)

    def flash_times_s(self, n_slots: int) -> np.ndarray:
        return self.flash_slots(n_slots) / self.fmt.fps

    def picture(self, slot: int) -> np.ndarray:
        t = slot / self.fmt.fps
        k = round((t - self.first_flash_s) / self.period_s)
        if k >= 0 and slot == int(np.round((self.first_flash_s + k * self.period_s) * self.fmt.fps)):
            return np.full_like(self._base, 255)
        phase = slot % _MOTION_PERIOD_FRAMES  # the motion repeats: its pictures are made once (cheap to feed)
        pic = self._moving.get(phase)
        if pic is None:
            u = phase / _MOTION_PERIOD_FRAMES
            dx, dy = round(12 * np.sin(2 * np.pi * u)), round(6 * np.sin(4 * np.pi * u))
            pic = self._moving[phase] = np.roll(self._base, (dy, dx), axis=(0, 1))
        return pic

    def audio(self, start: int, end: int) -> np.ndarray:
        """Program samples [start, end) (float32 mono)."""
        rate = self.fmt.audio_rate_hz
        n = np.arange(start, end)
        t = n / rate
        x = 0.1 * np.sin(2 * np.pi * 440 * t) + 0.1 * _hash_noise(n, self._seed)
        k = np.round((t - self.first_flash_s) / self.period_s)
        onset = self.first_flash_s + k * self.period_s
        # the beep starts at the flash frame's slot time (slots are on the frame grid)
        onset = np.round(onset * self.fmt.fps) / self.fmt.fps
        burst = (k >= 0) & (t >= onset) & (t < onset + BEEP_S)
        x[burst] = 0.8 * np.sin(2 * np.pi * BEEP_HZ * (t[burst] - onset[burst]))
        return x.astype(np.float32)

    def batch(self, first_slot: int, n: int, finished_ns: int | None = None) -> ProgramBatch:
        """Slots [first_slot, first_slot + n) with their audio, as the core hands them to outputs."""
        slots = np.arange(first_slot, first_slot + n, dtype=np.int64)
        frames = np.stack([self.picture(int(s)) for s in slots])
        a0, a1 = self.fmt.samples_at(first_slot), self.fmt.samples_at(first_slot + n)
        return ProgramBatch(slots=slots, pts_s=slots / self.fmt.fps, frames=frames, audio=self.audio(a0, a1),
                            audio_start=a0, finished_ns=finished_ns or time.monotonic_ns())

    def play(self, write, seconds: float, batch_frames: int = 1, realtime: bool = True,
             stop=None) -> int:
        """Hand ``seconds`` of program to ``write(batch)`` in batches, paced by the wall clock when ``realtime``
        (as the studio's live core does); returns the slots written."""
        n_total = round(seconds * self.fmt.fps)
        t0 = time.monotonic()
        slot = 0
        while slot < n_total and not (stop is not None and stop.is_set()):
            n = min(batch_frames, n_total - slot)
            if realtime:
                due = t0 + (slot + n - 1) / self.fmt.fps  # a batch leaves when its last frame is due
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            write(self.batch(slot, n))
            slot += n
        return slot


# -- measuring what a receiver decoded ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Decoded:
    """What a receiver's file holds: per-frame brightness and times, the audio and its first sample's time."""

    levels: np.ndarray  # mean brightness per video frame
    frame_times_s: np.ndarray
    audio: np.ndarray  # float32 mono
    audio_rate_hz: int
    audio_start_s: float  # time of audio[0] on the same clock as frame_times_s


def decode_media(path: Path | str) -> Decoded:
    """Decode a received file (FLV, MPEG-TS, MP4). Times are the container's presentation times."""
    levels, times, chunks = [], [], []
    first_audio = None
    rate = 0
    with av.open(str(path)) as c:
        streams = [s for s in (c.streams.video[:1] + c.streams.audio[:1])]
        for frame in c.decode(*streams):
            if isinstance(frame, av.VideoFrame):
                y = frame.to_ndarray(format="gray")
                levels.append(float(y[::8, ::8].mean()))
                times.append(float(frame.time))
            else:
                if first_audio is None:
                    first_audio = float(frame.time)
                    rate = frame.sample_rate
                chunks.append(frame.to_ndarray().reshape(-1))
    audio = np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, np.float32)
    return Decoded(np.array(levels), np.array(times), audio, rate, float(first_audio or 0.0))


@dataclass(frozen=True)
class SyncReport:
    """A/V offset of what was decoded (positive: the sound comes late)."""

    offset_xcorr_ms: float  # the decoded audio against the source audio, aligned to the decoded first flash
    offset_onsets_ms: float  # median of (beep onset - flash frame time) over the flashes found
    flashes: int  # flash frames found in the video
    beeps: int  # beeps found in the audio
    frames: int

    def within(self, late_ms: float = 45.0, early_ms: float = 125.0) -> bool:
        """The broadcast bounds (ITU-R BT.1359 style): sound at most ``late_ms`` late or ``early_ms`` early."""
        return all(-early_ms <= o <= late_ms for o in (self.offset_xcorr_ms, self.offset_onsets_ms))


def measure_sync(decoded: Decoded, source: SyncSource, program_s: float) -> SyncReport:
    """Find the flashes and beeps in what was decoded; offset by onsets and by cross-correlation (see SyncReport).
    ``program_s``: how much program was sent (the search range of the cross-correlation)."""
    fps = source.fmt.fps
    lv, ft = decoded.levels, decoded.frame_times_s
    flash_idx = np.nonzero(lv > 200)[0]
    flash_idx = flash_idx[np.r_[True, np.diff(flash_idx) > 1]] if len(flash_idx) else flash_idx  # first of each run
    flash_t = ft[flash_idx]
    rate = decoded.audio_rate_hz or source.fmt.audio_rate_hz
    x = decoded.audio
    # beep onsets: where a 1 kHz burst's envelope crosses half its height
    env = np.abs(x) > 0.4
    onset_idx = np.nonzero(env & ~np.r_[False, env[:-1]])[0]
    onsets = []
    for i in onset_idx:
        if not onsets or i - onsets[-1] > 0.5 * source.period_s * rate:
            onsets.append(i)
    onset_t = decoded.audio_start_s + np.array(onsets) / rate
    diffs = []
    for f in flash_t:
        if len(onset_t):
            j = int(np.argmin(np.abs(onset_t - f)))
            if abs(onset_t[j] - f) < 0.5 * source.period_s:
                diffs.append(onset_t[j] - f)
    offset_onsets = float(np.median(diffs) * 1e3) if diffs else float("nan")

    # Cross-correlation: which program time does decoded audio[0] hold? The noise never repeats, so the whole program
    # can be searched. Then the first decoded flash is the program flash nearest to where the audio says it is.
    offset_x = float("nan")
    if len(flash_t) and len(x) >= rate and program_s > 0:
        seg = x[: min(len(x), 4 * rate)]
        ref = source.audio(0, round(program_s * rate) + len(seg))
        corr = scipy.signal.correlate(ref, seg, mode="valid", method="fft")
        audio_shift = decoded.audio_start_s - int(np.argmax(corr)) / rate  # decoded time - program time (audio)
        prog_flash = source.flash_times_s(round((program_s + 1) * fps))
        nearest = prog_flash[int(np.argmin(np.abs(prog_flash - (flash_t[0] - audio_shift))))]
        video_shift = flash_t[0] - nearest  # decoded time - program time (video)
        offset_x = float((audio_shift - video_shift) * 1e3)
    return SyncReport(offset_xcorr_ms=offset_x, offset_onsets_ms=offset_onsets, flashes=len(flash_t),
                      beeps=len(onsets), frames=len(lv))

