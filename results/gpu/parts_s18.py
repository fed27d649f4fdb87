"""Session 18 (issue 16's 5 ms item): the Wan 2.1 VAE decode of one 81-frame window at 288 px (the twin's
``AutoencoderKLWan`` in bf16, latents 1 x 16 x 21 x 36 x 36), in the forms it could run: eager (the engine's today),
with cuDNN's autotuner, with channels-last-3d activations, and its decoder compiled by TorchInductor; CUDA events,
after warm-up, median of repeats, PSNR of each form's frames against eager.

    PYTHONPATH=.:/tmp/site python results/gpu/parts_s18.py --json OUT.json
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
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    import torch

    from studio.contracts import GENERATORS, GeneratorSettings
    from studio.presenter.anchor import build_anchor

    out: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "vae": {}}

    def save():
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))

    gen = GENERATORS.create("wan2.1-1.3b")
    gen.open(build_anchor(), GeneratorSettings(device="cuda", size_px=288, precision="bf16", batch_frames=81))
    vae = gen.vae
    z = torch.randn((1, 16, 21, 36, 36), device="cuda", dtype=torch.bfloat16, generator=torch.Generator("cuda").manual_seed(0))

    def timed(fn):
        with torch.inference_mode():
            for _ in range(2):
                fn()
            torch.cuda.synchronize()
            ms = []
            for _ in range(a.repeats):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                y = fn()
                e1.record()
                torch.cuda.synchronize()
                ms.append(e0.elapsed_time(e1))
        return statistics.median(ms), y

    def psnr(x, ref):
        mse = float(((x.float() - ref.float()) * 127.5).pow(2).mean())
        return 99.0 if mse == 0 else round(10 * __import__("math").log10(255 ** 2 / mse), 2)

    ref = None

    def attempt(label, fn, setup=None):
        nonlocal ref
        t0 = time.perf_counter()
        try:
            if setup:
                setup()
            ms, y = timed(fn)
            row = {"window_ms": round(ms, 1), "ms_per_frame_at_stride1": round(ms / 81, 3),
                   "ms_per_output_frame_at_stride4": round(ms / 324, 3), "set_up_s": round(time.perf_counter() - t0, 1)}
            if ref is None:
                ref = y
            row["psnr_vs_eager"] = psnr(y, ref)
            print(f"vae  {label:48s} {ms:8.1f} ms a window  {ms / 324:6.3f} ms an output frame at stride 4  "
                  f"{row['psnr_vs_eager']} dB", flush=True)
        except Exception as exc:
            row = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            traceback.print_exc()
        out["vae"][label] = row
        save()

    decode = lambda: vae.decode(z).sample  # noqa: E731
    attempt("eager (the engine's)", decode)
    torch.backends.cudnn.benchmark = True
    attempt("eager, cudnn.benchmark", decode)

    def to_cl():
        vae.to(memory_format=torch.channels_last_3d)
    attempt("channels-last-3d, cudnn.benchmark", decode, setup=to_cl)

    def comp():
        vae.to(memory_format=torch.contiguous_format)
        vae.decoder = torch.compile(vae.decoder, dynamic=False)
    attempt("decoder compiled (inductor), cudnn.benchmark", decode, setup=comp)
    out["peak_mem_mb"] = round(torch.cuda.max_memory_allocated() / 2 ** 20)
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
