"""Where the last milliseconds go, part by part, on the device machine (session 16; issues 15 and 16).

Each part is timed alone with CUDA events (warm-up first, median of repeats), per output frame, in the forms the core
could run it:
- post: the 1080p canvas + I420 of 16 presenter frames (1080 px), eager, as our CUDA graph (what the core runs with
  CUDA_GRAPHS), and TorchInductor-compiled inside our graph; the device-to-host copy of the I420 planes alone;
- builtin: the warp renderer at 1080, batch 16 (plain field 270 and pyramidal 135): our graph of the eager module
  (the core's CUDA_GRAPHS) against our graph of the compiled module;
- span: SPAN x4 270 -> 1080, batch 8, fp16: eager, channels-last with cuDNN autotuning, our graph, compiled;
- rife: the in-betweens of FlowFill (batch 8 at 288): eager against our graph;
- wan: one 81-frame window of the Wan 1.3B twin at 288, DiT passes and VAE decode apart, with and without cuDNN
  autotuning, and the DiT compiled.

    python results/gpu/parts_s16.py --parts post,builtin,span,rife,wan --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import traceback
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="post,builtin,span,rife,wan")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    import torch

    out: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}

    def save():
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))

    def timed(fn, *args, repeats=a.repeats, warm=3):
        for _ in range(warm):
            fn(*args)
        torch.cuda.synchronize()
        ms = []
        for _ in range(repeats):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn(*args)
            e1.record()
            e1.synchronize()
            ms.append(e0.elapsed_time(e1))
        return statistics.median(ms)

    def record(part, name, ms_per_frame, **extra):
        out.setdefault(part, {})[name] = {"ms_per_frame": ms_per_frame, **extra}
        print(f"{part:8s} {name:58s} {ms_per_frame:8.4f} ms/frame " + " ".join(f"{k}={v}" for k, v in extra.items()),
              flush=True)
        save()

    def attempt(part, name, body):
        t0 = time.perf_counter()
        try:
            body()
        except Exception as exc:  # a variant that fails is a finding, not the end of the run
            out.setdefault(part, {})[name] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            print(f"{part:8s} {name:58s} FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            traceback.print_exc(limit=3)
            save()
        print(f"         ({name}: {time.perf_counter() - t0:.1f} s)", flush=True)

    from studio.pipeline.graphs import Graphed

    stream = torch.cuda.Stream()
    parts = a.parts.split(",")
    g = torch.Generator(device="cuda").manual_seed(0)

    def psnr(x, ref):
        mse = torch.mean((x.float() - ref.float()) ** 2).item()
        return 99.0 if mse == 0 else 10 * torch.log10(torch.tensor(255.0 ** 2 / mse)).item()

    if "post" in parts:
        from studio.encode.colour import rgb_to_i420
        from studio.pipeline.post import Canvas
        from studio.contracts import Layout, ProgramFormat

        fmt = ProgramFormat(width=1920, height=1080, fps=60.0, layout=Layout.CANVAS, presenter_px=1080)
        canvas = Canvas()
        canvas.open(fmt, "cuda")
        canvas.select("BREAKING NEWS: PARTS OF THE POST STAGE")
        frames = torch.rand((16, 3, 1080, 1080), device="cuda", generator=g) * 255

        def finish(x):
            pic = canvas.compose(x)
            return pic.permute(0, 2, 3, 1), rgb_to_i420(pic)

        with torch.inference_mode():
            ref = finish(frames)
            attempt("post", "eager canvas + I420", lambda: record("post", "eager canvas + I420",
                                                                 timed(finish, frames) / 16))
            gr = Graphed(finish, (frames,), stream)
            attempt("post", "graphed canvas + I420 (the core's CUDA_GRAPHS)",
                    lambda: record("post", "graphed canvas + I420 (the core's CUDA_GRAPHS)", timed(gr, frames) / 16))
            attempt("post", "graphed canvas alone", lambda: record(
                "post", "graphed canvas alone",
                timed(Graphed(lambda x: canvas.compose(x).permute(0, 2, 3, 1), (frames,), stream), frames) / 16))
            host = torch.empty(ref[1].shape, dtype=torch.uint8, pin_memory=True)
            attempt("post", "D2H copy of the I420 planes", lambda: record(
                "post", "D2H copy of the I420 planes", timed(lambda: host.copy_(ref[1], non_blocking=True)) / 16))
            host_rgb = torch.empty(ref[0].shape, dtype=torch.uint8, pin_memory=True)
            attempt("post", "D2H copy of the RGB pictures", lambda: record(
                "post", "D2H copy of the RGB pictures", timed(lambda: host_rgb.copy_(ref[0], non_blocking=True)) / 16))

            def compiled():
                t0 = time.perf_counter()
                fc = torch.compile(finish, dynamic=False)
                gc = Graphed(fc, (frames,), stream)
                got = gc(frames)
                record("post", "inductor canvas + I420 in our graph", timed(gc, frames) / 16,
                       compile_s=round(time.perf_counter() - t0, 1), rgb_equal=bool(torch.equal(got[0], ref[0])),
                       i420_max_diff=int((got[1].int() - ref[1].int()).abs().max()))
            attempt("post", "inductor canvas + I420 in our graph", compiled)

    if "builtin" in parts:
        from studio.presenter.anchor import build_anchor
        from studio.contracts.coeffs import example_motion
        from studio.presenter.renderer import WarpRenderer

        anchor = build_anchor()
        c = torch.from_numpy(example_motion(16)).cuda()
        for field in (270, 135):
            m = WarpRenderer(anchor, 1080, field, newton_steps=3).cuda().eval()
            m.static_shapes = True
            with torch.inference_mode():
                ref = m(c)
                name = f"field {field}: our graph of the eager renderer"
                attempt("builtin", name, lambda: record("builtin", name, timed(Graphed(m.forward, (c,), stream), c) / 16))

                def comp(field=field, m=m, ref=ref):
                    t0 = time.perf_counter()
                    gc = Graphed(torch.compile(m.forward, dynamic=False), (c,), stream)
                    got = gc(c)
                    record("builtin", f"field {field}: our graph of the compiled renderer", timed(gc, c) / 16,
                           compile_s=round(time.perf_counter() - t0, 1), psnr_vs_eager=round(psnr(got, ref), 2))
                attempt("builtin", f"field {field}: compiled", comp)
            del m
            torch._dynamo.reset()

    if "span" in parts:
        from studio.enhance.upscale import LearnedUpscaler

        up = LearnedUpscaler("cuda", half=True)
        x = torch.rand((8, 3, 270, 270), device="cuda", generator=g) * 255
        with torch.inference_mode():
            ref = up(x)
            attempt("span", "eager fp16 (the core's)", lambda: record("span", "eager fp16 (the core's)",
                                                                      timed(up, x) / 8))
            attempt("span", "our graph, fp16", lambda: record("span", "our graph, fp16",
                                                              timed(Graphed(up, (x,), stream), x) / 8))
            torch.backends.cudnn.benchmark = True
            attempt("span", "eager fp16, cudnn.benchmark", lambda: record(
                "span", "eager fp16, cudnn.benchmark", timed(up, x) / 8))
            up.net = up.net.to(memory_format=torch.channels_last)

            def cl(z):
                return up(z.contiguous(memory_format=torch.channels_last))
            attempt("span", "channels-last fp16, cudnn.benchmark", lambda: record(
                "span", "channels-last fp16, cudnn.benchmark", timed(cl, x) / 8, psnr_vs_eager=round(psnr(cl(x), ref), 2)))
            attempt("span", "channels-last, benchmark, our graph", lambda: record(
                "span", "channels-last, benchmark, our graph", timed(Graphed(cl, (x,), stream), x) / 8))

            def comp():
                t0 = time.perf_counter()
                up.net = up.net.to(memory_format=torch.contiguous_format)
                net = up.net
                up.net = torch.compile(net, dynamic=False)
                gc = Graphed(up, (x,), stream)
                got = gc(x)
                record("span", "compiled, benchmark, our graph", timed(gc, x) / 8,
                       compile_s=round(time.perf_counter() - t0, 1), psnr_vs_eager=round(psnr(got, ref), 2))
                up.net = net
            attempt("span", "compiled", comp)
            torch.backends.cudnn.benchmark = False

    if "spanq" in parts:  # call B: the forms' accuracy against fp32 on the portrait (not noise), and their time
        import numpy as np

        from studio.enhance.upscale import LearnedUpscaler
        from studio.presenter.anchor import build_anchor

        img = torch.from_numpy(np.asarray(build_anchor().image, np.float32)).permute(2, 0, 1)[None].cuda()
        x = torch.nn.functional.interpolate(img, size=(270, 270), mode="bicubic", antialias=True).clamp(0, 255)
        x = x.repeat(8, 1, 1, 1)
        with torch.inference_mode():
            ref = LearnedUpscaler("cuda", dtype=torch.float32)(x)
            for label, kw in (("fp32", {"dtype": torch.float32}), ("fp16", {"half": True}),
                              ("fp16 channels-last", {"half": True, "channels_last": True}),
                              ("bf16 channels-last", {"dtype": torch.bfloat16, "channels_last": True})):
                up = LearnedUpscaler("cuda", **kw)
                got = up(x)
                attempt("spanq", label, lambda up=up, got=got, label=label: record(
                    "spanq", f"{label} eager", timed(up, x) / 8, psnr_vs_fp32=round(psnr(got, ref), 2)))
                attempt("spanq", label + " graph", lambda up=up, label=label: record(
                    "spanq", f"{label} our graph", timed(Graphed(up, (x,), stream), x) / 8))

    if "rife" in parts:
        from studio.enhance.rife import RifeInterpolator

        r = RifeInterpolator("cuda", half=True)
        a0 = torch.rand((8, 3, 288, 288), device="cuda", generator=g) * 255
        a1 = torch.rand((8, 3, 288, 288), device="cuda", generator=g) * 255
        t = torch.tensor([0.25, 0.5, 0.75] * 2 + [0.25, 0.5], dtype=torch.float32)
        with torch.inference_mode():
            attempt("rife", "eager batch 8 at 288", lambda: record("rife", "eager batch 8 at 288 (per in-between)",
                                                                   timed(r.between, a0, a1, t) / 8))
            tt = t.cuda()
            attempt("rife", "our graph batch 8", lambda: record(
                "rife", "our graph batch 8 (per in-between)",
                timed(Graphed(lambda p, q, s: r.between(p, q, s), (a0, a1, tt), stream), a0, a1, tt) / 8))
            torch.backends.cudnn.benchmark = True
            attempt("rife", "eager, cudnn.benchmark", lambda: record(
                "rife", "eager batch 8, cudnn.benchmark (per in-between)", timed(r.between, a0, a1, t) / 8))
            torch.backends.cudnn.benchmark = False

    if "wan" in parts:
        from studio.contracts import GENERATORS, GeneratorSettings
        from studio.presenter.anchor import build_anchor

        anchor = build_anchor()
        gen = GENERATORS.create("wan2.1-1.3b")
        gen.open(anchor, GeneratorSettings(device="cuda", size_px=288, precision="bf16", batch_frames=81))
        feats = torch.zeros((81, 12, 768), device="cuda")
        calls: dict[str, list] = {"dit": [], "vae_decoder": []}
        for name in calls:
            fn = gen.fns[name]

            def wrapped(*xs, _fn=fn, _name=name):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                res = _fn(*xs)
                e1.record()
                calls[_name].append((e0, e1))
                return res
            gen.fns[name] = wrapped

        def window(label):
            with torch.inference_mode():
                gen.run_window(feats)
                torch.cuda.synchronize()
                for v in calls.values():
                    v.clear()
                total = timed(gen.run_window, feats, repeats=2, warm=0) * 2
                torch.cuda.synchronize()
            row = {k: sum(e0.elapsed_time(e1) for e0, e1 in v) / 2 for k, v in calls.items()}
            record("wan", label, total / 2 / 81, window_ms=round(total / 2, 1),
                   dit_ms=round(row["dit"], 1), vae_ms=round(row["vae_decoder"], 1),
                   per_frame_at_stride4=round(total / 2 / 324, 3))
        attempt("wan", "288 eager", lambda: window("288 eager (per output frame at stride 1)"))
        torch.backends.cudnn.benchmark = True
        attempt("wan", "288 eager, cudnn.benchmark", lambda: window("288 eager, cudnn.benchmark"))

        def comp():
            t0 = time.perf_counter()
            inner = calls  # keep the timing wrapper around the compiled DiT
            dit = gen.dit
            compiled = torch.compile(dit, dynamic=False)

            def wrapped(*xs):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                res = compiled(*xs)
                e1.record()
                inner["dit"].append((e0, e1))
                return res
            gen.fns["dit"] = wrapped
            with torch.inference_mode():
                gen.run_window(feats)
            out.setdefault("wan", {})["dit compile_s"] = round(time.perf_counter() - t0, 1)
            window("288, DiT compiled, cudnn.benchmark")
        attempt("wan", "288 DiT compiled", comp)
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
