"""`render` of the default rundown against real time, and the lip sync of the MP4 it writes.

Renders the rundown's stories (resources/rundown.json) with ``main.py render --canvas 720p --fps 25 --device cpu``,
reads each stage's real-time factor from its last line, then measures the finished MP4 with the independent lip-sync
tool (``python -m studio.bench.lipsync``: a face mesh reads the mouth opening; correlation with the loudness, p/b/m
closure against open vowels from the phone timings render wrote).

    python benchmarks/render_lipsync.py --json benchmarks/cpu/render_lipsync.json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGE = re.compile(r"(\w+) ([\d.]+) s \(([\d.]+)\)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--canvas", default="720p", choices=("720p", "1080p"))
    ap.add_argument("--fps", type=float, default=25.0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--stories", type=int, default=0, help="render only the first N stories (default: all)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    return ap.parse_args(argv)


def rundown_script(stories: int = 0) -> str:
    """The rundown's story texts, one paragraph each (the first ``stories`` of them when not 0)."""
    segments = json.loads((REPO / "resources" / "rundown.json").read_text(encoding="utf-8"))["segments"]
    if stories:
        segments = segments[:stories]
    return "\n\n".join(seg["text"] for seg in segments)


def parse_stages(text: str) -> dict[str, dict[str, float]]:
    """``{stage: {"s": seconds, "rtf": real-time factor}}`` from render's "stage seconds" line."""
    line = next((ln for ln in text.splitlines() if ln.startswith("stage seconds (real-time factor):")), "")
    return {k: {"s": float(s), "rtf": float(r)} for k, s, r in STAGE.findall(line)}


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="render-lipsync-"))
    script, mp4, phones = tmp / "rundown.txt", tmp / "rundown.mp4", tmp / "rundown.json"
    script.write_text(rundown_script(a.stories), encoding="utf-8")
    cmd = [sys.executable, str(REPO / "main.py"), "render", "--script", str(script), "--canvas", a.canvas,
           "--fps", f"{a.fps:g}", "--device", a.device, "--out", str(mp4), "--timings", str(phones)]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    stages = parse_stages(done.stderr)
    if done.returncode != 0 or not stages:
        print(done.stderr[-2000:], file=sys.stderr)
        print(f"render_lipsync: render failed (exit {done.returncode})", file=sys.stderr)
        return 1
    sync = subprocess.run([sys.executable, "-m", "studio.bench.lipsync", str(mp4), "--phones", str(phones)],
                          capture_output=True, text=True, timeout=1800, cwd=REPO)
    try:
        report = json.loads(sync.stdout)
    except json.JSONDecodeError:
        print(sync.stderr[-2000:], file=sys.stderr)
        print(f"render_lipsync: the lip-sync tool gave no report (exit {sync.returncode})", file=sys.stderr)
        return 1
    from studio.bench.harness import machine_info

    phones_stats = report.get("phones") or {}
    result = {"command": "python benchmarks/render_lipsync.py",
              "render": f"python main.py render --script RUNDOWN.txt --canvas {a.canvas} --fps {a.fps:g} "
                        f"--device {a.device}",
              "machine": machine_info(a.device), "wall_s": round(wall, 1), "stages": stages,
              "audio_s": report.get("audio_duration_s"), "frames": report.get("n_frames"),
              "best_corr": report.get("best_corr"), "best_lag_frames": report.get("best_lag_frames"),
              "pbm_over_open": phones_stats.get("pbm_over_open"), "passes": report.get("passes"),
              "failures": report.get("failures")}
    print(json.dumps(result, indent=1))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
