"""The soak's switch to the microphone, repeated: the studio window (offscreen) on the soak's settings (512 px square,
25 fps, chunks of 4, live baselines), recording and sending MPEG-TS over TCP to a receiver as the soak does, the
rundown on air, then the microphone (beckett.wav into a PulseAudio null sink), then back to the rundown; ``--switches``
times. Every chunk the microphone source hands out in the first 3 s after a switch is traced (when, which slots, how
many skipped, how long the loop took), with the drop counters (core's skipped slots, preview's superseded frames).

    python results/cpu/s13/switch_drops.py [--switches 4]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--switches", type=int, default=4)
    ap.add_argument("--no-outputs", action="store_true", help="no recording, no stream (as s12's probe)")
    a = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    home = Path(tempfile.mkdtemp(prefix="switch-home-"))
    os.environ["NEWSSTUDIO_HOME"] = str(home)
    pulse = Path(tempfile.mkdtemp(prefix="switch-pulse-"))
    pulse.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(pulse)
    repo = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(repo))
    subprocess.run(["bash", str(repo / "installers" / "pulse-null-sink.sh")], check=True, capture_output=True)

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from studio.audio.capture import rescan_devices
    from studio.pipeline import commands as cmd
    from studio.pipeline import sources as srcmod
    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.settings import CoreSettings
    from studio.pipeline.studio import AudioOutputMode, StudioSettings
    from studio.ui.main_window import MainWindow
    from studio.ui.soak import _Receiver
    from studio.ui.theme import apply_theme

    trace: list[dict] = []
    t0 = time.monotonic()
    orig = srcmod.MicSource.next_chunk

    def next_chunk(self, pace):
        t_ask = time.monotonic()
        ch = orig(self, pace)
        if ch is not None:
            trace.append({"t": round(t_ask - t0, 3), "waited_ms": round((time.monotonic() - t_ask) * 1e3, 1),
                          "first": int(ch.slots[0]), "last": int(ch.slots[-1]), "skipped": int(ch.skipped),
                          "max_frames": pace.max_frames})
        return ch

    srcmod.MicSource.next_chunk = next_chunk
    speech = Path(list(importlib.util.find_spec("moonshine_voice").submodule_search_locations)[0]) / "assets" / \
        "beckett.wav"
    rescan_devices()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_theme(app)
    core = CoreSettings(size_px=512, fps=25.0, device="cpu", engine="builtin", chunk_frames=4, batch_frames=4,
                        measure_baseline=True, optimizations=default_optimizations("cpu", "builtin"))
    w = MainWindow(runtime_settings=StudioSettings(core=core, audio_output=AudioOutputMode.NONE),
                   settings=QSettings(str(home / "studio.ini"), QSettings.IniFormat))
    w.resize(1920, 1080)
    w.show()

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.004)

    while w.runtime.latest_frame() is None and time.monotonic() - t0 < 180:
        pump(0.5)
    receiver = None
    if not a.no_outputs:
        (home / "rec").mkdir()
        w.folder_edit.setText(str(home / "rec"))
        w.toggle_recording()
        receiver = _Receiver(19778)
        w.bridge.send(cmd.StartOutput("tcp://127.0.0.1:19778"))
    player = None
    rows = []
    for i in range(a.switches):
        w.set_mode(cmd.PreviewMode.SCRIPT)
        pump(1)
        w.rundown.toggle_live()
        pump(15)
        rt = w.runtime
        before = rt.telemetry().frames_dropped
        sup0 = rt._preview.superseded
        n0 = len(trace)
        t_switch = time.monotonic() - t0
        w.set_mode(cmd.PreviewMode.MICROPHONE)
        end = time.monotonic() + 12
        while time.monotonic() < end:
            pump(0.1)
            if player is None or player.poll() is not None:
                player = subprocess.Popen(["paplay", "--device=studio", str(speech)], env=dict(os.environ))
        c = rt._core
        row = {"switch": i + 1, "t_switch": round(t_switch, 2),
               "telemetry_dropped_delta": rt.telemetry().frames_dropped - before,
               "core_skipped": c.dropped if c is not None else None,
               "preview_superseded_delta": rt._preview.superseded - sup0,
               "first_chunks": [r for r in trace[n0:] if r["t"] < t_switch + 3][:12],
               "skips_later": [r for r in trace[n0:] if r["skipped"] and r["t"] >= t_switch + 3]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if player is not None:
        player.kill()
    print(json.dumps({"switches": len(rows), "with_drops": sum(1 for r in rows if r["telemetry_dropped_delta"]),
                      "outputs": not a.no_outputs}))
    if w.recording_path is not None:
        w.toggle_recording()
    w.close()
    pump(2)
    if receiver is not None:
        receiver.kill()
    subprocess.run(["pulseaudio", "--kill"], env=dict(os.environ), capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
