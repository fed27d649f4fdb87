"""Where the soak's dropped frames at the switch to the microphone and at a sound-server restart come from: the studio
window (offscreen) on the soak's settings (512 px square, 25 fps, chunks of 4, live baselines), the rundown on air for
20 s, then the microphone (beckett.wav played into a PulseAudio null sink), the sound server killed at +25 s and
started again 6 s later. Prints every change of the drop counters (the core's skipped slots, the preview's superseded
and overflowed frames) with the time and the event.

    python results/cpu/s12/mic_switch_drops.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["NEWSSTUDIO_HOME"] = tempfile.mkdtemp(prefix="drops-home-")
    pulse = Path(tempfile.mkdtemp(prefix="drops-pulse-"))
    pulse.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(pulse)
    repo = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(repo))
    sink = repo / "installers" / "pulse-null-sink.sh"
    subprocess.run(["bash", str(sink)], check=True, capture_output=True)

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from studio.audio.capture import rescan_devices
    from studio.pipeline import commands as cmd
    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.settings import CoreSettings
    from studio.pipeline.studio import AudioOutputMode, StudioSettings
    from studio.ui.main_window import MainWindow
    from studio.ui.soak import _bounce_pulse
    from studio.ui.theme import apply_theme

    speech = Path(list(importlib.util.find_spec("moonshine_voice").submodule_search_locations)[0]) / "assets" / \
        "beckett.wav"
    rescan_devices()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_theme(app)
    core = CoreSettings(size_px=512, fps=25.0, device="cpu", engine="builtin", chunk_frames=4, batch_frames=4,
                        measure_baseline=True, optimizations=default_optimizations("cpu", "builtin"))
    w = MainWindow(runtime_settings=StudioSettings(core=core, audio_output=AudioOutputMode.NONE),
                   settings=QSettings(os.environ["NEWSSTUDIO_HOME"] + "/studio.ini", QSettings.IniFormat))
    w.resize(1920, 1080)
    w.show()
    t0 = time.monotonic()
    events: list[str] = []
    w.bridge.event.connect(lambda e: events.append(f"{time.monotonic() - t0:6.1f} {repr(e)[:160]}"))

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.004)

    while w.runtime.latest_frame() is None and time.monotonic() - t0 < 180:
        pump(0.5)
    last = None
    player = None
    phase = "script"
    mic_at = None
    w.rundown.toggle_live()
    while True:
        pump(0.1)
        el = time.monotonic() - t0
        rt = w.runtime
        c, p = rt._core, rt._preview
        counts = (c.dropped if c is not None else -1, p.superseded, p.overflow)
        if counts != last:
            print(json.dumps({"t_s": round(el, 2), "phase": phase, "core_skipped": counts[0],
                              "preview_superseded": counts[1], "preview_overflow": counts[2],
                              "telemetry_dropped": rt.telemetry().frames_dropped}), flush=True)
            last = counts
        if phase == "script" and el > 25:
            phase, mic_at = "microphone", el
            print(f"{el:6.1f} switch to the microphone", flush=True)
            w.set_mode(cmd.PreviewMode.MICROPHONE)
        if phase != "script" and (player is None or player.poll() is not None):
            player = subprocess.Popen(["paplay", "--device=studio", str(speech)], env=dict(os.environ))
        if phase == "microphone" and el > mic_at + 25:
            phase = "pulse bounced"
            print(f"{el:6.1f} sound server killed, back in 6 s", flush=True)
            threading.Thread(target=_bounce_pulse, args=(sink, 6.0), daemon=True).start()
        if phase == "pulse bounced" and el > mic_at + 55:
            break
    player.kill()
    print("\n".join(e for e in events if "Telemetry" not in e))
    w.close()
    pump(2)
    subprocess.run(["pulseaudio", "--kill"], env=dict(os.environ), capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
