"""Issue 16's 5 ms: SPAN x4 from the pyramidal 288 px to the 1080 presenter. Route A (the core's until now): SPAN to
1152, then a bicubic antialiased downscale to 1080. Route B: a bicubic antialiased downscale of the small frame to 270
(1080 / 4) first, then SPAN lands on 1080 exactly: 12 % fewer SPAN pixels and no full-size resize. Quality of each
against the built-in renderer's own 1080 px frames (the picture a native render makes), on frames the renderer makes
at 288 from the same motion; PSNR over the whole frame and over the face box; CPU time of each (one thread per core).

    python results/cpu/s15/span_routes.py --frames 6 --json results/cpu/s15/span_routes.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=6)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F

    from studio.bench.renderer_speed import _motion
    from studio.enhance.quality import face_box, psnr
    from studio.enhance.upscale import LearnedUpscaler
    from studio.presenter.anchor import build_anchor
    from studio.presenter.renderer import Presenter, RenderSettings

    anchor = build_anchor()
    coeffs = torch.as_tensor(_motion(a.frames))
    with torch.inference_mode():
        big = Presenter(anchor, RenderSettings(size_px=1080)).module
        ref = big(coeffs).clamp(0, 255)
        small = Presenter(anchor, RenderSettings(size_px=288)).module(coeffs).clamp(0, 255)
        box = face_box(big.lm_src.cpu().numpy(), 1080)
        span = LearnedUpscaler("cpu")
        span(small[:1])  # warm
        t0 = time.perf_counter()
        x = span(small)
        route_a = F.interpolate(x, size=(1080, 1080), mode="bicubic", align_corners=False, antialias=True).clamp(0, 255)
        ta = (time.perf_counter() - t0) / a.frames
        t0 = time.perf_counter()
        y = F.interpolate(small, size=(270, 270), mode="bicubic", align_corners=False, antialias=True).clamp(0, 255)
        route_b = span(y)
        tb = (time.perf_counter() - t0) / a.frames
        bic = F.interpolate(small, size=(1080, 1080), mode="bicubic", align_corners=False).clamp(0, 255)
    out = {"frames": a.frames, "face_box": box,
           "span_1152_then_1080": {"psnr_db": psnr(route_a, ref), "psnr_face_db": psnr(route_a, ref, box),
                                   "cpu_ms_per_frame": ta * 1e3},
           "270_then_span_1080": {"psnr_db": psnr(route_b, ref), "psnr_face_db": psnr(route_b, ref, box),
                                  "cpu_ms_per_frame": tb * 1e3},
           "bicubic_1080": {"psnr_db": psnr(bic, ref), "psnr_face_db": psnr(bic, ref, box)},
           "a_vs_b_psnr_db": psnr(route_a, route_b)}
    for k, v in out.items():
        print(k, v)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
