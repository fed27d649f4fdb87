"""The neural audio-to-motion engine: one wrapper that owns the model, its backend and the fingerprint cache.

``NeuralMotionEngine.session()`` gives a streaming ``MotionSession``: ``push(audio)`` returns the mouth coefficients
of every 25 fps frame whose audio (plus the 75 ms look-ahead) has arrived; ``flush()`` ends the stream. The offline
call ``motion(audio)`` is the same session fed at once, so offline and live give identical numbers.

Per session: streaming log-mel -> encoder windows of 200 ms at a 133 ms stride (each through the shared
``FingerprintCache``) -> one ``StepGraph`` step per frame against an INT8 sliding-window KV cache. Both backends run
the same graphs: PyTorch eager, or ONNX Runtime on the exported ``encoder.onnx`` / ``step.onnx``.

VAD gate (``NeuralSettings.vad_gate``, on by default): Silero VAD (the silence sieve's model, no level gate, no
hangover) runs on the same audio in 32 ms frames; a motion frame whose own audio and look-ahead hold no 32 ms frame
that Silero calls speech comes out as silence (viseme SIL, mouth at rest), and the rest pose is what the model is fed
back as its previous frame. Why: on the human clips most silence frames the model calls speech sit right after a
phrase ends, where Silero (trained on real voices) already hears silence. It uses only audio the frame's output may
depend on anyway (up to 75 ms after its centre), so it adds no latency.

p/b/m closure (``NeuralSettings.pbm_closure``, on by default): a frame whose viseme is p/b/m, or whose p/b/m
probability reaches ``NeuralSettings.pbm_threshold``, comes out with the lips together (LIP_PART 0); the model is still
fed back its own coefficients, so the visemes do not change. Why: the
shipped weights are an ensemble (``Audio2MotionEnsemble``), whose mean mouth seldom closes fully unless every member
does, while its visemes are the more accurate signal (metrics.json, human_speech_eval).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from studio.audio.features import N_MELS, SAMPLE_RATE_HZ, StreamingLogMel
from studio.audio.fingerprint import STRIDE_MS, WINDOW_MEL, FingerprintCache
from studio.audio.settings import SieveSettings
from studio.audio.sieve import SilenceSieve
from studio.errors import ModelLoadError
from studio.neural.constants import FPS, MEL_FRONT_PAD, SAMPLES_PER_FRAME, SILENT_MEL
from studio.neural.kvcache import CacheDType
from studio.neural.model import ENC_RECEPTIVE_FIELD, LOOKAHEAD_MS, Audio2Motion, StepGraph
from studio.neural.settings import Backend, NeuralSettings
from studio.contracts.coeffs import MOUTH_COEFFS, Coeff
from studio.speech.visemes import Viseme

log = logging.getLogger(__name__)

_SILENT_MEL = SILENT_MEL
_GATE_SIEVE = SieveSettings(rms_gate_dbfs=float("-inf"), hangover_ms=0.0)  # Silero alone: any input level
_VAD_FRAME = _GATE_SIEVE.frame_samples  # 512: Silero's frame at 16 kHz (32 ms)
_SIL = int(Viseme.SIL)
_PBM = int(Viseme.PBM)
_PART = list(MOUTH_COEFFS).index(Coeff.LIP_PART)  # column in the engine's mouth coefficients
# a frame's output depends on audio up to this many samples after its start (1520: its centre + the look-ahead)
KV_PROBE_TOKENS = int(60 * FPS)  # the longest stream the live KV-cache probe times uncached (a minute of frames)
KV_PROBE_PERIOD_S = 2.0  # at most one live KV-cache probe this often ...
KV_PROBE_DUTY = 0.02  # ... and at most this share of the time spent in them
FRAME_REACH = SAMPLES_PER_FRAME // 2 + int(round(LOOKAHEAD_MS / 1000 * SAMPLE_RATE_HZ))


@dataclass(frozen=True)
class NeuralMotion:
    """Engine output at 25 fps: mouth coefficients (T x 5: jaw, part, round, spread, press; 0..1) and visemes (T,)."""

    mouth: np.ndarray
    visemes: np.ndarray
    viseme_probs: np.ndarray | None = None  # T x 16 softmax of the viseme head
    fps: float = FPS

    def resample(self, fps: float, n_frames: int) -> np.ndarray:
        """Mouth coefficients at another frame rate (n_frames x 5), linear between 25 fps frame centres."""
        src_t = (np.arange(len(self.mouth)) + 0.5) / self.fps
        dst_t = (np.arange(n_frames) + 0.5) / fps
        if len(self.mouth) == 0:
            return np.zeros((n_frames, 5), np.float32)
        return np.stack([np.interp(dst_t, src_t, self.mouth[:, c]) for c in range(5)], axis=1).astype(np.float32)


class _TorchBackend:
    def __init__(self, model: Audio2Motion) -> None:
        self.model = model
        self.step_graph = StepGraph(model).eval()

    def encode(self, window: np.ndarray) -> np.ndarray:  # WINDOW_MEL x n_mels -> WINDOW_MEL x C
        with torch.inference_mode():
            return self.model.encoder(torch.from_numpy(window)[None])[0].numpy()

    def initial_state(self, dtype) -> list:
        return list(self.model.empty_state(dtype).tensors())

    def step(self, enc: np.ndarray, prev: np.ndarray, state: list) -> tuple[np.ndarray, np.ndarray, list]:
        with torch.inference_mode():
            out = self.step_graph(torch.from_numpy(enc), torch.from_numpy(prev), *state)
        return out[0].numpy(), out[1].numpy(), list(out[2:])

    def state_nbytes(self, state: list) -> int:
        return sum(t.numel() * t.element_size() for t in state)


class _OnnxBackend:
    def __init__(self, model: Audio2Motion, onnx_dir: Path, threads: int) -> None:
        import onnxruntime as ort

        self.model = model
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            self.enc = ort.InferenceSession(str(onnx_dir / "encoder.onnx"), opts, providers=["CPUExecutionProvider"])
            self.stp = ort.InferenceSession(str(onnx_dir / "step.onnx"), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail / InvalidGraph types
            raise ModelLoadError(f"Cannot load the ONNX audio-to-motion graphs from {onnx_dir} ({exc}): "
                                 "run `python -m studio.neural.export`.") from exc
        self.state_names = [i.name for i in self.stp.get_inputs()][2:]

    def encode(self, window: np.ndarray) -> np.ndarray:
        return self.enc.run(None, {"mel": window[None].astype(np.float32)})[0][0]

    def initial_state(self, dtype) -> list:
        return [t.numpy() for t in self.model.empty_state(dtype).tensors()]

    def step(self, enc: np.ndarray, prev: np.ndarray, state: list) -> tuple[np.ndarray, np.ndarray, list]:
        feeds = {"enc": enc.astype(np.float32), "prev": prev.astype(np.float32)}
        feeds.update(dict(zip(self.state_names, state)))
        out = self.stp.run(None, feeds)
        return out[0], out[1], out[2:]

    def state_nbytes(self, state: list) -> int:
        return int(sum(a.nbytes for a in state))


class NeuralMotionEngine:
    """Owns the model (weights, backend, cache precision) and the fingerprint cache shared by all sessions."""

    def __init__(self, settings: NeuralSettings | None = None, model: Audio2Motion | None = None,
                 fingerprints: FingerprintCache | None = None) -> None:
        from studio.neural.weights import load_weights

        self.settings = settings or NeuralSettings()
        s = self.settings
        if model is None:
            if not s.weights_path.is_file():
                raise ModelLoadError(f"Audio-to-motion weights not found at {s.weights_path}: train them with "
                                     "`python -m studio.neural.training.train` or choose the pocketsphinx engine.")
            try:
                model = load_weights(s.weights_path)
            except (RuntimeError, KeyError, TypeError, OSError) as exc:
                raise ModelLoadError(f"Cannot load {s.weights_path} ({exc}): retrain or restore the file.") from exc
        self.model = model.eval()
        if s.backend is Backend.ONNX and s.cache_dtype is not CacheDType.INT8:
            raise ModelLoadError("The exported ONNX step graph has an INT8 cache: use the torch backend for "
                                 f"{s.cache_dtype.value}.")
        if s.backend is Backend.ONNX:
            self.backend: _TorchBackend | _OnnxBackend = _OnnxBackend(self.model, self._onnx_dir(), s.onnx_threads)
        else:
            self.backend = _TorchBackend(self.model)
        if fingerprints is None and s.fingerprint_capacity > 0:
            fingerprints = FingerprintCache(s.fingerprint_capacity)
        self.fingerprints = fingerprints
        self._vad_model: SilenceSieve | None = None  # loaded on the first gated session, shared by all
        self._vad_lock = threading.Lock()

    def _vad(self) -> SilenceSieve:
        """A fresh Silero VAD stream (no level gate, no hangover) on the engine's one loaded model."""
        with self._vad_lock:
            if self._vad_model is None:
                self._vad_model = SilenceSieve(_GATE_SIEVE)
        return SilenceSieve(_GATE_SIEVE, share_model_of=self._vad_model)

    def _onnx_dir(self) -> Path:
        """The settings' folder, or a cache folder keyed by the weights' hash, exported on first use."""
        if self.settings.onnx_dir is not None:
            return self.settings.onnx_dir
        import hashlib

        from studio.neural.export import export
        from studio.paths import cache_dir

        h = hashlib.md5(str(sorted((k, float(v.float().sum())) for k, v in self.model.state_dict().items()))
                        .encode()).hexdigest()[:12]
        folder = cache_dir("audio2motion") / h
        if not ((folder / "encoder.onnx").is_file() and (folder / "step.onnx").is_file()):
            try:
                export(self.model, folder)
            except Exception as exc:  # torch.onnx raises many types; the user can still use the torch backend
                raise ModelLoadError(f"ONNX export of the audio-to-motion model failed ({exc}): "
                                     "use the torch backend.") from exc
        return folder

    def session(self, stride_mel: float | None = None, fingerprints: bool = True, kv_cache: bool = True,
                skip_silence: bool = False, kv_probe: str = "", kv_probes=None) -> "MotionSession":
        """A new stream; ``stride_mel``: encoder window stride in 10 ms mel frames (default the fingerprint cache's
        13.33; the live microphone uses 4, one frame, so a frame waits for no more audio than its look-ahead).
        ``fingerprints=False`` keeps the stream out of the shared cache (a live voice rarely repeats a window
        exactly, and would push the rundown's phrases out). ``kv_cache=False``: no KV cache - every step runs the
        parallel form over every token of the stream so far (the plain pipeline's baseline: exact, but its cost grows
        with the stream). ``skip_silence``: where the VAD gate hears no speech the model does no work at all (the
        mouth rests) and the stream starts afresh at the next speech (the silence sieve of the core).
        ``kv_probe``: with the cache on, measure live what it saves (``MotionSession.kv_saved_ms``): "inline" times
        the uncached step within ``push`` now and then, "external" only keeps its inputs for a caller's thread
        (``probe_kv``), "" neither; the probes go into ``kv_probes`` (a caller's deque, kept across its streams) or
        the session's own."""
        return MotionSession(self, stride_mel, fingerprints, kv_cache, skip_silence, kv_probe, kv_probes)

    def motion(self, audio: np.ndarray) -> NeuralMotion:
        """Whole 16 kHz mono float32 recording -> 25 fps motion, ceil(N / 640) frames."""
        s = self.session()
        mouth, vis = s.push(audio)
        p1 = s.last_probs
        m2, v2 = s.flush()
        probs = np.concatenate([p1, s.last_probs])
        return NeuralMotion(np.concatenate([mouth, m2]), np.concatenate([vis, v2]), probs)


def kv_saved(probes) -> tuple[float, int]:
    """(median uncached - median cached step ms, median token count) of KV-cache probes (cached ms, uncached ms,
    tokens); nan, 0 without any. Streams longer than KV_PROBE_TOKENS are timed over their last KV_PROBE_TOKENS
    tokens: the uncached cost grows with the stream, so the figure is then a lower bound."""
    probes = list(probes)
    if not probes:
        return float("nan"), 0
    c, u, n = (float(np.median([p[i] for p in probes])) for i in range(3))
    return u - c, int(n)


class MotionSession:
    """One stream: feed audio as it comes, get frames as soon as their look-ahead has arrived."""

    def __init__(self, engine: NeuralMotionEngine, stride_mel: float | None = None, fingerprints: bool = True,
                 kv_cache: bool = True, skip_silence: bool = False, kv_probe: str = "", kv_probes=None) -> None:
        self.engine = engine
        self.kv_cache = kv_cache
        # the live KV-cache probe (``kv_probe``): recent cached step times kept; (cached ms, uncached ms, tokens) of
        # each probe into ``kv_probes``
        self._probe = kv_probe if kv_cache else ""
        self._cached_ms: collections.deque[float] = collections.deque(maxlen=256)
        self._probe_next = int(KV_PROBE_PERIOD_S * FPS)  # inline: the step of the next probe
        self.kv_probes: collections.deque[tuple[float, float, int]] = (
            kv_probes if kv_probes is not None else collections.deque(maxlen=64))
        self.kv_probe_count = 0
        self.skip_silence = skip_silence and engine.settings.vad_gate
        self.frames_skipped = 0  # silent frames on which the model did no work (skip_silence)
        self.step_ms_total = 0.0  # time inside the model's steps
        self.steps = 0
        # (token, prev) of the steps the uncached form reads: every step without the cache; the last KV_PROBE_TOKENS
        # for the probe with it
        self._history: collections.deque[tuple[np.ndarray, np.ndarray]] = collections.deque(
            maxlen=KV_PROBE_TOKENS if kv_cache else None)
        self._fingerprints = engine.fingerprints if fingerprints else None
        self._stride = STRIDE_MS / 10.0 if stride_mel is None else float(stride_mel)
        if not 1 <= self._stride <= WINDOW_MEL - ENC_RECEPTIVE_FIELD + 1:
            raise ValueError(f"stride_mel {stride_mel} out of range 1..{WINDOW_MEL - ENC_RECEPTIVE_FIELD + 1}")
        cfg = engine.model.cfg
        self._mpf, self._tok = cfg.mel_per_frame, cfg.mel_per_token
        self._mel = StreamingLogMel()
        # Mel frames and encoder outputs kept in padded coordinates [base, base + len).
        self._mel_buf = np.full((MEL_FRONT_PAD, N_MELS), _SILENT_MEL, np.float32)
        self._mel_base = 0
        self._enc_buf = np.zeros((0, cfg.enc_channels), np.float32)
        self._enc_base = MEL_FRONT_PAD
        self._window_k = 0
        self._first_end = MEL_FRONT_PAD + 13
        self._frames_out = 0
        self._samples_in = 0
        self._prev = np.zeros(cfg.n_out, np.float32)
        self._state = engine.backend.initial_state(engine.settings.cache_dtype)
        self._lock = threading.Lock()
        # VAD gate: Silero decisions per 32 ms frame of the pushed audio, frame k in self._vad_said[k - _vad_base]
        self._vad = engine._vad() if engine.settings.vad_gate else None
        self._vad_said: list[bool] = []
        self._vad_base = 0
        self.frames_gated = 0  # frames the VAD gate put to rest
        self._close_pbm = engine.settings.pbm_closure
        self._pbm_threshold = engine.settings.pbm_threshold
        self.last_probs = np.zeros((0, 16), np.float32)  # viseme probabilities of the frames the last call returned

    @property
    def frames_out(self) -> int:
        return self._frames_out

    def cache_nbytes(self) -> int:
        """Bytes held by the KV cache now (constant over the stream)."""
        return self.engine.backend.state_nbytes(self._state)

    def _encode(self, window: np.ndarray) -> np.ndarray:
        fp = self._fingerprints
        if fp is None:
            return self.engine.backend.encode(window)
        return fp.get_or_compute(window, self.engine.backend.encode)

    def _run_windows(self) -> None:
        mel_end = self._mel_base + len(self._mel_buf)
        while True:
            e = self._first_end + int(round(self._window_k * self._stride))
            if e > mel_end:
                break
            done = self._enc_base + len(self._enc_buf)
            w = self._mel_buf[e - WINDOW_MEL - self._mel_base : e - self._mel_base]
            out = self._encode(np.ascontiguousarray(w))
            self._enc_buf = np.concatenate([self._enc_buf, out[WINDOW_MEL - (e - done):]])
            self._window_k += 1
        keep = max(0, len(self._mel_buf) - WINDOW_MEL)  # bounded history
        self._mel_buf = self._mel_buf[keep:]
        self._mel_base += keep

    def _run_steps(self) -> tuple[np.ndarray, np.ndarray]:
        mouth, vis, probs = [], [], []
        enc_end = self._enc_base + len(self._enc_buf)
        while MEL_FRONT_PAD + self._mpf * self._frames_out + self._tok <= enc_end:
            a = MEL_FRONT_PAD + self._mpf * self._frames_out - self._enc_base
            silent = self._vad is not None and not self._speech_near(self._frames_out)
            if silent and self.skip_silence:  # no work: rest, and the next speech starts a fresh stream
                self.frames_skipped += 1
                self._prev = np.zeros(len(self._prev), np.float32)
                self._state = self.engine.backend.initial_state(self.engine.settings.cache_dtype)
                self._history.clear()
                lg = np.full(16, -30.0, np.float32)
                lg[_SIL] = 0.0
                vis.append(_SIL)
                mouth.append(self._prev)
                e = np.exp(lg - lg.max())
                probs.append(e / e.sum())
                self._frames_out += 1
                continue
            t0 = time.perf_counter()
            if self.kv_cache:
                y, logits, self._state = self.engine.backend.step(self._enc_buf[a:a + self._tok], self._prev,
                                                                  self._state)
            else:
                y, logits = self._uncached_step(self._enc_buf[a:a + self._tok], self._prev)
            step_ms = (time.perf_counter() - t0) * 1e3
            self.step_ms_total += step_ms
            self.steps += 1
            if self._probe:
                self._keep_probe_input(self._enc_buf[a:a + self._tok], self._prev, step_ms)
            lg = np.asarray(logits, np.float32).reshape(-1)
            if silent:
                self._prev = np.zeros(len(self._prev), np.float32)  # rest, and the model goes on from rest
                vis.append(_SIL)
                self.frames_gated += 1
            else:
                self._prev = np.asarray(y, np.float32).reshape(-1)
                vis.append(int(np.argmax(lg)))
            e = np.exp(lg - lg.max())
            probs.append(e / e.sum())
            if self._close_pbm and (vis[-1] == _PBM or 0 < self._pbm_threshold <= probs[-1][_PBM]):
                mouth.append(self._prev.copy())
                mouth[-1][_PART] = 0.0  # lips together; the model still goes on from its own coefficients
            else:
                mouth.append(self._prev)
            self._frames_out += 1
        drop = MEL_FRONT_PAD + self._mpf * self._frames_out - self._enc_base
        if drop > 0:
            self._enc_buf = self._enc_buf[drop:]
            self._enc_base += drop
        m = np.stack(mouth).astype(np.float32) if mouth else np.zeros((0, 5), np.float32)
        self.last_probs = np.stack(probs) if probs else np.zeros((0, 16), np.float32)
        return m, np.asarray(vis, np.int64)

    def _keep_probe_input(self, enc: np.ndarray, prev: np.ndarray, cached_ms: float) -> None:
        self._remember(enc, prev)
        self._cached_ms.append(cached_ms)
        if self._probe == "inline" and self.steps >= self._probe_next:  # on the stream's clock: offline too
            ms = self.probe_kv(self.kv_probe_inputs())
            self._probe_next = self.steps + int(FPS * max(KV_PROBE_PERIOD_S, ms / 1e3 / KV_PROBE_DUTY))

    def kv_probe_inputs(self):
        """A copy of what the uncached step would read now: (1 x N x 8C, 1 x N x 5 tensors, median cached step ms),
        or None without a probe or before the first step."""
        if not self._probe or not self._history:
            return None
        return *self._stacked_history(), float(np.median(self._cached_ms))

    def probe_kv(self, inputs) -> float:
        """Time the uncached step on ``kv_probe_inputs()`` (from any thread), keep the pair, return its ms. Callers
        probe every ``KV_PROBE_PERIOD_S``, or less often so that probes take at most ``KV_PROBE_DUTY`` of the time."""
        if inputs is None:
            return 0.0
        feats, prevs, cached_ms = inputs
        t0 = time.perf_counter()
        with torch.inference_mode():
            self.engine.model.motion(feats, prevs)
        ms = (time.perf_counter() - t0) * 1e3
        self.kv_probes.append((cached_ms, ms, feats.shape[1]))
        self.kv_probe_count += 1
        return ms

    def kv_saved_ms(self) -> tuple[float, int]:
        """What the KV cache saves a step, from this stream's probes (``kv_saved``)."""
        return kv_saved(self.kv_probes)

    def _remember(self, enc: np.ndarray, prev: np.ndarray) -> None:
        self._history.append((np.asarray(enc, np.float32).reshape(-1), np.asarray(prev, np.float32).reshape(-1)))

    def _stacked_history(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The kept steps' tokens and previous outputs: 1 x N x 8C, 1 x N x 5."""
        feats = torch.from_numpy(np.stack([h[0] for h in self._history]))[None]
        prevs = torch.from_numpy(np.stack([h[1] for h in self._history]))[None]
        return feats, prevs

    def _uncached_step(self, enc: np.ndarray, prev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """No KV cache: the parallel form over every token of the stream so far; the last token's outputs."""
        self._remember(enc, prev)
        feats, prevs = self._stacked_history()
        with torch.inference_mode():
            y, logits = self.engine.model.motion(feats, prevs)
        return y[0, -1].numpy(), logits[0, -1].numpy()

    def _speech_near(self, t: int) -> bool:
        """Whether Silero heard speech in a 32 ms frame ending within frame ``t``'s audio or its look-ahead
        (samples 640 t .. 640 t + 1520). Frames not decided yet count as speech (the gate fails open; with audio
        pushed in order they always are decided by the time the model emits frame ``t``)."""
        a = SAMPLES_PER_FRAME * t
        k_lo, k_hi = a // _VAD_FRAME, (a + FRAME_REACH) // _VAD_FRAME - 1
        if k_hi - self._vad_base >= len(self._vad_said):
            return True
        return any(self._vad_said[max(k_lo - self._vad_base, 0) : k_hi - self._vad_base + 1])

    def _feed_vad(self, x: np.ndarray) -> None:
        if self._vad is None:
            return
        self._vad_said += self._vad.frames(x)  # no hangover: each 32 ms frame's own decision
        drop = SAMPLES_PER_FRAME * self._frames_out // _VAD_FRAME - self._vad_base  # no later frame looks back there
        if drop > 0:
            del self._vad_said[:drop]
            self._vad_base += drop

    def push(self, audio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """16 kHz mono float32 samples -> (mouth K x 5, visemes K) for the frames completed by them."""
        with self._lock:
            x = np.asarray(audio, np.float32).reshape(-1)
            self._samples_in += len(x)
            self._feed_vad(x)
            return self._push_mel(self._mel.push(x))

    def push_mel(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log-mel frames (K x n_mels, as ``studio.audio.features.log_mel`` makes them) instead of audio: for
        evaluating on the training recipe's stored features. There is no audio for the VAD gate, so it is off for
        the session. Do not mix with ``push`` in one session (``flush`` may follow: it pads with silence)."""
        with self._lock:
            self._vad = None
            return self._push_mel(np.asarray(feats, np.float32))

    def _push_mel(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(feats):
            self._mel_buf = np.concatenate([self._mel_buf, feats])
        self._run_windows()
        return self._run_steps()

    def flush(self, frames: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """End of stream: pad with silence so every frame up to ``frames`` (default ceil(samples / 640)) comes out;
        returns those."""
        target = -(-self._samples_in // SAMPLES_PER_FRAME) if frames is None else int(frames)
        outs_m, outs_v, outs_p = [], [], []
        pad = np.zeros(SAMPLES_PER_FRAME, np.float32)
        n_in = self._samples_in
        while self._frames_out < target:
            m, v = self.push(pad)
            outs_m.append(m)
            outs_v.append(v)
            outs_p.append(self.last_probs)
        self._samples_in = n_in
        m = np.concatenate(outs_m) if outs_m else np.zeros((0, 5), np.float32)
        v = np.concatenate(outs_v) if outs_v else np.zeros(0, np.int64)
        p = np.concatenate(outs_p) if outs_p else np.zeros((0, 16), np.float32)
        extra = self._frames_out - target
        if extra > 0:
            m, v, p = m[: len(m) - extra], v[: len(v) - extra], p[: len(p) - extra]
        self.last_probs = p
        return m, v


_DEFAULT: NeuralMotionEngine | None = None
_DEFAULT_LOCK = threading.Lock()


def default_engine() -> NeuralMotionEngine:
    """The process-wide engine (one fingerprint cache shared by every segment): ONNX Runtime (fastest on the CPU;
    the graphs are exported into the cache on first use), else PyTorch."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            try:
                _DEFAULT = NeuralMotionEngine(NeuralSettings(backend=Backend.ONNX))
            except ModelLoadError as exc:
                if not NeuralSettings().weights_path.is_file():
                    raise
                log.warning("ONNX Runtime path unavailable (%s): using PyTorch", exc)
                _DEFAULT = NeuralMotionEngine(NeuralSettings(backend=Backend.TORCH))
        return _DEFAULT
