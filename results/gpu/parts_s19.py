"""Session 19 (issue 16's 5 ms item): one 288-px window of the Wan 1.3B twin with the engine's two options apart.

- dit: the window's 8 flow-matching steps (each 2 guidance passes as one batch of 2) in the engine's compiled form
  (TorchInductor inside our CUDA graph: ``cuda_graphs`` opens it so), the DiT in bf16 against its blocks' Linear
  layers in rowwise fp8 (torchao; the same seeded weights and inputs); ms a window and an output frame at key stride
  4 (a window's 81 keyframes make 324 output frames), and how far fp8's velocity (one pass) and latents (8 steps)
  are from bf16's;
- decode: the window's latents (1 x 16 x 21 x 36 x 36) through the Wan VAE (diffusers ``AutoencoderKLWan``, the
  engine's eager form) and through TAEHV's decoder (eager, the engine's form; and in our CUDA graph).
CUDA events, after a warm-up, median of the repeats. ``--tiny``: a small config on the CPU (perf_counter), to check
that the script runs.

    PYTHONPATH=.:/tmp/site python3 results/gpu/parts_s19.py --json OUT.json
    python results/gpu/parts_s19.py --tiny --json /tmp/parts_s19_tiny.json
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
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="a small config on the CPU: checks that the script runs")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    import torch

    from studio.generators import wan_dit as wd
    from studio.contracts import GeneratorSettings
    from studio.presenter.anchor import build_anchor

    if a.tiny:
        cfg = wd.WanConfig(dim=64, ffn_dim=128, num_heads=4, num_layers=2, text_dim=32, clip_dim=32, audio_dim=16,
                           audio_layers=3, audio_hidden=16, vae_base_dim=8)
        latent_frames, size, device, precision = 2, 64, "cpu", "fp32"
    else:
        cfg, latent_frames, size, device, precision = wd.WAN_1_3B, wd.LATENT_FRAMES, 288, "cuda", "bf16"
    cuda = device == "cuda"
    window = 4 * (latent_frames - 1) + 1
    per_window_out = 4 * window  # output frames a window's keyframes make at key stride 4
    out: dict = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
                 "tiny": a.tiny, "size_px": size, "window_frames": window, "repeats": a.repeats,
                 "dit": {}, "decode": {}}
    try:
        import torchao
        out["torchao"] = torchao.__version__
    except Exception as exc:  # noted, not fatal: the fp8 form then says why it stayed bf16
        out["torchao"] = f"not importable ({type(exc).__name__}: {str(exc)[:120]})"

    def save():
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def timed(fn, warm=1):
        """(median ms of ``a.repeats`` calls after ``warm`` ones, the last result)."""
        with torch.inference_mode():
            for _ in range(warm):
                y = fn()
            sync()
            ms = []
            for _ in range(a.repeats):
                if cuda:
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    y = fn()
                    e1.record()
                    e1.synchronize()
                    ms.append(e0.elapsed_time(e1))
                else:
                    t0 = time.perf_counter()
                    y = fn()
                    ms.append((time.perf_counter() - t0) * 1000)
        return statistics.median(ms), y

    def attempt(part, label, body):
        t0 = time.perf_counter()
        try:
            row = body()
        except Exception as exc:  # a form that fails is a finding, not the end of the run
            row = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
            traceback.print_exc(limit=4)
        row["set_up_and_run_s"] = round(time.perf_counter() - t0, 1)
        out[part][label] = row
        print(f"{part:6s} {label:44s} " + " ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        save()
        return row

    def window_row(ms):
        return {"window_ms": round(ms, 2), "ms_per_output_frame_at_stride4": round(ms / per_window_out, 4)}

    anchor = build_anchor()
    settings = GeneratorSettings(device=device, size_px=size, precision=precision, batch_frames=window,
                                 cuda_graphs=cuda)
    gen = {}  # "bf16": the full-VAE engine; "fp8": fp8 DiT linears + TAEHV (the same seeded DiT, built first)

    def open_form(key, **options):
        g = wd.WanDiTGenerator(cfg, latent_frames=latent_frames, **options)
        t0 = time.perf_counter()
        g.open(anchor, settings)  # with cuda_graphs: the DiT compiled by TorchInductor inside our CUDA graph
        gen[key] = g
        return {"open_and_compile_s": round(time.perf_counter() - t0, 1), "precision": g.precision_label,
                "compiled": bool(getattr(g.fns["dit"], "compiled", False))}

    feats = torch.randn((window, cfg.audio_layers, cfg.audio_dim), generator=torch.Generator().manual_seed(0))
    latents = {}

    def dit(key, **options):
        row = open_form(key, **options)
        ms, z = timed(lambda: gen[key].denoise(feats))
        latents[key] = z
        return {**window_row(ms), **row}

    attempt("dit", "bf16 compiled", lambda: dit("bf16"))
    attempt("dit", "fp8 (rowwise) DiT linears compiled",
            lambda: dit("fp8", fp8_linears=True, decoder=wd.VideoDecoder.TAEHV))

    def difference():
        g, g8 = gen["bf16"], gen["fp8"]
        first, latter = g.audio_windows(feats.to(g.device, g.dtype))
        inputs = (torch.cat([g.noise, g.y], dim=1).expand(2, -1, -1, -1, -1),
                  torch.full((2,), g.sigmas[0] * 1000.0, device=g.device), g.context.expand(2, -1, -1),
                  torch.cat([first, torch.zeros_like(first)]), torch.cat([latter, torch.zeros_like(latter)]))
        with torch.inference_mode():
            v, v8 = g.fns["dit"](*inputs).float(), g8.fns["dit"](*inputs).float()
        d, dz = (v8 - v).abs(), (latents["fp8"].float() - latents["bf16"].float())
        return {"fp8_linears": g8.fp8_count, "velocity_max_abs_diff": float(d.max()),
                "velocity_max_abs": float(v.abs().max()),
                "velocity_max_rel_diff": float(d.max() / v.abs().max()),
                "velocity_rel_l2": float(d.norm() / v.norm()),
                "latents_after_steps_rel_l2": float(dz.norm() / latents["bf16"].float().norm())}
    attempt("dit", "fp8 against bf16 (same inputs)", difference)

    z = latents.get("bf16")
    if z is None:
        z = torch.randn((1, 16, latent_frames, size // 8, size // 8), device=device,
                        dtype=torch.bfloat16 if cuda else torch.float32)

    def decode(key, graphed=False):
        g = gen[key]
        fn = g.fns["vae_decoder"]
        if graphed:
            from studio.pipeline.graphs import Graphed

            with torch.inference_mode():
                fn = Graphed(fn, (z,), torch.cuda.Stream())
        ms, video = timed(lambda: fn(z))
        return {**window_row(ms), "frames": int(video.shape[2]), "px": int(video.shape[-1])}

    attempt("decode", "wan-vae eager (the engine's)", lambda: decode("bf16"))
    attempt("decode", "taehv eager (the engine's)", lambda: decode("fp8"))
    if cuda:
        attempt("decode", "taehv in our CUDA graph", lambda: decode("fp8", graphed=True))
        out["peak_mem_mb"] = round(torch.cuda.max_memory_allocated() / 2 ** 20)
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
