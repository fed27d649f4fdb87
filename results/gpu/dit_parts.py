"""Where the Wan-2.1-1.3B twin's time goes on the device machine (issue 16's 5 ms item): one 81-frame window at a
size, split into the DiT's 8 x 2 guidance passes and the VAE decode (CUDA events around each call, after a warm-up
window), eager and as CUDA graphs; then the post stage's parts per output frame at the 1080p canvas: RIFE in-betweens
(one pair a call, and batched as FlowFill does), and SPAN x4 + resize to 1080.

    python results/gpu/dit_parts.py --sizes 288 512 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[288, 512])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    import numpy as np
    import torch

    from studio.contracts import GENERATORS, GeneratorSettings
    from studio.presenter.anchor import build_anchor

    anchor = build_anchor()
    out: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "windows": {}, "post": {}}

    def events_ms(fn, *args, n=None):
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        r = fn(*args)
        e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1), r

    for size in a.sizes:
        for graphs in (False, True):
            gen = GENERATORS.create("wan2.1-1.3b")
            t0 = time.perf_counter()
            gen.open(anchor, GeneratorSettings(device="cuda", size_px=size, precision="bf16", batch_frames=81,
                                               cuda_graphs=graphs))
            open_s = time.perf_counter() - t0
            parts: dict[str, list[float]] = {"dit": [], "vae_decoder": []}
            for name in parts:
                fn = gen.fns[name]

                events: list = []

                def timed(*xs, _fn=fn, _name=name, _events=events):  # bound per name (not the loop's last)
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    r = _fn(*xs)
                    e1.record()
                    _events.append((_name, e0, e1))
                    return r

                gen.fns[name] = timed
                parts[name] = events  # type: ignore[assignment]
            feats = torch.zeros((81, 12, 768), device="cuda")
            with torch.inference_mode():
                gen.run_window(feats)  # warm-up window
                torch.cuda.synchronize()
                for evs in parts.values():
                    evs.clear()
                totals = []
                for _ in range(a.repeats):
                    ms, _ = events_ms(gen.run_window, feats)
                    totals.append(ms)
            torch.cuda.synchronize()
            row = {"open_s": open_s, "window_ms": statistics.median(totals), "windows": totals,
                   "gpu_mem_peak_mb": torch.cuda.max_memory_allocated() / 2 ** 20}
            for name, evs in parts.items():
                per = [e0.elapsed_time(e1) for _, e0, e1 in evs]
                row[f"{name}_ms_per_window"] = sum(per) / a.repeats
                row[f"{name}_calls_per_window"] = len(per) / a.repeats
            row["ms_per_output_frame_at_stride"] = {s: row["window_ms"] / (81 * s) for s in (1, 2, 4)}
            key = f"{size}{' graphs' if graphs else ' eager'}"
            out["windows"][key] = row
            print(f"window {key}: {row['window_ms']:.1f} ms (DiT {row['dit_ms_per_window']:.1f} in "
                  f"{row['dit_calls_per_window']:.0f} calls, VAE {row['vae_decoder_ms_per_window']:.1f}); per output "
                  f"frame at stride 1/2/4: " + " / ".join(f"{v:.2f}" for v in row["ms_per_output_frame_at_stride"]
                                                          .values()) + f" ms; open {open_s:.1f} s", flush=True)
            gen.close()
            del gen
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    # post parts, per output frame at the 1080p canvas (presenter 1080)
    from studio.pipeline.post import FlowFill, Upscaler, UpscaleRoute
    from studio.contracts import Layout, ProgramFormat

    fmt = ProgramFormat(width=1920, height=1080, fps=60.0, layout=Layout.CANVAS, presenter_px=1080)
    g = torch.Generator(device="cuda").manual_seed(0)
    with torch.inference_mode():
        for size in a.sizes:
            keys = torch.rand((9, 3, size, size), device="cuda", generator=g) * 255
            for batch in (1, 8):
                ff = FlowFill("cuda", batch=batch)
                for stride in (2, 4):
                    mask = np.zeros(8 * stride, bool)
                    mask[stride - 1::stride] = True  # 8 keys, the rest in between
                    ff.fill(keys[:8], mask, restart=True)
                    ms = statistics.median(events_ms(ff.fill, keys[:8], mask, True)[0] for _ in range(5))
                    out["post"][f"rife {size} batch {batch} stride {stride}"] = ms / len(mask)
                    print(f"RIFE at {size}, batch {batch}, stride {stride}: {ms / len(mask):.3f} ms per output frame",
                          flush=True)
            up = Upscaler(1080, UpscaleRoute.SPAN)
            up.open(fmt, "cuda")
            frames = torch.rand((16, 3, size, size), device="cuda", generator=g) * 255
            up.process(frames)
            ms = statistics.median(events_ms(up.process, frames)[0] for _ in range(5)) / 16
            out["post"][f"span {size}->1080 batch 16"] = ms
            print(f"SPAN x4 {size} -> 1080 ({up.route.value}): {ms:.3f} ms per frame", flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
