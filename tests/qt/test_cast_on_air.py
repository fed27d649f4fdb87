"""The studio window with a rundown's cast: a portrait that cannot be used is one line under its anchor; a cast of two
goes on the programme (both faces in the preview's frame), each segment is spoken by its speaker's voice with the other
listening, through the one core; the layout cuts to the speaker; an empty cast brings the one anchor back.

The window renders with the built-in engine registered under a test name that keeps the coefficients of every call
the core makes (as tests/integration/test_rundown_render.py does), so that the turns are counted on what was
rendered. One window for the module; eSpeak voices keep speech fast.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, QSettings, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from studio.contracts import CastLayout
from studio.contracts.coeffs import OPENING_COEFFS
from studio.pipeline.rundown import Segment
from studio.pipeline.settings import CoreSettings
from studio.pipeline.telemetry import RuntimeState
from studio.runtime import AudioOutputMode, StudioSettings
from studio.ui.main_window import MainWindow
from studio.ui.theme import apply_theme

pytestmark = pytest.mark.qt

ENGINE = "test-cast-studio"
SIZE = 96
SEGMENTS = [Segment("Opening", "Good evening. The river rose over its banks tonight, and the town prepared.",
                    "espeak:en-us", anchor="Anna"),
            Segment("Report", "Thank you, Anna. By noon the water had reached the old bridge.", "espeak:en-us",
                    anchor="Ben")]


@pytest.fixture(scope="module")
def recorded():
    """Registers ``ENGINE``: the built-in engine, each call's coefficients kept (cast: K x rows x N)."""
    from studio.contracts import GENERATORS
    from studio.generators.builtin import BuiltinGenerator

    calls: list[np.ndarray] = []

    class Recorded(BuiltinGenerator):
        def generate(self, coeffs, features=None, **rows):
            calls.append(coeffs.cpu().numpy().copy())
            return super().generate(coeffs, features, **rows)

        def render_span(self, coeffs, strides, carry, **rows):
            calls.append(coeffs.cpu().numpy().copy())
            return super().render_span(coeffs, strides, carry, **rows)

    GENERATORS.names()
    GENERATORS.register(ENGINE)(lambda **kw: Recorded(**kw))
    yield calls
    GENERATORS._factories.pop(ENGINE, None)


@pytest.fixture(scope="module")
def window(qapp, recorded, tmp_path_factory: pytest.TempPathFactory):
    """The window; the producer's saved rundown, which it edits and saves, is put back as it was afterwards (other
    modules' windows load it)."""
    from studio.pipeline.rundown import user_rundown_path

    saved = user_rundown_path()
    before = saved.read_bytes() if saved.is_file() else None
    apply_theme(qapp)
    ini = tmp_path_factory.mktemp("settings") / "studio.ini"
    settings = StudioSettings(core=CoreSettings(size_px=SIZE, fps=25.0, chunk_frames=4, batch_frames=4,
                                                engine=ENGINE, measure_baseline=False),
                              audio_output=AudioOutputMode.NONE, warm_up_voice=False, warm_up_microphone=False,
                              default_voice="espeak:en-us")
    w = MainWindow(runtime_settings=settings, settings=QSettings(str(ini), QSettings.IniFormat))
    w.resize(1280, 800)
    w.show()
    yield w
    w.close()
    if before is None:
        saved.unlink(missing_ok=True)
    else:
        saved.write_bytes(before)
    assert not w.bridge.running


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from PIL import Image

    from studio.presenter.anchor import default_portrait

    folder = tmp_path_factory.mktemp("faces")
    Image.fromarray(np.ascontiguousarray(default_portrait()[:, ::-1])).save(folder / "ben.png")
    (folder / "broken.png").write_text("this is not an image")
    return {"ben": folder / "ben.png", "broken": folder / "broken.png"}


def _drop(row, path: Path) -> None:
    md = QMimeData()
    md.setUrls([QUrl.fromLocalFile(str(path))])
    QApplication.sendEvent(row, QDragEnterEvent(QPoint(5, 5), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier))
    QApplication.sendEvent(row, QDropEvent(QPointF(5, 5), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier))


def _rename(qtbot, row, name: str) -> None:
    row.name_edit.selectAll()
    qtbot.keyClicks(row.name_edit, name)
    row.name_edit.editingFinished.emit()


def _mouth(c: np.ndarray) -> np.ndarray:
    """How far the mouth is open (a listener's small smile spreads closed lips: not counted)."""
    return np.abs(c[..., list(OPENING_COEFFS)]).sum(-1)


def _frame(w: MainWindow) -> np.ndarray:
    f = w.runtime.latest_frame()
    return f.image.astype(np.float32)


def test_a_cast_of_two_goes_on_air_and_takes_turns(qtbot, window: MainWindow, recorded, faces) -> None:
    w = window
    qtbot.waitUntil(lambda: w.anchor_name != "" and w.runtime.latest_frame() is not None, timeout=120_000)
    qtbot.waitUntil(lambda: _frame(w).shape == (SIZE, SIZE, 3), timeout=30_000)
    alone = _frame(w)  # the one anchor (the built-in portrait); Ben's portrait is it mirrored

    # a cast of two whose second portrait is not an image: one line under Ben, the one anchor stays on air
    form = w.rundown.cast_form
    w.rundown.set_voices(["espeak:en-us", "espeak:en-gb"])
    for _ in range(2):
        qtbot.mouseClick(form.add_button, Qt.LeftButton)
    anna, ben = form.rows
    _rename(qtbot, anna, "Anna")
    _rename(qtbot, ben, "Ben")
    ben.voice_combo.setCurrentIndex(ben.voice_combo.findData("espeak:en-gb"))
    _drop(ben, faces["broken"])
    qtbot.waitUntil(lambda: not ben.error.isHidden(), timeout=60_000)
    assert ben.error.text().startswith("Ben: ") and "broken.png" in ben.error.text()
    assert "\n" not in ben.error.text() and "Traceback" not in ben.error.text()
    assert anna.error.isHidden() and w.cast_names == ()
    assert _frame(w).shape == (SIZE, SIZE, 3)

    # a good portrait, and Go live at once: the show waits for the cast's faces, then Anna speaks, then Ben in his
    # own voice; never both mouths at once, each listening while the other speaks
    recorded.clear()
    voices: dict[int, tuple[str, int]] = {}

    def finished() -> bool:
        for it in list(w.runtime.rundown.items):  # what the rundown room scheduled: (voice, speaker row) per row
            voices[it.on_air.row] = (it.voice, it.on_air.speaker)
        return w.state == RuntimeState.IDLE and len(voices) == 2

    _drop(ben, faces["ben"])
    w.rundown.set_segments(SEGMENTS)
    w.rundown.list.setCurrentRow(0)
    w.rundown.toggle_live()
    qtbot.waitUntil(lambda: w.state == RuntimeState.LIVE, timeout=120_000)
    assert w.cast_names == ("Anna", "Ben") and ben.error.isHidden()
    qtbot.waitUntil(finished, timeout=120_000)
    assert voices == {0: ("espeak:en-us", 0), 1: ("espeak:en-gb", 1)}
    calls = list(recorded)
    mouth = [_mouth(c) for c in calls]
    assert all(m.max() == 0 for c, m in zip(calls, mouth) if c.ndim == 2)  # the one anchor spoke nothing
    mouth = np.concatenate([m for c, m in zip(calls, mouth) if c.ndim == 3])  # T x 2: the cast's rows
    assert not np.any((mouth[:, 0] > 0) & (mouth[:, 1] > 0))
    who = np.where(mouth[:, 0] > 0, 0, np.where(mouth[:, 1] > 0, 1, -1))
    spoken = who[who >= 0]
    turns = [int(x) for i, x in enumerate(spoken) if i == 0 or x != spoken[i - 1]]
    assert turns == [0, 1]

    # both anchors on the programme, side by side, in the preview's latest frame
    frame = _frame(w)
    assert frame.shape == (SIZE, 2 * SIZE, 3)
    left, right = frame[:, :SIZE], frame[:, SIZE:]
    mirrored = alone[:, ::-1]
    assert np.abs(left - alone).mean() < np.abs(left - mirrored).mean()  # Anna: the built-in portrait
    assert np.abs(right - mirrored).mean() < np.abs(right - alone).mean()  # Ben: it mirrored
    assert w.windowTitle().endswith("Anna & Ben")

    # cut to the speaker: one anchor's picture at a time
    form.layout_combo.setCurrentIndex(form.layout_combo.findData(CastLayout.CUT))
    qtbot.waitUntil(lambda: _frame(w).shape == (SIZE, SIZE, 3), timeout=60_000)
    assert w.settings.value("cast/layout") == "cut"

    # no cast: the one anchor again
    for row in list(form.rows):
        qtbot.mouseClick(row.remove_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: w.cast_names == (), timeout=60_000)
    assert w.rundown.segments()[1].anchor is None and w.rundown.cast() == ()
