"""Bounded KV cache of the motion transformer: a sliding window of W tokens plus one summary token per layer.

Storage per layer: keys and values of the last W tokens as symmetric per-token INT8 (``scale = max|x| / 127``, one
scale per token), dequantized inside the attention; the tokens that slide out of the window are folded into a running
sum (the summary token is their mean). The newest token always sits at index W-1 (the window shifts by one each step),
so positions are window-relative and the graph is static (exports to ONNX unchanged). Memory is
``layers * 2 * W * (d + 4) + layers * 2 * d * 4 + 8`` bytes for INT8, whatever the stream length.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch


class CacheDType(Enum):
    INT8 = "int8"
    FP16 = "fp16"
    FP32 = "fp32"


def quantize_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (..., d) float -> (int8 (..., d), scale (..., 1) float32); symmetric, scale = max|x| / 127."""
    scale = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-8) / 127.0
    q = torch.round(x / scale).clamp(-127, 127).to(torch.int8)
    return q, scale.to(torch.float32)


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.to(torch.float32) * scale


@dataclass
class KVState:
    """Cache tensors of all layers (batch 1). ``k``/``v``: L x W x d (int8, fp16 or fp32); ``k_scale``/``v_scale``:
    L x W x 1 (ones unless INT8); ``sum_k``/``sum_v``: L x d float32 (evicted tokens); ``count``: (1,) evicted tokens;
    ``n_valid``: (1,) tokens in the window (float, for a static graph)."""

    k: torch.Tensor
    k_scale: torch.Tensor
    v: torch.Tensor
    v_scale: torch.Tensor
    sum_k: torch.Tensor
    sum_v: torch.Tensor
    count: torch.Tensor
    n_valid: torch.Tensor

    @staticmethod
    def empty(n_layers: int, window: int, d: int, dtype: CacheDType, device: str | torch.device = "cpu") -> "KVState":
        store = {CacheDType.INT8: torch.int8, CacheDType.FP16: torch.float16, CacheDType.FP32: torch.float32}[dtype]
        z = torch.zeros(n_layers, window, d, dtype=store, device=device)
        ones = torch.ones(n_layers, window, 1, dtype=torch.float32, device=device)
        s = torch.zeros(n_layers, d, dtype=torch.float32, device=device)
        c = torch.zeros(1, dtype=torch.float32, device=device)
        return KVState(z, ones, z.clone(), ones.clone(), s, s.clone(), c, c.clone())

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.k, self.k_scale, self.v, self.v_scale, self.sum_k, self.sum_v, self.count, self.n_valid)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())


def store(x: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """New token (d,) -> (stored (1, d) in the cache's dtype, scale (1, 1))."""
    if like.dtype == torch.int8:
        q, s = quantize_per_token(x[None])
        return q, s
    return x[None].to(like.dtype), torch.ones(1, 1, dtype=torch.float32, device=x.device)


def push(
    cache: torch.Tensor, scale: torch.Tensor, total: torch.Tensor, new: torch.Tensor, full: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer's window (W x d, W x 1) + evicted sum (d,): shift in ``new`` (d,) and fold the oldest token into the
    sum when the window was ``full`` (0/1 float). Returns (cache, scale, sum, dequantized window W x d)."""
    oldest = cache[0].to(torch.float32) * scale[0]
    total = total + full * oldest
    q, s = store(new, cache)
    cache = torch.cat([cache[1:], q], dim=0)
    scale = torch.cat([scale[1:], s], dim=0)
    return cache, scale, total, cache.to(torch.float32) * scale
