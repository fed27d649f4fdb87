"""Renderer speed: warm up, synchronize around each timed batch, repeat, report medians (ms per frame).

`python -m studio.bench.renderer_speed --device cuda --size 512 1080 --batch 1 8 --json out.json`
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import torch

from studio.presenter.anchor import build_anchor
from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.presenter.renderer import Presenter, RenderSettings


def _motion(n: int) -> np.ndarray:
    t = np.arange(n) / 25.0
    c = np.zeros((n, N_COEFFS), np.float32)
    c[:, Coeff.JAW_OPEN] = 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t)
    c[:, Coeff.BLINK_L] = c[:, Coeff.BLINK_R] = (np.sin(2 * np.pi * 0.3 * t) > 0.95).astype(np.float32)
    c[:, Coeff.HEAD_YAW_DEG] = 1.5 * np.sin(2 * np.pi * 0.2 * t)
    return c


def measure(size_px: int, batch: int, device: str, repeats: int = 20) -> dict:
    presenter = Presenter(build_anchor(), RenderSettings(size_px=size_px, device=device, batch_frames=batch))
    dev = presenter.device
    coeffs = torch.tensor(_motion(batch * repeats), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times = []
    with torch.inference_mode():
        for _ in range(3):  # warm-up
            presenter.module(coeffs[:batch])
        for r in range(repeats):
            sync()
            t0 = time.perf_counter()
            frames = presenter.module(coeffs[r * batch:(r + 1) * batch])
            frames.clamp_(0, 255).to(torch.uint8)
            sync()
            times.append((time.perf_counter() - t0) * 1e3 / batch)
    return {"size_px": size_px, "batch": batch, "device": str(dev),
            "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "median_ms_per_frame": statistics.median(times),
            "p95_ms_per_frame": float(np.percentile(times, 95)), "repeats": repeats, "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", default="cpu")
    p.add_argument("--size", type=int, nargs="+", default=[512])
    p.add_argument("--batch", type=int, nargs="+", default=[8])
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--json")
    a = p.parse_args(argv)
    rows = [measure(s, b, a.device, a.repeats) for s in a.size for b in a.batch]
    for r in rows:
        print(f"{r['device_name']:>20} {r['size_px']:>5}px batch {r['batch']:>2}: "
              f"{r['median_ms_per_frame']:.3f} ms/frame median, p95 {r['p95_ms_per_frame']:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
