"""The studio window (offscreen, the real MainWindow) in microphone mode at the 1280x720 canvas, 25 fps, CPU, the
built-in engine with its default flags and the neural audio engine; speech (beckett.wav, two_cities.wav) played into
a PulseAudio null sink; no recording, no stream. Prints the studio's own telemetry every 5 s and a summary.

    python results/cpu/s11/studio_mic_720p.py [--seconds 60]
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
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

    assets = Path(list(importlib.util.find_spec("moonshine_voice").submodule_search_locations)[0]) / "assets"
    clips = [assets / "beckett.wav", assets / "two_cities.wav"]
    rescan_devices()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_theme(app)
    core = CoreSettings(layout=Layout.CANVAS, canvas_height_px=720, fps=25.0, device="cpu", engine="builtin",
                        optimizations=default_optimizations("cpu", "builtin"))
    st = StudioSettings(core=core, audio_output=AudioOutputMode.NONE)
    w = MainWindow(runtime_settings=st, settings=QSettings(os.environ["NEWSSTUDIO_HOME"] + "/studio.ini",
                                                           QSettings.IniFormat))
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
    w.grab().save(str(Path(__file__).with_name("studio_mic_720p.png")))
    lat = [s["latency_ms_median"] for s in samples if s["latency_ms_median"] == s["latency_ms_median"]]
    print(json.dumps({"seconds": a.seconds, "program": "x".join(map(str, core.output_size)),
                      "fps_shown_end": t.fps_shown,
                      "frames_dropped": t.frames_dropped - t_first.frames_dropped,
                      "latency_ms_median_of_samples": statistics.median(lat) if lat else None,
                      "latency_ms_max_sample": max(lat) if lat else None,
                      "gui_stall_max_ms": w.stall.max_stall_ms}))
    w.close()
    pump(2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
