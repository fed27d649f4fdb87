"""Engine speed: each talking-head engine's generator alone (timing twins, random weights), warmed up, synchronized
around each timed call, repeated; medians of ms per output frame, the GPU memory peak, and each audio encoder's ms
per window. What the core adds (pyramidal upscaling, keyframes + RIFE, the audio cache, async stages) is measured by
``python main.py bench --leaderboard``; this is the engines' own cost.

`python -m studio.bench.engine_speed --device cuda --precision bf16 --engines all --sizes native pyramidal 1024
 --json engines.json`

Sizes: ``native`` / ``pyramidal`` are each engine's ``GeneratorInfo`` sizes; a number is a square size in pixels.
Engines that generate a face and paste it back (Wav2Lip, MuseTalk) run their network at their native face size
whatever the size; the frame size only changes the paste. On the CPU, engines with ``needs_gpu_reason`` are listed
with that reason and not run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch

from studio.contracts import GENERATORS, GeneratorSettings
from studio.contracts.coeffs import N_COEFFS

ENGINES = ("wav2lip", "musetalk-1.5", "liveportrait", "ditto", "wan2.1-1.3b", "wan2.1-14b")


def bench_anchor(size: int = 512) -> SimpleNamespace:
    """The astronaut portrait (scikit-image) with a face box for the crop: what the engines read of an anchor pack.
    The landmarks only place the crop here (no MediaPipe on the GPU machine): timing does not depend on them."""
    from skimage import data
    from skimage.transform import resize

    img = (resize(data.astronaut(), (size, size), anti_aliasing=True) * 255).astype(np.uint8)
    k = size / 512
    lm = np.zeros((478, 3), np.float32)
    lm[:, 0] = np.linspace(160, 260, 478) * k  # the astronaut's face spans about x 160..260, y 60..190 at 512 px
    lm[:, 1] = np.linspace(60, 190, 478) * k
    return SimpleNamespace(image=img, landmarks=lm, name="astronaut")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(name: str, size_px: int, device: str, precision: str, batch: int, repeats: int, warmup: int = 2) -> dict:
    gen = GENERATORS.create(name)
    if gen.info.stream_windows:  # whole windows, one a call (the streaming form: benchmarks/gpu/first_frame.py)
        gen = GENERATORS.create(name, stream_first_latents=0)
    info = gen.info
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    b = info.batch_sizes[0] if len(info.batch_sizes) == 1 else batch  # the DiTs: one 81-frame window per call
    t0 = time.perf_counter()
    gen.open(bench_anchor(), GeneratorSettings(device=device, size_px=size_px, precision=precision,
                                               batch_frames=b, seed=0))
    open_s = time.perf_counter() - t0
    coeffs = torch.zeros((b, N_COEFFS), device=dev)
    feats = None if info.audio is None else torch.randn((b, *info.audio.shape_per_frame), device=dev)
    times = []
    with torch.inference_mode():
        for i in range(repeats + warmup):
            _sync(dev)
            t = time.perf_counter()
            out = gen.generate(coeffs, feats)
            _sync(dev)
            if i >= warmup:
                times.append((time.perf_counter() - t) * 1e3)
    row = {"engine": name, "label": gen.label, "device": device, "dtype": str(gen.dtype), "size_px": size_px,
           "native_px": info.native_px, "frames_per_call": b, "open_s": round(open_s, 2),
           "ms_per_call_median": round(statistics.median(times), 3),
           "ms_per_frame_median": round(statistics.median(times) / b, 3),
           "ms_per_frame_min": round(min(times) / b, 3), "repeats": repeats, "warmup": warmup,
           "out_shape": list(out.shape)}
    if dev.type == "cuda":
        row["gpu_peak_gib"] = round(torch.cuda.max_memory_allocated(dev) / 2 ** 30, 2)
    if hasattr(gen, "run_window"):
        row.update(_dit_parts(gen, dev, repeats))
    gen.close()
    return row


def _dit_parts(gen, dev: torch.device, repeats: int) -> dict:
    """The DiT's forward (one batch of 2 guidance passes) and the VAE decode of a window, each timed alone."""
    h = gen.settings.size_px // 8
    x = torch.randn((2, gen.cfg.in_dim, gen.latent_frames, h, h), device=dev, dtype=gen.dtype)
    t = torch.full((2,), 500.0, device=dev)
    first, latter = gen.audio_windows(torch.randn((gen.window_frames, gen.cfg.audio_layers, gen.cfg.audio_dim),
                                                  device=dev, dtype=gen.dtype))
    first, latter = first.expand(2, -1, -1, -1, -1), latter.expand(2, -1, -1, -1, -1)
    ctx = gen.context.expand(2, -1, -1)
    z = torch.randn((1, gen.cfg.out_dim, gen.latent_frames, h, h), device=dev, dtype=gen.dtype)
    res = {}
    with torch.inference_mode():
        for key, fn in (("dit_forward_x2_ms", lambda: gen.fns["dit"](x, t, ctx, first, latter)),
                        ("vae_decode_window_ms", lambda: gen.fns["vae_decoder"](z))):
            ts = []
            for i in range(repeats + 1):
                _sync(dev)
                t0 = time.perf_counter()
                fn()
                _sync(dev)
                if i:
                    ts.append((time.perf_counter() - t0) * 1e3)
            res[key] = round(statistics.median(ts), 2)
    res["tokens"] = gen.latent_frames * (h // 2) ** 2
    res["steps"] = gen.steps
    return res


def measure_encoder(name: str, device: str, precision: str, repeats: int) -> dict:
    from studio.generators.audio_encoders import ENCODERS

    enc = ENCODERS[name](device, precision)
    w = (np.random.default_rng(0).standard_normal(enc.window_samples) * 0.1).astype(np.float32)
    dev = torch.device(device)
    ts = []
    for i in range(repeats + 1):
        _sync(dev)
        t0 = time.perf_counter()
        enc.encode_window(w)
        _sync(dev)
        if i:
            ts.append((time.perf_counter() - t0) * 1e3)
    return {"encoder": name, "device": device, "window_s": enc.window_samples / 16000,
            "ms_per_window_median": round(statistics.median(ts), 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--precision", default="bf16", choices=("fp32", "fp16", "bf16"))
    p.add_argument("--engines", nargs="+", default=["all"])
    p.add_argument("--sizes", nargs="+", default=["native"])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2, help="untimed calls first (a DiT call is a whole window)")
    p.add_argument("--encoders", action="store_true", help="also time each audio encoder per window")
    p.add_argument("--json")
    a = p.parse_args(argv)
    names = ENGINES if a.engines == ["all"] else tuple(a.engines)
    rows: list[dict] = []
    for name in names:
        info = GENERATORS.create(name).info
        if a.device == "cpu" and info.needs_gpu_reason:
            rows.append({"engine": name, "device": "cpu", "skipped": "needs a GPU: " + info.needs_gpu_reason})
            print(f"{name:14s} needs a GPU: {info.needs_gpu_reason}", flush=True)
            continue
        sizes = []
        for s in a.sizes:
            px = {"native": info.native_px, "pyramidal": info.pyramidal_px}.get(s, None)
            px = int(s) if px is None else px
            if px and px not in sizes:
                sizes.append(px)
        for px in sizes:
            try:
                row = measure(name, px, a.device, a.precision, 1 if a.device == "cpu" else a.batch, a.repeats,
                              a.warmup)
            except torch.cuda.OutOfMemoryError as exc:
                row = {"engine": name, "size_px": px, "skipped": f"out of GPU memory ({exc.__class__.__name__})"}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.encoders:
        for enc in ("whisper-tiny", "wav2vec2-base", "hubert-large", "wav2lip-mel"):
            row = measure_encoder(enc, a.device, a.precision, a.repeats)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "torch": torch.__version__, "cpu_count": os.cpu_count(),
                       "load_avg_1m": round(os.getloadavg()[0], 2),
                       "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "", "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
