"""Reading audio files for the pipeline: decode, downmix and resample through PyAV (FFmpeg)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from studio.errors import InputError


def load_audio_file(path: Path, target_rate_hz: int = 16000) -> tuple[np.ndarray, int]:
    """Decode any audio file to mono float32 at ``target_rate_hz``."""
    import av

    if not path.exists():
        raise InputError(f"Audio file not found: {path}. Check the path.")
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise InputError(f"{path.name} has no audio track: give a WAV, MP3 or other audio file.")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=target_rate_hz)
            chunks = []
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1))
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
    except InputError:
        raise
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise InputError(f"Cannot decode {path.name} as audio: give a WAV, MP3, FLAC or OGG file.") from exc
    audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    if len(audio) < target_rate_hz // 10:
        raise InputError(f"{path.name} holds less than 0.1 s of audio: give a longer recording.")
    return np.clip(audio, -1.0, 1.0).astype(np.float32), target_rate_hz
