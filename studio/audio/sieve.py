"""The silence sieve: decides per 32 ms frame whether anyone is speaking, as cheaply as possible.

Two stages: an RMS gate (dBFS) rejects quiet frames for free; frames that pass go to Silero VAD (the ONNX model
bundled in the ``silero_vad`` wheel, run through plain onnxruntime, no torch). A hangover keeps "speaking" on
through short pauses. Callers ask the sieve first and skip recognition work while it says silence.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from studio.audio.settings import SieveSettings
from studio.errors import ModelLoadError

log = logging.getLogger(__name__)


def silero_onnx_path() -> Path:
    """The Silero VAD ONNX model inside the installed ``silero_vad`` wheel."""
    try:
        path = Path(str(resources.files("silero_vad") / "data" / "silero_vad.onnx"))
    except ModuleNotFoundError as exc:
        raise ModelLoadError("Silero VAD is not installed: run `pip install silero-vad`.") from exc
    if not path.is_file():
        raise ModelLoadError(f"Silero VAD model missing at {path}: reinstall with `pip install --force silero-vad`.")
    return path


@dataclass(frozen=True)
class SieveStats:
    frames_seen: int
    frames_gated: int  # rejected by the RMS gate (VAD not run)
    frames_vad_silent: int  # VAD ran and said silence
    frames_speech: int  # VAD said speech
    frames_speaking: int  # frames reported as speaking (speech + hangover)
    vad_calls: int
    vad_time_ms: float  # total wall time inside the VAD model

    @property
    def frames_skipped(self) -> int:
        """Frames on which no recognition work is needed (not speaking)."""
        return self.frames_seen - self.frames_speaking

    @property
    def vad_ms_per_call(self) -> float:
        return self.vad_time_ms / self.vad_calls if self.vad_calls else 0.0


class SilenceSieve:
    """Streaming speech/silence decision on 16 kHz float32 audio."""

    def __init__(self, settings: SieveSettings | None = None, share_model_of: SilenceSieve | None = None) -> None:
        """``share_model_of``: use that sieve's loaded Silero model (its ONNX session is stateless: the LSTM state
        lives in each sieve) instead of loading another, ~40 ms each."""
        self.settings = settings or SieveSettings()
        s = self.settings
        if s.sample_rate_hz != 16000 or s.frame_samples != 512:
            raise ValueError("the bundled Silero VAD runs 512-sample frames at 16 kHz")
        if share_model_of is not None:
            self._session = share_model_of._session
        else:
            self._session = self._load(s.onnx_threads)
        self._sr = np.array(s.sample_rate_hz, dtype=np.int64)
        self._hangover_frames = int(np.ceil(s.hangover_ms / 1000.0 * s.sample_rate_hz / s.frame_samples))
        self.reset()
        self._frames_seen = self._frames_gated = self._frames_vad_silent = self._frames_speech = 0
        self._frames_speaking = self._vad_calls = 0
        self._vad_ns = 0

    @staticmethod
    def _load(threads: int):
        try:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.inter_op_num_threads = 1
            opts.intra_op_num_threads = threads
            return ort.InferenceSession(str(silero_onnx_path()), sess_options=opts, providers=["CPUExecutionProvider"])
        except ModelLoadError:
            raise
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ModelLoadError(f"Cannot load Silero VAD: {exc}. Reinstall silero-vad / onnxruntime.") from exc

    def reset(self) -> None:
        """Forget the audio history (VAD state, context, pending samples, hangover); keep the counters."""
        self._state = np.zeros((2, 1, 128), np.float32)  # Silero LSTM state
        self._context = np.zeros(self.settings.context_samples, np.float32)
        self._pending = np.zeros(0, np.float32)
        self._since_speech = 1 << 30  # frames since the last speech frame
        self.last_probability = 0.0

    @property
    def speaking(self) -> bool:
        return self._since_speech <= self._hangover_frames

    def process(self, chunk: np.ndarray) -> bool:
        """Feed mono 16 kHz samples (any length); returns whether speech is on after the last full frame."""
        self.frames(chunk)
        return self.speaking

    def frames(self, chunk: np.ndarray) -> list[bool]:
        """Feed mono 16 kHz samples (any length); returns the speaking flag after each 32 ms frame they completed."""
        x = np.asarray(chunk, dtype=np.float32).reshape(-1)
        if self._pending.size:
            x = np.concatenate([self._pending, x])
        n = self.settings.frame_samples
        n_full = x.shape[0] // n
        out = []
        for i in range(n_full):
            self._process_frame(x[i * n : (i + 1) * n])
            out.append(self.speaking)
        self._pending = x[n_full * n :].copy()
        return out

    def _process_frame(self, frame: np.ndarray) -> None:  # frame: 512 float32
        s = self.settings
        self._frames_seen += 1
        rms = float(np.sqrt(np.mean(np.square(frame, dtype=np.float64)) + 1e-20))
        dbfs = 20.0 * np.log10(rms + 1e-12)
        if dbfs < s.rms_gate_dbfs:
            self._frames_gated += 1
            is_speech = False
            self.last_probability = 0.0
        else:
            x = np.concatenate([self._context, frame])[None, :]  # 1 x 576
            t0 = time.perf_counter_ns()
            prob, self._state = self._session.run(None, {"input": x, "state": self._state, "sr": self._sr})
            self._vad_ns += time.perf_counter_ns() - t0
            self._vad_calls += 1
            self.last_probability = float(prob[0, 0])
            is_speech = self.last_probability >= s.vad_threshold
            if is_speech:
                self._frames_speech += 1
            else:
                self._frames_vad_silent += 1
        self._context = frame[-s.context_samples :].copy()
        self._since_speech = 0 if is_speech else min(self._since_speech + 1, 1 << 30)
        if self.speaking:
            self._frames_speaking += 1

    def stats(self) -> SieveStats:
        return SieveStats(
            frames_seen=self._frames_seen,
            frames_gated=self._frames_gated,
            frames_vad_silent=self._frames_vad_silent,
            frames_speech=self._frames_speech,
            frames_speaking=self._frames_speaking,
            vad_calls=self._vad_calls,
            vad_time_ms=self._vad_ns / 1e6,
        )
