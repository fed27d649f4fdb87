"""The studio window at 1920x1080 (offscreen Qt) on air on the default rundown, recording, with a PulseAudio null sink
as its sound card and microphone; one grab per tab of the tools dock (outputs, leaderboard, compile). Run from the
repository root:  python results/cpu/s14/screenshots.py OUTDIR
"""
import os, subprocess, sys, tempfile, time
from pathlib import Path

out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/cpu/s14")
out.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
home = Path(tempfile.mkdtemp(prefix="shots-home-"))
os.environ["NEWSSTUDIO_HOME"] = str(home)
pulse = Path(tempfile.mkdtemp(prefix="shots-pulse-")); pulse.chmod(0o700)
os.environ["XDG_RUNTIME_DIR"] = str(pulse)
subprocess.run(["bash", "installers/pulse-null-sink.sh"], check=True, capture_output=True, timeout=30)

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from studio.audio.capture import rescan_devices
from studio.ui.main_window import MainWindow
from studio.ui.theme import apply_theme

rescan_devices()
app = QApplication(sys.argv[:1])
apply_theme(app)
w = MainWindow(settings=QSettings(str(home / "studio.ini"), QSettings.IniFormat))
w.resize(1920, 1080)
w.show()


def pump(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.004)


t0 = time.monotonic()
while w.runtime.latest_frame() is None and time.monotonic() - t0 < 180:
    pump(0.5)
pump(3)
w.folder_edit.setText(str(home / "recordings"))
w.toggle_recording()
w.rundown.toggle_live()
pump(25)
for i, name in enumerate(("outputs", "leaderboard", "compile")):
    w.tools.setCurrentIndex(i)
    pump(1.5)
    w.grab().save(str(out / f"studio_onair_{name}.png"))
    print("wrote", out / f"studio_onair_{name}.png", "fps shown", round(w.runtime.telemetry().fps_shown, 1),
          "dropped", w.runtime.telemetry().frames_dropped, flush=True)
w.toggle_recording()
pump(5)
rec = sorted((home / "recordings").glob("*.mp4"))
print("recording", rec)
w.close()
pump(2)
if rec:
    print(subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name,duration", "-of", "csv=p=0",
                          str(rec[0])], capture_output=True, text=True).stdout)
    wav = home / "rec.wav"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(rec[0]), "-vn", str(wav)], check=True)
    print(subprocess.run(["sox", str(wav), "-n", "stat"], capture_output=True, text=True).stderr)
subprocess.run(["pulseaudio", "--kill"], capture_output=True)
