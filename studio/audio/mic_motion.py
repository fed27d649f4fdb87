"""Live microphone -> motion coefficients: ring + silence sieve + phone recognizer + coarticulation + idle motion.

``pump()`` consumes the new audio in the ring in 32 ms sieve frames; only frames the sieve calls speech reach the
recognizer (with a short pre-roll at each onset, since the VAD reacts a frame or two late), and the recognized phones
drive a streaming ``Coarticulator``. ``frame(t_s)`` returns the coefficients for stream time ``t_s`` (seconds of
audio since the ring started): mouth from the phones, scaled by the loudness envelope of the ring so the jaw follows
the voice energy also where no phone is known yet; idle motion always on; lips closed in silence.

Phones become known ~0.1 s after they end (``stats().recognizer.emit_delay_ms_median``): present frames at
``now_s - recommended_delay_s`` for the phone shapes to be in place.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass

import numpy as np

from studio.audio.recognizer import RecognizerStats, StreamingPhoneRecognizer
from studio.audio.ringbuffer import AudioRing
from studio.audio.settings import MicMotionSettings, RecognizerSettings, SieveSettings
from studio.audio.sieve import SieveStats, SilenceSieve
from studio.contracts.coeffs import MOUTH_COEFFS, Coeff
from studio.presenter.idle import IdleMotion
from studio.speech.types import PhonemeTiming
from studio.speech.visemes import Coarticulator

log = logging.getLogger(__name__)

_MOUTH_IDX = np.array([int(c) for c in MOUTH_COEFFS])


@dataclass(frozen=True)
class MicMotionStats:
    sieve: SieveStats
    recognizer: RecognizerStats
    samples_processed: int
    samples_sent_to_recognizer: int
    samples_lost: int  # audio overwritten in the ring before it was processed (we fell behind)
    phones: int  # phones recognized (the neural source: frames the model produced)
    frames_missing: int = 0  # neural source: frames asked for before the model had them (its latest one was shown)

    @property
    def recognizer_share(self) -> float:
        """Fraction of the processed audio that the recognizer had to look at (the rest the sieve saved)."""
        return self.samples_sent_to_recognizer / self.samples_processed if self.samples_processed else 0.0


class SievedMicSource:
    """What every live motion source shares: the ring, the silence sieve's speaking decisions, idle motion."""

    min_lead_s = 0.0  # audio after a frame's start that must be in before its mouth is known (beyond the session's)

    def __init__(
        self, ring: AudioRing, settings: MicMotionSettings | None = None, sieve_settings: SieveSettings | None = None
    ) -> None:
        self.settings = settings or MicMotionSettings()
        self.ring = ring
        self.rate_hz = ring.sample_rate_hz
        self.sieve = SilenceSieve(sieve_settings)
        if self.sieve.settings.sample_rate_hz != self.rate_hz:
            raise ValueError(f"ring rate {self.rate_hz} Hz != sieve rate {self.sieve.settings.sample_rate_hz} Hz")
        self.idle = IdleMotion(self.settings.fps, seed=self.settings.seed)
        self._frame_n = self.sieve.settings.frame_samples
        # Speaking decision per sieve frame: (first sample of the frame, speaking), bounded to ~10 s.
        self._decisions: collections.deque[tuple[int, bool]] = collections.deque(
            maxlen=int(10 * self.rate_hz / self._frame_n)
        )

    def start_worker(self) -> None:
        """Do the source's work on a thread of its own (a source that has one overrides this); by default ``frame()``
        does it all."""

    def stop_worker(self) -> None:
        """End the thread that ``start_worker()`` started, if any."""

    @property
    def now_s(self) -> float:
        """Stream time of the newest audio in the ring."""
        return self.ring.total_written / self.rate_hz

    def speaking_at(self, t_s: float) -> bool:
        """Whether the sieve heard speech at ``t_s`` or within the next ~0.1 s (VAD onsets lag a frame or two)."""
        lo = int(t_s * self.rate_hz) - self._frame_n
        hi = lo + self._frame_n + int(0.1 * self.rate_hz)
        return any(speaking for start, speaking in self._decisions if lo < start <= hi)


class MicMotionSource(SievedMicSource):
    """Motion coefficients for the presenter from the live microphone ring."""

    def __init__(
        self,
        ring: AudioRing,
        settings: MicMotionSettings | None = None,
        sieve_settings: SieveSettings | None = None,
        recognizer_settings: RecognizerSettings | None = None,
    ) -> None:
        super().__init__(ring, settings, sieve_settings)
        self.recognizer = StreamingPhoneRecognizer(recognizer_settings)
        self.coarticulator = Coarticulator(self.settings.fps, lookahead_s=self.settings.coart_lookahead_s)
        self._cursor = ring.total_written  # next sample to process; history before construction is ignored
        self._processed = self._to_asr = self._lost = self._phones = 0

    @property
    def recommended_delay_s(self) -> float:
        """How far behind ``now_s`` to present frames so the recognized phones are in (measured, plus lookahead)."""
        d = self.recognizer.stats().emit_delay_ms_p95
        d_s = 0.12 if not np.isfinite(d) else d / 1000.0
        return d_s + self.settings.coart_lookahead_s + self._frame_n / self.rate_hz

    def skip_to(self, sample: int) -> None:
        """Ignore the audio before ``sample`` (e.g. what the ring held before a live session started)."""
        if sample > self._cursor:
            self._cursor = min(int(sample), self.ring.total_written)
            for p in self.recognizer.finish() if self.recognizer.in_utterance else []:
                self.coarticulator.push(p)
            self.sieve.reset()

    def pump(self) -> list[PhonemeTiming]:
        """Process all complete sieve frames that arrived since the last call; returns the new phones."""
        new: list[PhonemeTiming] = []
        n = self._frame_n
        total = self.ring.total_written
        if self._cursor < self.ring.oldest_sample:
            self._lost += self.ring.oldest_sample - self._cursor
            self._cursor = self.ring.oldest_sample
            new += self.recognizer.finish()
            self.sieve.reset()
        while self._cursor + n <= total:
            frame = self.ring.read(self._cursor, n)
            if frame is None:  # overwritten meanwhile
                self._cursor = self.ring.oldest_sample
                continue
            speaking = self.sieve.process(frame)
            self._decisions.append((self._cursor, speaking))
            if speaking:
                if not self.recognizer.in_utterance:
                    start = max(self.ring.oldest_sample, self._cursor - int(self.settings.preroll_ms / 1000 * self.rate_hz))
                    audio = self.ring.read(start, self._cursor + n - start)
                    if audio is None:
                        start, audio = self._cursor, frame
                    self.recognizer.start(start)
                else:
                    audio = frame
                self._to_asr += audio.shape[0]
                new += self.recognizer.feed(audio)
            elif self.recognizer.in_utterance:
                new += self.recognizer.finish()
            self._cursor += n
            self._processed += n
        for p in new:
            self.coarticulator.push(p)
        self._phones += len(new)
        return new

    def loudness(self, t_s: float) -> float:
        """Loudness envelope at ``t_s``: RMS over a window centred there, mapped from dBFS to 0..1."""
        s = self.settings
        half = int(s.envelope_window_ms / 2000.0 * self.rate_hz)
        centre = int(t_s * self.rate_hz)
        lo = max(self.ring.oldest_sample, centre - half)
        hi = min(self.ring.total_written, centre + half)
        if hi <= lo:
            return 0.0
        x = self.ring.read(lo, hi - lo)
        if x is None or x.size == 0:
            return 0.0
        dbfs = 10.0 * np.log10(float(np.mean(np.square(x, dtype=np.float64))) + 1e-12)
        return float(np.clip((dbfs - s.envelope_floor_dbfs) / (s.envelope_ceiling_dbfs - s.envelope_floor_dbfs), 0, 1))

    def frame(self, t_s: float, idle_t_s: float | None = None) -> np.ndarray:
        """Coefficients (N_COEFFS,) float32 for the frame presented at stream time ``t_s``.

        ``idle_t_s`` is the time of the idle motion (blinks, sway) when it must keep running while the stream time
        stands still (the microphone stalled); by default ``t_s``.
        """
        self.pump()
        speaking = self.speaking_at(t_s)
        idle_t = t_s if idle_t_s is None else idle_t_s
        out = np.asarray(self.idle.frame(idle_t, speaking=speaking), np.float32).copy()
        mouth = np.zeros(len(MOUTH_COEFFS), np.float32)
        if speaking:
            env = self.loudness(t_s)
            mouth = self.coarticulator.frame(t_s)[_MOUTH_IDX].astype(np.float32)
            jaw, part, press = (list(MOUTH_COEFFS).index(c) for c in (Coeff.JAW_OPEN, Coeff.LIP_PART, Coeff.LIP_PRESS))
            mouth[jaw] *= 0.5 + 0.5 * env  # energy scales the phone's opening
            mouth[part] *= 0.75 + 0.25 * env
            if mouth[press] < 0.5:  # not a p/b/m closure: energy alone keeps the mouth moving between phones
                energy_open = self.settings.envelope_min_jaw * env
                mouth[jaw] = max(mouth[jaw], energy_open)
                mouth[part] = max(mouth[part], energy_open)
            mouth = np.clip(mouth, 0.0, 1.0)
        out[_MOUTH_IDX] = mouth
        return out

    def stats(self) -> MicMotionStats:
        return MicMotionStats(
            sieve=self.sieve.stats(),
            recognizer=self.recognizer.stats(),
            samples_processed=self._processed,
            samples_sent_to_recognizer=self._to_asr,
            samples_lost=self._lost,
            phones=self._phones,
        )
