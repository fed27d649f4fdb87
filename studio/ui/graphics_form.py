"""The rundown's broadcast graphics, edited: the programme's name strap, ticker, clock and logo, and the current
segment's over-the-shoulder headline and its transition (``studio.graphics.look.Graphics``)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLineEdit, QPlainTextEdit, QPushButton, QVBoxLayout,
    QWidget,
)

from studio.graphics.look import Graphics


class GraphicsForm(QWidget):
    """Emits ``programme_changed`` and ``segment_changed`` when the producer edits a field."""

    programme_changed = Signal()
    segment_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._loading = False
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("Presenter's name (name strap)")
        self.role_edit = QLineEdit()
        self.role_edit.setPlaceholderText("Role, e.g. Evening news")
        self.ticker_edit = QPlainTextEdit()
        self.ticker_edit.setPlaceholderText("Ticker: one line per item")
        self.ticker_edit.setMaximumHeight(64)
        self.clock_check = QCheckBox("Clock")
        self.logo_edit = QLineEdit()
        self.logo_edit.setPlaceholderText("Channel logo image (top right)")
        self.logo_button = QPushButton("…")
        self.logo_button.setToolTip("Choose the channel logo")
        self.logo_button.clicked.connect(self._choose_logo)
        self.headline_edit = QLineEdit()
        self.headline_edit.setPlaceholderText("Headline beside the presenter (left / right placement)")
        self.dissolve_check = QCheckBox("Dissolve into this segment")
        logo_row = QHBoxLayout()
        logo_row.addWidget(self.logo_edit, 1)
        logo_row.addWidget(self.logo_button)
        prog = QGroupBox("Programme graphics")
        pf = QFormLayout(prog)
        pf.addRow("Name", self.name_edit)
        pf.addRow("Role", self.role_edit)
        pf.addRow("Ticker", self.ticker_edit)
        pf.addRow("Logo", logo_row)
        pf.addRow("", self.clock_check)
        seg = QGroupBox("This segment")
        sf = QFormLayout(seg)
        sf.addRow("Headline", self.headline_edit)
        sf.addRow("", self.dissolve_check)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(prog)
        lay.addWidget(seg)
        for w in (self.name_edit, self.role_edit, self.logo_edit):
            w.textEdited.connect(self._programme_edited)
        self.ticker_edit.textChanged.connect(self._programme_edited)
        self.clock_check.toggled.connect(self._programme_edited)
        self.headline_edit.textEdited.connect(self._segment_edited)
        self.dissolve_check.toggled.connect(self._segment_edited)

    def _choose_logo(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Channel logo", "", "Images (*.png *.jpg *.jpeg *.webp)")
        if path:
            self.logo_edit.setText(path)
            self._programme_edited()

    def _programme_edited(self, *args) -> None:
        if not self._loading:
            self.programme_changed.emit()

    def _segment_edited(self, *args) -> None:
        if not self._loading:
            self.segment_changed.emit()

    def programme(self) -> Graphics:
        lines = tuple(t.strip() for t in self.ticker_edit.toPlainText().splitlines() if t.strip())
        return Graphics(name=self.name_edit.text().strip() or None, role=self.role_edit.text().strip() or None,
                        ticker=lines or None, clock=True if self.clock_check.isChecked() else None,
                        logo=self.logo_edit.text().strip() or None)

    def set_programme(self, g: Graphics) -> None:
        self._loading = True
        self.name_edit.setText(g.name or "")
        self.role_edit.setText(g.role or "")
        self.ticker_edit.setPlainText("\n".join(g.ticker or ()))
        self.clock_check.setChecked(bool(g.clock))
        self.logo_edit.setText(g.logo or "")
        self._loading = False

    def segment(self, base: Graphics | None) -> Graphics | None:
        """``base`` (the segment's graphics) with this form's segment fields; None when nothing is set."""
        g = base or Graphics()
        from dataclasses import replace

        g = replace(g, headline=self.headline_edit.text().strip() or None,
                    transition="dissolve" if self.dissolve_check.isChecked() else None)
        return g if g.to_dict() else None

    def set_segment(self, g: Graphics | None, enabled: bool = True) -> None:
        self._loading = True
        self.headline_edit.setText((g.headline if g else None) or "")
        self.dissolve_check.setChecked(bool(g and g.transition == "dissolve"))
        for w in (self.headline_edit, self.dissolve_check):
            w.setEnabled(enabled)
        self._loading = False
