"""A cast of four anchors on one programme, in the core on a GPU: ms an output frame and GPU memory.

The cast is the rows of one generator call a chunk (two-shot: every anchor on the set, each cut out and sized alike;
on the 1920x1080 canvas at 60 fps each anchor is 480 px). The programme is the bench program's speech cut into one
turn per anchor, each spoken by the next anchor while the others listen (``studio.pipeline.cast_motion``), under the
built-in set and graphics. Each engine runs with every flag it uses by default on CUDA, keyframes at stride 4 where
its default has them (the leaderboard's settings): the built-in engine, and LivePortrait's timing twin (random weights
of the release's shapes: its cost, not its pictures). Per engine: a warm-up run (which also grabs one programme frame
to a PNG beside the JSON), then ``--repeats`` runs, medians of: wall ms an output frame, the generate and post stages'
GPU ms an output frame (CUDA events), peak GPU memory (torch's allocator, its peak reset before each run), frames
dropped. The portraits are the built-in presenter and Grace Hopper (matplotlib's sample), in turn.

    PYTHONPATH=.:/tmp/site python3 benchmarks/gpu/cast_core.py --program .gpu_home/bench_program.npz --json OUT.json

``--check``: the CPU, two anchors on the 720p canvas at 25 fps, two seconds: the script runs, not a figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--program", type=Path, help="a saved bench program (.npz, bench --save-program); default: "
                                                 "text-to-speech of the default rundown")
    ap.add_argument("--anchors", type=int, default=4, help="anchors in the cast (2 to 4)")
    ap.add_argument("--engines", default="builtin,liveportrait", help="comma list")
    ap.add_argument("--seconds", type=float, default=8.0, help="programme length of each run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--canvas", type=int, default=1080, choices=(720, 1080))
    ap.add_argument("--fps", type=float, default=60.0)
    ap.add_argument("--layout", default="two-shot", choices=("two-shot", "cut"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--check", action="store_true", help="CPU, 2 anchors, 720p25, 2 s: the script runs")
    a = ap.parse_args(argv)
    if a.check:
        a.anchors, a.canvas, a.fps, a.seconds, a.repeats, a.engines = 2, 720, 25.0, 2.0, 1, "builtin"
    if not 2 <= a.anchors <= 4:
        ap.error("--anchors: 2 to 4")
    return a


def turns(program, anchors: int) -> list:
    """The program's speech as ``anchors`` turns of equal length, turn i spoken by anchor i."""
    from studio.bench.harness import ANALYSIS_RATE_HZ
    from studio.contracts import OnAir
    from studio.pipeline.sources import ProgramItem, resample

    audio = np.concatenate([it.audio_16k for it in program]).astype(np.float32)
    out = []
    for i, part in enumerate(np.array_split(audio, anchors)):
        out.append(ProgramItem(program_audio=resample(part, ANALYSIS_RATE_HZ, 48000), analysis_audio=part,
                               on_air=OnAir(title=f"Turn {i + 1}", speaker=i)))
    return out


def grab_output():
    """An output that keeps the last programme frame (the warm-up run's, for a look)."""
    from studio.contracts import Output

    class Grab(Output):
        name = "grab"
        needs_rgb = True
        wants_yuv = False
        retains_frames = True

        def __init__(self) -> None:
            super().__init__()
            self.frame = None

        def write(self, batch) -> None:
            if len(batch.frames):
                self.frame = batch.frames[-1].copy()

    return Grab()


def run_engine(engine: str, packs: tuple, items: list, a: argparse.Namespace, device: str, png: Path | None,
               progress=print) -> dict:
    import torch

    from studio.audio.settings import DEFAULT_AUDIO_ENGINE
    from studio.bench.harness import NullOutput
    from studio.contracts import CastLayout, Layout
    from studio.graphics.look import CanvasStyle
    from studio.pipeline.cast_motion import programme_motion
    from studio.pipeline.factory import default_optimizations, make_core
    from studio.pipeline.settings import CoreSettings
    from studio.pipeline.sources import ProgramSource

    cuda = device.startswith("cuda")
    opts = default_optimizations(device, engine)
    s = CoreSettings(layout=Layout.CANVAS, canvas_height_px=a.canvas, fps=a.fps, device=device, engine=engine,
                     optimizations=opts, chunk_frames=16, key_stride=4, batch_frames=16 if cuda else 8,
                     cast_size=a.anchors,
                     cast_layout=CastLayout.CUT if a.layout == "cut" else CastLayout.TWO_SHOT)
    forms: dict = {}
    runs = []
    for r in range(a.repeats + 1):  # the first: warm-up (the engine opened, graphs captured, a frame grabbed)
        grab = grab_output() if r == 0 else None
        out = grab if grab is not None else NullOutput()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        core = make_core(ProgramSource(list(items)), programme_motion(a.anchors, DEFAULT_AUDIO_ENGINE, s.seed), s,
                         packs, [out], on_air=False, canvas_style=CanvasStyle(), forms=forms)
        core.warm()
        t0 = time.perf_counter()
        try:
            rep = core.run()
        finally:
            core.close()
        wall = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else 0.0
        n = max(1, rep.frames_produced)
        row = {"frames": rep.frames_produced, "dropped": rep.frames_dropped, "wall_s": wall,
               "ms_per_frame": rep.ms_per_frame,
               "gpu_ms_per_frame": {k: rep.stages[k].total_ms / n for k in ("generate", "post") if k in rep.stages},
               "gpu_mem_peak_mb": max(peak, rep.gpu_mem_peak_mb), "optimizations": sorted(o.value for o in opts)}
        progress(f"{engine} {'warm-up' if r == 0 else f'run {r}'}: {rep.frames_produced} frames, "
                 f"{rep.ms_per_frame:.2f} ms a frame, GPU {row['gpu_ms_per_frame']}, peak {row['gpu_mem_peak_mb']:.0f} MB")
        if grab is not None and grab.frame is not None and png is not None:
            from PIL import Image

            Image.fromarray(grab.frame).save(png)
        if r:
            runs.append(row)
    from studio.pipeline.pool import close_forms

    close_forms(forms)
    med = {k: statistics.median(x[k] for x in runs) for k in ("ms_per_frame", "gpu_mem_peak_mb", "dropped")}
    gpu = {k: statistics.median(x["gpu_ms_per_frame"].get(k, 0.0) for x in runs)
           for k in ("generate", "post")}
    return {"engine": engine, "anchors": a.anchors, "layout": a.layout, "runs": runs,
            "median": {**med, "gpu_ms_per_frame": gpu, "gpu_ms_per_frame_total": sum(gpu.values())}}


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    import matplotlib
    import torch

    from studio.bench.harness import build_program, cut_program, load_program, machine_info
    from studio.pipeline.factory import presenter_px
    from studio.pipeline.settings import CoreSettings
    from studio.contracts import CastLayout, Layout
    from studio.presenter.anchor import build_anchor

    device = "cpu" if a.check else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("cast_core: no CUDA device here (--check runs the script on the CPU)")
        return 2
    layout = CastLayout.CUT if a.layout == "cut" else CastLayout.TWO_SHOT
    px = presenter_px(CoreSettings(layout=Layout.CANVAS, canvas_height_px=a.canvas, cast_size=a.anchors,
                                   cast_layout=layout))
    hopper = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    two = (build_anchor(output_px=px), build_anchor(hopper, output_px=px))
    packs = tuple(two[i % 2] for i in range(a.anchors))
    program = load_program(a.program) if a.program else build_program(a.seconds)
    items = turns(cut_program(program, a.seconds), a.anchors)
    result = {"machine": machine_info(device), "canvas": f"{a.canvas * 16 // 9}x{a.canvas}", "fps": a.fps,
              "anchors": a.anchors, "presenter_px": px, "seconds": a.seconds, "repeats": a.repeats, "rows": []}
    for engine in a.engines.split(","):
        png = a.json.with_name(f"{a.json.stem}_{engine}.png") if a.json else None
        try:
            result["rows"].append(run_engine(engine, packs, items, a, device, png))
        except Exception as exc:  # one engine's failure is its row, the others still run
            print(f"{engine}: failed: {exc!r}")
            result["rows"].append({"engine": engine, "error": repr(exc)})
        if a.json:
            a.json.write_text(json.dumps(result, indent=1))
    for row in result["rows"]:
        if "median" in row:
            m = row["median"]
            print(f"{row['engine']}: {a.anchors} anchors, {result['canvas']} at {a.fps:g} fps: "
                  f"{m['ms_per_frame']:.2f} ms a frame wall, GPU {m['gpu_ms_per_frame_total']:.2f} ms a frame "
                  f"{ {k: round(v, 2) for k, v in m['gpu_ms_per_frame'].items()} }, peak {m['gpu_mem_peak_mb']:.0f} "
                  f"MB, dropped {m['dropped']:g}")
    return 0 if all("median" in r for r in result["rows"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
