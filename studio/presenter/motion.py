"""Motion for a whole segment: mouth from phone timings (with the audio's loudness) plus idle behaviour."""

from __future__ import annotations

import numpy as np

from studio.contracts.coeffs import MOUTH_COEFFS, MotionTrack
from studio.presenter.idle import idle_track
from studio.speech.types import PhonemeTiming
from studio.speech.visemes import mouth_track, stress_times


def loudness_envelope(audio: np.ndarray, sample_rate_hz: int, fps: float, n_frames: int) -> np.ndarray:
    """Per-frame loudness 0..1 (T,): RMS over each frame period, in dB mapped from -50..-10 dBFS."""
    hop = sample_rate_hz / fps
    out = np.zeros(n_frames, np.float32)
    for i in range(n_frames):
        a, b = int(round(i * hop)), int(round((i + 1) * hop))
        seg = audio[a:b]
        if len(seg):
            rms = float(np.sqrt(np.mean(seg.astype(np.float64) ** 2)))
            db = 20 * np.log10(max(rms, 1e-6))
            out[i] = np.clip((db + 50.0) / 40.0, 0.0, 1.0)
    return out


def script_motion(
    phonemes: tuple[PhonemeTiming, ...] | list[PhonemeTiming],
    audio: np.ndarray,
    sample_rate_hz: int,
    fps: float,
    n_frames: int,
    seed: int = 0,
) -> MotionTrack:
    """Coefficients for ``n_frames`` keyframes: visemes with coarticulation drive the mouth, the loudness of the
    speech scales the opening, and idle motion (blinks, sway, nods on stressed syllables, breathing) never stops."""
    loud = loudness_envelope(audio, sample_rate_hz, fps, n_frames)
    mouth = mouth_track(phonemes, fps, n_frames, loudness=loud)
    idle = idle_track(n_frames, fps, seed=seed, speech_activity=loud, stress_times_s=stress_times(phonemes))
    values = idle.copy()
    cols = list(MOUTH_COEFFS)
    values[:, cols] = mouth[:, cols]
    return MotionTrack(fps=fps, values=values.astype(np.float32))
