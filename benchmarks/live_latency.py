"""Sound-to-pixel latency of `live` from the microphone: the 720p canvas at 25 fps on this machine.

Starts a PulseAudio null sink as the microphone (installers/pulse-null-sink.sh), plays Moonshine's two human readings
(beckett.wav, two_cities.wav) into it in turn from the 6th second, runs ``main.py live --input pulse`` for
``--seconds`` and writes what its summary line measured (latency median and p95, frames shown and dropped, CPU load)
with the load average before and after. Needs pulseaudio and paplay (Debian: pulseaudio pulseaudio-utils).

``--interview``: two anchors, the host on a script of questions (``live --interview``), the guest's voice the
readings: beckett.wav, then ``--answer-gap`` seconds of silence in which the host asks the next question, and again;
then (``--baseline``) one anchor at the same picture from the same readings, for comparison on the shared machine.

    python benchmarks/live_latency.py --json benchmarks/cpu/live_latency.json
    python benchmarks/live_latency.py --interview --json benchmarks/cpu/interview_live.json
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
STAGES = re.compile(r"core stages (.*?) ms a chunk")
INTERVIEW = re.compile(
    r"interview: host turns on air (?P<host_turns>\d+) of (?P<host_turns_written>\d+), guest heard speaking "
    r"(?P<guest_speech_s>[\d.]+) s, nods: host (?P<nods_host>\d+), guest (?P<nods_guest>\d+)")
HOST_SCRIPT = """Good evening. You were at the river when the water rose. What did you see?

Thank you. How long did it take the water to reach the old bridge?

And when did the council close the roads?

What do the people on the east bank need tonight?

What happens tomorrow morning?

Thank you for talking to us tonight."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to stay live (default 60)")
    ap.add_argument("--canvas", default="720p", choices=("720p", "1080p"))
    ap.add_argument("--size", type=int, help="a square presenter of this size instead of the canvas")
    ap.add_argument("--fps", type=float, default=25.0)
    ap.add_argument("--interview", action="store_true", help="two anchors: the host on a script, the guest live")
    ap.add_argument("--answer-gap", type=float, default=6.0, help="--interview: seconds of silence between answers")
    ap.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True,
                    help="--interview: then one anchor at the same picture, for comparison (default on)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    return ap.parse_args(argv)


def parse_summary(text: str) -> dict | None:
    """The figures of live's summary line (``LiveSummary.line``) in ``text``, or None when it has none."""
    m = SUMMARY.search(text)
    if m is None:
        return None
    out = {k: (int(v) if v.isdigit() else float(v)) for k, v in m.groupdict().items()}
    m = STAGES.search(text)
    if m is not None:  # median ms a chunk (one frame a chunk unless the loop fell behind)
        out["stages_ms_a_chunk"] = {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+)", m[1])}
    m = INTERVIEW.search(text)
    if m is not None:
        out.update({k: (int(v) if v.isdigit() else float(v)) for k, v in m.groupdict().items()})
    return out


def _clips() -> list[Path]:
    spec = importlib.util.find_spec("moonshine_voice")
    if spec is None:
        raise SystemExit("moonshine-voice is not installed: run installers/setup.sh (it brings the speech clips)")
    assets = Path(list(spec.submodule_search_locations)[0]) / "assets"
    return [assets / "beckett.wav", assets / "two_cities.wav"]


def _measure(a: argparse.Namespace, env: dict, runtime: str, interview: bool) -> dict | None:
    """One run of ``main.py live`` with the readings played into the sink: its summary's figures, or None."""
    clips, stop = _clips(), threading.Event()

    def play() -> None:
        stop.wait(6.0)
        k = 0
        while not stop.is_set():
            subprocess.run(["paplay", "--device=studio", str(clips[k % 2])], env=env, capture_output=True)
            k += 1

    def answer() -> None:  # the guest: a reading, then a silence for the host's next question
        stop.wait(6.0)
        while not stop.is_set():
            subprocess.run(["paplay", "--device=studio", str(clips[0])], env=env, capture_output=True)
            stop.wait(a.answer_gap)

    player = threading.Thread(target=answer if a.interview else play, daemon=True)  # the same voice for both
    player.start()
    picture = ["--size", str(a.size)] if a.size else ["--canvas", a.canvas]
    cmd = [sys.executable, str(REPO / "main.py"), "live", *picture, "--fps", f"{a.fps:g}",
           "--seconds", f"{a.seconds:g}", "--input", "pulse"]
    if interview:
        script = Path(runtime) / "host.txt"
        script.write_text(HOST_SCRIPT, encoding="utf-8")
        cmd += ["--interview", "--script", str(script)]
    load_before = os.getloadavg()[0]
    log = Path(env["NEWSSTUDIO_HOME"]) / "logs" / "studio.log"
    log_from = log.stat().st_size if log.exists() else 0
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.seconds + 300)
    stop.set()
    player.join()
    figures = parse_summary(done.stdout + done.stderr)
    if figures is None:
        print((done.stdout + done.stderr)[-2000:], file=sys.stderr)
        print(f"live_latency: `main.py {' '.join(cmd[2:])}` printed no summary (exit {done.returncode})", file=sys.stderr)
        return None
    shown = [x if not x.startswith(runtime) else Path(x).name for x in cmd[2:]]
    return {"command": " ".join(["python", "main.py"] + shown), "load_average_1m_before": load_before,
            "load_average_1m_after": os.getloadavg()[0], "wall_s": round(time.monotonic() - t0, 1), **figures,
            "skips": _skips(Path(env["NEWSSTUDIO_HOME"]) / "logs" / "studio.log", log_from)}


def _skips(log: Path, start: int) -> list[str]:
    """Where the run's dropped slots fell: the microphone source's lines in the studio's log past byte ``start``."""
    try:
        with log.open("rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line.split("microphone: ", 1)[1] for line in text.splitlines() if "slot(s) skipped before slot" in line]


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    env = dict(os.environ)
    env.setdefault("NEWSSTUDIO_HOME", tempfile.mkdtemp(prefix="live-latency-home-"))
    runtime = tempfile.mkdtemp(prefix="live-latency-pulse-")
    os.chmod(runtime, 0o700)
    env["XDG_RUNTIME_DIR"] = runtime
    subprocess.run(["bash", str(REPO / "installers" / "pulse-null-sink.sh")], env=env, check=True, capture_output=True)
    try:
        figures = _measure(a, env, runtime, a.interview)
        # the interview against one anchor at the same picture, measured just after it on the same (shared) machine
        baseline = _measure(a, env, runtime, False) if figures is not None and a.interview and a.baseline else None
    finally:
        subprocess.run(["pulseaudio", "--kill"], env=env, capture_output=True)
    if figures is None:
        return 1
    from studio.bench.harness import machine_info

    result = {**figures, "machine": machine_info("cpu")}
    if a.interview:
        result["host_script"] = HOST_SCRIPT
        if baseline is not None:
            result["one_anchor"] = baseline
    print(json.dumps(result, indent=1))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
