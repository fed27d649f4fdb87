"""Live microphone -> motion with the neural engine: the same interface as ``studio.audio.mic_motion.MicMotionSource``.

Every sample of the ring goes through one streaming ``MotionSession`` (the model needs the audio as it was, silence
included: its cache and its closed-mouth output in pauses come from it); the silence sieve still runs on the same
32 ms frames for the speaking flag (idle motion, the HUD) and its counts. Frame ``j`` of the session covers ring
samples ``[start + 640 j, start + 640 (j + 1))``: the live session's frame ``k`` shows it once the model's look-ahead
of audio after it has arrived (``min_lead_s``). Encoder windows advance one frame at a time here (``stride_mel=4``),
so a frame waits for its look-ahead and nothing more.

``start_worker()`` runs the model on its own thread as the audio arrives, so that the live clock's ``frame()`` only
reads what is ready (and finishes what is not): the model's time overlaps the rendering of the previous frame instead
of adding to it (ONNX Runtime and torch release the GIL while they compute). Without the worker, ``frame()`` does all
the work itself; the numbers are the same either way (one session, fed in order).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import weakref

import numpy as np

from studio.audio.features import SAMPLE_RATE_HZ
from studio.audio.mic_motion import MicMotionStats, SievedMicSource
from studio.audio.recognizer import RecognizerStats
from studio.audio.ringbuffer import AudioRing
from studio.audio.settings import MicMotionSettings, SieveSettings
from studio.neural.engine import (FRAME_REACH, KV_PROBE_DUTY, KV_PROBE_PERIOD_S, SAMPLES_PER_FRAME, NeuralMotionEngine,
                                  default_engine, kv_saved)
from studio.contracts.coeffs import MOUTH_COEFFS

log = logging.getLogger(__name__)

_MOUTH_IDX = np.array([int(c) for c in MOUTH_COEFFS])
_KEEP_FRAMES = 250  # 10 s of mouth frames
_STRIDE_MEL = 4


class NeuralMicMotionSource(SievedMicSource):
    """Motion coefficients for the presenter from the live microphone ring, through the neural engine."""

    def __init__(
        self,
        ring: AudioRing,
        settings: MicMotionSettings | None = None,
        sieve_settings: SieveSettings | None = None,
        engine: NeuralMotionEngine | None = None,
    ) -> None:
        super().__init__(ring, settings, sieve_settings)
        if self.rate_hz != SAMPLE_RATE_HZ:
            raise ValueError(f"ring rate {self.rate_hz} Hz: the model wants {SAMPLE_RATE_HZ} Hz")
        self.engine = engine or default_engine()
        self.kv_cache = True  # the session's options (the core's KV_CACHE and SILENCE_SIEVE flags)
        self.skip_silence = False
        self._processed = self._lost = self._frames = self._missing = 0
        self._delays_ms: collections.deque[float] = collections.deque(maxlen=4096)
        self._model_ms: collections.deque[float] = collections.deque(maxlen=4096)  # model time per frame made
        self._lock = threading.RLock()  # the session and the frames: the worker, the clock and the UI's stats
        self._worker: threading.Thread | None = None
        self._prober: threading.Thread | None = None
        self._kv_probes: collections.deque[tuple[float, float, int]] = collections.deque(maxlen=64)
        self._stop = threading.Event()
        self.worker_error = ""  # what stopped the worker, if anything (frame() then does the work itself)
        self._restart(ring.total_written)

    def start_worker(self, period_s: float = 0.005) -> None:
        """Run the model on a thread of its own, every ``period_s`` on the audio that arrived."""
        if self._worker is not None:
            return
        self._stop.clear()
        # the thread holds the source weakly: a source dropped without stop_worker() ends its thread too
        self._worker = threading.Thread(target=_work, args=(weakref.ref(self), self._stop, period_s),
                                        name="neural-mic", daemon=True)
        self._worker.start()
        self._prober = threading.Thread(target=_probe_kv, args=(weakref.ref(self), self._stop), name="kv-probe",
                                        daemon=True)
        self._prober.start()

    def stop_worker(self) -> None:
        if self._worker is None:
            return
        self._stop.set()
        self._worker.join(timeout=5)
        self._prober.join(timeout=5)
        self._worker = self._prober = None

    def probe_kv(self) -> float:
        """Time the current stream's step without the KV cache once, beside its cached steps (the live measure of
        what the KV_CACHE flag saves; ``kv_saved_ms``); returns the probe's ms (0: nothing to probe)."""
        with self._lock:
            s = self._session
            inputs = s.kv_probe_inputs()
        return s.probe_kv(inputs)  # outside the lock: the model's frames go on meanwhile

    def kv_saved_ms(self) -> tuple[float, int]:
        """What the KV cache saves a step, from the recent probes of all streams (``engine.kv_saved``)."""
        return kv_saved(self._kv_probes)

    def _restart(self, sample: int) -> None:
        self._cursor = self._start = self._model_cursor = int(sample)
        self._session = self.engine.session(stride_mel=_STRIDE_MEL, fingerprints=False, kv_cache=self.kv_cache,
                                            skip_silence=self.skip_silence, kv_probe="external",
                                            kv_probes=self._kv_probes)
        self._mouth: collections.deque[np.ndarray] = collections.deque(maxlen=_KEEP_FRAMES)
        self._first_kept = 0  # session frame index of self._mouth[0]

    @property
    def min_lead_s(self) -> float:
        """Audio after a frame's start that must be in the ring before its mouth is known: half the frame, the
        model's look-ahead after the frame's centre, and one 10 ms mel hop for the encoder windows' alignment
        (tests/unit/test_neural_mic.py checks it against the session). A stream's first frame waits 40 ms more, for
        the first full encoder window."""
        return FRAME_REACH / self.rate_hz + 0.010

    def set_options(self, kv_cache: bool, skip_silence: bool) -> None:
        """Switch the model's KV cache / silence skipping; a new stream starts from the newest audio."""
        with self._lock:
            if (kv_cache, skip_silence) != (self.kv_cache, self.skip_silence):
                self.kv_cache, self.skip_silence = kv_cache, skip_silence
                self._restart(self.ring.total_written)

    def cache_nbytes(self) -> int:
        """Bytes the model's KV cache holds now (constant with the cache; the growing history without it)."""
        with self._lock:
            s = self._session
            if s.kv_cache:
                return s.cache_nbytes()
            return int(sum(a.nbytes + b.nbytes for a, b in s._history))

    def step_ms(self) -> float:
        """Mean time of the model's steps in the current stream (ms); nan before the first."""
        s = self._session
        return s.step_ms_total / s.steps if s.steps else float("nan")

    def skip_to(self, sample: int) -> None:
        """Ignore the audio before ``sample``: a new stream starts there (cache and all)."""
        with self._lock:
            if sample > self._cursor:
                self._restart(min(int(sample), self.ring.total_written))
                self.sieve.reset()

    def pump(self) -> int:
        """Process the audio that arrived since the last call; returns how many frames the model produced."""
        with self._lock:
            return self._pump()

    def _pump(self) -> int:
        n = self._frame_n
        total = self.ring.total_written
        made = 0
        if min(self._cursor, self._model_cursor) < self.ring.oldest_sample:  # fell behind: a new stream
            self._lost += self.ring.oldest_sample - self._model_cursor
            self._restart(self.ring.oldest_sample)
            self.sieve.reset()
        while self._cursor + n <= total:  # the sieve: whole 32 ms frames
            frame = self.ring.read(self._cursor, n)
            if frame is None:
                break
            self._decisions.append((self._cursor, self.sieve.process(frame)))
            self._cursor += n
        audio = self.ring.read(self._model_cursor, total - self._model_cursor) if total > self._model_cursor else None
        if audio is not None:  # the model: every sample as soon as it is there
            t0 = time.perf_counter()
            mouth, _ = self._session.push(audio)
            if len(mouth):
                self._model_ms.extend([(time.perf_counter() - t0) * 1e3 / len(mouth)] * len(mouth))
            self._model_cursor = total
            self._processed += len(audio)
            for m in mouth:
                j = self._first_kept + len(self._mouth)
                # delay: audio that had to arrive after the frame's end before it came out
                end = self._start + (j + 1) * SAMPLES_PER_FRAME
                self._delays_ms.append((total - end) / self.rate_hz * 1e3)
                if len(self._mouth) == self._mouth.maxlen:
                    self._first_kept += 1
                self._mouth.append(np.asarray(m, np.float32))
            made += len(mouth)
        self._frames += made
        return made

    def mouth_at(self, t_s: float) -> np.ndarray | None:
        """The model's 5 mouth coefficients for the frame holding ``t_s`` (the latest known one while it is not out
        yet, counted in ``frames_missing``); None before the first frame."""
        if not self._mouth:
            return None
        j = int((t_s * self.rate_hz - self._start) // SAMPLES_PER_FRAME)
        i = j - self._first_kept
        if i >= len(self._mouth):
            self._missing += 1
            return self._mouth[-1]
        return self._mouth[max(i, 0)]

    def frame(self, t_s: float, idle_t_s: float | None = None) -> np.ndarray:
        """Coefficients (N_COEFFS,) float32 for the frame presented at stream time ``t_s``."""
        with self._lock:
            self._pump()
            speaking = self.speaking_at(t_s)
            mouth = self.mouth_at(t_s)
        out = np.asarray(self.idle.frame(t_s if idle_t_s is None else idle_t_s, speaking=speaking), np.float32).copy()
        out[_MOUTH_IDX] = 0.0 if mouth is None else np.clip(mouth, 0.0, 1.0)
        return out

    def stats(self) -> MicMotionStats:
        with self._lock:
            d = np.asarray(self._delays_ms) if self._delays_ms else np.array([np.nan])
            mm = np.asarray(self._model_ms) if self._model_ms else np.array([np.nan])
        rec = RecognizerStats(chunks=self._frames, phones_emitted=self._frames, utterances=1,
                              cpu_ms_per_chunk_median=float(np.median(mm)),
                              cpu_ms_per_chunk_p95=float(np.percentile(mm, 95)),
                              audio_ms_per_chunk_median=SAMPLES_PER_FRAME / self.rate_hz * 1e3,
                              emit_delay_ms_median=float(np.median(d)), emit_delay_ms_p95=float(np.percentile(d, 95)))
        return MicMotionStats(sieve=self.sieve.stats(), recognizer=rec, samples_processed=self._processed,
                              samples_sent_to_recognizer=self._processed,  # the model hears the silence too
                              samples_lost=self._lost, phones=self._frames, frames_missing=self._missing)


def _probe_kv(ref: "weakref.ReferenceType[NeuralMicMotionSource]", stop: threading.Event) -> None:
    wait = KV_PROBE_PERIOD_S
    while not stop.wait(wait):
        src = ref()
        if src is None:
            return
        try:
            ms = src.probe_kv()
        except Exception:  # the probe only measures: the presenter goes on without it
            log.exception("KV-cache probe stopped")
            return
        del src
        wait = max(KV_PROBE_PERIOD_S, ms / 1e3 / KV_PROBE_DUTY)


def _work(ref: "weakref.ReferenceType[NeuralMicMotionSource]", stop: threading.Event, period_s: float) -> None:
    while not stop.wait(period_s):
        src = ref()
        if src is None:
            return
        try:
            src.pump()
        except Exception as exc:  # the clock's own pump() goes on and reports it as it would without a worker
            src.worker_error = f"{type(exc).__name__}: {exc}"
            log.exception("neural microphone worker stopped")
            return
        del src
