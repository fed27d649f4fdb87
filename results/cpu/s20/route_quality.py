"""Session 20 (issue 16): the in-betweens at key stride 4 made two ways, against every frame generated.

- "upscale after": RIFE between the 288-px keyframes, then SPAN on every frame (the post stage up to session 19);
- "upscale keys": SPAN on the keyframes alone, RIFE's flows from the 288-px keys warping the upscaled keys at 1080
  (``RifeInterpolator.between_large``, the post stage since session 20).
The frames are the built-in engine's (a real face; the Wan twin's frames are noise) at 288 px on the bench's speaking
motion; the truth is SPAN on every generated frame. PSNR over the whole frame and the face box, in-betweens only.

    python results/cpu/s20/route_quality.py [--device cuda] --json results/cpu/s20/route_quality.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--frames", type=int, default=17)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    from studio.bench.renderer_speed import _motion
    from studio.enhance.quality import face_box, psnr
    from studio.enhance.rife import RifeInterpolator
    from studio.generators.builtin import BuiltinGenerator
    from studio.pipeline.post import span_for
    from studio.contracts import GeneratorSettings
    from studio.presenter.anchor import build_anchor

    dev = a.device
    gen = BuiltinGenerator()
    gen.open(build_anchor(), GeneratorSettings(device=dev, size_px=288, batch_frames=8))
    n = a.frames
    with torch.inference_mode():
        frames = gen.generate(torch.tensor(_motion(n), device=dev)).clamp(0, 255)  # every frame generated
        span = span_for(dev)

        def up(x):
            small = F.interpolate(x, size=(270, 270), mode="bicubic", align_corners=False, antialias=True)
            return torch.cat([span(small[i:i + 4].clamp(0, 255)).float() for i in range(0, len(small), 4)])

        truth = up(frames)
        keys = list(range(0, n, 4))
        mids = [i for i in range(n) if i % 4 and i < keys[-1]]
        rife = RifeInterpolator(dev, half=dev.startswith("cuda"))
        k0 = torch.tensor([i - i % 4 for i in mids])
        k1 = k0 + 4
        t = torch.tensor([(i % 4) / 4 for i in mids], dtype=torch.float32)
        after = up(rife.between(frames[k0], frames[k1], t))
        big = up(frames[keys])
        pos = {k: j for j, k in enumerate(keys)}
        large = rife.between_large(frames[k0], frames[k1], big[[pos[int(i)] for i in k0]],
                                   big[[pos[int(i)] for i in k1]], t)
    box = face_box(gen.module.lm_src.cpu().numpy() * (1080 / 288), 1080)
    ref = truth[mids]
    out = {"device": dev, "frames": n, "in_betweens": len(mids), "key_stride": 4, "size": "288 -> 1080",
           "face_box": box}
    for name, got in (("upscale_after", after), ("upscale_keys", large)):
        out[name] = {"psnr_db": psnr(got, ref), "psnr_face_db": psnr(got, ref, box) if box else None}
    out["keys_vs_after_psnr_db"] = psnr(large, after)

    # frames made at the presenter's size (a face-pasting engine: Wav2Lip, MuseTalk): RIFE at 1080 against RIFE's
    # flows from the keys shrunk by 2 and by 4 warping the 1080 keys
    gen2 = BuiltinGenerator()
    gen2.open(build_anchor(), GeneratorSettings(device=dev, size_px=1080, batch_frames=4))
    with torch.inference_mode():
        full = torch.cat([gen2.generate(torch.tensor(_motion(n)[i:i + 4], device=dev)).clamp(0, 255)
                          for i in range(0, n, 4)])
        ref = full[mids]
        box2 = face_box(gen2.module.lm_src.cpu().numpy(), 1080)
        direct = torch.cat([rife.between(full[k0[i:i + 2]], full[k1[i:i + 2]], t[i:i + 2])
                            for i in range(0, len(mids), 2)])
        out["presenter_size"] = {"face_box": box2, "rife_at_1080": {"psnr_db": psnr(direct, ref),
                                                                     "psnr_face_db": psnr(direct, ref, box2)}}
        for k in (2, 4):
            small = F.interpolate(full, scale_factor=1 / k, mode="area")
            got = torch.cat([rife.between_large(small[k0[i:i + 2]], small[k1[i:i + 2]], full[k0[i:i + 2]],
                                                full[k1[i:i + 2]], t[i:i + 2]) for i in range(0, len(mids), 2)])
            out["presenter_size"][f"flows_at_{1080 // k}"] = {"psnr_db": psnr(got, ref),
                                                             "psnr_face_db": psnr(got, ref, box2),
                                                             "vs_rife_at_1080_psnr_db": psnr(got, direct)}
    print(json.dumps(out, indent=1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
