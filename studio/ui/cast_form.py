"""The rundown's cast, edited: up to four anchors (a name, a portrait chosen or dropped, a voice) and how a cast of
several is shown (``studio.pipeline.cast``). The anchors' faces are built by the studio runtime; what it reports
(progress, a portrait it could not use) is shown here, one line per anchor."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox, QFileDialog, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton, QVBoxLayout,
    QWidget,
)

from studio.contracts import CastLayout
from studio.pipeline.cast import MAX_CAST, Member

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}
IMAGE_FILTER = "Images (*.jpg *.jpeg *.png *.bmp *.webp *.tif *.tiff)"
SEGMENT_VOICE = "segment's voice"  # a member without a voice of its own: each segment's voice
LAYOUTS = ((CastLayout.TWO_SHOT, "Two-shot: all on the set"), (CastLayout.CUT, "Cut to the speaker"))


def dropped_image(event) -> Path | None:
    """The first image file of a drag-and-drop event, or None."""
    md = event.mimeData()
    if not md.hasUrls():
        return None
    for url in md.urls():
        p = Path(url.toLocalFile())
        if p.suffix.lower() in IMAGE_SUFFIXES:
            return p
    return None


class MemberRow(QWidget):
    """One anchor: name and voice on the first line, the portrait (a file dialog, or an image dropped on the row) on
    the second, and why the portrait cannot be used under them. Emits ``edited`` after a change, ``renamed(old,
    new)`` after a valid new name and ``remove_requested``."""

    edited = Signal()
    renamed = Signal(str, str)
    remove_requested = Signal()

    def __init__(self, member: Member, voices: list[str], taken, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._taken = taken  # () -> the other rows' names
        self.setAcceptDrops(True)
        self.name_edit = QLineEdit(member.name)
        self.name_edit.setPlaceholderText("Name (name strap)")
        self.name_edit.editingFinished.connect(self._name_done)
        self._name = member.name
        self.voice_combo = QComboBox()
        self.voice_combo.setToolTip("This anchor's voice (the segment's own voice when none)")
        self.set_voices(voices, member.voice)
        self.voice_combo.currentIndexChanged.connect(lambda *_: self.edited.emit())
        self.remove_button = QPushButton("✕")
        self.remove_button.setToolTip("Remove this anchor from the cast")
        self.remove_button.clicked.connect(self.remove_requested.emit)
        self.portrait_edit = QLineEdit(str(member.portrait) if member.portrait else "")
        self.portrait_edit.setPlaceholderText("Portrait: the built-in presenter (drop an image here)")
        self.portrait_edit.setAcceptDrops(False)  # the row takes the drop
        self.portrait_edit.editingFinished.connect(self._portrait_done)
        self.browse_button = QPushButton("…")
        self.browse_button.setToolTip("Choose this anchor's portrait")
        self.browse_button.clicked.connect(self.choose_portrait)
        self.error = QLabel("")
        self.error.setProperty("role", "error")
        self.error.setWordWrap(True)
        self.error.setVisible(False)
        top = QHBoxLayout()
        top.addWidget(self.name_edit, 1)
        top.addWidget(self.voice_combo, 1)
        top.addWidget(self.remove_button)
        bottom = QHBoxLayout()
        bottom.addWidget(self.portrait_edit, 1)
        bottom.addWidget(self.browse_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 2)
        lay.setSpacing(3)
        lay.addLayout(top)
        lay.addLayout(bottom)
        lay.addWidget(self.error)

    def member(self) -> Member:
        text = self.portrait_edit.text().strip()
        return Member(name=self._name, portrait=Path(text) if text else None, voice=self.voice_combo.currentData())

    def set_voices(self, voices: list[str], current: str | None = None) -> None:
        current = current if current is not None else self.voice_combo.currentData()
        self.voice_combo.blockSignals(True)
        self.voice_combo.clear()
        self.voice_combo.addItem(SEGMENT_VOICE, None)
        for v in voices:
            self.voice_combo.addItem(v, v)
        if current and self.voice_combo.findData(current) < 0:
            self.voice_combo.addItem(current, current)  # not installed here: kept, the speech says so on air
        self.voice_combo.setCurrentIndex(max(0, self.voice_combo.findData(current)) if current else 0)
        self.voice_combo.blockSignals(False)

    def show_error(self, message: str) -> None:
        self.error.setText(message)
        self.error.setVisible(bool(message))

    def set_portrait(self, path: Path | None) -> None:
        self.portrait_edit.setText(str(path) if path else "")
        self._portrait_done()

    def choose_portrait(self) -> None:
        current = self.portrait_edit.text().strip()
        start = str(Path(current).parent) if current else str(Path.home())
        name, _ = QFileDialog.getOpenFileName(self, f"Portrait of {self._name}", start, IMAGE_FILTER)
        if name:
            self.set_portrait(Path(name))

    def _portrait_done(self) -> None:
        self.show_error("")
        self.edited.emit()

    def _name_done(self) -> None:
        new = self.name_edit.text().strip()
        if new == self._name:
            return
        if not new or new in self._taken(self):
            self.name_edit.setText(self._name)
            self.show_error("Give each anchor a name of its own: the segments name their speaker by it.")
            return
        old, self._name = self._name, new
        self.show_error("")
        self.renamed.emit(old, new)
        self.edited.emit()

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt)
        if dropped_image(event) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802 (Qt)
        path = dropped_image(event)
        if path is not None:
            event.acceptProposedAction()
            self.set_portrait(path)


class CastForm(QGroupBox):
    """The cast (module docstring). Emits ``changed`` when the cast or the layout changes, ``renamed(old, new)`` and
    ``removed(name)`` so that the segments' speakers follow."""

    changed = Signal()
    renamed = Signal(str, str)
    removed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Cast", parent)
        self.rows: list[MemberRow] = []
        self._voices: list[str] = []
        self.hint = QLabel("")
        self.hint.setProperty("role", "muted")
        self.hint.setWordWrap(True)
        self.add_button = QPushButton("+ Anchor")
        self.add_button.setToolTip(f"Add an anchor to the cast (up to {MAX_CAST})")
        self.add_button.clicked.connect(self.add_member)
        self.layout_combo = QComboBox()
        for layout, text in LAYOUTS:
            self.layout_combo.addItem(text, layout)
        self.layout_combo.setToolTip("How a cast of two or more is on the programme")
        self.layout_combo.currentIndexChanged.connect(lambda *_: self.changed.emit())
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 100)
        self.progress_bar.setVisible(False)
        self.status = QLabel("")
        self.status.setProperty("role", "muted")
        self.status.setWordWrap(True)
        self._rows_box = QVBoxLayout()
        self._rows_box.setSpacing(6)
        head = QHBoxLayout()
        head.addWidget(self.add_button)
        head.addWidget(self.layout_combo, 1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.hint)
        lay.addLayout(self._rows_box)
        lay.addLayout(head)
        lay.addWidget(self.progress_bar)
        lay.addWidget(self.status)
        self._update_controls()

    # -- data -------------------------------------------------------------------------------------------------

    def cast(self) -> tuple[Member, ...]:
        return tuple(r.member() for r in self.rows)

    def names(self) -> list[str]:
        return [r.member().name for r in self.rows]

    def set_cast(self, members) -> None:
        for r in self.rows:
            r.deleteLater()
        self.rows = []
        for m in tuple(members)[:MAX_CAST]:
            self._add_row(m)
        self._update_controls()

    def layout_choice(self) -> CastLayout:
        return self.layout_combo.currentData()

    def set_layout_choice(self, layout: CastLayout) -> None:
        self.layout_combo.blockSignals(True)
        self.layout_combo.setCurrentIndex(max(0, self.layout_combo.findData(layout)))
        self.layout_combo.blockSignals(False)

    def set_voices(self, names: list[str]) -> None:
        self._voices = list(names)
        for r in self.rows:
            r.set_voices(self._voices)

    def add_member(self) -> None:
        if len(self.rows) >= MAX_CAST:
            return
        taken = set(self.names())
        name = next(f"Anchor {i}" for i in range(1, MAX_CAST + 2) if f"Anchor {i}" not in taken)
        row = self._add_row(Member(name))
        self._update_controls()
        self.changed.emit()
        row.name_edit.setFocus()
        row.name_edit.selectAll()

    def remove_member(self, row: MemberRow) -> None:
        name = row.member().name
        self.rows.remove(row)
        row.deleteLater()
        self._update_controls()
        self.removed.emit(name)
        self.changed.emit()

    # -- what the studio reports ----------------------------------------------------------------------------

    def show_progress(self, fraction: float, message: str) -> None:
        self.progress_bar.setVisible(True)
        self.progress_bar.setValue(int(round(fraction * 100)))
        self.status.setText(message)

    def show_on_air(self, names: tuple[str, ...]) -> None:
        self.progress_bar.setVisible(False)
        self.status.setText(f"On the programme: {', '.join(names)}" if names else "")

    def show_error(self, name: str, message: str) -> None:
        """``message`` under the anchor ``name`` (the status line when no row has that name)."""
        self.progress_bar.setVisible(False)
        row = next((r for r in self.rows if r.member().name == name), None)
        if row is not None:
            row.show_error(message)
            self.status.setText("")
        else:
            self.status.setText(message)

    # -- rows -------------------------------------------------------------------------------------------------

    def _add_row(self, member: Member) -> MemberRow:
        row = MemberRow(member, self._voices, lambda me: {r.member().name for r in self.rows if r is not me})
        row.edited.connect(self.changed.emit)
        row.renamed.connect(self.renamed.emit)
        row.remove_requested.connect(lambda r=row: self.remove_member(r))
        self.rows.append(row)
        self._rows_box.addWidget(row)
        return row

    def _update_controls(self) -> None:
        n = len(self.rows)
        self.add_button.setEnabled(n < MAX_CAST)
        self.layout_combo.setEnabled(n >= 2)
        self.hint.setVisible(n < 2)
        self.hint.setText("No cast: the ANCHOR panel's portrait speaks every segment. Add two anchors or more for "
                          "a two-shot or a roundtable." if n == 0 else
                          "One anchor: its name and voice are used, the ANCHOR panel's portrait stays on the "
                          "programme. Add another for a two-shot.")
        if n >= MAX_CAST:
            self.add_button.setToolTip(f"A cast has at most {MAX_CAST} anchors")
