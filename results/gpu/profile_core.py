"""Where the built-in engine's GPU time per 1080p60 output frame goes (issue 15's 0.5 ms item), on the device machine.

Runs the bench's own core (``studio.bench.harness.run_config``: the 1080p canvas at 60 fps, chunks of 16, the bench
program) for a few flag sets under torch.profiler and prints, per set: the core's GPU ms per frame by stage (its CUDA
events), then the CUDA kernels and copies summed over the run, per output frame, largest first.

    python results/gpu/profile_core.py --program .gpu_home/bench_program.npz --seconds 4 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", type=Path, required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--sets", default="plain;cuda_graphs;cuda_graphs,gpu_encode;audio_cache,cuda_graphs,gpu_encode,"
                                      "kv_cache")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--trace", type=Path, help="also write a Chrome trace of each set's run here (one file a set)")
    a = ap.parse_args()

    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    from studio.bench.harness import BenchSettings, _per_frame, cut_program, load_program, run_config
    from studio.pipeline.settings import Optimization
    from studio.presenter.anchor import build_anchor

    b = BenchSettings(device="cuda", seconds=a.seconds, size_px=1080, canvas="1080p", fps=60.0, repeats=1)
    anchor = build_anchor()
    program = cut_program(load_program(a.program), a.seconds)
    tmp = Path(tempfile.mkdtemp(prefix="profile_"))
    out: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "sets": {}}
    for spec in a.sets.split(";"):
        opts = frozenset(Optimization(x) for x in spec.split(",") if x and x != "plain")
        run_config(anchor, cut_program(program, 1.0), b, opts, tmp)  # warm: graphs captured, caches filled
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            rep, _ = run_config(anchor, program, b, opts, tmp)
            torch.cuda.synchronize()
        if a.trace:
            a.trace.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(a.trace / f"{spec.replace(',', '+')}.json"))
        n = max(1, rep.frames_produced)
        rows = []
        for e in prof.key_averages():
            dev_us = getattr(e, "self_device_time_total", None)
            if dev_us is None:
                dev_us = e.self_cuda_time_total
            if dev_us > 0:
                rows.append((dev_us / n / 1e3, e.count, e.key[:90]))
        rows.sort(reverse=True)
        total = sum(r[0] for r in rows)
        res = {"frames": n, "gpu_ms_per_frame_events": {k: _per_frame(rep, k) for k in ("generate", "post")},
               "wall_ms_per_frame": rep.ms_per_frame, "kernel_ms_per_frame": total,
               "top": [{"ms_per_frame": r[0], "calls": r[1], "name": r[2]} for r in rows[:25]]}
        out["sets"][spec] = res
        ev = res["gpu_ms_per_frame_events"]
        print(f"== {spec}: {n} frames; events generate {ev['generate']:.3f} + post {ev['post']:.3f} ms/frame; "
              f"device busy (sum of kernels and copies) {total:.3f} ms/frame; wall {rep.ms_per_frame:.3f}")
        for r in rows[:18]:
            print(f"   {r[0]:8.4f} ms/frame {r[1]:6d}x  {r[2]}")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
