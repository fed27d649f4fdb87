"""The studio window (offscreen, the real MainWindow) in microphone mode at the 1280x720 canvas, 25 fps, CPU, the
built-in engine with its default flags and the neural audio engine; speech (beckett.wav, two_cities.wav) played into
a PulseAudio null sink; no recording, no stream. Prints the studio's own telemetry every 5 s and a summary.

    python results/cpu/s12/mic_latency_probe.py [--seconds 60] [--settings studio|core]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def thread_cpu_s() -> dict[str, float]:
    """CPU seconds of each thread of this process so far, by Python thread name (else the OS name)."""
    import threading

    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        name = names.get(int(tid), comm)
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--settings", choices=("studio", "core"), default="studio",
                    help="studio: as the window starts (its saved-settings path); core: CoreSettings' defaults")
    a = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["NEWSSTUDIO_HOME"] = tempfile.mkdtemp(prefix="mic720-home-")
    pulse = Path(tempfile.mkdtemp(prefix="mic720-pulse-"))
    pulse.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(pulse)
    repo = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(repo))
    subprocess.run(["bash", str(repo / "installers" / "pulse-null-sink.sh")], check=True, capture_output=True)

    import importlib.util

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from studio.audio.capture import rescan_devices
    from studio.pipeline import commands as cmd
    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.settings import CoreSettings, Layout
    from studio.pipeline.studio import AudioOutputMode, StudioSettings
    from studio.ui.main_window import MainWindow
    from studio.ui.theme import apply_theme

    from studio.pipeline import outputs as outmod

    trace: dict[int, dict] = {}
    orig_write, orig_shown = outmod.PreviewOutput.write, outmod.PreviewOutput.note_displayed

    def write(self, batch):
        now = time.monotonic_ns()
        for j, slot in enumerate(batch.slots):
            h = int(batch.heard_ns[j]) if batch.heard_ns is not None else 0
            trace[int(slot)] = {"heard": h, "written": now, "n": len(batch.slots)}
        return orig_write(self, batch)

    def shown(self, frame):
        t = trace.get(frame.index)
        if t is not None:
            t["shown"] = time.monotonic_ns()
        return orig_shown(self, frame)

    outmod.PreviewOutput.write, outmod.PreviewOutput.note_displayed = write, shown
    assets = Path(list(importlib.util.find_spec("moonshine_voice").submodule_search_locations)[0]) / "assets"
    clips = [assets / "beckett.wav", assets / "two_cities.wav"]
    rescan_devices()
    if os.environ.get("PROBE_QUEUED") == "1":  # the core as before just_in_time: the microphone's chunks queue
        from studio.pipeline.sources import MicSource

        MicSource.just_in_time = False
    if os.environ.get("PROBE_NO_KV_PROBE") == "1":  # A/B of the live KV-cache probe's thread (8c7236b)
        import studio.neural.mic as nmic

        nmic._probe_kv = lambda ref, stop: None
    if os.environ.get("PROBE_NO_LABEL_CACHE") == "1":  # A/B of results/cpu/s19/label_cache_tried.patch (not kept)
        import studio.ui.preview as pv

        pv._LABELS_KEPT = 0
    if os.environ.get("PROBE_SWITCH_S"):
        sys.setswitchinterval(float(os.environ["PROBE_SWITCH_S"]))
    if os.environ.get("PROBE_TORCH_THREADS"):
        import torch

        torch.set_num_threads(int(os.environ["PROBE_TORCH_THREADS"]))
    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_theme(app)
    qs = QSettings(os.environ["NEWSSTUDIO_HOME"] + "/studio.ini", QSettings.IniFormat)
    if a.settings == "studio":  # the window's own settings path (chunks of 4, live baseline chunks for the HUD)
        from dataclasses import replace

        from studio.ui.main_window import default_studio_settings

        st = default_studio_settings(qs, cuda=False)
        core = replace(st.core, layout=Layout.CANVAS, canvas_height_px=720, fps=25.0, engine="builtin",
                       optimizations=default_optimizations("cpu", "builtin"))
        st = replace(st, core=core, audio_output=AudioOutputMode.NONE)
    else:  # sessions 12-18: the core's defaults (chunks of 8, no baseline chunks)
        core = CoreSettings(layout=Layout.CANVAS, canvas_height_px=720, fps=25.0, device="cpu", engine="builtin",
                            optimizations=default_optimizations("cpu", "builtin"))
        st = StudioSettings(core=core, audio_output=AudioOutputMode.NONE)
    print(json.dumps({"settings": a.settings, "chunk_frames": core.chunk_frames, "batch_frames": core.batch_frames,
                      "measure_baseline": core.measure_baseline}), flush=True)
    w = MainWindow(runtime_settings=st, settings=qs)
    if os.environ.get("PROBE_NO_WAKE") == "1":  # A/B: frames picked up by the window's timer only (before s19)
        w.runtime.set_frame_listener(None)
    w.resize(1920, 1080)
    w.show()

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.004)

    pump(3)
    w.set_mode(cmd.PreviewMode.MICROPHONE)
    t0 = time.monotonic()
    while w.runtime.latest_frame() is None and time.monotonic() - t0 < 120:
        pump(0.5)
    pump(5)  # the microphone settles
    w.stall.reset()
    cpu0 = thread_cpu_s()
    start = time.monotonic()
    t_first = w.runtime.telemetry()
    player, k, samples = None, 0, []
    next_sample = start + 5
    while time.monotonic() - start < a.seconds:
        pump(0.1)
        if player is None or player.poll() is not None:
            player = subprocess.Popen(["paplay", "--device=studio", str(clips[k % 2])], env=dict(os.environ))
            k += 1
        if time.monotonic() >= next_sample:
            next_sample += 5
            t = w.runtime.telemetry()
            samples.append({"t_s": round(time.monotonic() - start, 1), "fps_shown": t.fps_shown,
                            "frames_dropped": t.frames_dropped, "latency_ms_median": t.latency_ms_median,
                            "gui_stall_ms": w.stall.recent_stall_ms})
            print(json.dumps(samples[-1]), flush=True)
    t = w.runtime.telemetry()
    player.kill()
    cpu1 = thread_cpu_s()
    span = time.monotonic() - start
    busy = {k: round(100 * (v - cpu0.get(k, 0.0)) / span, 1) for k, v in cpu1.items()}
    print(json.dumps({"cpu_percent_of_one_core_by_thread": {k: v for k, v in sorted(busy.items(), key=lambda x: -x[1])
                                                            if v >= 1.0}}))
    rows = [v for v in trace.values() if v["heard"] > 0 and "shown" in v]
    core_ms = [(v["written"] - v["heard"]) / 1e6 for v in rows]
    wait_ms = [(v["shown"] - v["written"]) / 1e6 for v in rows]
    sizes = [v["n"] for v in trace.values()]
    sample = w.runtime.bus.latest("core")
    if sample is not None:
        print(json.dumps({"stages_ms_median_per_chunk": {k: round(v.median_ms, 2) for k, v in sample.stages.items()},
                          "lead_ms": w.runtime._mic_source.lead * 1000 / 16000}))
        c = sample.compute
        if c is not None:  # what the HUD shows: compute saved and each flag's share, measured live in this run
            print(json.dumps({"hud_compute_saved": c.saved_fraction, "baseline_ms": c.baseline_ms_per_frame,
                              "actual_ms": c.actual_ms_per_frame,
                              "shares": {sh.name: [sh.status.value, sh.saved_fraction, sh.reason] for sh in c.shares}}))
    print(json.dumps({"frames_traced": len(rows), "heard_to_written_ms_median": statistics.median(core_ms),
                      "written_to_shown_ms_median": statistics.median(wait_ms),
                      "written_to_shown_ms_p95": sorted(wait_ms)[int(0.95 * len(wait_ms))],
                      "batch_frames_median": statistics.median(sizes), "batch_frames_max": max(sizes)}))
    w.grab().save(str(Path(__file__).with_name("mic_latency_probe.png")))
    lat = [s["latency_ms_median"] for s in samples if s["latency_ms_median"] == s["latency_ms_median"]]
    print(json.dumps({"seconds": a.seconds, "program": "x".join(map(str, core.output_size)),
                      "fps_shown_end": t.fps_shown,
                      "frames_dropped": t.frames_dropped - t_first.frames_dropped,
                      "latency_ms_median_of_samples": statistics.median(lat) if lat else None,
                      "latency_ms_max_sample": max(lat) if lat else None,
                      "gui_stall_max_ms": w.stall.max_stall_ms}))
    w.close()
    pump(2)
    subprocess.run(["pulseaudio", "--kill"], env=dict(os.environ), capture_output=True)  # this run's sound server
    return 0


if __name__ == "__main__":
    sys.exit(main())
