"""Sound-to-pixel latency of `live` from the microphone: the 720p canvas at 25 fps on this machine.

Starts a PulseAudio null sink as the microphone (installers/pulse-null-sink.sh), plays Moonshine's two human readings
(beckett.wav, two_cities.wav) into it in turn from the 6th second, runs ``main.py live --input pulse`` for
``--seconds`` and writes what its summary line measured (latency median and p95, frames shown and dropped, CPU load).
Needs pulseaudio and paplay (Debian: pulseaudio pulseaudio-utils).

    python benchmarks/live_latency.py --json benchmarks/cpu/live_latency.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(
    r"(?P<elapsed_s>[\d.]+) s: (?P<frames>\d+) frames shown \((?P<fps>[\d.]+) fps\), (?P<dropped>\d+) dropped; "
    r"sound-to-pixel latency median (?P<latency_ms_median>[\d.]+) ms, p95 (?P<latency_ms_p95>[\d.]+) ms"
    r".*CPU load (?P<cpu_load_percent>\d+)% of (?P<cores>\d+) cores")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to stay live (default 60)")
    ap.add_argument("--canvas", default="720p", choices=("720p", "1080p"))
    ap.add_argument("--fps", type=float, default=25.0)
    ap.add_argument("--json", type=Path, help="write the figures here")
    return ap.parse_args(argv)


def parse_summary(text: str) -> dict | None:
    """The figures of live's summary line (``LiveSummary.line``) in ``text``, or None when it has none."""
    m = SUMMARY.search(text)
    if m is None:
        return None
    return {k: (int(v) if v.isdigit() else float(v)) for k, v in m.groupdict().items()}


def _clips() -> list[Path]:
    spec = importlib.util.find_spec("moonshine_voice")
    if spec is None:
        raise SystemExit("moonshine-voice is not installed: run installers/setup.sh (it brings the speech clips)")
    assets = Path(list(spec.submodule_search_locations)[0]) / "assets"
    return [assets / "beckett.wav", assets / "two_cities.wav"]


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    env = dict(os.environ)
    env.setdefault("NEWSSTUDIO_HOME", tempfile.mkdtemp(prefix="live-latency-home-"))
    runtime = tempfile.mkdtemp(prefix="live-latency-pulse-")
    os.chmod(runtime, 0o700)
    env["XDG_RUNTIME_DIR"] = runtime
    subprocess.run(["bash", str(REPO / "installers" / "pulse-null-sink.sh")], env=env, check=True, capture_output=True)
    clips, stop = _clips(), threading.Event()

    def play() -> None:
        stop.wait(6.0)
        k = 0
        while not stop.is_set():
            subprocess.run(["paplay", "--device=studio", str(clips[k % 2])], env=env, capture_output=True)
            k += 1

    player = threading.Thread(target=play, daemon=True)
    player.start()
    cmd = [sys.executable, str(REPO / "main.py"), "live", "--canvas", a.canvas, "--fps", f"{a.fps:g}",
           "--seconds", f"{a.seconds:g}", "--input", "pulse"]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.seconds + 300)
    stop.set()
    subprocess.run(["pulseaudio", "--kill"], env=env, capture_output=True)
    figures = parse_summary(done.stdout + done.stderr)
    if figures is None:
        print((done.stdout + done.stderr)[-2000:], file=sys.stderr)
        print(f"live_latency: `main.py {' '.join(cmd[2:])}` printed no summary (exit {done.returncode})", file=sys.stderr)
        return 1
    from studio.bench.harness import machine_info

    result = {"command": " ".join(["python", "main.py"] + cmd[2:]), "machine": machine_info("cpu"),
              "wall_s": round(time.monotonic() - t0, 1), **figures}
    print(json.dumps(result, indent=1))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
