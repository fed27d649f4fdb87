"""Start the studio window: ``run_app`` is what ``python main.py`` calls."""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)


def _install_error_hooks(window) -> None:
    """One place for uncaught errors (GUI thread and other threads): log them, and say so in the window."""
    from PySide6.QtCore import QTimer

    def show(message: str) -> None:
        QTimer.singleShot(0, window, lambda: window.statusBar().showMessage(message, 15000))

    def hook(exc_type, exc, tb) -> None:
        log.error("uncaught error", exc_info=(exc_type, exc, tb))
        show(f"Internal error: {exc}. Details are in the log file.")

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        log.error("uncaught error in thread %s", args.thread.name if args.thread else "?",
                  exc_info=(args.exc_type, args.exc_value, args.exc_traceback))
        show(f"Internal error in {args.thread.name if args.thread else 'a worker'}: {args.exc_value}.")

    sys.excepthook = hook
    threading.excepthook = thread_hook


def run_app(anchor: Path | None = None) -> int:
    """Open the main window (with ``anchor``, or the last one used) and run the event loop; returns its exit code."""
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    from PySide6.QtWidgets import QApplication

    from studio.ui.main_window import MainWindow
    from studio.ui.theme import apply_theme

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("NewsStudio")
    app.setOrganizationName("NewsStudio")
    apply_theme(app)
    window = MainWindow(anchor=Path(anchor) if anchor else None)
    _install_error_hooks(window)
    if window.first_start:
        window.showMaximized()  # first start: the program preview gets the whole screen
    else:
        window.show()
    return int(app.exec())
