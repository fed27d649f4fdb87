"""CPU time per frame of encoding the program for a recording, an RTMP stream and a browser viewer at once.

The 720p25 program (the synthetic sync picture, RGB as the CPU core hands it over) goes at real time to three
outputs: the recorder (an MP4 file), RTMP to Debian's ffmpeg listening on 127.0.0.1 (``ffmpeg -listen 1``) and the
WebSocket page's server with one local client reading it. Measured over the steady part of each run: the CPU seconds
of this process and its encoder processes (the receivers excluded) per program frame, and how many pictures went
into a video encoder per program frame (in the measured window, and over the whole run once the outputs closed).

    python benchmarks/encode_fanout.py --baseline 462fc75

runs the same measurement on this checkout and on the ``--baseline`` commit (``git archive`` into a temporary
folder), alternating, ``--repeats`` times each, and writes the medians and their ratio to
benchmarks/encode_fanout.json. Needs ffmpeg on the PATH; about 2 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")

_WS_CLIENT = """
import sys
from websockets.sync.client import connect
port = sys.argv[1]
n = 0
with connect(f"ws://127.0.0.1:{port}/ws", origin=f"http://127.0.0.1:{port}", max_queue=None) as ws:
    print("connected", flush=True)
    try:
        while True:
            ws.recv(timeout=30)
            n += 1
    except Exception:
        pass
print(n, flush=True)
"""


def _tree(pid: int) -> list[int]:
    out = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for k in kids:
            out += _tree(int(k))
    return out


def _cpu_s(exclude: set[int]) -> float:
    """utime + stime of this process and its descendants, except ``exclude`` (and theirs)."""
    total = 0.0
    for pid in _tree(os.getpid()):
        if pid in exclude:
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) * _TICK_S
    return total


def _video_encodes(outs) -> int:
    """Pictures handed to a video encoder so far, over every encoder the outputs use."""
    hubs, n = [], 0
    for out in outs:
        hub = getattr(out, "hub", None)
        if hub is not None and all(hub is not h for h in hubs):
            hubs.append(hub)
        if hub is None and hasattr(out, "repeated"):  # a recorder with an encoder of its own
            n += out.frames + out.repeated
    return n + sum(h.encoder.frames_in for h in hubs)


def measure(seconds: float, warmup_s: float) -> dict:
    """One run in the checkout on ``sys.path`` (see the module docstring)."""
    from studio.contracts import ProgramFormat
    from studio.encode.check import free_port, listening, receiver_command
    from studio.encode.recorder import RecorderOutput
    from studio.encode.streams import StreamOutput
    from studio.encode.synthetic import SyncSource
    from studio.encode.websocket import WebSocketOutput

    fmt = ProgramFormat(1280, 720, 25.0)
    src = SyncSource(fmt)
    pool = [src.batch(i, 1) for i in range(50)]  # made before the clock starts: only the outputs are measured
    tmp = Path(tempfile.mkdtemp(prefix="encode-fanout-"))
    rtmp_port, ws_port = free_port(), free_port()
    rx = subprocess.Popen(receiver_command("rtmp", rtmp_port, tmp / "got.flv"), stdin=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    while not listening(rtmp_port):
        time.sleep(0.05)
    outs = [RecorderOutput(tmp / "show.mp4"), StreamOutput(f"rtmp://127.0.0.1:{rtmp_port}/live/test"),
            WebSocketOutput.from_url(f"ws://127.0.0.1:{ws_port}")]
    for out in outs:
        out.open(fmt)
    client = subprocess.Popen([sys.executable, "-c", _WS_CLIENT, str(ws_port)], stdout=subprocess.PIPE, text=True)
    assert client.stdout is not None and client.stdout.readline().strip() == "connected"
    exclude = {rx.pid, client.pid}

    period = 1.0 / fmt.fps
    n_total = round((warmup_s + seconds) * fmt.fps)
    n_warm = round(warmup_s * fmt.fps)
    t0 = time.monotonic()
    cpu0 = enc0 = wall0 = None
    for slot in range(n_total):
        if slot == n_warm:
            cpu0, enc0, wall0 = _cpu_s(exclude), _video_encodes(outs), time.monotonic()
        wait = t0 + slot * period - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        b = pool[slot % len(pool)]
        a0 = fmt.samples_at(slot)
        batch = dataclasses.replace(b, slots=b.slots * 0 + slot, pts_s=b.pts_s * 0 + slot / fmt.fps,
                                    audio_start=a0, finished_ns=time.monotonic_ns())
        for out in outs:
            out.write(batch)
    cpu1, enc1, wall1 = _cpu_s(exclude), _video_encodes(outs), time.monotonic()
    frames = (wall1 - wall0) * fmt.fps
    stats = {out.name: dataclasses.asdict(out.stats()) for out in outs}
    for out in outs:
        out.close()
    encodes_total = _video_encodes(outs)  # every picture any encoder took, the run's repeats and drops included
    rx.wait(30)
    client.wait(30)
    ws_messages = int(client.stdout.read().strip() or 0)
    import av

    with av.open(str(tmp / "got.flv")) as c:
        rtmp_frames = c.streams.video[0].frames or sum(1 for _ in c.demux(c.streams.video[0]))
    return {"cpu_ms_per_frame": (cpu1 - cpu0) * 1e3 / frames, "video_encodes_per_frame": (enc1 - enc0) / frames,
            "frames_measured": round(frames), "frames_sent": n_total,
            "video_encodes_per_frame_whole_run": encodes_total / n_total, "rtmp_frames_received": rtmp_frames,
            "ws_messages_received": ws_messages,
            "dropped": {k: v["dropped"] for k, v in stats.items()},
            "encoder": getattr(outs[1].hub, "choice", None) and outs[1].hub.choice.kind.value}


def _run_in(tree: Path, seconds: float, warmup_s: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--measure", "--seconds", str(seconds),
                           "--warmup", str(warmup_s)], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=seconds * 4 + 180)
    if done.returncode != 0:
        raise SystemExit(f"the run in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", default="462fc75", help="the commit to compare with (default 462fc75)")
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run (default 10)")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds before each measurement (default 3)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each checkout, alternating (default 3)")
    p.add_argument("--json", type=Path, default=REPO / "benchmarks" / "encode_fanout.json")
    p.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one run, JSON on stdout
    args = p.parse_args()
    if args.measure:
        print(json.dumps(measure(args.seconds, args.warmup)))
        return
    with tempfile.TemporaryDirectory(prefix="encode-fanout-base-") as base:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.baseline], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
        runs: dict[str, list[dict]] = {"baseline": [], "this": []}
        for i in range(args.repeats):
            for name, tree in (("baseline", Path(base)), ("this", REPO)):
                r = _run_in(tree, args.seconds, args.warmup)
                runs[name].append(r)
                print(f"{name} run {i + 1}: {r['cpu_ms_per_frame']:.1f} ms CPU / frame, "
                      f"{r['video_encodes_per_frame']:.2f} encodes / frame", flush=True)
    keys = ("cpu_ms_per_frame", "video_encodes_per_frame", "video_encodes_per_frame_whole_run")
    med = {k: {key: statistics.median(r[key] for r in v) for key in keys} for k, v in runs.items()}
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    result = {
        "what": "CPU time per 720p25 program frame: record + RTMP (ffmpeg -listen 1 on 127.0.0.1) + WebSocket "
                "(one local client), the receivers not counted",
        "command": "python benchmarks/encode_fanout.py --baseline " + args.baseline,
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()},
        "baseline": args.baseline, "this": head, "seconds": args.seconds, "warmup_s": args.warmup,
        "median": med,
        "cpu_ratio_this_over_baseline": med["this"]["cpu_ms_per_frame"] / med["baseline"]["cpu_ms_per_frame"],
        "runs": runs,
    }
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"median CPU per frame: baseline {med['baseline']['cpu_ms_per_frame']:.1f} ms, "
          f"this {med['this']['cpu_ms_per_frame']:.1f} ms ({result['cpu_ratio_this_over_baseline']:.2f}x); "
          f"encodes per frame over the whole run {med['baseline']['video_encodes_per_frame_whole_run']:.2f} -> "
          f"{med['this']['video_encodes_per_frame_whole_run']:.2f}; written to {args.json}")


if __name__ == "__main__":
    main()
