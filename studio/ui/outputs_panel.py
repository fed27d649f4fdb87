"""The OUTPUTS panel: send the program live to OBS, ffmpeg, a streaming server, a browser or a virtual camera.

One row per output with a status light, bitrate, fps and dropped frames, read from the runtime on the window's one
timer (``refresh``); Start and Stop send commands to the runtime, which opens and closes the outputs off the GUI
thread. The browser page's address is shown where there is one.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from studio.contracts import OutputState

LIGHTS = {OutputState.ON: "#2fbf71", OutputState.STARTING: "#3d8bfd", OutputState.RECONNECTING: "#f2a541",
          OutputState.FAILED: "#e5383b", OutputState.OFF: "#55606e"}
EXAMPLES = ("rtmp://127.0.0.1/live/studio", "tcp://127.0.0.1:9000", "udp://127.0.0.1:9000", "ws://127.0.0.1:8765",
            "virtualcam")


class OutputsPanel(QWidget):
    """See the module docstring. ``start_requested(url, allow_remote)``, ``stop_requested(url)``."""

    start_requested = Signal(str, bool)
    stop_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.url = QComboBox()
        self.url.setEditable(True)
        self.url.addItems(EXAMPLES)
        self.url.setToolTip("rtmp://… (OBS, nginx-rtmp, a streaming service), tcp:// or udp://HOST:PORT (MPEG-TS to "
                            "ffmpeg or OBS), ws://127.0.0.1:PORT (a browser page that plays it), virtualcam")
        self.remote = QCheckBox("reachable from other machines")
        self.remote.setToolTip("The browser page binds 127.0.0.1 unless you tick this: anyone on the network could "
                               "then watch the program.")
        self.start_button = QPushButton("Start output")
        self.start_button.clicked.connect(lambda: self.start_requested.emit(self.url.currentText().strip(),
                                                                            self.remote.isChecked()))
        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels(("", "output", "kbps", "fps", "dropped", ""))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.Stretch)
        self.message = QLabel("No live output: the program goes to the preview and the recorder.")
        self.message.setWordWrap(True)
        self.message.setProperty("role", "muted")
        row = QHBoxLayout()
        row.addWidget(self.url, 1)
        row.addWidget(self.start_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.addLayout(row)
        lay.addWidget(self.remote)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.message)
        self._urls: tuple[str, ...] = ()

    def set_outputs(self, urls: tuple[str, ...], message: str) -> None:
        """The runtime's answer: the outputs now on, and what went wrong ("" when nothing)."""
        self._urls = tuple(urls)
        self.table.setRowCount(len(urls))
        for i, url in enumerate(urls):
            stop = QPushButton("Stop")
            stop.clicked.connect(lambda _=False, u=url: self.stop_requested.emit(u))
            self.table.setCellWidget(i, 5, stop)
            self.table.setItem(i, 1, QTableWidgetItem(url))
        self.message.setProperty("role", "notice" if message else "muted")
        self.message.style().unpolish(self.message)
        self.message.style().polish(self.message)
        self.message.setText(message or (f"{len(urls)} live output(s)." if urls else
                                         "No live output: the program goes to the preview and the recorder."))

    def refresh(self, stats: list) -> None:
        """(url, OutputStats) rows from the runtime: lights and figures."""
        for url, st in stats:
            if url not in self._urls:
                continue
            i = self._urls.index(url)
            light = QTableWidgetItem("●")
            light.setForeground(_colour(LIGHTS.get(st.state, "#55606e")))
            light.setToolTip(f"{st.state.value}" + (f": {st.detail}" if st.detail else ""))
            self.table.setItem(i, 0, light)
            name = QTableWidgetItem(url)
            name.setToolTip(st.detail)
            self.table.setItem(i, 1, name)
            for j, v in ((2, st.bitrate_kbps), (3, st.fps)):
                self.table.setItem(i, j, QTableWidgetItem("—" if not math.isfinite(v) else f"{v:.0f}"))
            self.table.setItem(i, 4, QTableWidgetItem(str(st.dropped)))


def _colour(hex_rgb: str):
    from PySide6.QtGui import QColor

    return QColor(hex_rgb)
