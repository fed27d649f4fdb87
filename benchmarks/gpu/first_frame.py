"""Time to the first frame and throughput of a window engine: whole windows against its streaming form (a short first
window, then windows that follow on from the last one's last latent frame), both on one opened form of the engine
(the same weights and CUDA graphs), interleaved in one run, medians over the repeats after a warm-up of each.

- the engine alone, fed as the leaderboard row's core feeds it (keyframes at key stride 4 in chunks of 16 slots, the
  first chunk of a run no larger than the short window makes): the first call of a fresh stream, to its frames
  (``first_call_ms``: CUDA events, and wall time with the device synchronized); each window's DiT steps and decode
  (events), whose full windows give the steady throughput (``steady_ms_per_frame``: a full window's time over the
  frames it adds, 81 whole, 80 streaming); and ``stream_ms_per_frame`` over a stream of ``--frames`` generated frames
  (the short window and the last window's unused frames included);
- the core, the leaderboard row's run (1080p canvas at 60 fps, key stride 4, every flag the engine uses by default,
  about one window of keyframes): its report's ``first_frame_s`` (wall, from the run's start to the first frame
  handed to the outputs), wall ms an output frame, and the generate stage's GPU ms an output frame, with the
  keyframes the run generated and the windows it ran for them. Its ms a frame depend on how the program's keyframes
  fill whole windows (83 keyframes: two whole windows, or the short one and one more): the throughput of the
  schedules is the engine's ``steady_ms_per_frame``.

    PYTHONPATH=.:/tmp/site python3 benchmarks/gpu/first_frame.py --program .gpu_home/bench_program.npz --json OUT.json

``--check`` runs the same code on the CPU with the engine's twin at a tiny size (64 px, 2 blocks, 1 step, windows of
5 latent frames, the TAEHV decoder), timing with perf_counter: it shows the script works, not a figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

CHECK_ENGINE = "first-frame-check"
CHUNK_SLOTS = 16  # the bench harness's chunk (studio.bench.harness._core_settings)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", default="wan2.1-1.3b-taehv-fp8")
    ap.add_argument("--program", type=Path, required=True, help="a saved bench program (.npz, bench --save-program)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each schedule, at each level")
    ap.add_argument("--frames", type=int, default=4 * 81, help="generated frames of each engine-level stream")
    ap.add_argument("--budget-s", type=float, default=230.0, help="no new repeat starts after this many seconds")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--check", action="store_true", help="the engine's tiny twin on the CPU: the script runs")
    return ap.parse_args(argv)


def call_sizes(frames: int, stride: int, first_window_frames: int, chunk_slots: int = CHUNK_SLOTS) -> list[int]:
    """Keyframes of each generator call the core makes for ``frames`` keyframes of a contiguous program at key
    stride ``stride``: chunks of ``chunk_slots`` slots, the first no more than a streaming engine's short window
    makes (``Core._chunk_cap``); the keys of a chunk counted back from its last slot, its first slot a key only
    in the first chunk (``studio.enhance.interp.key_positions``)."""
    import numpy as np

    from studio.enhance.interp import key_positions

    first = chunk_slots if first_window_frames <= 0 else min(chunk_slots, (first_window_frames - 1) * stride + 1)
    out, made, slots = [], 0, first
    while made < frames:
        keys = int(key_positions(np.full(slots, stride), have_carry=bool(out)).sum())
        out.append(min(keys, frames - made))
        made += out[-1]
        slots = chunk_slots
    return out


def summarize(runs: list[dict], keys: tuple[str, ...]) -> dict:
    """Per schedule, the median of each of ``keys`` over its runs; and streaming over whole for each."""
    out: dict = {}
    for sched in ("whole", "stream"):
        rs = [r for r in runs if r["schedule"] == sched]
        out[sched] = {k: statistics.median(r[k] for r in rs) for k in keys if rs and all(r.get(k) is not None
                                                                                           for r in rs)}
    out["stream_over_whole"] = {k: out["stream"][k] / out["whole"][k] for k in keys
                                if k in out["stream"] and out["whole"].get(k)}
    return out


class _Clock:
    """perf_counter in place of a CUDA event (``--check``)."""

    def __init__(self, **_):
        self.t = 0.0

    def record(self, *_):
        self.t = time.perf_counter()

    def elapsed_time(self, other) -> float:
        return (other.t - self.t) * 1e3


def _register_check_engine() -> None:
    """The engine's twin at a tiny size, its audio as the wav2vec2-base twin gives it (12 layers x 768)."""
    from studio.contracts import GENERATORS
    from studio.generators import wan_dit as wd

    tiny = wd.WanConfig(dim=64, ffn_dim=128, num_heads=4, num_layers=2, text_dim=32, clip_dim=32, audio_hidden=16,
                        vae_base_dim=8)
    GENERATORS.register(CHECK_ENGINE)(lambda **kw: wd.WanDiTGenerator(tiny, steps=1, latent_frames=5,
                                                                      decoder=wd.VideoDecoder.TAEHV, **kw))


def engine_stream(gen, first_latents: int, sizes: list[int], cuda: bool) -> dict:
    """One stream of the opened engine ``gen`` with the given first window (0: whole windows), fed ``sizes``
    keyframes a call: the first call's time, each window's, the stream's."""
    import torch

    from studio.contracts.coeffs import N_COEFFS

    ev = torch.cuda.Event if cuda else _Clock
    dev = gen.device

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    gen.set_first_window(first_latents)
    gen.new_stream()
    frames = sum(sizes)
    g = torch.Generator(device="cpu").manual_seed(0)
    feats = torch.randn((frames, *gen.info.audio.shape_per_frame), generator=g).to(dev)
    coeffs = torch.zeros((frames, N_COEFFS), device=dev)
    windows: list = []
    run = gen._next_window

    def timed_window():
        plan = gen.schedule.plan(gen.windows)
        e0, e1 = ev(enable_timing=True), ev(enable_timing=True)
        e0.record()
        out = run()
        e1.record()
        windows.append((plan, e0, e1))
        return out

    gen._next_window = timed_window  # this stream's windows timed (the instance's attribute, dropped below)
    calls = []
    try:
        sync()
        t0 = time.perf_counter()
        first_wall = None
        at = 0
        for b in sizes:
            e0, e1 = ev(enable_timing=True), ev(enable_timing=True)
            e0.record()
            gen.generate(coeffs[at:at + b], feats[at:at + b])
            e1.record()
            calls.append((b, e0, e1))
            if first_wall is None:
                sync()
                first_wall = (time.perf_counter() - t0) * 1e3
            at += b
        sync()
    finally:
        del gen._next_window
    per_window = [{"latents": p.latents, "context": p.context, "new_frames": p.new_frames,
                   "ms": e0.elapsed_time(e1)} for p, e0, e1 in windows]
    full = [w["ms"] / w["new_frames"] for w in per_window if w["latents"] == gen.latent_frames]
    total = sum(e0.elapsed_time(e1) for _, e0, e1 in calls)
    return {"schedule": "stream" if first_latents else "whole", "first_latents": first_latents,
            "first_call_frames": sizes[0], "first_call_ms": calls[0][1].elapsed_time(calls[0][2]),
            "first_call_wall_ms": first_wall, "frames": frames, "stream_ms_per_frame": total / frames,
            "steady_ms_per_frame": statistics.median(full) if full else None, "windows": per_window}


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    import torch

    from studio.bench.harness import cut_program, defaults_for, load_program, machine_info, run_config
    from studio.bench.leaderboard import _row_forms
    from studio.generators import wan_dit as wd
    from studio.generators.graphs import Graphed
    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.settings import Optimization
    from studio.presenter.anchor import build_anchor

    t_start = time.perf_counter()
    cuda = not a.check
    dev = "cuda" if cuda else "cpu"
    if cuda:
        engine = a.engine
        b = replace(defaults_for(dev), canvas="1080p", fps=60.0, seconds=1.0, engine=engine, native_px=512,
                    key_stride=4, program=a.program)
        opts = default_optimizations(dev, engine)
    else:
        _register_check_engine()
        engine = CHECK_ENGINE
        b = replace(defaults_for(dev), size_px=64, fps=25.0, seconds=1.0, engine=engine, native_px=64, key_stride=2,
                    program=a.program)
        opts = default_optimizations(dev, engine) - {Optimization.PYRAMIDAL}  # generated at its 64 px
    stride = b.key_stride if Optimization.FRAME_INTERPOLATION in opts else 1
    out: dict = {"machine": machine_info(dev), "engine": engine, "optimizations": sorted(o.value for o in opts),
                 "key_stride": stride, "engine_runs": [], "core_runs": []}

    def save() -> None:
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))

    def time_left() -> bool:
        return time.perf_counter() - t_start < a.budget_s

    full = load_program(a.program)
    anchor = build_anchor()
    tmp = Path(tempfile.mkdtemp(prefix="first_frame_"))
    with _row_forms(cuda) as forms:
        t0 = time.perf_counter()
        run_config(anchor, cut_program(full, 0.5), b, opts, tmp, forms=forms)  # opens (and compiles) the form
        out["warm_s"] = round(time.perf_counter() - t0, 1)
        gen = next(g for g, _ in forms.values() if isinstance(g, wd.WanDiTGenerator))
        first = gen.schedule.first_latents
        if not first:
            raise SystemExit("the engine's form opened with whole windows: nothing to compare (stream_first_latents)")
        out.update(label=gen.label, precision=gen.precision_label, size_px=gen.settings.size_px,
                   window_latents=gen.latent_frames, first_latents=first,
                   first_window_frames=gen.schedule.first_window_frames,
                   short_window="CUDA graph" if isinstance(gen.fns.get("dit_first"), Graphed) else "eager")
        print(f"{gen.label} at {gen.settings.size_px} px: form opened in {out['warm_s']} s", flush=True)
        schedules = (0, first)
        sizes = {s: call_sizes(a.frames, stride, wd.frames_of(s) if s else 0) for s in schedules}
        for s in schedules:  # warm-up: each schedule's shapes once
            engine_stream(gen, s, sizes[s], cuda)
        for _ in range(a.repeats):
            for s in schedules:
                if not time_left():
                    break
                r = engine_stream(gen, s, sizes[s], cuda)
                out["engine_runs"].append(r)
                save()
                print(f"engine {r['schedule']}: first call ({r['first_call_frames']} frames) {r['first_call_ms']:.1f} "
                      f"ms (wall {r['first_call_wall_ms']:.1f}), steady {r['steady_ms_per_frame'] or 0:.3f} ms a "
                      f"frame, stream {r['stream_ms_per_frame']:.3f}", flush=True)
        window = gen.window_frames * stride  # one window of keyframes: the leaderboard row's program
        program = cut_program(full, window / b.fps)
        for rep_i in range(a.repeats + 1):  # the first round is a warm-up
            for s in schedules:
                if not time_left():
                    break
                gen.set_first_window(s)  # the run's own stream starts with it (the core calls new_stream)
                rep, _ = run_config(anchor, program, b, opts, tmp, forms=forms)
                if cuda:
                    torch.cuda.synchronize()
                n = max(1, rep.frames_produced)
                gen_st = rep.stages.get("generate")
                r = {"schedule": "stream" if s else "whole", "first_frame_s": rep.first_frame_s,
                     "wall_ms_per_frame": rep.ms_per_frame, "frames": rep.frames_produced,
                     "keyframes": rep.frames_full, "windows": gen.windows,
                     "generate_ms_per_frame": gen_st.total_ms / n if gen_st else None}
                if rep_i:
                    out["core_runs"].append(r)
                    save()
                print(f"core {r['schedule']}{'' if rep_i else ' (warm-up)'}: first frame "
                      f"{(rep.first_frame_s or 0) * 1e3:.0f} ms, {rep.ms_per_frame:.3f} ms a frame wall", flush=True)
        gen.set_first_window(first)
    out["summary"] = {
        "engine": summarize(out["engine_runs"], ("first_call_ms", "first_call_wall_ms", "steady_ms_per_frame",
                                                 "stream_ms_per_frame")),
        "core": summarize(out["core_runs"], ("first_frame_s", "wall_ms_per_frame", "generate_ms_per_frame"))}
    out["total_s"] = round(time.perf_counter() - t_start, 1)
    save()
    print(json.dumps(out["summary"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
