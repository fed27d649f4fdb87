"""KV cache: bounded size, window eviction into the summary, INT8 error bound, dequantized attention ~ FP attention."""

from __future__ import annotations

import torch

from studio.neural.kvcache import CacheDType, KVState, dequantize, push, quantize_per_token
from studio.neural.model import Audio2Motion, ModelConfig, StepGraph


def _tiny(window: int = 6) -> Audio2Motion:
    torch.manual_seed(0)
    cfg = ModelConfig(enc_channels=16, d_model=32, n_layers=2, n_heads=2, window=window, dropout=0.0)
    return Audio2Motion(cfg).eval()


def test_quantization_error_is_within_half_a_step() -> None:
    x = torch.randn(50, 64) * torch.rand(50, 1) * 10
    q, s = quantize_per_token(x)
    assert q.dtype == torch.int8 and s.shape == (50, 1)
    err = (dequantize(q, s) - x).abs()
    assert bool((err <= s / 2 + 1e-6).all())  # symmetric rounding: at most half a step (scale = max|x| / 127)
    assert torch.allclose(s[:, 0], x.abs().amax(-1) / 127)


def test_window_evicts_oldest_into_summary_sum() -> None:
    w, d = 4, 3
    cache = torch.zeros(w, d)
    scale = torch.ones(w, 1)
    total = torch.zeros(d)
    n_valid = 0
    for t in range(10):
        full = torch.tensor([1.0 if n_valid >= w else 0.0])
        cache, scale, total, window = push(cache, scale, total, torch.full((d,), float(t)), full)
        n_valid = min(n_valid + 1, w)
    assert window[:, 0].tolist() == [6.0, 7.0, 8.0, 9.0]  # the newest W tokens, newest last
    assert total[0].item() == sum(range(6))  # tokens 0..5 left the window


def test_cache_size_is_bounded_over_a_long_stream() -> None:
    model = _tiny()
    g = StepGraph(model)
    st = model.empty_state(CacheDType.INT8).tensors()
    size0 = KVState(*st).nbytes()
    with torch.inference_mode():
        for _ in range(40):  # far beyond the 6-token window
            out = g(torch.randn(8, 16), torch.rand(5), *st)
            st = out[2:]
    assert KVState(*st).nbytes() == size0
    assert st[-1].item() == 6.0  # n_valid saturates at the window
    assert st[-2].item() == 34.0  # evicted tokens counted into the summary


def test_int8_attention_close_to_fp32_and_stepping_matches_parallel() -> None:
    model = _tiny(window=10)
    n = 30
    mel = torch.randn(1, 4 * n + 4, 40) * 3 - 5
    prev = torch.rand(1, n, 5)
    with torch.inference_mode():
        ref, _ = model(mel, prev)  # parallel attention (window + summary), full precision
        feats = model.motion.tokens(model.encoder(mel), n)
        g = StepGraph(model)
        outs = {}
        for dt in (CacheDType.FP32, CacheDType.INT8):
            st = model.empty_state(dt).tensors()
            ys = []
            for t in range(n):
                o = g(feats[0, t], prev[0, t], *st)
                ys.append(o[0])
                st = o[2:]
            outs[dt] = torch.stack(ys)
    assert (outs[CacheDType.FP32] - ref[0]).abs().max().item() < 1e-5
    assert (outs[CacheDType.INT8] - ref[0]).abs().max().item() < 1e-2
