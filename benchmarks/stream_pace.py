"""The rate at which an RTMP receiver gets a program that is made faster than real time (a file render's case).

The 720p25 synthetic program is handed to an RTMP output as fast as it is made; Debian's ffmpeg listening on
127.0.0.1 (``ffmpeg -listen 1``) copies it and reports its progress (``-progress``) four times a second. The rate is
the receiver's media seconds per wall second over the steady part (its first 2 s of probing left out), with the
output's pacing on (what ``render --stream`` does) and off (``--stream-pace off``).

    python benchmarks/stream_pace.py

writes benchmarks/stream_pace.json. Needs ffmpeg on the PATH; about 40 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def receiver_rate(pace: bool, seconds: float, folder: Path) -> dict:
    from studio.contracts import ProgramFormat
    from studio.encode.check import free_port, listening
    from studio.encode.streams import StreamOutput
    from studio.encode.synthetic import SyncSource

    fmt = ProgramFormat(1280, 720, 25.0)
    port = free_port()
    rx = subprocess.Popen(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-listen", "1", "-i",
                           f"rtmp://127.0.0.1:{port}/live/t", "-c", "copy", "-f", "flv", str(folder / "got.flv"),
                           "-progress", "pipe:1", "-stats_period", "0.25"], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, text=True)
    marks: list[tuple[float, float]] = []  # (wall, the receiver's media seconds)

    def read() -> None:
        assert rx.stdout is not None
        for line in rx.stdout:
            if line.startswith("out_time_us=") and line.strip() != "out_time_us=N/A":
                marks.append((time.monotonic(), int(line.split("=")[1]) / 1e6))

    reader = threading.Thread(target=read)
    reader.start()
    while not listening(port):
        time.sleep(0.05)
    out = StreamOutput(f"rtmp://127.0.0.1:{port}/live/t", block=True)
    out.pace = pace
    out.open(fmt)
    n = SyncSource(fmt).play(out.write, seconds, batch_frames=5, realtime=False)
    out.close()
    rx.wait(60)
    reader.join()
    steady = [m for m in marks if m[1] > 0 and m[0] > marks[0][0] + 2.0][:-1]  # the last mark is the final flush
    rate = (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])
    return {"pace": pace, "frames": n, "receiver_media_s_per_wall_s": rate, "progress_marks": len(steady)}


def main() -> None:
    import platform
    import tempfile

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=12.0, help="program seconds per run (default 12)")
    p.add_argument("--json", type=Path, default=REPO / "benchmarks" / "stream_pace.json")
    args = p.parse_args()
    runs = []
    for pace in (True, False):
        with tempfile.TemporaryDirectory(prefix="stream-pace-") as tmp:
            runs.append(receiver_rate(pace, args.seconds, Path(tmp)))
        print(f"pacing {'on' if pace else 'off'}: the receiver gets {runs[-1]['receiver_media_s_per_wall_s']:.2f}x "
              "real time", flush=True)
    args.json.write_text(json.dumps({
        "what": "media seconds per wall second at an RTMP receiver (ffmpeg -listen 1 on 127.0.0.1), 720p25 program "
                "made faster than real time",
        "command": "python benchmarks/stream_pace.py",
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
        "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
