"""`render` of a 10-second script at the 720p canvas, end to end, against real time.

Runs ``main.py render --script S --canvas 720p --device cpu --out F`` as a fresh process, ``--repeats`` times, with
the default picture (the presenter cut out by its matte over the built-in set, with the graphics), and measures:
- wall seconds from starting the process to its exit (the user's wait), and that over the speech's length (the
  end-to-end real-time factor: at most 1.0 is "real time");
- render's own stage report (startup, anchor, speech, setup, render, finish; time to the first frame);
- CPU seconds of the process and its children (the encoder process), from ``getrusage``;
- the MP4 checked with ffprobe: its video frames and duration must match what render says it wrote.

One render before the timed ones fills the anchor pack's cache (the first-ever run builds the pack: that run's wall
time is reported apart as ``cold``). With ``--baseline COMMIT`` the same is measured on that commit (``git archive``
into a temporary folder, its own data folder) and the runs alternate, so that both see the same load; the machine's
load average is recorded beside every run.

    python benchmarks/render_realtime.py --repeats 5 --baseline cb6b09b --json benchmarks/cpu/render_realtime.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGE = re.compile(r"(\w+) ([\d.]+) s \(([\d.]+)\)")
FIRST = re.compile(r"first frame ([\d.]+) s after the command's start")
WROTE = re.compile(r"wrote .* \((\d+) frames, ([\d.]+) s,")
# about ten seconds with the default voice
SCRIPT = ("Good evening. The city council approved the new budget tonight, with more money for schools, roads and "
          "public transport, and a promise to cut waiting times at every clinic before the end of the year.")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="timed renders per tree (default 5)")
    ap.add_argument("--canvas", default="720p", choices=("720p", "1080p"))
    ap.add_argument("--baseline", help="also measure this commit, alternating with this checkout")
    ap.add_argument("--json", type=Path, help="write the figures here")
    return ap.parse_args(argv)


def _probe(mp4: Path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_entries",
                          "stream=codec_type,nb_read_frames,width,height:format=duration", "-of", "json", str(mp4)],
                         capture_output=True, text=True, timeout=120)
    info = json.loads(out.stdout or "{}")
    video = next((s for s in info.get("streams", []) if s.get("codec_type") == "video"), {})
    audio = any(s.get("codec_type") == "audio" for s in info.get("streams", []))
    return {"frames": int(video.get("nb_read_frames", 0)), "width": video.get("width"),
            "height": video.get("height"), "audio": audio,
            "duration_s": float(info.get("format", {}).get("duration", 0.0))}


def parse_report(text: str) -> dict | None:
    """Frames, speech seconds, time to the first frame and stage seconds from render's summary lines (None: no
    summary in ``text``)."""
    wrote = WROTE.search(text)
    if wrote is None:
        return None
    first = FIRST.search(text)
    line = next((ln for ln in text.splitlines() if ln.startswith("stage seconds")), "")
    return {"frames": int(wrote.group(1)), "speech_s": float(wrote.group(2)),
            "first_frame_s": float(first.group(1)) if first else None,
            "stages_s": {k: float(v) for k, v, _ in STAGE.findall(line)}}


def render_once(tree: Path, home: Path, script: Path, out: Path, canvas: str) -> dict:
    """One render as a fresh process; its figures, or ``{"error": ...}``."""
    env = dict(os.environ, PYTHONPATH=str(tree), NEWSSTUDIO_HOME=str(home))
    cmd = [sys.executable, str(tree / "main.py"), "render", "--script", str(script), "--canvas", canvas,
           "--device", "cpu", "--out", str(out)]
    out.unlink(missing_ok=True)
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=tree)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-400:]}"}
    report = parse_report(done.stderr)
    if report is None:
        return {"error": "render printed no summary"}
    frames, speech_s, stages = report["frames"], report["speech_s"], report["stages_s"]
    probe = _probe(out)
    ok = probe["frames"] == frames and probe["audio"] and abs(probe["duration_s"] - speech_s) < 0.2
    return {"wall_s": round(wall, 3), "speech_s": speech_s, "end_to_end_rtf": round(wall / speech_s, 3),
            "first_frame_s": report["first_frame_s"], "stages_s": stages,
            "render_stage_rtf": round(stages.get("render", 0.0) / speech_s, 3),
            "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
            "frames": frames, "mp4": probe, "mp4_ok": ok, "load_average_1m": round(load, 2),
            "load_average_1m_after": round(os.getloadavg()[0], 2)}


def _summary(runs: list[dict]) -> dict:
    good = [r for r in runs if "error" not in r]
    if not good:
        return {"runs": len(runs), "errors": len(runs)}
    med = lambda key: round(statistics.median(r[key] for r in good), 3)  # noqa: E731
    return {"runs": len(runs), "errors": len(runs) - len(good), "wall_s": med("wall_s"),
            "end_to_end_rtf": med("end_to_end_rtf"), "render_stage_rtf": med("render_stage_rtf"),
            "first_frame_s": med("first_frame_s"), "cpu_s": med("cpu_s"),
            "wall_s_min_max": [min(r["wall_s"] for r in good), max(r["wall_s"] for r in good)],
            "all_mp4_ok": all(r["mp4_ok"] for r in good),
            "load_average_1m": [min(r["load_average_1m"] for r in good), max(r["load_average_1m"] for r in good)]}


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="render-realtime-"))
    script = tmp / "script.txt"
    script.write_text(SCRIPT + "\n", encoding="utf-8")
    trees = {"this": REPO}
    if a.baseline:
        base = tmp / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", a.baseline], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        trees = {"baseline": base, "this": REPO}
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    cold: dict[str, dict] = {}
    for name, tree in trees.items():  # fills each tree's anchor cache (its own data folder)
        cold[name] = render_once(tree, tmp / f"home-{name}", script, tmp / f"{name}.mp4", a.canvas)
        print(f"{name} cold: {cold[name].get('wall_s', cold[name].get('error'))}", flush=True)
    for i in range(a.repeats):
        for name, tree in trees.items():
            r = render_once(tree, tmp / f"home-{name}", script, tmp / f"{name}.mp4", a.canvas)
            runs[name].append(r)
            print(f"{name} {i + 1}/{a.repeats}: " + (r["error"] if "error" in r else
                  f"wall {r['wall_s']:.2f} s for {r['speech_s']:.2f} s of speech ({r['end_to_end_rtf']:.3f}x), "
                  f"render stage {r['render_stage_rtf']:.3f}x, cpu {r['cpu_s']:.1f} s, load "
                  f"{r['load_average_1m']:.2f}"), flush=True)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    from studio.bench.harness import machine_info

    result = {"command": "python benchmarks/render_realtime.py " + " ".join(argv or sys.argv[1:]),
              "render": f"python main.py render --script SCRIPT --canvas {a.canvas} --device cpu --out FILE.mp4",
              "script": SCRIPT, "this": head + ("+" if dirty else ""), "baseline": a.baseline,
              "machine": machine_info("cpu"),
              "summary": {k: _summary(v) for k, v in runs.items()},
              "cold": cold, "runs": runs}
    for name, s in result["summary"].items():
        if "wall_s" in s:
            print(f"{name}: median wall {s['wall_s']:.2f} s ({s['end_to_end_rtf']:.3f}x real time end to end), "
                  f"render stage {s['render_stage_rtf']:.3f}x, first frame {s['first_frame_s']:.2f} s, "
                  f"cpu {s['cpu_s']:.1f} s, load {s['load_average_1m']}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if all(s.get("errors", 1) == 0 for s in result["summary"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
