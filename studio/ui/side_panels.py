"""The small panels beside the program preview: the anchor, the voice, the microphone and the recording.

Each panel owns its widgets and the words it shows; what it asks of the studio goes out as a command through
``send`` (the bridge's), and what the runtime reports comes in through the window's event table
(``studio.ui.event_routes``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
from PySide6.QtCore import QSettings, QSize, QStandardPaths, Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton, QVBoxLayout, QWidget,
)

from studio.audio.capture import list_input_devices
from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine
from studio.pipeline import commands as rt
from studio.ui import theme
from studio.ui.preview import LevelMeter


def stack(widget: QWidget, *items, margins: int = 10) -> QWidget:
    """Lay ``items`` (widgets or row layouts) out top to bottom in ``widget``, with the rest of the height free."""
    lay = QVBoxLayout(widget)
    lay.setContentsMargins(margins, margins, margins, margins)
    lay.setSpacing(8)
    for x in items:
        if isinstance(x, QHBoxLayout):
            lay.addLayout(x)
        else:
            lay.addWidget(x)
    lay.addStretch(1)
    return widget


def label(text: str = "", role: str | None = None, wrap: bool = True) -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(wrap)
    if role:
        lab.setProperty("role", role)
    return lab


def set_role(widget: QWidget, role: str) -> None:
    widget.setProperty("role", role)
    theme.repolish(widget)


def default_recording_folder() -> Path:
    movies = QStandardPaths.writableLocation(QStandardPaths.MoviesLocation) or str(Path.home() / "Videos")
    return Path(movies) / "NewsStudio"


class AnchorPanel(QWidget):
    """The face on air: its thumbnail and name, the build's progress, and why a portrait was refused."""

    def __init__(self) -> None:
        super().__init__()
        self.thumb = QLabel()
        self.thumb.setFixedSize(QSize(88, 88))
        self.thumb.setStyleSheet(f"background:#07090c; border:1px solid {theme.BORDER}; border-radius:4px;")
        self.thumb.setAlignment(Qt.AlignCenter)
        self.name = label("Loading…", "title")
        self.hint = label("Drop a portrait anywhere on the window", "muted")
        self.open_button = QPushButton("Open portrait…  (Ctrl+O)")
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 100)
        self.progress_bar.setVisible(False)
        self.status = label("", "muted")
        self.error = label("", "error")
        self.error.setVisible(False)
        head = QHBoxLayout()
        head.addWidget(self.thumb)
        col = QVBoxLayout()
        col.addWidget(self.name)
        col.addWidget(self.hint)
        col.addStretch(1)
        head.addLayout(col, 1)
        stack(self, head, self.open_button, self.progress_bar, self.status, self.error)

    def loading(self, what: str) -> None:
        self.error.setVisible(False)
        self.progress_bar.setValue(0)
        self.progress_bar.setVisible(True)
        self.status.setText(f"Preparing {what}…")

    def progress(self, fraction: float, message: str) -> None:
        self.progress_bar.setVisible(True)
        self.progress_bar.setValue(int(round(fraction * 100)))
        self.status.setText(message)

    def loaded(self, name: str, on_air: bool) -> None:
        self.name.setText(name)
        self.progress_bar.setVisible(False)
        self.status.setText("On air" if on_air else "Ready")
        self.error.setVisible(False)

    def failed(self, message: str, kept_anchor: str) -> None:
        self.progress_bar.setVisible(False)
        kept = f" {kept_anchor} stays on air." if kept_anchor else ""
        self.error.setText(f"{message}{kept}")
        self.error.setVisible(True)
        self.status.setText("")

    def set_thumbnail(self, image: np.ndarray) -> None:
        h, w = image.shape[:2]
        arr = np.ascontiguousarray(image)
        qimg = QImage(arr.data, w, h, 3 * w, QImage.Format_RGB888).copy()
        self.thumb.setPixmap(QPixmap.fromImage(qimg).scaled(86, 86, Qt.KeepAspectRatio, Qt.SmoothTransformation))


class VoicePanel(QWidget):
    """The default voice of new segments (kept for the next start); ``apply_button`` gives it to a selection."""

    def __init__(self, settings: QSettings, send: Callable[[rt.Command], None]) -> None:
        super().__init__()
        self.settings = settings
        self.send = send
        self.combo = QComboBox()
        self.combo.setToolTip("Installed text-to-speech voices")
        self.combo.currentTextChanged.connect(self._chosen)
        self.apply_button = QPushButton("Use for selected segments")
        self.note = label("Listing voices…", "muted")
        stack(self, self.combo, self.apply_button, self.note)

    def set_voices(self, names: list[str]) -> None:
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItems(names)
        saved = self.settings.value("speech/voice", "piper:joe")
        if saved in names:
            self.combo.setCurrentText(saved)
        self.combo.blockSignals(False)
        self._chosen(self.combo.currentText())
        self.note.setText(f"{len(names)} voices installed" if names else "No voices installed.")

    def _chosen(self, name: str) -> None:
        if name:
            self.send(rt.SetVoice(name))
            self.settings.setValue("speech/voice", name)


class MicrophonePanel(QWidget):
    """The input device, what turns its voice into mouth shapes, its level (the meter, and in words), and the
    interview: a guest at the microphone beside the presenter (``interview_toggled``), with the guest's portrait."""

    interview_toggled = Signal(bool)

    def __init__(self, settings: QSettings, send: Callable[[rt.Command], None]) -> None:
        super().__init__()
        self.settings = settings
        self.send = send
        self.mic_combo = QComboBox()
        self.meter = LevelMeter()
        self.status = label("", "muted")
        self.engine_combo = QComboBox()
        self.engine_combo.addItem("Mouth from: neural model (audio2motion)", AudioEngine.NEURAL.value)
        self.engine_combo.addItem("Mouth from: phone recognizer (pocketsphinx)", AudioEngine.POCKETSPHINX.value)
        self.engine_combo.setToolTip(
            "What turns the voice at the microphone into mouth shapes. The default is the neural model: on human "
            "speech it gets more visemes right and closes the lips on p/b/m more often than the phone recognizer "
            "(resources/models/audio2motion/metrics.json). It needs about 0.1 s of audio after a frame, so it shows "
            "the mouth later than the phone recognizer: choose that one where the last 0.1 s matters most.")
        saved_engine = settings.value("audio/engine", DEFAULT_AUDIO_ENGINE.value)
        idx = self.engine_combo.findData(saved_engine)
        self.engine_combo.setCurrentIndex(idx if idx >= 0 else self.engine_combo.findData(DEFAULT_AUDIO_ENGINE.value))
        self.engine_combo.currentIndexChanged.connect(self.engine_changed)
        self.interview_box = QCheckBox("Interview: guest on the microphone")
        self.interview_box.setToolTip(
            "The presenter speaks the rundown (Go live: one turn per segment) while the person at the microphone "
            "drives a guest beside them. The host's next turn waits until the guest has answered and paused; each "
            "listens while the other speaks. Both voices go into the recording and every output.")
        self.interview_box.toggled.connect(self.interview_toggled.emit)
        self.guest_button = QPushButton("Guest portrait…")
        self.guest_button.setToolTip("The guest's face (default: the built-in guest)")
        self.guest_button.clicked.connect(self._choose_guest)
        self.guest_label = label("Guest: the built-in guest", "muted")
        guest_row = QHBoxLayout()
        guest_row.addWidget(self.guest_button)
        guest_row.addWidget(self.guest_label, 1)
        stack(self, self.mic_combo, self.engine_combo, self.meter, self.status, self.interview_box, guest_row)

    def _choose_guest(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "The guest's portrait", str(Path.home()),
                                              "Images (*.jpg *.jpeg *.png *.bmp *.webp *.tif *.tiff)")
        if name:
            self.set_guest(Path(name))

    def set_guest(self, path: Path | None) -> None:
        """Ask for ``path`` as the guest's portrait (None: the built-in guest)."""
        self.guest_label.setText(f"Guest: {path.name if path else 'the built-in guest'} (preparing…)")
        self.send(rt.SetGuestPortrait(path))

    def guest_status(self, path: Path | None, message: str) -> None:
        set_role(self.guest_label, "error" if message else "muted")
        self.guest_label.setText(message or f"Guest: {path.name if path else 'the built-in guest'}")

    def show_interview(self, on: bool) -> None:
        """The box follows the mode asked for (the preview's switch may end an interview)."""
        self.interview_box.blockSignals(True)
        self.interview_box.setChecked(on)
        self.interview_box.blockSignals(False)

    def engine_changed(self, *args) -> None:
        value = self.engine_combo.currentData()
        self.settings.setValue("audio/engine", value)
        self.send(rt.SetAudioEngine(AudioEngine(value)))

    def fill_devices(self) -> None:
        """List the input devices and open the saved one (or the first)."""
        devices = list_input_devices()
        self.mic_combo.blockSignals(True)
        self.mic_combo.clear()
        if not devices:
            self.mic_combo.addItem("No input device")
            self.mic_combo.setEnabled(False)
            self.meter.enabled_input = False
            set_role(self.status, "notice")
            self.status.setText("No input device: connect a microphone or start a sound server.")
            self.mic_combo.blockSignals(False)
            return
        self.mic_combo.addItem("Off", "")
        for d in devices:
            self.mic_combo.addItem(d.name, d.name)
        saved = self.settings.value("audio/microphone", None)
        idx = self.mic_combo.findData(saved) if saved is not None else -1
        self.mic_combo.setCurrentIndex(idx if idx >= 0 else min(1, self.mic_combo.count() - 1))
        self.mic_combo.blockSignals(False)
        self.mic_combo.currentIndexChanged.connect(self._mic_changed)
        self._mic_changed()

    def _mic_changed(self, *args) -> None:
        name = self.mic_combo.currentData()
        self.settings.setValue("audio/microphone", name)
        self.send(rt.SetMicrophone(name))
        self.meter.enabled_input = bool(name)
        self.status.setText("Opening…" if name else "Microphone off.")

    def device_status(self, ok: bool, device_name: str, message: str) -> None:
        set_role(self.status, "muted" if ok or message == "Microphone off." else "notice")
        self.status.setText(f"Listening: {device_name}" if ok else message)

    def show_level(self, level_dbfs: float) -> None:
        """The level in words (the telemetry's pace); the meter itself follows every tick."""
        if np.isfinite(level_dbfs) and self.mic_combo.currentData():
            self.status.setText("silence (below -60 dBFS)" if level_dbfs < LevelMeter.FLOOR_DBFS
                                else f"{level_dbfs:.0f} dBFS")


class RecordingPanel(QWidget):
    """Where recordings go, the record button (``record_button.clicked``), the time recorded and the outcome."""

    def __init__(self, settings: QSettings) -> None:
        super().__init__()
        self.settings = settings
        self.folder_edit = QLineEdit()
        self.folder_edit.setPlaceholderText("Folder for recordings")
        folder_button = QPushButton("Browse…")
        folder_button.setToolTip("Choose the recording folder")
        folder_button.clicked.connect(self._choose_folder)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder_edit, 1)
        folder_row.addWidget(folder_button)
        self.record_button = QPushButton()
        self.record_button.setProperty("role", "record")
        self.time = label("00:00:00", "clock")
        self.status = label("Records the program (picture and sound) to MP4.", "muted")
        self.ended()
        stack(self, folder_row, self.record_button, self.time, self.status)

    def set_folder(self, folder: str) -> None:
        self.folder_edit.setText(folder)
        self.folder_edit.setCursorPosition(0)  # show where the path starts, not its tail

    def folder(self) -> Path:
        return Path(self.folder_edit.text().strip() or default_recording_folder()).expanduser()

    def _choose_folder(self) -> None:
        name = QFileDialog.getExistingDirectory(self, "Folder for recordings", self.folder_edit.text())
        if name:
            self.folder_edit.setText(name)
            self.settings.setValue("recording/folder", name)

    def started(self, path: Path) -> None:
        self.record_button.setText("■  STOP RECORDING  (R)")
        self.record_button.setProperty("recording", True)
        theme.repolish(self.record_button)
        set_role(self.status, "muted")
        self.status.setText(f"Recording to {path.name}")

    def ended(self) -> None:
        self.record_button.setText("●  RECORD  (R)")
        self.record_button.setProperty("recording", False)
        theme.repolish(self.record_button)

    def show_error(self, message: str) -> None:
        set_role(self.status, "error")
        self.status.setText(message)

    def show_elapsed(self, seconds: float) -> None:
        s = int(seconds)
        self.time.setText(f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}")
