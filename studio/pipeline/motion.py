"""Motion sources of the core: coefficients for a chunk's slots (``studio.contracts.coeffs``).

- ``ProgramMotion``: program items. Speech with phone timings (text-to-speech): visemes with coarticulation, the
  opening scaled by the speech's loudness. Recordings: the neural audio-to-motion engine (default) or the pocketsphinx
  phone recognizer. Idle motion (blinks, sway, breathing, nods on stressed syllables) never stops.
- ``MicMotion``: the microphone ring through the live neural engine or pocketsphinx (``studio.neural.mic``,
  ``studio.audio.mic_motion``), on the microphone source's clock.
"""

from __future__ import annotations

import collections
import logging
import math
import time

import numpy as np

from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine, MicMotionSettings
from studio.errors import ModelLoadError
from studio.neural.constants import FPS as MODEL_FPS
from studio.contracts import ANALYSIS_RATE_HZ, Chunk, MotionSource, ProgramFormat
from studio.pipeline.settings import Optimization
from studio.contracts.coeffs import MOUTH_COEFFS, N_COEFFS

log = logging.getLogger(__name__)

_MOUTH = [int(c) for c in MOUTH_COEFFS]
_SPEECH_HANGOVER_S = 0.1


class ProgramMotion(MotionSource):
    """See the module docstring. ``audio_engine``: what animates recordings (items without phone timings)."""

    name = "program"

    def __init__(self, audio_engine: AudioEngine = DEFAULT_AUDIO_ENGINE, seed: int = 0) -> None:
        self.audio_engine = audio_engine
        self.seed = seed
        self.note = ""  # why the engine asked for is not the one used ("" when it is)
        self._frames = 0
        self._neural = None
        self._model_frames = 0
        self._model_ms = 0.0
        self._model_skipped = 0
        self._kv_bytes = math.nan
        self._kv_probes: collections.deque = collections.deque(maxlen=64)  # the KV-cache probes of the tracks
        self._fp0 = (0, 0)  # the shared fingerprint cache's (hits, misses) when this source took the engine

    def open(self, fmt: ProgramFormat) -> None:
        from studio.presenter.idle import IdleMotion

        super().open(fmt)
        if getattr(self, "idle", None) is None:
            self.idle = IdleMotion(fmt.fps, seed=self.seed)
            self._stress_done = -math.inf

    # per item

    def _mouth(self, item, opts: frozenset, r: int) -> np.ndarray:
        """Row ``r`` of ``item``'s n_slots x 5 mouth coefficients. Speech with phone timings and pocketsphinx's
        recognition are computed once for the whole item; the neural engine's track is streamed, as far as the
        frames asked for, so a long recording starts at once and its progress is true."""
        key = ("mouth", self.fmt.fps, Optimization.AUDIO_CACHE in opts, Optimization.SILENCE_SIEVE in opts,
               Optimization.KV_CACHE in opts)
        got = item.motion_cache.get(key)
        if got is None:
            got = self._track(item, opts)
            item.motion_cache[key] = got
        if isinstance(got, _NeuralTrack):
            return got.row(r, self)
        return got[r]

    def _track(self, item, opts: frozenset):
        n = item.n_slots
        if item.phonemes:
            from studio.presenter.motion import loudness_envelope
            from studio.speech.visemes import mouth_track

            loud = loudness_envelope(item.analysis_audio, 16000, self.fmt.fps, n)
            mouth = mouth_track(item.phonemes, self.fmt.fps, n, loudness=loud)[:, _MOUTH]
        elif self.audio_engine is AudioEngine.NEURAL and self._neural_engine() is not None:
            session = self._neural.session(fingerprints=Optimization.AUDIO_CACHE in opts,
                                           kv_cache=Optimization.KV_CACHE in opts,
                                           skip_silence=Optimization.SILENCE_SIEVE in opts, kv_probe="inline",
                                           kv_probes=self._kv_probes)
            return _NeuralTrack(session, item.analysis_audio, self.fmt.fps, n)
        else:
            from studio.audio.recognizer import recognize_file_phones
            from studio.presenter.motion import loudness_envelope
            from studio.speech.visemes import mouth_track

            phones = recognize_file_phones(item.analysis_audio, 16000)
            item.motion_cache["phones"] = tuple(phones)
            loud = loudness_envelope(item.analysis_audio, 16000, self.fmt.fps, n)
            mouth = mouth_track(phones, self.fmt.fps, n, loudness=loud)[:, _MOUTH]
        return np.asarray(mouth, np.float32)

    def _neural_engine(self):
        if self._neural is None:
            from studio.neural.engine import default_engine

            try:
                self._neural = default_engine()
                fp = self._neural.fingerprints
                # the engine and its cache are process-wide: this source reports the counts from here on
                self._fp0 = (fp.hits, fp.misses) if fp is not None else (0, 0)
            except ModelLoadError as exc:
                self.note = f"{exc} Using the pocketsphinx engine instead."
                log.warning("%s", self.note)
                self.audio_engine = AudioEngine.POCKETSPHINX
                return None
        return self._neural

    # the role

    def motion(self, chunk: Chunk) -> np.ndarray:
        fps = self.fmt.fps
        out = np.zeros((chunk.n, N_COEFFS), np.float32)
        for j, slot in enumerate(chunk.slots):
            slot = int(slot)
            t = (slot + 0.5) / fps
            item = next((x for x in chunk.items if x.start_slot <= slot < x.end_slot), None)
            mouth = None
            if item is not None:
                mouth = self._mouth(item, chunk.optimizations, slot - item.start_slot)
                for p in item.phonemes:
                    st = item.start_slot / fps + p.start_s
                    if p.stress == 1 and self._stress_done < st <= t:
                        self.idle.nod(st)
            self._stress_done = max(self._stress_done, t)
            c = self.idle.frame(t, speaking=mouth is not None and bool(np.any(mouth > 0.05)))
            if mouth is not None:
                c[_MOUTH] = mouth
            else:
                c[_MOUTH] = 0.0
            out[j] = c
        self._frames += chunk.n
        return out

    def speaking(self, chunk: Chunk) -> np.ndarray | None:
        """Where items have phone timings, speech is known exactly (non-silence phones, 0.1 s hangover)."""
        fps = self.fmt.fps
        out = np.zeros(chunk.n, bool)
        for j, slot in enumerate(chunk.slots):
            slot = int(slot)
            item = next((x for x in chunk.items if x.start_slot <= slot < x.end_slot), None)
            if item is None:
                continue
            phones = item.phonemes or item.motion_cache.get("phones", ())
            if not phones:
                return None  # a recording: the silence sieve listens
            t = (slot - item.start_slot) / fps
            t1 = t + 1.0 / fps
            out[j] = any(p.phoneme not in _SILENCE and p.start_s < t1 and p.end_s + _SPEECH_HANGOVER_S > t
                         for p in phones)
        return out

    def stats(self) -> dict[str, float]:
        eng = self._neural
        if eng is None:
            return {}
        out = {"model_step_ms": self._model_ms / max(1, self._model_frames - self._model_skipped),
               "model_frames_skipped": self._model_skipped, "kv_cache_bytes": self._kv_bytes}
        if self._kv_probes:  # what the KV cache saves a step, measured live (studio.neural.engine.MotionSession)
            from studio.neural.engine import kv_saved

            saved, tokens = kv_saved(self._kv_probes)
            out["kv_saved_ms_per_frame"] = saved * MODEL_FPS / self.fmt.fps  # per output frame
            out["kv_probe_tokens"] = tokens
        if eng.fingerprints is not None:
            st = eng.fingerprints.stats()
            hits, misses = max(0, st.hits - self._fp0[0]), max(0, st.misses - self._fp0[1])
            saved = hits * st.encoder_ms_per_miss
            out.update({"audio_cache_hits": hits, "audio_cache_misses": misses, "audio_cache_saved_ms": saved,
                        "audio_cache_saved_ms_per_frame": saved / max(1, self._frames)})
        return out


_SILENCE = {"SIL", "sil", "_", "", " ", "#", "^", "$"}


class _NeuralTrack:
    """The neural engine's mouth track of one recording at the output rate, streamed: audio goes into the session
    in blocks until the rows asked for are exact (each output frame lies between two model frames, as resampling
    the whole track would place it), and after the last block the session is flushed."""

    BLOCK_SAMPLES = 32000  # 2 s at 16 kHz a push

    def __init__(self, session, audio: np.ndarray, fps: float, n_slots: int) -> None:
        self.session = session
        self.audio = audio
        self.fps = fps
        self.rows = np.zeros((n_slots, 5), np.float32)
        self.ready = 0  # rows[:ready] are final
        self.model = np.zeros((0, 5), np.float32)  # the engine's frames from number ``base`` on
        self.base = 0
        self.pushed = 0
        self.flushed = False
        self._ms = 0.0
        self._skipped = 0

    def row(self, r: int, owner: "ProgramMotion") -> np.ndarray:
        while r >= self.ready and self._advance(owner):
            pass
        return self.rows[min(r, len(self.rows) - 1)]

    def _advance(self, owner: "ProgramMotion") -> bool:
        if self.ready >= len(self.rows):
            return False
        s = self.session
        if self.pushed < len(self.audio):
            m, _ = s.push(self.audio[self.pushed : self.pushed + self.BLOCK_SAMPLES])
            self.pushed = min(len(self.audio), self.pushed + self.BLOCK_SAMPLES)
        else:
            m, _ = s.flush()
            self.flushed = True
        if len(m):
            self.model = np.concatenate([self.model, np.asarray(m, np.float32)])
        owner._model_frames += len(m)
        owner._model_ms += s.step_ms_total - self._ms
        owner._model_skipped += s.frames_skipped - self._skipped
        self._ms, self._skipped = s.step_ms_total, s.frames_skipped
        owner._kv_bytes = s.cache_nbytes() if s.kv_cache else float(
            sum(a.nbytes + b.nbytes for a, b in s._history))
        k = self.base + len(self.model)  # model frames so far
        if self.flushed:
            end = len(self.rows)
        else:  # rows whose time is not after the last model frame's centre: interpolated as in the whole track
            end = min(len(self.rows), max(0, math.floor((k - 0.5) / MODEL_FPS * self.fps - 0.5) + 1))
        if end > self.ready and len(self.model):
            dst_t = (np.arange(self.ready, end) + 0.5) / self.fps
            src_t = (np.arange(self.base, k) + 0.5) / MODEL_FPS
            self.rows[self.ready:end] = np.stack([np.interp(dst_t, src_t, self.model[:, c]) for c in range(5)], 1)
        self.ready = max(self.ready, end)
        # keep the model frames from the one before the next row on
        first = max(self.base, math.floor((self.ready + 0.5) / self.fps * MODEL_FPS - 0.5) - 1)
        self.model = self.model[min(first - self.base, len(self.model)):]
        self.base = min(first, k)
        return True


class MicMotion(MotionSource):
    """The microphone through the live neural engine (default) or pocketsphinx; falls back to pocketsphinx with a
    note when the neural weights cannot load.

    It listens to the chunks alone: each chunk's ``fresh`` audio (what arrived since the previous chunk, ahead of the
    chunk's slots by this source's ``lead_s``) goes into the ring of what it has heard, on the chunks' analysis
    timeline, and slot ``k`` shows the audio at ``k / fps`` on it."""

    name = "microphone"
    HEARD_S = 10  # the audio kept for the engine (it reads each sample once, as it arrives)

    def __init__(self, engine: AudioEngine = DEFAULT_AUDIO_ENGINE, settings: MicMotionSettings | None = None,
                 motion_thread: bool = True, lead_s: float = 0.04) -> None:
        self.engine = engine
        self.settings = settings or MicMotionSettings()
        self.motion_thread = motion_thread
        self._lead_s = lead_s
        self.note = ""
        self.src = None
        self._model_ms: list[float] = []

    def open(self, fmt: ProgramFormat) -> None:
        from dataclasses import replace

        from studio.audio.ringbuffer import AudioRing

        super().open(fmt)
        if self.src is not None:
            return
        self.heard = AudioRing(self.HEARD_S * ANALYSIS_RATE_HZ, ANALYSIS_RATE_HZ)
        ms = replace(self.settings, fps=fmt.fps)
        if self.engine is AudioEngine.NEURAL:
            from studio.neural.mic import NeuralMicMotionSource

            try:
                self.src = NeuralMicMotionSource(self.heard, ms)
            except ModelLoadError as exc:
                self.engine = AudioEngine.POCKETSPHINX
                self.note = f"{exc} Using the pocketsphinx engine instead."
                log.warning("%s", self.note)
        if self.src is None:
            from studio.audio.mic_motion import MicMotionSource

            self.src = MicMotionSource(self.heard, ms)
        if self.motion_thread:
            self.src.start_worker()

    @property
    def lead_s(self) -> float:
        """40 ms, or the engine's look-ahead where it needs more (the neural engine's)."""
        return max(self._lead_s, self.src.min_lead_s) if self.src is not None else self._lead_s

    def _listen(self, chunk: Chunk) -> None:
        """The chunk's fresh audio into the ring of what this source has heard (each sample once)."""
        if chunk.fresh is None:
            return
        x = chunk.fresh
        gap = chunk.fresh_start - self.heard.total_written
        if gap > 0:  # not heard (a source that started later): silence keeps the timeline
            self.heard.write(np.zeros(gap, np.float32))
        elif gap < 0:
            x = x[-gap:]
        self.heard.write(x)

    def motion(self, chunk: Chunk) -> np.ndarray:
        fps = self.fmt.fps
        self._listen(chunk)
        if hasattr(self.src, "set_options") and not (chunk.plain or chunk.baseline_of):
            # the producer's flags only: a baseline chunk's would restart the live model (its mouth closes until
            # it has its lead of audio again) twice per baseline chunk
            self.src.set_options(kv_cache=Optimization.KV_CACHE in chunk.optimizations,
                                 skip_silence=Optimization.SILENCE_SIEVE in chunk.optimizations)
        out = np.zeros((chunk.n, N_COEFFS), np.float32)
        for j, slot in enumerate(chunk.slots):
            t0 = time.perf_counter()
            out[j] = self.src.frame(int(slot) / fps)
            self._model_ms.append((time.perf_counter() - t0) * 1e3)
        del self._model_ms[:-500]
        return out

    def speaking(self, chunk: Chunk) -> np.ndarray | None:
        self._listen(chunk)
        return np.array([self.src.speaking_at(int(s) / self.fmt.fps) for s in chunk.slots], bool)

    def close(self) -> None:
        if self.src is not None:
            self.src.stop_worker()

    def stats(self) -> dict[str, float]:
        if self.src is None:
            return {}
        m = self.src.stats()
        out = {"motion_ms_median": float(np.median(self._model_ms)) if self._model_ms else math.nan,
               "sieve_frames_seen": m.sieve.frames_seen, "sieve_frames_skipped": m.sieve.frames_skipped,
               "recognizer_share": m.recognizer_share, "frames_missing": m.frames_missing}
        if self.engine is AudioEngine.NEURAL:
            out["model_ms_per_frame"] = m.recognizer.cpu_ms_per_chunk_median
            out["kv_cache_bytes"] = float(self.src.cache_nbytes())
            out["model_step_ms"] = self.src.step_ms()
            saved, tokens = self.src.kv_saved_ms()
            if math.isfinite(saved):  # a step a model frame: per output frame at the program's rate
                out["kv_saved_ms_per_frame"] = saved * MODEL_FPS / self.fmt.fps
                out["kv_probe_tokens"] = tokens
        return out



def warm_microphone(engine: AudioEngine) -> None:
    """Load the microphone's audio engine and run it on a second of silence before the presenter starts: loaded at
    the switch, it held the GIL long enough to stall the window (166 ms in the soak) and raised the resident size by
    ~100 MB in the middle of a show; loaded beside a running core (the first start exports its ONNX files, ~2 s), it
    made it drop frames. Skipped where there is no input device (the mode cannot start there)."""
    from studio.audio.capture import list_input_devices
    from studio.audio.features import SAMPLE_RATE_HZ
    from studio.audio.ringbuffer import AudioRing

    t0 = time.perf_counter()
    try:
        if not list_input_devices():
            return
        ring = AudioRing(2 * SAMPLE_RATE_HZ, SAMPLE_RATE_HZ)
        ring.write(np.zeros(SAMPLE_RATE_HZ, np.float32))
        if engine is AudioEngine.NEURAL:
            from studio.neural.mic import NeuralMicMotionSource

            src = NeuralMicMotionSource(ring)
        else:
            from studio.audio.mic_motion import MicMotionSource

            src = MicMotionSource(ring)
        for k in range(10):
            src.frame(0.04 * k)
    except Exception as exc:  # the microphone mode reports it when it is asked for
        log.warning("warming up the microphone's %s engine: %s", engine.value, exc)
        return
    log.info("the microphone's %s engine warmed in %.0f ms", engine.value, (time.perf_counter() - t0) * 1e3)
