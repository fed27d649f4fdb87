"""Session 20 (issue 16's 5 ms item): where the Wan 1.3B row's milliseconds go, and the post stage's two routes.

The leaderboard row's runs (``studio.bench.harness.run_config`` on one window of keyframes at key stride 4, every
flag of the engine, the row's forms built once), with CUDA events around the parts on the stream each runs on:
- denoise: the DiT's 8 steps of a window; decode: the window's latents to frames (TAEHV or the Wan VAE);
- upscale: the post stage's SPAN calls; fill: RIFE's in-betweens; the rest of the post stage (canvas, colour
  conversion, copies) is post minus those two.
Routes, interleaved: "keys" (the post stage since session 20: SPAN on the keyframes alone, in-betweens made at 1080
from the 288-px keys' flows) and "after" (session 19's: RIFE at 288, then SPAN on every frame; put back here by
wrapping the two calls, not in the product). Then one run of the "keys" route under torch.profiler (its top kernels)
and TAEHV's decode of one window eager against a CUDA graph of it.

    PYTHONPATH=.:/tmp/site python3 results/gpu/parts_s20.py --program .gpu_home/bench_program.npz --json OUT.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="wan2.1-1.3b-taehv-fp8")
    ap.add_argument("--program", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--check", action="store_true", help="the built-in engine on the CPU, 0.5 s: the script runs")
    ap.add_argument("--routes", default="keys,after",
                    help="routes to interleave: keys, after, and keys_wait (the keys route with the in-betweens' "
                         "indices and times copied from pageable memory, as before 53a40b8: the host waits for the "
                         "GPU before each batch)")
    a = ap.parse_args()

    import numpy as np
    import torch

    cuda = not a.check
    if a.check:
        a.engine, a.no_profile = "wav2lip", True

    class Clock:  # perf_counter in place of CUDA events (``--check``)
        def __init__(self, **_):
            self.t = 0.0

        def record(self, *_):
            self.t = time.perf_counter()

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

    import studio.pipeline.post as post
    from studio.bench.harness import cut_program, defaults_for, load_program, machine_info, run_config
    from studio.bench.leaderboard import _row_forms
    from studio.generators import wan_dit as wd
    from studio.pipeline.factory import default_optimizations
    from studio.presenter.anchor import build_anchor

    out: dict = {"machine": machine_info("cuda" if cuda else "cpu"), "engine": a.engine, "runs": [], "parts_note": __doc__.split("\n")[2]}

    def save():
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))

    events: list = []  # (part, start event, end event) of the current run

    def timed(part, fn):
        def wrapper(*args, **kwargs):
            s = torch.cuda.current_stream() if cuda else None
            ev = torch.cuda.Event if cuda else Clock
            e0, e1 = ev(enable_timing=True), ev(enable_timing=True)
            e0.record(s)
            y = fn(*args, **kwargs)
            e1.record(s)
            events.append((part, e0, e1))
            return y
        return wrapper

    route = {"after": False}
    orig_process, orig_fill = post.Upscaler.process, post.FlowFill.fill

    def process(self, frames, chunk=None):
        # the "after" route: the core's call on the keyframes alone returns None (no large keys), so FlowFill fills at
        # 288 and the core upscales every frame with its second call
        if route["after"] and chunk is not None and getattr(chunk, "_key_mask", None) is not None \
                and not getattr(chunk, "_route_seen", False):
            chunk._route_seen = True
            return None
        return orig_process(self, frames, chunk)

    orig_warm = post.FlowFill.warm

    def warm(self, key_px, large_px, device):  # each route's RIFE graphs captured before its timed run
        return orig_warm(self, key_px, None if route["after"] else large_px, device)

    post.FlowFill.warm = warm
    orig_on_device = post._on_device

    def on_device(values, dtype, device):  # keys_wait: the pageable copy (it waits for the stream's earlier work)
        if route.get("wait"):
            return torch.as_tensor(np.asarray(values), dtype=dtype).to(device)
        return orig_on_device(values, dtype, device)

    post._on_device = on_device
    post.Upscaler.process = timed("upscale", process)
    post.FlowFill.fill = timed("fill", orig_fill)
    wd.WanDiTGenerator.denoise = timed("denoise", wd.WanDiTGenerator.denoise)
    wd.WanDiTGenerator._decode_taehv = timed("decode", wd.WanDiTGenerator._decode_taehv)
    wd.WanDiTGenerator._decode = timed("decode", wd.WanDiTGenerator._decode)

    dev = "cuda" if cuda else "cpu"
    # each chunk's stage calls on the host clock (the first run of each route): what waits for what
    import studio.pipeline.core as corem

    timeline: list = []

    def traced(stage, fn):
        def wrapper(self, *args, **kwargs):
            t0 = time.perf_counter()
            y = fn(self, *args, **kwargs)
            n = getattr(y if y is not None else args[0], "n", None) if (y is not None or args) else None
            timeline.append((stage, t0, time.perf_counter(), n))
            return y
        return wrapper

    corem.Core._stage_a = traced("A", corem.Core._stage_a)
    corem.Core._stage_b = traced("B", corem.Core._stage_b)
    corem.Core._stage_c = traced("C", corem.Core._stage_c)
    b = replace(defaults_for(dev), canvas="1080p", fps=60.0, seconds=1.0, engine=a.engine, native_px=512 if cuda else 0,
                key_stride=4, program=a.program)
    opts = default_optimizations(dev, a.engine)
    if not cuda:
        from studio.pipeline.settings import Optimization

        opts = opts | {Optimization.FRAME_INTERPOLATION}
    out["optimizations"] = sorted(o.value for o in opts)
    full = load_program(a.program)
    program = cut_program(full, 81 * 4 / 60 if cuda else 0.5)  # one window of keyframes at key stride 4
    anchor = build_anchor()
    tmp = Path(tempfile.mkdtemp(prefix="parts_s20_"))

    def one(label):
        events.clear()
        timeline.clear()
        t0 = time.perf_counter()
        rep, _ = run_config(anchor, program, b, opts, tmp, forms=forms)
        if cuda:
            torch.cuda.synchronize()
        n = max(1, rep.frames_produced)
        parts: dict = {}
        for part, e0, e1 in events:
            parts[part] = parts.get(part, 0.0) + e0.elapsed_time(e1)
        st = {k: v.total_ms / n for k, v in rep.stages.items()}
        row = {"route": label, "wall_ms_per_frame": rep.ms_per_frame, "frames": rep.frames_produced,
               "keyframes": rep.frames_full, "interpolated": rep.frames_interpolated,
               "stage_ms_per_frame": st, "part_ms_per_frame": {k: v / n for k, v in parts.items()},
               "calls": {k: sum(1 for p, _, _ in events if p == k) for k in parts},
               "run_s": round(time.perf_counter() - t0, 2)}
        if not any(r["route"] == label for r in out["runs"]):
            row["timeline_ms"] = [(k, round((a0 - t0) * 1e3, 2), round((a1 - t0) * 1e3, 2), m)
                                  for k, a0, a1, m in timeline]
        if "post" in st:
            row["post_rest_ms_per_frame"] = st["post"] - (parts.get("upscale", 0) + parts.get("fill", 0)) / n
        out["runs"].append(row)
        save()
        print(f"{label:6s} wall {rep.ms_per_frame:.3f} ms/frame  stages "
              + " ".join(f"{k}={v:.3f}" for k, v in st.items()) + "  parts "
              + " ".join(f"{k}={v / n:.3f}" for k, v in parts.items()), flush=True)
        return rep

    with _row_forms(cuda) as forms:
        t0 = time.perf_counter()
        run_config(anchor, cut_program(program, 0.5), b, opts, tmp, forms=forms)  # opens and compiles the form
        route["after"] = True
        run_config(anchor, cut_program(program, 0.5), b, opts, tmp, forms=forms)  # the "after" route's graphs
        route["after"] = False
        out["warm_s"] = round(time.perf_counter() - t0, 1)
        print(f"warm-up (open, compile, both routes) {out['warm_s']} s", flush=True)
        labels = a.routes.split(",")
        for _ in range(a.repeats):
            for label in labels:
                route["after"], route["wait"] = label == "after", label == "keys_wait"
                one(label)
        route["after"] = route["wait"] = False
        summary = {}
        for label in labels:
            rs = [r for r in out["runs"] if r["route"] == label]
            summary[label] = {"wall_ms_per_frame_median": statistics.median(r["wall_ms_per_frame"] for r in rs),
                              "parts_median": {k: statistics.median(r["part_ms_per_frame"].get(k, 0) for r in rs)
                                               for k in rs[0]["part_ms_per_frame"]},
                              "stages_median": {k: statistics.median(r["stage_ms_per_frame"].get(k, 0) for r in rs)
                                                for k in rs[0]["stage_ms_per_frame"]}}
        out["summary"] = summary
        save()
        print(json.dumps(summary, indent=1), flush=True)

        gen = next((g for g, _ in forms.values() if isinstance(g, wd.WanDiTGenerator)), None)
        if not a.no_profile:
            try:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    one("profiled")
                table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=45)
                out["profile_top"] = table
                print(table, flush=True)
            except Exception as exc:  # the profile is a help, not the measurement
                out["profile_error"] = f"{type(exc).__name__}: {exc}"
                traceback.print_exc(limit=3)
            save()
        if cuda and getattr(gen, "taehv", None) is not None:
            with contextlib.suppress(Exception), torch.inference_mode():
                h = gen.settings.size_px // 8
                z = torch.randn((1, 16, gen.latent_frames, h, h), device="cuda", dtype=gen.dtype)
                dec = gen.taehv

                def ms(fn, reps=5):
                    fn()
                    torch.cuda.synchronize()
                    got = []
                    for _ in range(reps):
                        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        e0.record()
                        fn()
                        e1.record()
                        e1.synchronize()
                        got.append(e0.elapsed_time(e1))
                    return statistics.median(got)

                from studio.pipeline.graphs import Graphed

                eager = ms(lambda: dec(z))
                g = Graphed(dec, (z,), torch.cuda.Stream())
                graph = ms(lambda: g(z))
                diff = float((g(z) - dec(z)).abs().max())
                out["taehv_window"] = {"eager_ms": eager, "graph_ms": graph, "max_abs_diff": diff,
                                       "latents": list(z.shape)}
                print(f"TAEHV one window: eager {eager:.2f} ms, graph {graph:.2f} ms (max diff {diff:.2e})", flush=True)
        save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
