"""Model shapes and causality: the output at frame t ignores audio after t + the stated look-ahead."""

from __future__ import annotations

import numpy as np
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


def test_engine_output_is_causal_up_to_the_lookahead() -> None:
    eng = NeuralMotionEngine(NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0), model=_tiny())
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
    eng = NeuralMotionEngine(NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0), model=_tiny())
    audio = (0.1 * np.random.default_rng(3).standard_normal(16000)).astype(np.float32)
    whole = eng.motion(audio).mouth
    s = eng.session()
    parts = [s.push(audio[i:i + 777])[0] for i in range(0, len(audio), 777)] + [s.flush()[0]]
    assert np.allclose(np.concatenate(parts), whole, atol=1e-6)
    assert len(whole) == 25
