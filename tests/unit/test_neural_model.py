"""Model shapes and causality: the output at frame t ignores audio after t + the stated look-ahead, with and without
the VAD gate; the gate rests the mouth where Silero hears no speech and nowhere else."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from studio.neural.engine import NeuralMotionEngine
from studio.neural.model import LOOKAHEAD_MS, Audio2Motion, ModelConfig
from studio.neural.settings import Backend, NeuralSettings


def _tiny() -> Audio2Motion:
    torch.manual_seed(1)
    return Audio2Motion(ModelConfig(enc_channels=16, d_model=32, n_layers=2, n_heads=2, window=8, dropout=0.0)).eval()


def test_shapes_and_ranges() -> None:
    m = _tiny()
    with torch.no_grad():
        y, logits = m(torch.randn(2, 4 * 12 + 4, 40), torch.rand(2, 12, 5))
    assert y.shape == (2, 12, 5) and logits.shape == (2, 12, 16)
    assert float(y.min()) >= 0 and float(y.max()) <= 1


def test_lookahead_is_at_most_80_ms() -> None:
    assert LOOKAHEAD_MS <= 80


def _engine(vad_gate: bool = False) -> NeuralMotionEngine:
    return NeuralMotionEngine(NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0, vad_gate=vad_gate),
                              model=_tiny())


def test_engine_output_is_causal_up_to_the_lookahead() -> None:
    eng = _engine()
    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(16000 * 2)).astype(np.float32)
    base = eng.motion(audio).mouth
    t = 20  # frame 20: centre at 820 ms; it may see audio up to 820 + LOOKAHEAD_MS
    cut = int((t + 0.5) / 25 * 16000 + LOOKAHEAD_MS / 1000 * 16000)
    changed = audio.copy()
    changed[cut:] = rng.standard_normal(len(audio) - cut).astype(np.float32)
    other = eng.motion(changed).mouth
    assert np.array_equal(base[: t + 1], other[: t + 1])
    assert not np.allclose(base[t + 2 :], other[t + 2 :])  # later frames do see it


def test_streaming_in_chunks_equals_offline() -> None:
    eng = _engine()
    audio = (0.1 * np.random.default_rng(3).standard_normal(16000)).astype(np.float32)
    whole = eng.motion(audio).mouth
    s = eng.session()
    parts = [s.push(audio[i:i + 777])[0] for i in range(0, len(audio), 777)] + [s.flush()[0]]
    assert np.allclose(np.concatenate(parts), whole, atol=1e-6)
    assert len(whole) == 25


ALSA_CLIP = Path("/usr/share/sounds/alsa/Front_Center.wav")  # a human voice (alsa-utils, installers/setup.sh)


def _speech_in_noise() -> np.ndarray:
    """0.6 s of a quiet room (-50 dBFS noise), "Front Center" spoken, 0.6 s of room again (16 kHz)."""
    if not ALSA_CLIP.exists():
        pytest.skip("alsa-utils sound clips not installed")
    from studio.pipeline.offline import load_audio_file

    voice, rate = load_audio_file(ALSA_CLIP)
    assert rate == 16000
    room = (0.003 * np.random.default_rng(5).standard_normal(int(0.6 * rate))).astype(np.float32)
    return np.concatenate([room, voice + 0.003 * np.random.default_rng(6).standard_normal(len(voice)), room]
                          ).astype(np.float32)


def test_vad_gate_rests_the_mouth_in_the_room_noise_not_in_the_speech() -> None:
    audio = _speech_in_noise()
    gated, free = _engine(vad_gate=True).motion(audio), _engine().motion(audio)
    rest = np.all(gated.mouth == 0.0, axis=1) & (gated.visemes == 0)
    room = np.r_[np.arange(0, 12), np.arange(len(rest) - 12, len(rest) - 2)]  # well inside the noise, both ends
    assert rest[room].all()  # the noise: at rest
    speech = slice(20, len(rest) - 20)
    assert (~rest[speech]).mean() > 0.6  # the words move the mouth
    assert not np.allclose(free.mouth[room], 0.0)  # the random tiny model would move the mouth there (the test bites)


def test_vad_gate_is_causal_up_to_the_lookahead_and_streams_like_offline() -> None:
    eng = _engine(vad_gate=True)
    audio = _speech_in_noise()
    base = eng.motion(audio)
    for t in (15, 30, 45):  # in the room noise before the words, in the words, at their end
        cut = int((t + 0.5) / 25 * 16000 + LOOKAHEAD_MS / 1000 * 16000)
        changed = audio.copy()
        changed[cut:] = 0.3 * np.sin(np.arange(len(audio) - cut) * 0.07)  # loud, voiced-looking
        assert np.array_equal(base.mouth[: t + 1], eng.motion(changed).mouth[: t + 1])
    s = eng.session()
    parts = [s.push(audio[i:i + 333])[0] for i in range(0, len(audio), 333)] + [s.flush()[0]]
    assert np.allclose(np.concatenate(parts), base.mouth, atol=1e-6)  # chunked log-mel: float rounding only
    assert 0 < s.frames_gated < len(base.mouth)


def test_sieves_sharing_one_silero_model_decide_like_separate_ones() -> None:
    from studio.audio.settings import SieveSettings
    from studio.audio.sieve import SilenceSieve

    audio = _speech_in_noise()
    st = SieveSettings(rms_gate_dbfs=float("-inf"), hangover_ms=0.0)
    first = SilenceSieve(st)
    a, b = SilenceSieve(st, share_model_of=first), SilenceSieve(st)
    da = [a.process(audio[i:i + 512]) for i in range(0, len(audio) - 511, 512)]
    first.process(audio[:5000])  # another stream on the shared model in between keeps its own state
    db = [b.process(audio[i:i + 512]) for i in range(0, len(audio) - 511, 512)]
    assert da == db and any(da) and not all(da)
