"""Log-mel features of 16 kHz speech: the input of the neural audio encoder and of the fingerprint cache.

Framing is causal and streaming-friendly: mel frame ``j`` covers samples ``[j * HOP, j * HOP + WIN)`` (10 ms hop,
25 ms Hann window, no centre padding), so the features of a stream fed in any chunks equal those of the whole file.
Values are natural-log mel energies (floor 1e-5), 40 bands over 60..7600 Hz.
"""

from __future__ import annotations

import functools
import math

import numpy as np

SAMPLE_RATE_HZ = 16000
HOP = 160  # samples: 10 ms
WIN = 400  # samples: 25 ms
N_FFT = 512
N_MELS = 40
FMIN_HZ = 60.0
FMAX_HZ = 7600.0
LOG_FLOOR = 1e-5
FRAMES_PER_SECOND = SAMPLE_RATE_HZ // HOP  # 100


def _hz_to_mel(f: np.ndarray | float) -> np.ndarray:
    return 2595.0 * np.log10(1.0 + np.asarray(f, np.float64) / 700.0)


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    return 700.0 * (10.0 ** (m / 2595.0) - 1.0)


@functools.lru_cache(maxsize=1)
def mel_filterbank() -> np.ndarray:
    """Triangular filters, N_MELS x (N_FFT // 2 + 1), float32 (HTK mel scale, area-unnormalized)."""
    n_bins = N_FFT // 2 + 1
    freqs = np.linspace(0, SAMPLE_RATE_HZ / 2, n_bins)
    pts = _mel_to_hz(np.linspace(_hz_to_mel(FMIN_HZ), _hz_to_mel(FMAX_HZ), N_MELS + 2))
    fb = np.zeros((N_MELS, n_bins), np.float64)
    for i in range(N_MELS):
        lo, mid, hi = pts[i], pts[i + 1], pts[i + 2]
        up = (freqs - lo) / max(mid - lo, 1e-9)
        down = (hi - freqs) / max(hi - mid, 1e-9)
        fb[i] = np.maximum(0.0, np.minimum(up, down))
    return fb.astype(np.float32)


@functools.lru_cache(maxsize=1)
def _mel_bands() -> tuple[np.ndarray, np.ndarray]:
    """The filterbank as bands of one width W: filter i reads the W consecutive bins ``idx[i]`` that cover its
    support, with the weights ``w[i]`` (zero outside it). Both N_MELS x W."""
    fb = mel_filterbank()
    support = [np.flatnonzero(row) for row in fb]
    width = max(int(z[-1] - z[0] + 1) for z in support)
    lo = np.array([min(int(z[0]), fb.shape[1] - width) for z in support])
    idx = lo[:, None] + np.arange(width)[None, :]
    return idx, np.take_along_axis(fb, idx, axis=1)


def _mel_energies(spec: np.ndarray, block: int = 4096) -> np.ndarray:
    """n x (N_FFT/2+1) float32 power spectra -> n x N_MELS mel energies, each frame's sum in one fixed order (its W
    band products added in a fixed tree of elementwise additions), so a frame's value does not depend on what else
    is in the batch. A matrix product's does: BLAS picks its kernel and summation order by the batch's shape, and a
    stream fed in small chunks differed from the whole file in the last bit (then beyond it, through the model's
    INT8 cache: tests/unit/test_neural_model.py under OPENBLAS_CORETYPE=Haswell)."""
    idx, w = _mel_bands()
    out = np.empty((len(spec), N_MELS), np.float32)
    for a in range(0, len(spec), block):
        p = spec[a:a + block][:, idx] * w  # b x N_MELS x W products
        while p.shape[-1] > 1:  # pairs, then pairs of pairs: the same tree for every frame
            h = p.shape[-1] // 2
            q = p[..., :h] + p[..., h:2 * h]
            p = np.concatenate([q, p[..., 2 * h:]], axis=-1) if p.shape[-1] % 2 else q
        out[a:a + block] = p[..., 0]
    return out


@functools.lru_cache(maxsize=1)
def _window() -> np.ndarray:
    return np.hanning(WIN + 2)[1:-1].astype(np.float32)


def n_frames_for(n_samples: int) -> int:
    """Complete mel frames in ``n_samples`` samples."""
    return max(0, (n_samples - WIN) // HOP + 1)


def log_mel(audio: np.ndarray) -> np.ndarray:
    """Mono float32 audio (N,) at 16 kHz, -1..1 -> log-mel (n_frames_for(N) x N_MELS) float32."""
    x = np.asarray(audio, np.float32).reshape(-1)
    n = n_frames_for(len(x))
    if n == 0:
        return np.zeros((0, N_MELS), np.float32)
    idx = np.arange(WIN)[None, :] + HOP * np.arange(n)[:, None]  # n x WIN
    frames = x[idx] * _window()[None, :]
    spec = np.abs(np.fft.rfft(frames, n=N_FFT, axis=1)) ** 2  # n x (N_FFT/2+1)
    mel = _mel_energies(spec.astype(np.float32))
    return np.log(np.maximum(mel, LOG_FLOOR)).astype(np.float32)


def frame_rms_db(audio: np.ndarray, fps: float, n_frames: int, rate_hz: int = SAMPLE_RATE_HZ) -> np.ndarray:
    """RMS level in dBFS per video frame period (n_frames,) float32 (-120 for digital silence)."""
    hop = rate_hz / fps
    out = np.full(n_frames, -120.0, np.float32)
    for i in range(n_frames):
        a, b = int(round(i * hop)), int(round((i + 1) * hop))
        seg = audio[a:b]
        if len(seg):
            rms = math.sqrt(float(np.mean(np.square(seg, dtype=np.float64))))
            out[i] = 20.0 * math.log10(max(rms, 1e-6))
    return out


class StreamingLogMel:
    """Log-mel of a stream fed in arbitrary chunks; ``push`` returns the frames that became complete."""

    def __init__(self) -> None:
        self._tail = np.zeros(0, np.float32)  # samples not consumed by a complete frame yet
        self.frames_out = 0

    def push(self, audio: np.ndarray) -> np.ndarray:
        x = np.concatenate([self._tail, np.asarray(audio, np.float32).reshape(-1)])
        n = n_frames_for(len(x))
        feats = log_mel(x[: (n - 1) * HOP + WIN]) if n else np.zeros((0, N_MELS), np.float32)
        self._tail = x[n * HOP :]
        self.frames_out += n
        return feats
