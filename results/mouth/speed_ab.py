"""CPU cost of the renderer before (a file holding the old renderer.py) and after, interleaved in one process.

``python results/mouth/speed_ab.py OLD_RENDERER.py --sizes 512 1080 --batch 8 --repeats 15`` prints the median ms per
frame of the whole forward and of ``mouth_interior`` alone, for each, on the default anchor and the motion of
``studio.bench.renderer_speed``. The old file comes from ``git show COMMIT:studio/presenter/renderer.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from studio.bench.renderer_speed import _motion  # noqa: E402
from studio.presenter import renderer as new  # noqa: E402
from studio.presenter.anchor import build_anchor  # noqa: E402


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("old_renderer", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_renderer"] = mod  # dataclasses look their module up while the file runs
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", type=Path)
    p.add_argument("--sizes", type=int, nargs="+", default=[512, 1080])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--device", default="cpu", help="cpu or cuda (synchronized around each timed call)")
    a = p.parse_args(argv)
    old = _load(a.old)
    anchor = build_anchor()
    rows = []
    for size in a.sizes:
        field = max(64, size // 4)
        mods = {"before": old.WarpRenderer(anchor, size, field, 3).to(a.device).eval(),
                "after": new.WarpRenderer(anchor, size, field, 3).to(a.device).eval()}
        c = torch.tensor(_motion(a.batch), device=a.device)
        sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
        times = {k: {"forward": [], "mouth": []} for k in mods}
        with torch.inference_mode():
            prep = {}
            for k, m in mods.items():
                m(c)
                grid, mask = m.warp_field(c)
                frames = m.compose(c, grid, mask)
                prep[k] = (frames, m.landmarks(c), m.landmarks(c, mouth_scale=0.0), m.landmarks(c, jaw_only=True))
            for _ in range(a.repeats):
                for k, m in mods.items():  # interleaved: the machine's load falls on both alike
                    sync()
                    t0 = time.perf_counter()
                    m(c)
                    sync()
                    times[k]["forward"].append((time.perf_counter() - t0) * 1e3 / a.batch)
                    frames, full, rest, jaw = prep[k]
                    f = frames.clone()
                    sync()
                    t0 = time.perf_counter()
                    m.mouth_interior(f, full, rest, jaw, c)
                    sync()
                    times[k]["mouth"].append((time.perf_counter() - t0) * 1e3 / a.batch)
        for k in mods:
            rows.append({"size_px": size, "batch": a.batch, "renderer": k, "device": a.device,
                         "threads": torch.get_num_threads(),
                         "forward_ms_per_frame": round(statistics.median(times[k]["forward"]), 3),
                         "mouth_ms_per_frame": round(statistics.median(times[k]["mouth"]), 3)})
            print(json.dumps(rows[-1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
