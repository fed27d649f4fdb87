"""Engines for the built-in renderer: each backend x precision x size x batch built, verified against eager output
and timed against it in the same run (``studio.compile.jobs.compile_target``), one JSON row per engine.

    python -m studio.bench.compile_renderer --device cuda --size 512 1080 --batch 1 16 \
        --backends inductor cuda_graphs --precisions fp32 fp16 --json engines.json

The renderer is built with ``static_shapes`` (every frame through the blink and mouth paths, no host
synchronisation: what a CUDA graph or an export needs) on the default anchor, with random motion in the rig's range.
Engines go to a temporary folder unless ``--engines-dir`` names one. A failing build or verification is a row with
its error, not the end of the run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch


def motion(n: int, seed: int = 7) -> np.ndarray:
    """n x N_COEFFS random motion inside the rig's range (``studio.contracts.coeffs.example_motion``)."""
    from studio.contracts.coeffs import example_motion

    return example_motion(n, seed)


def renderer_target(anchor, size: int, batch: int, device: str):
    """The renderer as a compile target: graph-safe module, example motion at ``batch``."""
    from studio.contracts import CompileTarget
    from studio.presenter.renderer import WarpRenderer

    module = WarpRenderer(anchor, size, max(64, size // 4), newton_steps=3).to(device).eval()
    module.static_shapes = True
    return CompileTarget("renderer", module, (torch.from_numpy(motion(batch)).to(device),))


def run_one(target, settings, fp, root: Path) -> dict:
    from studio.compile.jobs import compile_target
    from studio.errors import StudioError

    row = {"backend": settings.backend, "precision": settings.precision, "batch": settings.batch}
    job = compile_target("builtin", target, settings, fp=fp, root=root, force=True)
    try:
        while True:
            p = next(job)
            if p.log:
                print(f"  {p.log}", file=sys.stderr, flush=True)
    except StopIteration as stop:
        report = stop.value
        row.update(engine=report.path.name, verification=report.verification.as_dict(),
                   timing=report.timing.as_dict() if report.timing else None, build_s=report.build_s,
                   details=report.details)
    except StudioError as exc:
        row["error"] = str(exc)
    return row


def main(argv: list[str] | None = None) -> int:
    from studio.compile.settings import BACKENDS, BuildSettings
    from studio.compile.silicon import PRECISIONS, fingerprint
    from studio.presenter.anchor import build_anchor

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", type=int, nargs="+", default=[512])
    ap.add_argument("--batch", type=int, nargs="+", default=[8])
    ap.add_argument("--backends", nargs="+", default=["inductor", "cuda_graphs"], choices=BACKENDS)
    ap.add_argument("--precisions", nargs="+", default=["fp32"], choices=PRECISIONS)
    ap.add_argument("--mode", default="default", help="TorchInductor mode")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--engines-dir", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    fp = fingerprint(args.device)
    anchor = build_anchor()
    rows = []
    with tempfile.TemporaryDirectory(prefix="engines-") as tmp:
        root = args.engines_dir or Path(tmp)
        for size in args.size:
            for batch in args.batch:
                target = renderer_target(anchor, size, batch, "cuda" if fp.is_cuda else "cpu")
                for backend in args.backends:
                    for precision in args.precisions:
                        settings = BuildSettings(backend=backend, precision=precision, batch=batch,
                                                 inductor_mode=args.mode, timed_calls=args.repeats)
                        print(f"{size} px, batch {batch}, {backend} {precision}", file=sys.stderr, flush=True)
                        row = {"size": size, **run_one(target, settings, fp, root)}
                        rows.append(row)
                        t, v = row.get("timing"), row.get("verification")
                        if t and v:
                            print(f"{size:>5} b{batch:<3} {backend:<12} {precision:<5} eager {t['eager_ms']:8.3f} ms"
                                  f"  engine {t['engine_ms']:8.3f} ms  {t['speedup']:6.2f}x  "
                                  f"max|err| {v['max_abs_error']}  PSNR {v['psnr_db']} dB", flush=True)
                        else:
                            print(f"{size:>5} b{batch:<3} {backend:<12} {precision:<5} "
                                  f"{row.get('error', 'verification failed')}", flush=True)
                del target
                if fp.is_cuda:
                    torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps({"silicon": fp.as_dict(), "torch": torch.__version__, "rows": rows},
                                        indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
