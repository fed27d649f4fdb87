"""The rundown panel edits the cast (names, portraits chosen or dropped, voices) and each segment's speaker; both go
through the rundown file and come back, and a rundown without a cast still loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from studio.contracts import CastLayout
from studio.pipeline.cast import Member
from studio.pipeline.rundown import Segment, load_cast, load_rundown, save_rundown
from studio.ui.rundown_panel import RundownPanel

pytestmark = pytest.mark.qt

VOICES = ["espeak:en-us", "espeak:en-gb", "piper:joe"]


def _panel(qtbot) -> RundownPanel:
    panel = RundownPanel()
    qtbot.addWidget(panel)
    panel.show()  # a drop reaches a visible widget only
    panel.set_voices(VOICES)
    return panel


def _rename(qtbot, row, name: str) -> None:
    row.name_edit.selectAll()
    qtbot.keyClicks(row.name_edit, name)
    row.name_edit.editingFinished.emit()


def _drop(row, path: Path) -> None:
    """An image file dragged onto the member's row and dropped, as a file manager does it."""
    md = QMimeData()
    md.setUrls([QUrl.fromLocalFile(str(path))])
    enter = QDragEnterEvent(QPoint(5, 5), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(row, enter)
    assert enter.isAccepted()
    QApplication.sendEvent(row, QDropEvent(QPointF(5, 5), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier))


def test_the_cast_and_the_speakers_round_trip_through_the_file(qtbot, tmp_path: Path) -> None:
    (tmp_path / "faces").mkdir()
    ben_png = tmp_path / "faces" / "ben.png"
    ben_png.write_bytes(b"")  # only its path is saved here; the studio builds the face (tests/qt/test_cast_on_air.py)
    panel = _panel(qtbot)
    panel.set_segments([Segment("One", "Good evening.", "espeak:en-us"), Segment("Two", "The weather.", "piper:joe"),
                        Segment("Three", "Good night.", "piper:joe")])
    assert panel.speaker_combo.isHidden()  # no cast: no speakers to choose
    form = panel.cast_form
    qtbot.mouseClick(form.add_button, Qt.LeftButton)
    qtbot.mouseClick(form.add_button, Qt.LeftButton)
    anna, ben = form.rows
    _rename(qtbot, anna, "Anna")
    _rename(qtbot, ben, "Ben")
    _drop(ben, ben_png)
    ben.voice_combo.setCurrentIndex(ben.voice_combo.findData("espeak:en-gb"))
    assert panel.cast() == (Member("Anna"), Member("Ben", ben_png, "espeak:en-gb"))
    assert not panel.speaker_combo.isHidden()
    assert [panel.speaker_combo.itemText(i) for i in range(panel.speaker_combo.count())] == ["Anna", "Ben"]
    panel.list.setCurrentRow(1)
    panel.speaker_combo.setCurrentText("Ben")
    assert [s.anchor for s in panel.segments()] == [None, "Ben", None]
    assert "Ben" in panel.list.item(1).text() and "espeak:en-gb" in panel.list.item(1).text()  # his voice speaks
    form.layout_combo.setCurrentIndex(form.layout_combo.findData(CastLayout.CUT))
    assert form.layout_choice() is CastLayout.CUT

    path = save_rundown(panel.segments(), tmp_path / "rundown.json", graphics=panel.programme_graphics(),
                        cast=panel.cast())
    raw = json.loads(path.read_text())
    assert raw["cast"] == {"Anna": {}, "Ben": {"portrait": "faces/ben.png", "voice": "espeak:en-gb"}}
    assert [s.get("anchor") for s in raw["segments"]] == [None, "Ben", None]

    again = _panel(qtbot)
    again.set_cast(load_cast(path))
    again.set_segments(load_rundown(path))
    assert again.cast() == panel.cast() and again.segments() == panel.segments()
    again.list.setCurrentRow(1)
    assert again.speaker_combo.currentText() == "Ben"
    assert again.cast_form.rows[1].voice_combo.currentData() == "espeak:en-gb"


def test_renaming_and_removing_an_anchor_carry_to_the_segments(qtbot) -> None:
    panel = _panel(qtbot)
    panel.set_cast((Member("Anna"), Member("Ben")))
    panel.set_segments([Segment("One", "Hi.", anchor="Ben"), Segment("Two", "Bye.", anchor="Anna")])
    anna, ben = panel.cast_form.rows
    _rename(qtbot, ben, "Benedict")
    assert [s.anchor for s in panel.segments()] == ["Benedict", "Anna"]
    _rename(qtbot, anna, "Benedict")  # a name taken: refused in one line, the old name kept
    assert anna.member().name == "Anna" and not anna.error.isHidden()
    assert "name of its own" in anna.error.text()
    qtbot.mouseClick(ben.remove_button, Qt.LeftButton)
    assert panel.cast() == (Member("Anna"),)
    assert [s.anchor for s in panel.segments()] == [None, "Anna"]  # his segment: the first anchor speaks it
    for _ in range(5):
        qtbot.mouseClick(panel.cast_form.add_button, Qt.LeftButton)
    assert len(panel.cast()) == 4 and not panel.cast_form.add_button.isEnabled()


def test_a_rundown_without_a_cast_loads_and_saves_without_one(qtbot, tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": 1, "segments": [{"title": "A", "text": "Hi.", "voice": "piper:joe"}]}))
    panel = _panel(qtbot)
    panel.set_cast(load_cast(old))
    panel.set_segments(load_rundown(old))
    assert panel.cast() == () and panel.speaker_combo.isHidden()
    assert panel.segments() == [Segment("A", "Hi.", "piper:joe")]
    save_rundown(panel.segments(), old, cast=panel.cast())
    assert "cast" not in json.loads(old.read_text()) and load_rundown(old) == [Segment("A", "Hi.", "piper:joe")]


def test_a_speaker_missing_from_the_cast_is_dropped_on_loading(qtbot) -> None:
    panel = _panel(qtbot)
    panel.set_cast((Member("Anna"),))
    panel.set_segments([Segment("One", "Hi.", anchor="Zed")])
    assert panel.segments()[0].anchor is None
