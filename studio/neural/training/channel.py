"""Realistic channels for the data recipe (training only): rooms, microphones and phone lines, background noise and
music at broadcast levels, and lossy codecs through PyAV.

Why: the model learned from clean synthetic voices and a few generic perturbations (``data.augment``); a human voice
reaches the studio through a room, a microphone or a phone line, often under a music bed and through a codec. Each
stage here imitates one of those with parameters drawn per clip; ``realistic_channel`` chains them at random. Every
stage keeps the length and the timing of the input (codec delay is measured and removed), so the clip's phone
timings stay valid.
Music beds: Debian asterisk-moh-opsound-g722 (five CC-BY-SA-3.0 pieces, 16 kHz) when installed, else none.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

RATE = 16000
MUSIC_DIR = Path("/usr/share/asterisk/moh")
CODECS = ("aac", "libopus", "libmp3lame", "pcm_mulaw", "adpcm_g722", "amr_nb")
_DECODERS = {"aac": "aac", "libopus": "libopus", "libmp3lame": "mp3", "pcm_mulaw": "pcm_mulaw",
             "adpcm_g722": "adpcm_g722", "amr_nb": "amr_nb"}


def room_impulse(rng: np.random.Generator, rt60_s: float, direct_ratio_db: float) -> np.ndarray:
    """A synthetic room impulse response at 16 kHz: the direct path, 6-14 early reflections in the first 3-25 ms
    (random sign, gain falling with delay), then a diffuse tail of noise decaying by 60 dB in ``rt60_s`` at low
    frequencies and in 0.55 x that above 2 kHz (air and walls absorb highs). ``direct_ratio_db``: direct path over the
    rest (energy)."""
    from scipy.signal import butter, sosfilt

    n = max(int(rt60_s * RATE * 1.2), 64)
    t = np.arange(n) / RATE
    noise = rng.standard_normal(n)
    low = sosfilt(butter(2, 2000, "low", fs=RATE, output="sos"), noise) * np.exp(-6.9 * t / rt60_s)
    high = sosfilt(butter(2, 2000, "high", fs=RATE, output="sos"), noise) * np.exp(-6.9 * t / (0.55 * rt60_s))
    tail = low + high
    onset = int(rng.uniform(0.003, 0.008) * RATE)
    tail[:onset] = 0.0
    for _ in range(int(rng.integers(6, 15))):
        d = int(rng.uniform(0.003, 0.025) * RATE)
        tail[d] += rng.choice([-1.0, 1.0]) * rng.uniform(0.3, 1.0) * (0.003 * RATE / d) * np.abs(tail).max() * 4
    rest = float(np.sum(tail**2))
    h = tail / np.sqrt(max(rest, 1e-12)) * 10 ** (-direct_ratio_db / 20)
    h[0] = 1.0
    return h.astype(np.float32)


def apply_room(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Speech in a room: RT60 0.15-0.9 s, direct-to-reverberant ratio -3..+15 dB; same RMS as the input."""
    from scipy.signal import fftconvolve

    h = room_impulse(rng, float(rng.uniform(0.15, 0.9)), float(rng.uniform(-3.0, 15.0)))
    y = fftconvolve(x, h)[: len(x)]
    return (y * _rms(x) / max(_rms(y), 1e-9)).astype(np.float32)


def _peak_sos(f0: float, gain_db: float, q: float) -> np.ndarray:
    """RBJ peaking biquad as one second-order section."""
    a = 10 ** (gain_db / 40)
    w = 2 * np.pi * f0 / RATE
    alpha = np.sin(w) / (2 * q)
    b = np.array([1 + alpha * a, -2 * np.cos(w), 1 - alpha * a])
    den = np.array([1 + alpha / a, -2 * np.cos(w), 1 - alpha / a])
    return np.concatenate([b / den[0], den / den[0]])[None]


def microphone(x: np.ndarray, rng: np.random.Generator, kind: str | None = None) -> np.ndarray:
    """The colour of a pickup: ``studio`` (gentle tilt, proximity bass), ``lavalier`` (presence peak 4-7 kHz, chest
    resonance), ``laptop`` (no bass under 250-400 Hz, 1-3 kHz resonances, top cut at 5-7 kHz) or ``phone`` (300-3400
    Hz band, through 8 kHz sampling, mid boost). Same RMS as the input."""
    from scipy.signal import butter, resample_poly, sosfilt

    kind = kind or str(rng.choice(["studio", "lavalier", "laptop", "phone"]))
    sos = []
    if kind == "studio":
        sos += [_peak_sos(rng.uniform(80, 200), rng.uniform(0, 5), 0.7), _peak_sos(rng.uniform(6000, 7500),
                                                                                   rng.uniform(-4, 3), 0.8)]
    elif kind == "lavalier":
        sos += [butter(2, rng.uniform(70, 140), "high", fs=RATE, output="sos"),
                _peak_sos(rng.uniform(4000, 7000), rng.uniform(3, 8), 1.2), _peak_sos(rng.uniform(600, 900),
                                                                                     rng.uniform(1, 4), 1.5)]
    elif kind == "laptop":
        sos += [butter(3, rng.uniform(250, 400), "high", fs=RATE, output="sos"),
                butter(3, rng.uniform(5000, 7000), "low", fs=RATE, output="sos")]
        sos += [_peak_sos(rng.uniform(1000, 3000), rng.uniform(3, 9), rng.uniform(2, 5)) for _ in range(2)]
    elif kind == "phone":
        x = resample_poly(resample_poly(x, 1, 2), 2, 1)[: len(x)]
        sos += [butter(4, [300, 3400], "band", fs=RATE, output="sos"), _peak_sos(rng.uniform(1500, 2500),
                                                                                 rng.uniform(2, 6), 1.0)]
    else:
        raise ValueError(f"unknown microphone kind {kind!r}")
    y = sosfilt(np.concatenate(sos), x)
    return (y * _rms(x) / max(_rms(y), 1e-9)).astype(np.float32)


@lru_cache(maxsize=1)
def music_beds() -> tuple[np.ndarray, ...]:
    """The music pieces of Debian asterisk-moh-opsound-g722 at 16 kHz (empty when not installed)."""
    from studio.audio.io import load_audio_file

    out = []
    for p in sorted(MUSIC_DIR.glob("*.g722")):
        audio, rate = load_audio_file(p)
        if rate == RATE and len(audio) > RATE:
            out.append(np.asarray(audio, np.float32))
    return tuple(out)


def add_bed(x: np.ndarray, rng: np.random.Generator, below_db: float, kind: str | None = None) -> np.ndarray:
    """A background under the speech, ``below_db`` under its RMS: ``music`` (a random stretch of a music bed; falls
    back to speech-shaped noise without the package), ``speech_noise`` (noise with the clip's own long-term spectrum,
    like a distant crowd) or ``hum`` (mains 50/60 Hz and harmonics)."""
    kinds = ["music", "speech_noise", "hum"] if music_beds() else ["speech_noise", "hum"]
    kind = kind or str(rng.choice(kinds))
    n = len(x)
    if kind == "music" and music_beds():
        piece = music_beds()[int(rng.integers(len(music_beds())))]
        start = int(rng.integers(0, max(1, len(piece) - n)))
        bed = np.resize(piece[start:start + n], n)
    elif kind == "hum":
        t = np.arange(n) / RATE
        f = 50.0 if rng.random() < 0.5 else 60.0
        bed = sum(np.sin(2 * np.pi * f * k * t + rng.uniform(0, 6.3)) / k for k in (1, 2, 3, 5))
    else:
        spec = np.abs(np.fft.rfft(x))
        smooth = np.convolve(spec, np.ones(64) / 64, mode="same")
        phase = np.exp(1j * rng.uniform(0, 2 * np.pi, len(spec)))
        bed = np.fft.irfft(smooth * phase, n)
    bed = np.asarray(bed, np.float64)
    bed *= _rms(x) / max(_rms(bed), 1e-12) * 10 ** (-below_db / 20)
    return (x + bed).astype(np.float32)


def codec_roundtrip(x: np.ndarray, rng: np.random.Generator, codec: str | None = None) -> np.ndarray:
    """Encode and decode through PyAV with a broadcast / telephony / streaming codec at a random bit rate, then remove
    the codec's delay (found by cross-correlation, within 0.15 s) so that the output lines up with the input."""
    import av

    codec = codec or str(rng.choice(CODECS))
    rate, bit_rate = {
        "aac": (16000, int(rng.choice([24000, 32000, 48000]))),
        "libopus": (16000, int(rng.choice([12000, 16000, 24000]))),
        "libmp3lame": (16000, int(rng.choice([24000, 32000, 48000]))),
        "pcm_mulaw": (8000, 0),
        "adpcm_g722": (16000, 0),
        "amr_nb": (8000, int(rng.choice([7950, 10200, 12200]))),
    }[codec]
    from scipy.signal import resample_poly

    src = x if rate == RATE else resample_poly(x, 1, RATE // rate).astype(np.float32)
    enc = av.CodecContext.create(codec, "w")
    enc.sample_rate = rate
    enc.layout = "mono"
    enc.format = av.AudioFormat(next(f.name for f in (enc.codec.audio_formats or []))
                                if enc.codec.audio_formats else "s16")
    if bit_rate:
        enc.bit_rate = bit_rate
    enc.open()
    dec = av.CodecContext.create(_DECODERS[codec], "r")
    dec.sample_rate = rate
    dec.layout = "mono"
    out_rate = [rate]  # what the decoder really gives (libopus decodes at 48 kHz)
    frame_size = enc.frame_size or 1024
    out = []
    fmt = enc.format.name
    pcm = np.clip(src, -1.0, 1.0)
    for i in range(0, len(pcm) + frame_size, frame_size):
        chunk = pcm[i:i + frame_size]
        packets = []
        if len(chunk):
            chunk = np.pad(chunk, (0, frame_size - len(chunk))) if enc.frame_size else chunk
            frame = _audio_frame(chunk, fmt, rate)
            packets = enc.encode(frame)
        for pkt in packets:
            for f in dec.decode(pkt):
                out.append(_frame_samples(f))
                out_rate[0] = f.sample_rate
    for pkt in enc.encode(None):
        for f in dec.decode(pkt):
            out.append(_frame_samples(f))
            out_rate[0] = f.sample_rate
    y = np.concatenate(out) if out else np.zeros(0, np.float32)
    if out_rate[0] != RATE:
        from math import gcd

        g = gcd(out_rate[0], RATE)
        y = resample_poly(y, RATE // g, out_rate[0] // g).astype(np.float32)
    lag = _delay(x, y, int(0.15 * RATE))
    y = y[lag:lag + len(x)]
    return np.pad(y, (0, len(x) - len(y))).astype(np.float32)


def _audio_frame(chunk: np.ndarray, fmt: str, rate: int):
    import av

    if fmt.startswith("flt"):
        data = chunk.astype(np.float32)[None]
    elif fmt.startswith("s32"):
        data = (chunk.astype(np.float64) * 2147483647).astype(np.int32)[None]
    else:
        data = (chunk * 32767).astype(np.int16)[None]
    frame = av.AudioFrame.from_ndarray(data, format=fmt, layout="mono")
    frame.sample_rate = rate
    return frame


def _frame_samples(f) -> np.ndarray:
    a = f.to_ndarray().reshape(-1)
    if a.dtype == np.int16:
        return a.astype(np.float32) / 32768.0
    if a.dtype == np.int32:
        return (a.astype(np.float64) / 2147483648.0).astype(np.float32)
    return a.astype(np.float32)


def _delay(x: np.ndarray, y: np.ndarray, max_lag: int) -> int:
    """Samples by which ``y`` lags ``x`` (0..max_lag), from the cross-correlation of their first seconds."""
    from scipy.signal import correlate

    n = min(len(x), len(y) - max_lag, 4 * RATE)
    if n <= 0:
        return 0
    c = correlate(y[: n + max_lag], x[:n], mode="valid")  # c[k] = sum y[k + i] x[i]
    return int(np.argmax(c[: max_lag + 1]))


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64))) + 1e-12)


def realistic_channel(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random chain: room (p 0.5), microphone (p 0.8), background 12-30 dB under the speech (p 0.6; music at
    broadcast bed levels, crowd-like noise or hum), codec (p 0.5); the level is left to ``data.augment``."""
    y = np.asarray(x, np.float32)
    if rng.random() < 0.5:
        y = apply_room(y, rng)
    if rng.random() < 0.8:
        y = microphone(y, rng)
    if rng.random() < 0.6:
        y = add_bed(y, rng, float(rng.uniform(12.0, 30.0)))
    if rng.random() < 0.5:
        peak = float(np.abs(y).max()) + 1e-9
        y = codec_roundtrip(y / peak * 0.7, rng) * (peak / 0.7)
    return y.astype(np.float32)
