"""The scripts in benchmarks/: their argument parsing, and the code of each that calls the product, on tiny inputs.

The figures themselves come from running the scripts (benchmarks/README.md); these tests only check that the scripts
still fit the product they measure."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"


def load(relpath: str):
    """A script of benchmarks/ as a module (they are not a package)."""
    path = BENCH / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tiny_program(seconds: float = 0.5, repeats: int = 2):
    """A bench program of a speech-like noise burst said ``repeats`` times (a repeated phrase, like the ident)."""
    from studio.bench.harness import BenchItem
    from studio.contracts import ANALYSIS_RATE_HZ

    rng = np.random.default_rng(7)
    n = int(seconds * ANALYSIS_RATE_HZ)
    burst = (0.2 * rng.standard_normal(n) * np.hanning(n)).astype(np.float32)
    return [BenchItem(burst, "NewsStudio") for _ in range(repeats)]


def test_audio_cache_rates_counts_the_repeated_phrase_as_hits():
    mod = load("audio_cache_rates.py")
    a = mod.parse_args(["--engines", "wav2lip", "--fps", "25", "--seconds", "3"])
    assert (a.engines, a.fps, a.seconds, a.json) == ("wav2lip", 25.0, 3.0, None)
    out = mod.measure(tiny_program(), ["wav2lip"], 25.0)
    (enc, st), = out.items()
    assert st["engine"] == "wav2lip"
    assert st["misses"] > 0 and st["hits"] > 0  # the second saying of the phrase comes from the cache
    assert 0.0 < st["hit_rate"] <= 0.5


def test_live_latency_reads_the_summary_line_that_live_prints():
    from studio.pipeline.live import LiveSummary

    mod = load("live_latency.py")
    line = LiveSummary(elapsed_s=60.0, frames=1503, dropped=2, latency_ms_median=125.4, latency_ms_p95=135.0,
                       motion={}, engine="neural", microphone="running", cpu_load=0.36, cores=2).line()
    got = mod.parse_summary("live: listening on 'pulse' for 60 s\nlive: " + line + "\n")
    assert got == {"elapsed_s": 60.0, "frames": 1503, "fps": 25.1, "dropped": 2, "latency_ms_median": 125.0,
                   "latency_ms_p95": 135.0, "cpu_load_percent": 36, "cores": 2, "stages_ms_a_chunk": {}}
    assert mod.parse_summary("error: no microphone") is None
    assert mod.parse_args(["--seconds", "5"]).seconds == 5.0
    interview = LiveSummary(elapsed_s=60.0, frames=1500, dropped=0, latency_ms_median=130.0, latency_ms_p95=150.0,
                            motion={}, engine="neural", microphone="running", cpu_load=0.5, cores=2,
                            interview="host turns on air 4 of 6, guest heard speaking 31.5 s, nods: host 9, guest 7",
                            stages_ms={"motion": 2.5, "generate": 30.25, "post": 5.0})
    got = mod.parse_summary("live: " + interview.line() + "\n")
    assert (got["frames"], got["host_turns"], got["host_turns_written"], got["guest_speech_s"], got["nods_host"],
            got["nods_guest"]) == (1500, 4, 6, 31.5, 9, 7)
    assert got["stages_ms_a_chunk"] == {"motion": 2.5, "generate": 30.2, "post": 5.0}
    a = mod.parse_args(["--interview", "--size", "256"])
    assert a.interview and a.size == 256 and a.answer_gap == 6.0


def test_render_lipsync_reads_render_stage_line_and_the_rundown():
    mod = load("render_lipsync.py")
    text = ("wrote /tmp/r.mp4 (803 frames, 32.12 s, device cpu)\nstage seconds (real-time factor): anchor 0.15 s "
            "(0.005), speech 2.75 s (0.086), render 16.70 s (0.520)\n")
    assert mod.parse_stages(text) == {"anchor": {"s": 0.15, "rtf": 0.005}, "speech": {"s": 2.75, "rtf": 0.086},
                                      "render": {"s": 16.7, "rtf": 0.52}}
    assert mod.parse_stages("no such line") == {}
    one, whole = mod.rundown_script(1), mod.rundown_script()
    assert one and whole.startswith(one) and len(whole) > len(one)
    assert mod.parse_args(["--stories", "2"]).stories == 2


def test_render_realtime_reads_render_summary_lines():
    mod = load("render_realtime.py")
    text = ("render: 100% frame 239/239\nwrote /tmp/r.mp4 (239 frames, 9.56 s, device cpu, engine builtin, "
            "optimizations pyramidal; first frame 3.08 s after the command's start (0.61 s after the core's), done "
            "7.10 s after it)\nstage seconds (real-time factor): startup 1.42 s (0.149), anchor 0.18 s (0.019), "
            "setup 0.86 s (0.090), speech 0.00 s (0.000), finish 0.20 s (0.021), render 5.31 s (0.555)\n")
    assert mod.parse_report(text) == {
        "frames": 239, "speech_s": 9.56, "first_frame_s": 3.08,
        "stages_s": {"startup": 1.42, "anchor": 0.18, "setup": 0.86, "speech": 0.0, "finish": 0.2, "render": 5.31}}
    assert mod.parse_report("error: no such file") is None
    a = mod.parse_args(["--repeats", "2", "--baseline", "abc123"])
    assert (a.repeats, a.baseline, a.canvas) == (2, "abc123", "720p")


def test_dit_parts_runs_its_check_on_the_cpu(tmp_path):
    from studio.bench.harness import save_program

    program = tmp_path / "program.npz"
    save_program(tiny_program(0.5, 1), program)
    out = tmp_path / "parts.json"
    done = subprocess.run([sys.executable, str(BENCH / "gpu" / "dit_parts.py"), "--check", "--repeats", "1",
                           "--program", str(program), "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["engine"] == "builtin" and len(d["runs"]) == 1
    assert d["runs"][0]["frames"] > 0 and d["summary"]["wall_ms_per_frame_median"] > 0


def test_first_frame_feeds_the_engine_as_the_core_does():
    mod = load("gpu/first_frame.py")
    # key stride 4, chunks of 16 slots: 5 keyframes first (slot 0 and every 4th back from 15), then 4 a chunk
    assert mod.call_sizes(324, 4, 9) == [5] + [4] * 79 + [3]
    assert mod.call_sizes(324, 4, 0) == mod.call_sizes(324, 4, 9)  # the short window's 9 keys span 33 slots: no cap
    # every frame generated: the first chunk no more than the short window makes
    assert mod.call_sizes(40, 1, 9) == [9, 16, 15] and mod.call_sizes(40, 1, 0) == [16, 16, 8]
    runs = [{"schedule": "whole", "ms": 4.0}, {"schedule": "stream", "ms": 1.0}, {"schedule": "whole", "ms": 6.0},
            {"schedule": "stream", "ms": 3.0}, {"schedule": "whole", "ms": 5.0}]
    assert mod.summarize(runs, ("ms",)) == {"whole": {"ms": 5.0}, "stream": {"ms": 2.0},
                                            "stream_over_whole": {"ms": 0.4}}
    a = mod.parse_args(["--program", "p.npz", "--check"])
    assert a.check and a.repeats == 3 and a.frames == 324 and a.engine == "wan2.1-1.3b-taehv-fp8"


def test_first_frame_runs_its_check_on_the_cpu(tmp_path):
    pytest.importorskip("diffusers", reason="needs the 'engines' extra")
    from studio.bench.harness import save_program

    program = tmp_path / "program.npz"
    save_program(tiny_program(0.5, 2), program)
    out = tmp_path / "first_frame.json"
    done = subprocess.run([sys.executable, str(BENCH / "gpu" / "first_frame.py"), "--check", "--repeats", "1",
                           "--frames", "20", "--program", str(program), "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["engine"] == "first-frame-check" and d["first_window_frames"] == 9 and d["window_latents"] == 5
    assert [r["schedule"] for r in d["engine_runs"]] == ["whole", "stream"]
    assert [r["schedule"] for r in d["core_runs"]] == ["whole", "stream"]
    whole, stream = d["engine_runs"]
    assert [w["new_frames"] for w in whole["windows"]] == [17, 17]  # 20 frames: two whole windows
    assert [w["new_frames"] for w in stream["windows"]] == [9, 16]  # the short window and one that follows on
    assert whole["frames"] == stream["frames"] == 20 and whole["first_call_frames"] == 16
    assert stream["first_call_frames"] == 9
    assert all(r["frames"] > 0 and r["first_frame_s"] > 0 for r in d["core_runs"])
    assert set(d["summary"]["engine"]["stream_over_whole"]) >= {"first_call_ms", "steady_ms_per_frame"}


def test_cast_core_runs_its_check_on_the_cpu(tmp_path):
    """Two anchors through the core as one programme: every turn's frames made, both faces in the grabbed frame."""
    from studio.bench.harness import save_program

    program = tmp_path / "program.npz"
    save_program(tiny_program(2.0, 1), program)
    out = tmp_path / "cast.json"
    done = subprocess.run([sys.executable, str(BENCH / "gpu" / "cast_core.py"), "--check", "--program", str(program),
                           "--json", str(out)], capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["anchors"] == 2 and d["presenter_px"] == 640 and [r["engine"] for r in d["rows"]] == ["builtin"]
    run = d["rows"][0]["runs"][0]
    assert run["frames"] == 50 and run["ms_per_frame"] > 0  # 2 s at 25 fps
    from PIL import Image

    assert Image.open(tmp_path / "cast_builtin.png").size == (1280, 720)


def test_gpu_bundle_script_parses_and_says_what_is_missing(tmp_path):
    script = BENCH / "gpu" / "run.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    done = subprocess.run(["bash", str(script), "core"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "make_bundles.sh" in done.stdout


@pytest.mark.parametrize("name", ["audio_cache_rates.py", "live_latency.py", "render_lipsync.py", "gpu/dit_parts.py",
                                  "gpu/first_frame.py", "gpu/cast_core.py"])
def test_each_script_explains_its_one_command(name):
    doc = load(name).__doc__
    assert f"benchmarks/{name}" in doc


def test_two_anchor_render_reads_the_rundown_summary_line():
    mod = load("two_anchor_render.py")
    line = ("wrote /tmp/p.mp4 (236 frames, 9.44 s, device cpu, engine builtin, optimizations pyramidal); stage "
            "seconds (real-time factor): anchor 0.40 s (0.042), speech 2.10 s (0.222), render 30.50 s (3.231); 236 "
            "frames produced; generate 61.3 ms a frame")
    got = mod.parse_summary(line)
    assert (got["frames"], got["programme_s"], got["generate_ms_per_frame"]) == (236, 9.44, 61.3)
    assert got["stages"]["render"] == {"s": 30.5, "rtf": 3.231} and "generate" not in got["stages"]
    assert mod.parse_summary(line.split("; 236")[0])["generate_ms_per_frame"] is None
    a = mod.parse_args(["--layout", "cut", "--short"])
    assert (a.layout, a.short, a.keep) == ("cut", True, None)
