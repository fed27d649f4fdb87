"""The rundown (segments to edit, reorder, add, remove; Go live; the cast and each segment's speaker) and the
teleprompter that follows the words."""

from __future__ import annotations

import html
from dataclasses import replace

from PySide6.QtGui import QColor
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView, QComboBox, QHBoxLayout, QLabel, QLineEdit, QListWidget, QListWidgetItem, QPlainTextEdit,
    QPushButton, QScrollArea, QSizePolicy, QTextBrowser, QVBoxLayout, QWidget,
)

from studio.pipeline.cast import segment_voice, speaker_index
from studio.pipeline.rundown import Segment
from studio.speech.types import WordTiming
from studio.ui import theme
from studio.ui.cast_form import CastForm
from studio.ui.graphics_form import GraphicsForm

_ROLE = Qt.UserRole


class RundownPanel(QWidget):
    """Segments in air order. Emits ``go_live_requested(rows, segments)`` and ``stop_requested``."""

    go_live_requested = Signal(list, list)  # rundown rows, Segment objects
    stop_requested = Signal()
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._live = False
        self._loading = False
        self.list = QListWidget()
        self.list.setDragDropMode(QAbstractItemView.InternalMove)
        self.list.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.list.setWordWrap(True)
        self.list.currentRowChanged.connect(self._show_current)
        self.list.model().rowsMoved.connect(lambda *a: self._renumber())
        self.add_button = QPushButton("+ Add")
        self.remove_button = QPushButton("Remove")
        self.up_button = QPushButton("▲")
        self.down_button = QPushButton("▼")
        for b, tip in ((self.add_button, "Add a segment after the selected one"),
                       (self.remove_button, "Remove the selected segments"),
                       (self.up_button, "Move up"), (self.down_button, "Move down")):
            b.setToolTip(tip)
        self.add_button.clicked.connect(self.add_segment)
        self.remove_button.clicked.connect(self.remove_selected)
        self.up_button.clicked.connect(lambda: self.move_current(-1))
        self.down_button.clicked.connect(lambda: self.move_current(1))
        self.go_button = QPushButton("GO LIVE  (Space)")
        self.go_button.setProperty("role", "golive")
        self.go_button.setProperty("live", False)
        self.go_button.setToolTip("Speak the selected segments in order (all from the current one if one is selected)")
        self.go_button.clicked.connect(self.toggle_live)

        self.title_edit = QLineEdit()
        self.title_edit.setPlaceholderText("Segment title")
        self.voice_combo = QComboBox()
        self.voice_combo.setToolTip("Voice of this segment")
        self.text_edit = QPlainTextEdit()
        self.text_edit.setPlaceholderText("What the presenter says…")
        self.text_edit.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self.title_edit.textEdited.connect(self._edited)
        self.text_edit.textChanged.connect(self._edited)
        self.voice_combo.currentTextChanged.connect(self._edited)
        self.speaker_combo = QComboBox()
        self.speaker_combo.setToolTip("Who speaks this segment (the cast's first anchor when none is chosen)")
        self.speaker_combo.currentIndexChanged.connect(self._edited)

        buttons = QHBoxLayout()
        for b in (self.add_button, self.remove_button, self.up_button, self.down_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        form_top = QHBoxLayout()
        form_top.addWidget(self.title_edit, 3)
        form_top.addWidget(self.voice_combo, 2)
        who = QHBoxLayout()  # with a cast: who speaks the segment (hidden without one)
        self.speaker_label = QLabel("Spoken by")
        self.speaker_label.setProperty("role", "muted")
        who.addWidget(self.speaker_label)
        who.addWidget(self.speaker_combo, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 10, 10, 10)
        lay.addWidget(self.list, 2)
        lay.addLayout(buttons)
        lay.addLayout(form_top)
        lay.addLayout(who)
        lay.addWidget(self.text_edit, 2)
        self.cast_form = CastForm()
        self.cast_form.changed.connect(self._cast_changed)
        self.cast_form.renamed.connect(lambda old, new: self._replace_speaker(old, new))
        self.cast_form.removed.connect(lambda name: self._replace_speaker(name, None))
        self.graphics = GraphicsForm()
        self.graphics.programme_changed.connect(self.changed.emit)
        self.graphics.segment_changed.connect(self._edited)
        # the cast and the graphics scroll when the dock is short, instead of squeezing over the other rows
        forms = QWidget()
        forms_lay = QVBoxLayout(forms)
        forms_lay.setContentsMargins(0, 0, 0, 0)
        forms_lay.addWidget(self.cast_form)
        forms_lay.addWidget(self.graphics)
        scroll = QScrollArea()
        scroll.setWidget(forms)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        lay.addWidget(scroll, 3)
        lay.addWidget(self.go_button)
        self._fill_speakers()

    # -- data ---------------------------------------------------------------------------------------------------

    def set_voices(self, names: list[str]) -> None:
        current = self.voice_combo.currentText()
        self._loading = True
        self.voice_combo.clear()
        self.voice_combo.addItems(names)
        if current:
            self.voice_combo.setCurrentText(current)
        self._loading = False
        self.cast_form.set_voices(names)

    def set_segments(self, segments: list[Segment]) -> None:
        """The segments in air order (a speaker who is not in the cast is dropped: the first anchor speaks)."""
        self.list.clear()
        names = set(self.cast_form.names())
        for seg in segments:
            item = QListWidgetItem()
            item.setData(_ROLE, seg if seg.anchor is None or seg.anchor in names else replace(seg, anchor=None))
            self.list.addItem(item)
        self._renumber()
        if segments:
            self.list.setCurrentRow(0)

    def programme_graphics(self):
        """The programme-wide graphics (``studio.graphics.look.Graphics``) as edited."""
        return self.graphics.programme()

    def set_programme_graphics(self, g) -> None:
        self.graphics.set_programme(g)

    def segments(self) -> list[Segment]:
        return [self.list.item(i).data(_ROLE) for i in range(self.list.count())]

    def cast(self) -> tuple:
        """The cast as edited (``studio.pipeline.cast.Member``s; empty: one anchor)."""
        return self.cast_form.cast()

    def set_cast(self, members) -> None:
        """Show ``members`` (before ``set_segments``: the speakers are checked against them)."""
        self.cast_form.set_cast(members)
        self._fill_speakers()

    # -- the cast and the speakers ------------------------------------------------------------------------------

    def _cast_changed(self) -> None:
        self._fill_speakers()
        self._renumber()

    def _fill_speakers(self) -> None:
        names = self.cast_form.names()
        loading, self._loading = self._loading, True
        self.speaker_combo.clear()
        self.speaker_combo.addItems(names)
        self.speaker_combo.setVisible(bool(names))
        self.speaker_label.setVisible(bool(names))
        self._loading = loading
        self._show_current(self.list.currentRow())

    def _replace_speaker(self, old: str, new: str | None) -> None:
        """The segments ``old`` spoke are spoken by ``new`` (None: the cast's first anchor)."""
        for i in range(self.list.count()):
            item = self.list.item(i)
            seg: Segment = item.data(_ROLE)
            if seg.anchor == old:
                item.setData(_ROLE, replace(seg, anchor=new))

    def _renumber(self) -> None:
        cast = self.cast()
        for i in range(self.list.count()):
            item = self.list.item(i)
            seg: Segment = item.data(_ROLE)
            who = f"{cast[speaker_index(cast, seg.anchor)].name}  ·  " if cast else ""
            item.setText(f"{i + 1:>2}   {seg.title}\n      {seg.word_count} words  ·  {who}"
                         f"{segment_voice(seg, cast)}")
        self.changed.emit()

    def _show_current(self, row: int) -> None:
        self._loading = True
        seg = self.list.item(row).data(_ROLE) if row >= 0 else None
        self.title_edit.setText(seg.title if seg else "")
        self.text_edit.setPlainText(seg.text if seg else "")
        if seg is not None:
            if self.voice_combo.findText(seg.voice) < 0:
                self.voice_combo.addItem(seg.voice)
            self.voice_combo.setCurrentText(seg.voice)
            cast = self.cast()
            self.speaker_combo.setCurrentIndex(speaker_index(cast, seg.anchor) if cast else -1)
        for w in (self.title_edit, self.text_edit, self.voice_combo, self.speaker_combo):
            w.setEnabled(seg is not None)
        self.graphics.set_segment(seg.graphics if seg else None, seg is not None)
        self._loading = False

    def _edited(self, *args) -> None:
        if self._loading:
            return
        item = self.list.currentItem()
        if item is None:
            return
        seg: Segment = item.data(_ROLE)
        item.setData(_ROLE, replace(seg, title=self.title_edit.text(), text=self.text_edit.toPlainText(),
                                    voice=self.voice_combo.currentText() or seg.voice,
                                    graphics=self.graphics.segment(seg.graphics),
                                    anchor=self.speaker_combo.currentText() or None))
        self._renumber()

    def add_segment(self, voice: str = "") -> None:
        voice = voice or self.voice_combo.currentText() or "piper:joe"
        row = self.list.currentRow() + 1 if self.list.currentRow() >= 0 else self.list.count()
        item = QListWidgetItem()
        item.setData(_ROLE, Segment(title="New segment", text="", voice=voice))
        self.list.insertItem(row, item)
        self._renumber()
        self.list.setCurrentRow(row)
        self.title_edit.setFocus()
        self.title_edit.selectAll()

    def remove_selected(self) -> None:
        rows = sorted({self.list.row(i) for i in self.list.selectedItems()}, reverse=True)
        for row in rows:
            self.list.takeItem(row)
        self._renumber()

    def move_current(self, delta: int) -> None:
        row = self.list.currentRow()
        new = row + delta
        if row < 0 or not 0 <= new < self.list.count():
            return
        item = self.list.takeItem(row)
        self.list.insertItem(new, item)
        self.list.setCurrentRow(new)
        self._renumber()

    def apply_voice_to_selected(self, voice: str) -> None:
        for item in self.list.selectedItems() or ([self.list.currentItem()] if self.list.currentItem() else []):
            item.setData(_ROLE, replace(item.data(_ROLE), voice=voice))
        self._renumber()
        self._show_current(self.list.currentRow())

    # -- going live ---------------------------------------------------------------------------------------------

    def selected_for_air(self) -> tuple[list[int], list[Segment]]:
        """Selected segments in rundown order; with one (or none) selected, everything from the current row on."""
        rows = sorted(self.list.row(i) for i in self.list.selectedItems())
        if len(rows) <= 1:
            start = max(0, self.list.currentRow())
            rows = list(range(start, self.list.count()))
        segs = [self.list.item(r).data(_ROLE) for r in rows]
        keep = [(r, s) for r, s in zip(rows, segs) if s.text.strip()]
        return [r for r, _ in keep], [s for _, s in keep]

    def toggle_live(self) -> None:
        if self._live:
            self.stop_requested.emit()
        else:
            rows, segs = self.selected_for_air()
            if segs:
                self.go_live_requested.emit(rows, segs)

    def set_live(self, live: bool) -> None:
        self._live = live
        self.go_button.setText("STOP  (Space)" if live else "GO LIVE  (Space)")
        self.go_button.setProperty("live", live)
        theme.repolish(self.go_button)

    def mark_on_air(self, row: int) -> None:
        for i in range(self.list.count()):
            f = self.list.item(i).font()
            f.setBold(i == row)
            self.list.item(i).setFont(f)
            self.list.item(i).setForeground(QColor(theme.ON_AIR) if i == row else self.list.palette().text().color())
        if 0 <= row < self.list.count():
            self.list.scrollToItem(self.list.item(row))


class Teleprompter(QWidget):
    """The segment on air in large type; words already spoken dim, the current word highlighted."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.header = QLabel("Teleprompter")
        self.header.setProperty("role", "muted")
        self.view = QTextBrowser()
        self.view.setOpenLinks(False)
        self.view.setStyleSheet("QTextBrowser { background: #07090c; border: none; padding: 14px; }")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 10, 10)
        lay.addWidget(self.header)
        lay.addWidget(self.view, 1)
        self._text = ""
        self._words: tuple[WordTiming, ...] = ()
        self._word = -2
        self.current_word = -1
        self.show_waiting("Select segments and press Go live.")

    def show_waiting(self, message: str) -> None:
        self._text, self._words, self._word = "", (), -2
        self.header.setText("Waiting")
        self.view.setHtml(f"<div style='color:{theme.MUTED}; font-size:16pt;'>{html.escape(message)}</div>")

    def set_segment(self, title: str, text: str, words: tuple[WordTiming, ...]) -> None:
        self._text, self._words, self._word = text, words, -2
        self.header.setText(f"ON AIR  ·  {title}")
        self.set_word(-1)

    def set_word(self, index: int) -> None:
        """Highlight word ``index`` (-1: none yet)."""
        if index == self._word or not self._text:
            return
        self._word = index
        self.current_word = index
        text, parts, pos = self._text, [], 0
        for i, w in enumerate(self._words):
            if w.char_start < 0 or w.char_start < pos:
                continue
            parts.append(self._span(text[pos:w.char_start], "past" if i <= index else "future"))
            kind = "now" if i == index else ("past" if i < index else "future")
            parts.append(self._span(text[w.char_start:w.char_end], kind))
            pos = w.char_end
        parts.append(self._span(text[pos:], "past" if index >= len(self._words) - 1 and index >= 0 else "future"))
        self.view.setHtml("<div style='font-size:22pt; line-height:140%;'>" + "".join(parts) + "</div>")
        if index >= 0:
            self.view.scrollToAnchor("now")

    @staticmethod
    def _span(s: str, kind: str) -> str:
        s = html.escape(s)
        if kind == "now":
            return (f"<a name='now'></a><span style='background:{theme.WARN}; color:#111; font-weight:700;'>"
                    f"{s}</span>")
        colour = "#5d6774" if kind == "past" else "#f2f5f8"
        return f"<span style='color:{colour};'>{s}</span>"
