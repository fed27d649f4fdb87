"""The dark broadcast theme: one palette and one style sheet, applied to the whole application."""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QApplication

BG = "#0d1014"  # window
PANEL = "#151a21"  # dock bodies
PANEL_2 = "#1c222b"  # inputs, lists
BORDER = "#2a323d"
TEXT = "#dfe5ec"
MUTED = "#8792a2"
ACCENT = "#3d8bfd"  # selection, focus
ON_AIR = "#e5383b"  # live / recording
READY = "#2fbf71"  # healthy
WARN = "#f2a541"  # warnings, teleprompter highlight

STYLE_SHEET = f"""
QWidget {{ background: {BG}; color: {TEXT}; font-size: 10pt; }}
QMainWindow::separator {{ background: {BG}; width: 4px; height: 4px; }}
QDockWidget {{ titlebar-close-icon: none; color: {MUTED}; font-weight: 600; }}
QDockWidget::title {{ background: {BG}; padding: 6px 10px 4px 10px; text-align: left; }}
QDockWidget > QWidget {{ background: {PANEL}; border: 1px solid {BORDER}; border-radius: 6px; }}
QLabel {{ background: transparent; }}
QLabel[role="muted"] {{ color: {MUTED}; }}
QLabel[role="error"] {{ color: #ff8a8a; background: #3a1719; border: 1px solid #6b2428; border-radius: 4px;
    padding: 6px; }}
QLabel[role="notice"] {{ color: {WARN}; background: #2e2412; border: 1px solid #5a4417; border-radius: 4px;
    padding: 6px; }}
QLabel[role="title"] {{ font-size: 12pt; font-weight: 600; }}
QLabel[role="clock"] {{ font-family: "DejaVu Sans Mono", monospace; font-size: 16pt; font-weight: 600; }}
QPushButton {{ background: {PANEL_2}; border: 1px solid {BORDER}; border-radius: 5px; padding: 6px 14px; }}
QPushButton:hover {{ border-color: {ACCENT}; }}
QPushButton:pressed {{ background: #11151b; }}
QPushButton:disabled {{ color: #55606e; border-color: #222831; }}
QPushButton[role="golive"] {{ background: #173d2a; border: 1px solid {READY}; color: #c9f5dc; font-weight: 700;
    font-size: 11pt; padding: 9px 18px; }}
QPushButton[role="golive"][live="true"] {{ background: {ON_AIR}; border-color: #ff6b6d; color: white; }}
QPushButton[role="mode"] {{ font-weight: 700; padding: 6px 16px; color: {MUTED}; border-radius: 0; }}
QPushButton[role="mode"]:checked {{ background: #1f3a63; border-color: {ACCENT}; color: white; }}
QPushButton[role="record"] {{ background: #3a1719; border: 1px solid {ON_AIR}; color: #ffd6d6; font-weight: 700;
    padding: 9px 18px; }}
QPushButton[role="record"][recording="true"] {{ background: {ON_AIR}; color: white; }}
QLineEdit, QPlainTextEdit, QTextEdit, QComboBox, QListWidget, QTextBrowser {{ background: {PANEL_2};
    border: 1px solid {BORDER}; border-radius: 4px; padding: 4px; selection-background-color: {ACCENT}; }}
QLineEdit:focus, QPlainTextEdit:focus, QComboBox:focus, QListWidget:focus {{ border-color: {ACCENT}; }}
QComboBox QAbstractItemView {{ background: {PANEL_2}; border: 1px solid {BORDER}; selection-background-color: {ACCENT}; }}
QListWidget::item {{ padding: 6px 4px; border-bottom: 1px solid {BORDER}; }}
QListWidget::item:selected {{ background: #1f3a63; color: white; }}
QProgressBar {{ background: {PANEL_2}; border: 1px solid {BORDER}; border-radius: 4px; height: 14px;
    text-align: center; color: {TEXT}; }}
QProgressBar::chunk {{ background: {ACCENT}; border-radius: 3px; }}
QStatusBar {{ background: #0a0c10; color: {MUTED}; border-top: 1px solid {BORDER}; }}
QStatusBar QLabel {{ padding: 0 10px; border-left: 1px solid {BORDER}; }}
QToolTip {{ background: {PANEL_2}; color: {TEXT}; border: 1px solid {BORDER}; }}
QScrollBar:vertical {{ background: {PANEL}; width: 10px; }}
QScrollBar::handle:vertical {{ background: {BORDER}; border-radius: 4px; min-height: 20px; }}
QScrollBar::add-line, QScrollBar::sub-line {{ height: 0; }}
QMenuBar {{ background: {BG}; }} QMenuBar::item:selected {{ background: {PANEL_2}; }}
QMenu {{ background: {PANEL}; border: 1px solid {BORDER}; }} QMenu::item:selected {{ background: {ACCENT}; }}
"""


def apply_theme(app: QApplication) -> None:
    """Fusion style + dark palette + the style sheet (the palette covers what the sheet does not reach)."""
    app.setStyle("Fusion")
    pal = QPalette()
    for role, colour in (
        (QPalette.Window, BG), (QPalette.WindowText, TEXT), (QPalette.Base, PANEL_2), (QPalette.AlternateBase, PANEL),
        (QPalette.Text, TEXT), (QPalette.Button, PANEL_2), (QPalette.ButtonText, TEXT), (QPalette.Highlight, ACCENT),
        (QPalette.HighlightedText, "#ffffff"), (QPalette.ToolTipBase, PANEL_2), (QPalette.ToolTipText, TEXT),
        (QPalette.PlaceholderText, MUTED),
    ):
        pal.setColor(role, QColor(colour))
    app.setPalette(pal)
    font = QFont()
    font.setFamilies(["Inter", "Noto Sans", "DejaVu Sans", "Sans Serif"])
    font.setPointSizeF(10)
    app.setFont(font)
    app.setStyleSheet(STYLE_SHEET)


def repolish(widget) -> None:
    """Re-apply the style sheet after a dynamic property (``live``, ``recording``, ``role``) changed."""
    widget.style().unpolish(widget)
    widget.style().polish(widget)
    widget.update()
