"""The studio window with a two-anchor cast on air, grabbed to a PNG (offscreen Qt, CPU, no sound device).

The rundown's cast is the built-in presenter and Grace Hopper (the public-domain portrait in matplotlib's wheel), set
in the panel as a producer would (two anchors added, named, a portrait dropped on a row); the programme is the 1280x720
canvas with the set and the graphics, in a 1920x1080 window (a full-HD screen); Go live, and the window is grabbed
while the second anchor speaks.

    QT_QPA_PLATFORM=offscreen python benchmarks/studio_two_anchors.py --out benchmarks/studio_two_anchors.png
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

MAX_BYTES = 400_000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("benchmarks/studio_two_anchors.png"))
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the cast on air")
    p.add_argument("--frame", type=Path, help="also write the programme's frame at that moment (full size)")
    a = p.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    home = Path(tempfile.mkdtemp(prefix="two-anchors-home-"))
    os.environ["NEWSSTUDIO_HOME"] = str(home)  # a fresh data folder: the producer's own rundown is not touched
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

    import matplotlib
    from PySide6.QtCore import QMimeData, QPoint, QPointF, QSettings, Qt, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDropEvent
    from PySide6.QtWidgets import QApplication

    from studio.contracts import Layout
    from studio.graphics.look import Graphics
    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.rundown import Segment
    from studio.pipeline.settings import CoreSettings
    from studio.pipeline.telemetry import RuntimeState
    from studio.runtime import AudioOutputMode, StudioSettings
    from studio.ui.main_window import MainWindow
    from studio.ui.theme import apply_theme

    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_theme(app)
    core = CoreSettings(layout=Layout.CANVAS, canvas_height_px=720, fps=25.0, device="cpu", chunk_frames=4,
                        batch_frames=4, measure_baseline=True, optimizations=default_optimizations("cpu", "builtin"))
    settings = StudioSettings(core=core, audio_output=AudioOutputMode.NONE, default_voice="espeak:en-us")
    w = MainWindow(runtime_settings=settings, settings=QSettings(str(home / "studio.ini"), QSettings.IniFormat))
    w.resize(1920, 1080)
    w.show()
    t0 = time.monotonic()

    def pump_until(what, seconds: float = a.timeout) -> None:
        end = time.monotonic() + seconds
        while not what():
            if time.monotonic() > end:
                raise SystemExit(f"gave up after {seconds:g} s (state {w.state.label})")
            app.processEvents()
            time.sleep(0.01)

    pump_until(lambda: w.anchor_name != "" and w.runtime.latest_frame() is not None)
    w.rundown.set_programme_graphics(Graphics(role="Evening news", clock=True,
                                              ticker=("Two anchors on one programme, rows of one warp",
                                                      "Listeners blink, nod and turn toward the speaker")))
    form = w.rundown.cast_form
    for _ in range(2):
        form.add_button.click()
    for row, name in zip(form.rows, ("Eileen Collins", "Grace Hopper")):
        row.name_edit.setText(name)
        row.name_edit.editingFinished.emit()
    hopper = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    md = QMimeData()
    md.setUrls([QUrl.fromLocalFile(str(hopper))])
    row = form.rows[1]
    QApplication.sendEvent(row, QDragEnterEvent(QPoint(5, 5), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier))
    QApplication.sendEvent(row, QDropEvent(QPointF(5, 5), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier))
    w.rundown.set_segments([
        Segment("Opening", "Good evening. Tonight the city opens its new tram line, and Grace has the details.",
                "espeak:en-us", anchor="Eileen Collins"),
        Segment("Transport", "Thank you, Eileen. From Monday the trams run every six minutes, day and night, and "
                "the first week is free for everyone.", "espeak:en-us", anchor="Grace Hopper")])
    pump_until(lambda: w.cast_names == ("Eileen Collins", "Grace Hopper"))
    cast_s = time.monotonic() - t0
    w.rundown.list.setCurrentRow(0)
    w.rundown.toggle_live()
    pump_until(lambda: w.state == RuntimeState.LIVE and w.telemetry is not None and w.telemetry.segment_index == 1)
    pump_until(lambda: w.teleprompter.current_word >= 6, 30)
    image = w.grab().toImage()
    frame = w.runtime.latest_frame().image

    from PIL import Image

    buf = io.BytesIO()
    from PySide6.QtCore import QBuffer, QIODevice

    qbuf = QBuffer()
    qbuf.open(QIODevice.WriteOnly)
    image.save(qbuf, "PNG")
    png = Image.open(io.BytesIO(bytes(qbuf.data())))
    png.convert("RGB").save(buf, "PNG", optimize=True)
    if buf.tell() > MAX_BYTES:  # a palette of 256 colours keeps the UI's text sharp at a third of the size
        buf = io.BytesIO()
        png.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT).save(buf, "PNG", optimize=True)
    a.out.write_bytes(buf.getvalue())
    if a.frame is not None:
        Image.fromarray(frame).save(a.frame)
    print(f"wrote {a.out} ({buf.tell() / 1e3:.0f} kB, {image.width()}x{image.height()}); programme frame "
          f"{frame.shape[1]}x{frame.shape[0]}; cast on air {cast_s:.1f} s after the window opened; "
          f"{w.telemetry.fps_shown:.1f} fps shown; load {os.getloadavg()[0]:.1f}")
    w.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
