"""Face sharpness at the 1080p canvas, before and after: variance of the Laplacian in the face box of the rest frame.

One command (CPU; BEFORE is a checkout of the code to compare against, e.g. ``git worktree add /tmp/before <commit>``):

    python benchmarks/face_sharpness.py --before /tmp/before [--size 1080]

For each bundled portrait (scikit-image's astronaut, matplotlib's Grace Hopper) each side builds the anchor pack (at the
presenter's size where the code supports ``build_anchor(..., output_px=...)``), renders the rest frame at the 1080p
canvas's presenter size (1080 x 1080) and measures, in the face box (the face oval's bounding box): the variance of the
Laplacian of the grey frame, and the PSNR of the rest frame against the pack's own portrait at that size (how much the
warp at rest changes the enhanced picture). Each side runs in its own process with its own ``studio`` on the path.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def measure(name: str, size: int) -> dict:
    import cv2
    import matplotlib

    from studio.presenter import landmarks as lm
    from studio.presenter.anchor import build_anchor
    try:
        from studio.contracts.coeffs import N_COEFFS
    except ImportError:  # a checkout from before the contracts package (the --before side)
        from studio.presenter.coeffs import N_COEFFS
    from studio.presenter.renderer import Presenter, RenderSettings

    source = None if name == "astronaut" else Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    kwargs = {"output_px": size} if "output_px" in inspect.signature(build_anchor).parameters else {}
    t0 = time.perf_counter()
    anchor = build_anchor(source, **kwargs)
    build_s = time.perf_counter() - t0
    frame = Presenter(anchor, RenderSettings(size_px=size, device="cpu")).render(np.zeros((1, N_COEFFS), np.float32))[0]
    s = size / anchor.size_px
    oval = anchor.landmarks[list(lm.FACE_OVAL), :2] * s
    x0, y0 = np.floor(oval.min(0)).astype(int).clip(0, size)
    x1, y1 = np.ceil(oval.max(0)).astype(int).clip(0, size)
    grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float64)
    lap = cv2.Laplacian(grey, cv2.CV_64F)[y0:y1, x0:x1]
    portrait = np.asarray(__import__("PIL.Image", fromlist=["Image"]).fromarray(anchor.image).resize(
        (size, size), 1)) if anchor.size_px != size else anchor.image
    diff = frame[y0:y1, x0:x1].astype(np.float64) - portrait[y0:y1, x0:x1].astype(np.float64)
    psnr = 10 * np.log10(255.0 ** 2 / max(float((diff ** 2).mean()), 1e-12))
    return {"portrait": name, "pack_px": anchor.size_px, "face_box": [int(x0), int(y0), int(x1), int(y1)],
            "laplacian_var": float(lap.var()), "rest_psnr_db": float(psnr), "pack_build_s": build_s}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="a checkout of the code to compare against")
    p.add_argument("--size", type=int, default=1080)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        for name in ("astronaut", "hopper"):
            print(json.dumps(measure(name, a.size)), flush=True)
        return 0
    if a.before is None:
        p.error("--before CHECKOUT is required")
    rows = {}
    for label, checkout in (("before", a.before.resolve()), ("after", Path(__file__).resolve().parents[1])):
        env = dict(os.environ, PYTHONPATH=str(checkout))
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", "--size", str(a.size)],
                             env=env, cwd=str(checkout), check=True, capture_output=True, text=True).stdout
        rows[label] = {r["portrait"]: r for r in map(json.loads, out.split("\n")[:-1]) if r}
    print(f"presenter {a.size} px (the {a.size}p canvas); face box of the rest frame")
    print(f"{'portrait':10} {'pack px':>13} {'Laplacian var':>21} {'ratio':>6} {'rest PSNR dB':>13} {'build s':>13}")
    for name in ("astronaut", "hopper"):
        b, f = rows["before"][name], rows["after"][name]
        print(f"{name:10} {b['pack_px']:>6}->{f['pack_px']:<6} {b['laplacian_var']:>9.1f} -> {f['laplacian_var']:<9.1f}"
              f" {f['laplacian_var'] / b['laplacian_var']:>6.2f} {b['rest_psnr_db']:>5.1f} -> {f['rest_psnr_db']:<5.1f}"
              f" {b['pack_build_s']:>5.1f} -> {f['pack_build_s']:<5.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
