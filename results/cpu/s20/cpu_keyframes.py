"""Session 20: do keyframes + RIFE pay on the CPU now that the flows of large frames come from a shrunk copy (the
post stage since 61e547b)? The CPU drivers leave frame interpolation out for every engine since 2798ae3 (Wav2Lip at
the 1080p canvas then: 168 ms a frame plain, 1222 with RIFE in-betweens). Wav2Lip's twin on the CPU, the bench's
program (the default rundown through TTS, cut), the CPU's default flags with and without frame interpolation at
key stride 2, interleaved runs, medians of wall ms per output frame.

    python results/cpu/s20/cpu_keyframes.py --json results/cpu/s20/cpu_keyframes.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="wav2lip")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--canvas", default="1080p")
    ap.add_argument("--fps", type=float, default=25.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    from studio.bench.harness import build_program, defaults_for, machine_info, run_config
    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.settings import Optimization
    from studio.presenter.anchor import build_anchor

    b = replace(defaults_for("cpu"), canvas=a.canvas, fps=a.fps, engine=a.engine, key_stride=2, seconds=a.seconds)
    base = default_optimizations("cpu", a.engine)
    configs = {"cpu_default": base, "with_keyframes": base | {Optimization.FRAME_INTERPOLATION}}
    program = build_program(a.seconds)
    anchor = build_anchor()
    tmp = Path(tempfile.mkdtemp(prefix="cpu_keyframes_"))
    out: dict = {"machine": machine_info("cpu"), "engine": a.engine, "canvas": a.canvas, "fps": a.fps,
                 "program_s": a.seconds, "key_stride": 2,
                 "flags": {k: sorted(o.value for o in v) for k, v in configs.items()}, "runs": []}
    run_config(anchor, program, b, base, tmp)  # warm-up: models, caches
    for _ in range(a.repeats):
        for name, opts in configs.items():
            rep, _ = run_config(anchor, program, b, opts, tmp)
            row = {"config": name, "ms_per_frame": rep.ms_per_frame, "frames": rep.frames_produced,
                   "generated": rep.frames_full, "interpolated": rep.frames_interpolated,
                   "stage_ms_per_frame": {k: v.total_ms / max(1, rep.frames_produced) for k, v in rep.stages.items()}}
            out["runs"].append(row)
            print(f"{name:15s} {rep.ms_per_frame:8.1f} ms/frame  generated {rep.frames_full} interpolated "
                  f"{rep.frames_interpolated}", flush=True)
    out["median_ms_per_frame"] = {k: statistics.median(r["ms_per_frame"] for r in out["runs"] if r["config"] == k)
                                  for k in configs}
    print(out["median_ms_per_frame"])
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
