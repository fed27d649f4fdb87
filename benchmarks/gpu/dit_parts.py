"""Where a DiT engine's milliseconds go on the GPU: CUDA events around its parts in the leaderboard row's runs.

The row's runs (``studio.bench.harness.run_config`` on one window of keyframes at key stride 4, 1080p canvas at 60 fps,
every flag the engine uses by default, the row's forms built once), timed on the stream each part runs on:
- denoise: the DiT's steps of a window; decode: the window's latents to frames (TAEHV or the Wan VAE);
- upscale: the post stage's SPAN calls; fill: RIFE's in-betweens; the rest of the post stage (canvas, colour
  conversion, copies) is the post stage's time minus those two.
Then, for an engine with a TAEHV decoder, one window's decode eager against a CUDA graph of it.

    PYTHONPATH=.:/tmp/site python3 benchmarks/gpu/dit_parts.py --program .gpu_home/bench_program.npz --json OUT.json

``--check`` runs the same code on the CPU with the built-in engine on half a second of the program (what
tests/unit/test_benchmarks.py runs): the parts there are perf_counter intervals, not a GPU figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", default="wan2.1-1.3b-taehv-fp8")
    ap.add_argument("--program", type=Path, required=True, help="a saved bench program (.npz, bench --save-program)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--check", action="store_true", help="the built-in engine on the CPU, 0.5 s: the script runs")
    return ap.parse_args(argv)


class _Clock:
    """perf_counter in place of a CUDA event (``--check``)."""

    def __init__(self, **_):
        self.t = 0.0

    def record(self, *_):
        self.t = time.perf_counter()

    def elapsed_time(self, other) -> float:
        return (other.t - self.t) * 1e3


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    import torch

    import studio.pipeline.post as post
    from studio.bench.harness import cut_program, defaults_for, load_program, machine_info, run_config
    from studio.bench.leaderboard import _row_forms
    from studio.generators import wan_dit as wd
    from studio.pipeline.factory import default_optimizations
    from studio.presenter.anchor import build_anchor

    cuda = not a.check
    engine = a.engine if cuda else "builtin"
    dev = "cuda" if cuda else "cpu"
    out: dict = {"machine": machine_info(dev), "engine": engine, "runs": []}

    def save() -> None:
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))

    events: list = []  # (part, start event, end event) of the current run

    def timed(part, fn):
        def wrapper(*args, **kwargs):
            s = torch.cuda.current_stream() if cuda else None
            ev = torch.cuda.Event if cuda else _Clock
            e0, e1 = ev(enable_timing=True), ev(enable_timing=True)
            e0.record(s)
            y = fn(*args, **kwargs)
            e1.record(s)
            events.append((part, e0, e1))
            return y
        return wrapper

    post.Upscaler.process = timed("upscale", post.Upscaler.process)
    post.FlowFill.fill = timed("fill", post.FlowFill.fill)
    wd.WanDiTGenerator.denoise = timed("denoise", wd.WanDiTGenerator.denoise)
    wd.WanDiTGenerator._decode_taehv = timed("decode", wd.WanDiTGenerator._decode_taehv)
    wd.WanDiTGenerator._decode = timed("decode", wd.WanDiTGenerator._decode)

    if cuda:
        b = replace(defaults_for(dev), canvas="1080p", fps=60.0, seconds=1.0, engine=engine, native_px=512,
                    key_stride=4, program=a.program)
        seconds = 81 * 4 / 60  # one window of 81 keyframes at key stride 4
    else:
        b = replace(defaults_for(dev), size_px=128, fps=25.0, seconds=0.5, engine=engine, program=a.program)
        seconds = 0.5
    opts = default_optimizations(dev, engine)
    out["optimizations"] = sorted(o.value for o in opts)
    program = cut_program(load_program(a.program), seconds)
    anchor = build_anchor()
    tmp = Path(tempfile.mkdtemp(prefix="dit_parts_"))

    def one(forms) -> None:
        events.clear()
        rep, _ = run_config(anchor, program, b, opts, tmp, forms=forms)
        if cuda:
            torch.cuda.synchronize()
        n = max(1, rep.frames_produced)
        parts: dict = {}
        for part, e0, e1 in events:
            parts[part] = parts.get(part, 0.0) + e0.elapsed_time(e1)
        stages = {k: v.total_ms / n for k, v in rep.stages.items()}
        row = {"wall_ms_per_frame": rep.ms_per_frame, "frames": rep.frames_produced, "keyframes": rep.frames_full,
               "interpolated": rep.frames_interpolated, "stage_ms_per_frame": stages,
               "part_ms_per_frame": {k: v / n for k, v in parts.items()},
               "calls": {k: sum(1 for p, _, _ in events if p == k) for k in parts}}
        if "post" in stages:
            row["post_rest_ms_per_frame"] = stages["post"] - (parts.get("upscale", 0) + parts.get("fill", 0)) / n
        out["runs"].append(row)
        save()
        print(f"wall {rep.ms_per_frame:.3f} ms/frame  stages " + " ".join(f"{k}={v:.3f}" for k, v in stages.items())
              + "  parts " + " ".join(f"{k}={v / n:.3f}" for k, v in parts.items()), flush=True)

    with _row_forms(cuda) as forms:
        t0 = time.perf_counter()
        run_config(anchor, cut_program(program, 0.5), b, opts, tmp, forms=forms)  # opens and compiles the form
        out["warm_s"] = round(time.perf_counter() - t0, 1)
        print(f"warm-up (open, compile) {out['warm_s']} s", flush=True)
        for _ in range(a.repeats):
            one(forms)
        rs = out["runs"]
        out["summary"] = {
            "wall_ms_per_frame_median": statistics.median(r["wall_ms_per_frame"] for r in rs),
            "parts_median": {k: statistics.median(r["part_ms_per_frame"].get(k, 0.0) for r in rs)
                             for k in rs[0]["part_ms_per_frame"]},
            "stages_median": {k: statistics.median(r["stage_ms_per_frame"].get(k, 0.0) for r in rs)
                              for k in rs[0]["stage_ms_per_frame"]}}
        save()
        print(json.dumps(out["summary"], indent=1), flush=True)
        gen = next((g for g, _ in forms.values() if isinstance(g, wd.WanDiTGenerator)), None)
        if cuda and getattr(gen, "taehv", None) is not None:
            out["taehv_window"] = _taehv_window(gen)
            save()
    return 0


def _taehv_window(gen) -> dict:
    """One window's TAEHV decode, eager against a CUDA graph of it (medians of 5 after a warm-up call)."""
    import torch

    from studio.pipeline.graphs import Graphed

    with contextlib.suppress(RuntimeError), torch.inference_mode():
        h = gen.settings.size_px // 8
        z = torch.randn((1, 16, gen.latent_frames, h, h), device="cuda", dtype=gen.dtype)  # B x C x T x H/8 x W/8
        dec = gen.taehv

        def ms(fn, reps: int = 5) -> float:
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

        eager = ms(lambda: dec(z))
        g = Graphed(dec, (z,), torch.cuda.Stream())
        graph = ms(lambda: g(z))
        diff = float((g(z) - dec(z)).abs().max())
        print(f"TAEHV one window: eager {eager:.2f} ms, graph {graph:.2f} ms (max diff {diff:.2e})", flush=True)
        return {"eager_ms": eager, "graph_ms": graph, "max_abs_diff": diff, "latents": list(z.shape)}
    return {"error": "the CUDA graph of the decode failed"}


if __name__ == "__main__":
    raise SystemExit(main())
