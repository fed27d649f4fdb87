"""Session 21 (issue 16): the DiT engine's compute saved over the whole bench program (the default rundown's first
20 s: the opening, the station ident, a story, the ident again, the next story cut short; a 0.6-s pause after each
story), every flag against the plain core.

The leaderboard runs a window engine on one window of output (a second of the program), where the ident and the
pauses hardly come; here the same core runs the whole program: every flag, plain (the DiT at 512, every frame
generated, no caches; with --plain-seconds on the program's first window only, when a device call cannot hold a
plain run of all of it), every flag again, then every flag less one of the flags a rundown exercises (sieve, audio
cache, async pipeline, keyframes + RIFE, CUDA graphs) while time lasts. The JSON is written after each run.

    PYTHONPATH=.:/tmp/site python3 results/gpu/rundown_s21.py --program .gpu_home/bench_program.npz --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="wan2.1-1.3b-taehv-fp8")
    ap.add_argument("--program", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--budget", type=float, default=1e9, help="seconds: no run starts after this")
    ap.add_argument("--plain-seconds", type=float, default=0.0,
                    help="the plain run on this much of the program's start (0: all of it): with no flag on, a window "
                         "engine does the same work for every window, speech or pause, ident or not")
    ap.add_argument("--check", action="store_true", help="Wav2Lip on the CPU over 1 s: the script runs")
    a = ap.parse_args()
    t_start = time.perf_counter()

    from studio.bench.harness import _per_frame, cut_program, defaults_for, load_program, machine_info, run_config
    from studio.bench.leaderboard import _release, _row_forms
    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.settings import Optimization as O
    from studio.presenter.anchor import build_anchor

    cuda = not a.check
    dev = "cuda" if cuda else "cpu"
    engine = "wav2lip" if a.check else a.engine
    full = load_program(a.program)
    program = full if cuda else cut_program(full, 1.0)
    b = replace(defaults_for(dev), canvas="1080p", fps=60.0, seconds=sum(len(i.audio_16k) for i in program) / 16000,
                engine=engine, native_px=512 if cuda else 0, key_stride=4, program=a.program)
    opts = default_optimizations(dev, engine)
    out: dict = {"machine": machine_info(dev), "engine": engine, "program_s": b.seconds,
                 "program_items": [i.title for i in program], "optimizations": sorted(o.value for o in opts),
                 "key_stride": b.key_stride, "output": "1080p canvas at 60 fps", "runs": []}
    anchor = build_anchor()
    tmp = Path(tempfile.mkdtemp(prefix="rundown_s21_"))

    def save():
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))

    def one(label, flags):
        t0 = time.perf_counter()
        prog = cut_program(program, a.plain_seconds) if label == "plain" and a.plain_seconds else program
        rep, _, core = run_config(anchor, prog, b, flags, tmp, keep_core=True, forms=forms)
        feats = core.features.stats() if core.features is not None else None
        core.pool.close()
        del core
        _release(cuda)
        n = max(1, rep.frames_produced)
        row = {"run": label, "flags": sorted(f.value for f in flags), "wall_ms_per_frame": rep.ms_per_frame,
               "frames": rep.frames_produced, "generated": rep.frames_full, "interpolated": rep.frames_interpolated,
               "silent": rep.silent_frames, "audio_cache": feats,
               "stage_ms_per_frame": {k: v.total_ms / n for k, v in rep.stages.items()},
               "gpu_ms_per_frame": _per_frame(rep, "generate") + _per_frame(rep, "post") if cuda else None,
               "gpu_mem_peak_mb": rep.gpu_mem_peak_mb if cuda else None, "run_s": round(time.perf_counter() - t0, 1)}
        row["program_s"] = sum(len(i.audio_16k) for i in prog) / 16000
        out["runs"].append(row)
        save()
        print(f"{label:22s} {rep.ms_per_frame:8.2f} ms/frame  frames {rep.frames_produced} generated "
              f"{rep.frames_full} silent {rep.silent_frames} cache {feats and (feats.get('hits'), feats.get('misses'))}"
              f"  ({row['run_s']} s)", flush=True)

    with _row_forms(cuda) as forms:
        t0 = time.perf_counter()
        run_config(anchor, cut_program(program, 0.5), b, opts, tmp, forms=forms)  # opens and compiles the form
        out["warm_s"] = round(time.perf_counter() - t0, 1)
        print(f"warm-up {out['warm_s']} s", flush=True)
        plan = [("optimized", opts), ("plain", frozenset()), ("optimized", opts)]
        plan += [(f"without_{f.value}", opts - {f}) for f in (O.SILENCE_SIEVE, O.AUDIO_CACHE, O.ASYNC_PIPELINE,
                                                               O.FRAME_INTERPOLATION, O.CUDA_GRAPHS) if f in opts]
        for label, flags in plan:
            if time.perf_counter() - t_start > a.budget:
                print(f"skipped {label}: past the budget", flush=True)
                continue
            one(label, flags)
    runs = out["runs"]
    o_ms = statistics.median(r["wall_ms_per_frame"] for r in runs if r["run"] == "optimized")
    p = [r["wall_ms_per_frame"] for r in runs if r["run"] == "plain"]
    out["summary"] = {"optimized_ms_per_frame": o_ms, "plain_ms_per_frame": p[0] if p else None,
                      "compute_saved": 1 - o_ms / p[0] if p else None,
                      "saved_share": {r["run"][len("without_"):]: (r["wall_ms_per_frame"] - o_ms) / p[0]
                                      for r in runs if r["run"].startswith("without_")} if p else {}}
    save()
    print(json.dumps(out["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
