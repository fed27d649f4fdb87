"""What the matte, the set and the broadcast graphics cost per output frame, in the studio's own core.

Two looks on the same canvas, program and flags, measured alternately in one run (warm-up first, medians):
- plain: a plain-colour set, the framed photo (no matte), no graphics;
- full: the built-in news set, the presenter cut out by the warped matte, name strap, segment title, ticker, clock
  and logo.
It reports, per look, the canvas alone (``compose`` of a batch, ms per frame) and the whole core (wall ms per output
frame; on CUDA also the GPU time of the generate and post stages per output frame, by CUDA events), and the
difference full - plain.

    PYTHONPATH=$PWD python benchmarks/matte_graphics_cost.py --device cuda --canvas 1080 --fps 60 \
        --json benchmarks/gpu/out/matte_graphics_cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch


def _looks(tmp: Path):
    from PIL import Image

    from studio.graphics.look import CanvasStyle, Graphics

    logo = tmp / "logo.png"
    Image.new("RGBA", (160, 90), (230, 40, 40, 255)).save(logo)
    full = CanvasStyle(graphics=Graphics(name="Eileen Collins", role="Anchor, evening news", clock=True,
                                         ticker=("Markets close higher", "Rain clears by the weekend"),
                                         logo=str(logo)))
    plain = CanvasStyle(background_rgb=(16, 28, 48), use_matte=False, show_lower_third=False)
    return {"plain": plain, "full": full}


def _items(seconds: float):
    from studio.pipeline.sources import ProgramItem
    from studio.contracts import OnAir

    rng = np.random.default_rng(0)
    n = int(seconds * 16000)
    t = np.arange(n) / 16000
    speech = (rng.normal(0, 0.2, n) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t)) ** 2).astype(np.float32)
    return [ProgramItem(program_audio=np.repeat(speech, 3), analysis_audio=speech,
                        on_air=OnAir(title="The evening news", row=0))]


def _core_once(anchor, settings, style, seconds: float) -> dict:
    from studio.pipeline.factory import DiscardOutput, make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    core = make_core(ProgramSource(_items(seconds)), ProgramMotion(), settings, anchor, [DiscardOutput()],
                     on_air=False, canvas_style=style)
    try:
        core.warm()
        rep = core.run()
    finally:
        core.close()
    per = rep.frames_produced or 1
    out = {"wall_ms_per_frame": rep.ms_per_frame}
    st = rep.stages
    if "generate" in st and "post" in st:
        out["gpu_or_stage_ms_per_frame"] = (st["generate"].total_ms + st["post"].total_ms) / per
    return out


def _compose_once(style, fmt, device: str, n: int, reps: int) -> float:
    from studio.pipeline.post import Canvas

    c = Canvas(style, framed=not style.use_matte)
    c.open(fmt, device)
    p = fmt.presenter_px
    frames = torch.rand((n, 4 if style.use_matte else 3, p, p), device=device) * 255
    slots = np.arange(n)
    times = []
    for i in range(reps + 2):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        c.select("The evening news", 0, slots + i * n)
        c.compose(frames)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if i >= 2:
            times.append((time.perf_counter() - t0) * 1e3 / n)
    c.close()
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--canvas", type=int, default=1080, choices=[720, 1080])
    ap.add_argument("--fps", type=float, default=60.0)
    ap.add_argument("--seconds", type=float, default=4.0, help="program length of one core run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from studio.contracts import Layout, ProgramFormat
    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.settings import CoreSettings
    from studio.presenter.anchor import build_anchor
    from studio.presenter.renderer import resolve_device

    device = str(resolve_device(args.device))
    anchor = build_anchor(output_px=args.canvas)  # the pack the studio puts on air at this canvas
    s = CoreSettings(device=device, fps=args.fps, layout=Layout.CANVAS, canvas_height_px=args.canvas,
                     measure_baseline=False, optimizations=default_optimizations(device))
    w, h = s.output_size
    fmt = ProgramFormat(width=w, height=h, fps=args.fps, layout=Layout.CANVAS, presenter_px=h)
    with tempfile.TemporaryDirectory() as d:
        looks = _looks(Path(d))
        result: dict = {"device": device, "gpu": torch.cuda.get_device_name() if device.startswith("cuda") else "",
                        "canvas": f"{w}x{h}", "fps": args.fps, "optimizations": sorted(o.value for o in
                                                                                         s.optimizations)}
        compose = {k: [] for k in looks}
        core = {k: [] for k in looks}
        for name, style in looks.items():  # warm-up: anchor, engines, graphs, fonts
            _compose_once(style, fmt, device, 8, 1)
            _core_once(anchor, replace(s), style, 1.0)
        for _ in range(args.repeats):
            for name, style in looks.items():
                compose[name].append(_compose_once(style, fmt, device, 8, 5))
                core[name].append(_core_once(anchor, s, style, args.seconds))
    for name in looks:
        result[name] = {"compose_ms_per_frame": statistics.median(compose[name]),
                        **{k: statistics.median(r[k] for r in core[name]) for k in core[name][0]}}
    result["full_minus_plain"] = {k: result["full"][k] - result["plain"][k] for k in result["plain"]}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
