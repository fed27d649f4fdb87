"""Session 19 (issue 16's 5 ms item): PyTorch SDPA's backends at the Wan 1.3B DiT's self-attention shape at 288 px
(batch 2 for the two guidance passes, 12 heads, 6,804 tokens, head 128, bf16): flash (FlashAttention-2), cuDNN,
memory-efficient; CUDA events after warm-up, median of repeats; each backend's output against flash's; TFLOP/s.
Then one whole DiT pass (eager) under each backend that ran.

    PYTHONPATH=.:/tmp/site python results/gpu/attn_s19.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=6804)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dev = "cuda"
    out: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                 "cudnn": torch.backends.cudnn.version(), "shape": [2, 12, a.tokens, 128], "sdpa": {}, "dit_pass": {}}

    def save():
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))

    def timed(fn, repeats):
        with torch.inference_mode():
            for _ in range(3):
                y = fn()
            torch.cuda.synchronize()
            ms = []
            for _ in range(repeats):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                y = fn()
                e1.record()
                torch.cuda.synchronize()
                ms.append(e0.elapsed_time(e1))
        return statistics.median(ms), y

    g = torch.Generator(dev).manual_seed(0)
    q, k, v = (torch.randn((2, 12, a.tokens, 128), device=dev, dtype=torch.bfloat16, generator=g) for _ in range(3))
    flops = 4 * 2 * 12 * a.tokens * a.tokens * 128
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    ref = None
    ran = []
    for name, be in backends.items():
        try:
            with sdpa_kernel([be]):
                ms, y = timed(lambda: F.scaled_dot_product_attention(q, k, v), a.repeats)
            ref = y if ref is None else ref
            out["sdpa"][name] = {"ms": round(ms, 3), "tflops": round(flops / ms / 1e9, 1),
                                 "max_abs_vs_flash": float((y.float() - ref.float()).abs().max())}
            ran.append(name)
        except Exception as exc:  # a backend that does not run here is reported, not fatal
            out["sdpa"][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        print(name, out["sdpa"][name], flush=True)
        save()

    from studio.generators.wan_dit import WAN_1_3B, WanAudioDiT, WanDiTGenerator
    from studio.generators.weights import default_dtype

    with torch.device(dev), default_dtype(torch.bfloat16):
        dit = WanAudioDiT(WAN_1_3B).eval()
    gen = WanDiTGenerator()
    gen.dit, gen.device, gen.dtype = dit, torch.device(dev), torch.bfloat16
    from types import SimpleNamespace

    gen.settings = SimpleNamespace(size_px=288, seed=0)
    gen.context = torch.randn((1, 769, WAN_1_3B.dim), device=dev, dtype=torch.bfloat16)
    (target,) = gen._targets()
    inputs = target.example_inputs
    for name in ran:
        with sdpa_kernel([backends[name]]):
            ms, _ = timed(lambda: dit(*inputs), 3)
        out["dit_pass"][name] = {"ms_eager": round(ms, 1)}
        print("dit pass", name, out["dit_pass"][name], flush=True)
        save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
