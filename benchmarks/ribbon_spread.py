"""How still the HUD's compute-saved ribbon holds on air: the studio's runtime (its core, its baseline chunks, no
window) goes on air with the default rundown, again and again, for ``--minutes``, and the figure the ribbon shows is
sampled every ``--every-s`` seconds; the spread is p90 - p10 of the figures shown (percentage points; samples while
it says "measuring" are counted apart).

    python benchmarks/ribbon_spread.py --minutes 5 --json benchmarks/cpu/ribbon_spread.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=5.0, help="time on air (default 5)")
    p.add_argument("--every-s", type=float, default=1.0, help="sampling period of the ribbon (default 1 s)")
    p.add_argument("--size", type=int, default=512, help="presenter size in px (default 512, the studio's)")
    p.add_argument("--json", type=Path, help="write the samples and the spread here")
    return p.parse_args(argv)


def shown(compute) -> float | None:
    """The figure the ribbon shows for this sample (studio/ui/hud.py ribbon_text), in whole percent; None while it
    says "measuring"."""
    if compute is None or not math.isfinite(compute.saved_fraction):
        return None
    return float(round(100 * compute.saved_fraction))


def spread(values: list[float]) -> dict:
    import numpy as np

    if not values:
        return {"n": 0}
    p10, p50, p90 = (float(x) for x in np.percentile(values, [10, 50, 90]))
    return {"n": len(values), "p10": p10, "median": p50, "p90": p90, "spread_points": p90 - p10,
            "min": min(values), "max": max(values)}


def main(argv=None) -> int:
    a = parse_args(argv)
    from studio.pipeline import commands as cmd
    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.rundown import load_rundown
    from studio.pipeline.settings import CoreSettings
    from studio.pipeline.studio import AudioOutputMode, StudioRuntime, StudioSettings

    core = CoreSettings(size_px=a.size, fps=25.0, device="cpu", chunk_frames=4, batch_frames=4,
                        measure_baseline=True, optimizations=default_optimizations("cpu", "builtin"))
    events: list = []
    runtime = StudioRuntime(StudioSettings(core=core, audio_output=AudioOutputMode.NONE), on_event=events.append)
    thread = threading.Thread(target=runtime.run, name="ribbon-runtime")
    thread.start()
    samples: list[dict] = []
    segments = tuple(load_rundown())
    try:
        runtime.submit(cmd.LoadAnchor(None))
        t0 = time.monotonic()
        while runtime.latest_frame() is None and time.monotonic() - t0 < 300:
            time.sleep(0.2)
        runtime.submit(cmd.GoLive(segments))
        on_air = time.monotonic()
        finished = 0
        while time.monotonic() - on_air < 60 * a.minutes:
            time.sleep(a.every_s)
            done = sum(isinstance(e, cmd.RundownFinished) for e in events)
            if done > finished:  # the rundown ended: on air with it again
                finished = done
                runtime.submit(cmd.GoLive(segments))
            sample = runtime.bus.latest("core")
            c = sample.compute if sample is not None else None
            samples.append({"t_s": round(time.monotonic() - on_air, 2), "shown_percent": shown(c),
                            "pairs": c.pairs if c is not None else 0,
                            "low": c.low if c is not None and math.isfinite(c.low) else None,
                            "high": c.high if c is not None and math.isfinite(c.high) else None})
    finally:
        runtime.submit(cmd.Shutdown())
        thread.join(timeout=60)
    figures = [s["shown_percent"] for s in samples if s["shown_percent"] is not None]
    first = next((s["t_s"] for s in samples if s["shown_percent"] is not None), None)
    result = {"command": "python benchmarks/ribbon_spread.py " + " ".join(sys.argv[1:]), "minutes": a.minutes,
              "size_px": a.size, "load_average_1m": os.getloadavg()[0], "cpu_count": os.cpu_count(),
              "samples_measuring": len(samples) - len(figures), "first_figure_after_s": first,
              "rundowns_finished": finished, "shown": spread(figures), "samples": samples}
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(result, indent=1))
    s = result["shown"]
    print(f"ribbon over {a.minutes:g} min on air: {s['n']} figures shown"
          + (f", p10 {s['p10']:.0f} %, median {s['median']:.0f} %, p90 {s['p90']:.0f} %: spread "
             f"{s['spread_points']:.1f} points" if s["n"] else "")
          + f"; {result['samples_measuring']} samples said measuring (first figure after {first} s); "
          f"load average {result['load_average_1m']:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
