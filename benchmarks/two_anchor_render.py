"""A two-anchor rundown through ``render --rundown``: wall time against the programme's length, and the turns.

Writes a rundown of three segments (Anna, Ben, Anna; Ben's portrait is the built-in one mirrored) and renders it with
``main.py render --rundown --canvas 720p --fps 25 --device cpu`` (a warm-up render first, which builds and caches the
anchor packs; then ``--repeats`` timed renders, median). The turns are counted on the cast's motion over the same
programme (the rundown's own items and the motion source the render runs, chunk by chunk as the core asks): mouth
activity (jaw + lip part, mean per frame) per anchor per segment, blinks (lids past half closed) and nods (pitch
bumps of 0.6 degrees over a 1 s moving median) per anchor. The generator's cost a frame is read from the render's
summary line, and each render's CPU seconds (the command's process, every thread) are counted beside its wall time,
which a busy shared machine stretches more.

``--short``: three short segments (about 9 s of programme, for a quick before / after). ``--keep DIR``: the rendered
files are kept there. ``--before DIR`` (a checkout of older code): its renders alternate with this tree's, and the
decoded pictures of the first timed pair are compared frame by frame (PSNR), beside two renders of this tree (what
the encode alone varies from run to run).

    python benchmarks/two_anchor_render.py --json benchmarks/cpu/two_anchor_render.json
    python benchmarks/two_anchor_render.py --layout cut --short --repeats 3 --before /tmp/older-checkout
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SEGMENTS = [
    ("Anna", "Good evening. The river rose over its banks tonight, and the town prepared for a long night. "
             "Volunteers filled sandbags in the main square until after dark."),
    ("Ben", "Thank you, Anna. By noon the water had reached the old bridge, and the council closed the roads on "
            "both sides. Engineers say the bridge is safe, but they will check it again in the morning."),
    ("Anna", "Thank you, Ben. We will follow the river through the night. Stay with us."),
]
SHORT = [("Anna", "Good evening. The river rose over its banks tonight."),
         ("Ben", "Thank you, Anna. The roads by the old bridge are closed."),
         ("Anna", "Thank you, Ben. Stay with us.")]
STAGE = re.compile(r"(\w+) ([\d.]+) s \(([\d.]+)\)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--canvas", default="720p", choices=("720p", "1080p"))
    ap.add_argument("--fps", type=float, default=25.0)
    ap.add_argument("--layout", default="two-shot", choices=("two-shot", "cut"))
    ap.add_argument("--repeats", type=int, default=1, help="timed renders (median), after one warm-up")
    ap.add_argument("--short", action="store_true", help="three short segments (about 9 s of programme)")
    ap.add_argument("--keep", type=Path, help="keep the rendered files in this folder")
    ap.add_argument("--before", type=Path, help="a checkout of the code before: its renders alternate with these, and "
                                                "the pictures are compared")
    ap.add_argument("--json", type=Path, help="write the figures here")
    return ap.parse_args(argv)


def write_rundown(folder: Path, short: bool = False) -> Path:
    from PIL import Image

    from studio.presenter.anchor import default_portrait

    Image.fromarray(np.ascontiguousarray(default_portrait()[:, ::-1])).save(folder / "ben.png")
    data = {"version": 2, "cast": {"Anna": {"voice": "piper:joe"}, "Ben": {"portrait": "ben.png",
                                                                             "voice": "espeak:en-gb"}},
            "segments": [{"title": f"Part {i + 1}", "text": t, "anchor": who}
                         for i, (who, t) in enumerate(SHORT if short else SEGMENTS)]}
    path = folder / "rundown.json"
    path.write_text(json.dumps(data, indent=1))
    return path


def count_nods(pitch: np.ndarray, fps: float) -> int:
    k = int(fps)
    pad = np.pad(pitch, (k // 2, k // 2), mode="edge")
    slow = np.array([np.median(pad[i:i + k]) for i in range(len(pitch))])
    up = (pitch - slow) > 0.6
    return int(np.sum(up[1:] & ~up[:-1]) + (up[0] if len(up) else 0))


def turns(rundown: Path, fps: float, chunk_frames: int = 8) -> dict:
    """The cast's motion over the programme, chunk by chunk, and what it shows (module docstring)."""
    from studio.contracts import Pacing, ProgramFormat
    from studio.contracts.coeffs import Coeff
    from studio.pipeline.cast_motion import CastMotion
    from studio.pipeline.programme import check_rundown, segment_item
    from studio.pipeline.sources import ProgramSource

    segments, cast = check_rundown(rundown)
    items = [segment_item(segments, cast, i) for i in range(len(segments))]
    fmt = ProgramFormat(width=1280, height=720, fps=fps, rows=len(cast))
    source, motion = ProgramSource(items), CastMotion(len(cast))
    source.open(fmt)
    motion.open(fmt)
    rows = []
    import threading

    while (chunk := source.next_chunk(Pacing(max_frames=chunk_frames, cost_s_per_frame=0.0,
                                             stop=threading.Event()))) is not None:
        rows.append(motion.motion(chunk))
    c = np.concatenate(rows)  # T x anchors x N
    mouth = np.abs(c[..., Coeff.JAW_OPEN]) + np.abs(c[..., Coeff.LIP_PART])
    per_segment = []
    for i, item in enumerate(items):
        span = slice(item.start_slot, item.end_slot)
        per_segment.append({"segment": i + 1, "speaker": cast[item.on_air.speaker].name,
                            "seconds": round((item.end_slot - item.start_slot) / fps, 2),
                            "mouth_activity": {m.name: round(float(mouth[span, a].mean()), 4)
                                               for a, m in enumerate(cast)},
                            "listener_nods": {m.name: count_nods(c[span, a, Coeff.HEAD_PITCH_DEG], fps)
                                              for a, m in enumerate(cast) if a != item.on_air.speaker}})
    blinks = {}
    for a, m in enumerate(cast):
        shut = c[:, a, Coeff.BLINK_L] > 0.5
        blinks[m.name] = int(np.sum(shut[1:] & ~shut[:-1]) + shut[0])
    both_mouths = int(np.sum((mouth[:, 0] > 0) & (mouth[:, 1] > 0)))
    return {"frames": len(c), "segments": per_segment, "blinks": blinks,
            "nods": {m.name: count_nods(c[:, a, Coeff.HEAD_PITCH_DEG], fps) for a, m in enumerate(cast)},
            "frames_with_both_mouths_open": both_mouths}


def render(rundown: Path, out: Path, a: argparse.Namespace, repo: Path = REPO) -> dict:
    cmd = [sys.executable, str(repo / "main.py"), "render", "--rundown", str(rundown), "--canvas", a.canvas,
           "--fps", f"{a.fps:g}", "--device", "cpu", "--layout", a.layout, "--out", str(out)]
    load0 = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime
    if done.returncode != 0:
        raise SystemExit(f"render failed: {done.stderr.strip().splitlines()[-1:]}")
    got = parse_summary(done.stderr.strip().splitlines()[-1])
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), **got,
            "wall_per_programme_s": round(wall / got["programme_s"], 3),
            "load_average_1m": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def parse_summary(line: str) -> dict:
    """The figures of ``render --rundown``'s summary line: frames, programme seconds, stage seconds (and real-time
    factors), the generator's ms a frame (None where the line has none)."""
    head = re.search(r"\((\d+) frames, ([\d.]+) s", line)
    gen = re.search(r"generate ([\d.]+) ms a frame", line)
    return {"programme_s": float(head.group(2)), "frames": int(head.group(1)),
            "stages": {k: {"s": float(s), "rtf": float(r)} for k, s, r in STAGE.findall(line)},
            "generate_ms_per_frame": float(gen.group(1)) if gen else None}


def psnr_by_frame(a: Path, b: Path) -> np.ndarray:
    """PSNR (dB, inf where equal) of each decoded frame of ``b`` against ``a``'s."""
    import av

    with av.open(str(a)) as ca, av.open(str(b)) as cb:
        out = []
        for fa, fb in zip(ca.decode(video=0), cb.decode(video=0)):
            d = fa.to_ndarray(format="rgb24").astype(np.float64) - fb.to_ndarray(format="rgb24")
            mse = float(np.mean(d * d))
            out.append(math.inf if mse == 0 else 10 * math.log10(255 ** 2 / mse))
    return np.array(out)


def psnr_summary(p: np.ndarray) -> dict:
    finite = p[np.isfinite(p)]
    low = np.flatnonzero(p < 40)
    return {"frames": len(p), "identical": int(np.isinf(p).sum()),
            "median_db": round(float(np.median(finite)), 2) if len(finite) else None,
            "frames_under_40_db": low.tolist(), "their_db": [round(float(x), 1) for x in p[low]]}


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="two-anchor-"))
    rundown = write_rundown(tmp, a.short)
    before: dict = {}
    if a.before is not None:  # the older checkout's renders alternate with this one's
        before = {"tree": str(a.before), "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=a.before).stdout.strip(),
            "warm_up": render(rundown, tmp / "before_warm.mp4", a, a.before), "runs": []}
    warm = render(rundown, tmp / "warm.mp4", a)  # builds and caches both anchor packs
    runs = []
    for i in range(a.repeats):
        if before:
            before["runs"].append(render(rundown, tmp / f"before{i}.mp4", a, a.before))
        runs.append(render(rundown, tmp / f"run{i}.mp4", a))
    med = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
    if before:
        before["median"] = sorted(before["runs"], key=lambda r: r["wall_s"])[len(runs) // 2]
        # the decoded pictures of the first timed renders; the same code twice shows what the encode alone varies
        before["pictures_against_before"] = psnr_summary(psnr_by_frame(tmp / "before0.mp4", tmp / "run0.mp4"))
        if a.repeats > 1:
            before["pictures_same_code_twice"] = psnr_summary(psnr_by_frame(tmp / "run0.mp4", tmp / "run1.mp4"))
    if a.keep is not None:
        a.keep.mkdir(parents=True, exist_ok=True)
        for f in tmp.glob("*.mp4"):
            f.replace(a.keep / f.name)
    what = f"render --rundown, two anchors, {a.layout}, {a.canvas} canvas at {a.fps:g} fps, CPU"
    out = {"what": what + (", short segments" if a.short else ""),
           "command": " ".join(["python", "benchmarks/two_anchor_render.py", *(argv or sys.argv[1:])]),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=REPO).stdout.strip(),
           "machine": {"cpus": os.cpu_count(), "load_average_1m": os.getloadavg()[0]},
           "warm_up": warm, "runs": runs, "median": med, **({"before": before} if before else {}),
           "turns": turns(rundown, a.fps)}
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
