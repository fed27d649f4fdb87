"""The PROGRAM FORMAT panel: what the program looks like (square presenter or 16:9 canvas), its frame rates, the
device, the talking-head engine and the canvas background. Kept between sessions; applied between shows, after the
runtime has measured that this machine sustains it (it says why not, with the measured figure)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QVBoxLayout, QWidget)

from studio.contracts import Layout
from studio.pipeline.settings import CoreSettings, Optimization

PICTURES = (  # label, layout, size (square) or canvas height
    ("Square presenter 512 × 512", Layout.SQUARE, 512),
    ("Square presenter 720 × 720", Layout.SQUARE, 720),
    ("Square presenter 1080 × 1080", Layout.SQUARE, 1080),
    ("16:9 canvas 1280 × 720", Layout.CANVAS, 720),
    ("16:9 canvas 1920 × 1080", Layout.CANVAS, 1080),
)
RATES = (25.0, 30.0, 50.0, 60.0)
KEY_DIVISORS = (1, 2, 4)  # keyframes every frame, every 2nd, every 4th (with keyframes + interpolation on)


def engine_choices() -> list[tuple[str, str, str, bool]]:
    """(registry name, label, why it cannot be chosen or "", whether it draws a rundown's cast) for every engine this
    build has."""
    from studio.generators import engine_table

    out = []
    for row in engine_table():
        why = ""
        if not row.get("weights_present", row["name"] == "builtin"):
            why = "timing twin only (weights not installed): a twin is never put on air"
        elif row.get("runs_on_weights") is False:
            why = "runs only as a timing twin in this version (its release's other files are not read yet)"
        out.append((row["name"], row["label"], why, bool(row.get("cast"))))
    return out


class FormatPanel(QWidget):
    """See the module docstring; ``apply_requested`` carries the new CoreSettings and the background image."""

    apply_requested = Signal(object, object)  # (CoreSettings, Path | None)

    def __init__(self, settings: QSettings, current: CoreSettings, cuda: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.qs = settings
        self.base = current
        self.picture = QComboBox()
        for label, _, _ in PICTURES:
            self.picture.addItem(label)
        self.fps = QComboBox()
        for r in RATES:
            self.fps.addItem(f"{r:g} fps", r)
        self.keys = QComboBox()
        self._keys_on = Optimization.FRAME_INTERPOLATION in current.optimizations
        self.device = QComboBox()
        self.device.addItem("CPU", "cpu")
        if cuda:
            self.device.addItem("CUDA GPU", "cuda")
        else:
            self.device.addItem("CUDA GPU (none on this machine)", "cuda")
            self.device.model().item(1).setEnabled(False)
        self.engine = QComboBox()
        # sized to a short label, not the longest (an engine with its options spelled out would widen the whole dock);
        # the list shows every label whole, and the tooltip the chosen one
        self.engine.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.engine.setMinimumContentsLength(18)
        self.engine.currentIndexChanged.connect(lambda _: self.engine.setToolTip(self.engine.currentText()))
        try:
            engines = engine_choices()
        except ImportError:
            engines = [("builtin", "Built-in presenter (mesh warp)", "", True)]
        for name, label, why, *cast in engines:
            self.engine.addItem(label + (" — timing twin" if why else ""), name)
            i = self.engine.count() - 1
            if why:
                self.engine.model().item(i).setEnabled(False)
            # what the list says of each engine on hover: why it cannot be chosen, else whether it draws a cast
            note = "draws a rundown's cast (several anchors on the set)" if cast and cast[0] else \
                "draws one anchor: a rundown's cast needs an engine that draws several"
            self.engine.setItemData(i, why or f"{label}: {note}", 3)  # Qt.ToolTipRole
        self.background = QLineEdit()
        self.background.setPlaceholderText("plain studio colour")
        browse = QPushButton("Image…")
        browse.clicked.connect(self._choose_background)
        bg_row = QHBoxLayout()
        bg_row.addWidget(self.background, 1)
        bg_row.addWidget(browse)
        self.apply_button = QPushButton("Apply format")
        self.apply_button.setToolTip("Measures this machine at the new format first; applied between shows")
        self.apply_button.clicked.connect(self._apply)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setProperty("role", "muted")
        form = QFormLayout()
        form.addRow("Picture", self.picture)
        form.addRow("Frame rate", self.fps)
        form.addRow("Keyframes", self.keys)
        form.addRow("Device", self.device)
        form.addRow("Engine", self.engine)
        form.addRow("Background", bg_row)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 10, 10, 10)
        lay.addLayout(form)
        lay.addWidget(self.apply_button)
        lay.addWidget(self.status)
        lay.addStretch(1)
        self.fps.currentIndexChanged.connect(self._fill_keys)
        self.show_settings(current)

    def _fill_keys(self, *_) -> None:
        """The keyframe rates at this frame rate; while the keyframes flag is off (the HUD's pill) every frame is
        generated, and the field says so: its rate is the one the pill would use."""
        fps = float(self.fps.currentData() or 25.0)
        keep = self.keys.currentData()
        self.keys.clear()
        for d in KEY_DIVISORS:
            if d == 1:
                text = "every frame generated"
            elif self._keys_on:
                text = f"{fps / d:g} generated per second, the rest interpolated"
            else:
                text = f"keyframes off: every frame generated (when on: {fps / d:g} a second)"
            self.keys.addItem(text, d)
        i = self.keys.findData(keep)
        self.keys.setCurrentIndex(i if i >= 0 else 1)

    def set_keyframes_on(self, on: bool) -> None:
        """The keyframes flag went on or off (the HUD's pill): the field says what the program does now."""
        if on != self._keys_on:
            self._keys_on = on
            self._fill_keys()

    def show_settings(self, s: CoreSettings) -> None:
        self.base = s
        self._keys_on = Optimization.FRAME_INTERPOLATION in s.optimizations
        for i, (_, layout, px) in enumerate(PICTURES):
            if layout is s.layout and px == (s.canvas_height_px if layout is Layout.CANVAS else s.size_px):
                self.picture.setCurrentIndex(i)
        self.fps.setCurrentIndex(max(0, self.fps.findData(s.fps)))
        self._fill_keys()
        self.keys.setCurrentIndex(max(0, self.keys.findData(s.key_stride)))
        self.device.setCurrentIndex(1 if s.device.startswith("cuda") else 0)
        self.engine.setCurrentIndex(max(0, self.engine.findData(s.engine)))

    def chosen(self) -> CoreSettings:
        _, layout, px = PICTURES[self.picture.currentIndex()]
        s = replace(self.base, layout=layout, fps=float(self.fps.currentData()),
                    key_stride=int(self.keys.currentData() or 2), device=str(self.device.currentData()),
                    engine=str(self.engine.currentData()))
        return replace(s, canvas_height_px=px) if layout is Layout.CANVAS else replace(s, size_px=px)

    def chosen_background(self) -> Path | None:
        text = self.background.text().strip()
        return Path(text) if text else None

    def _choose_background(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Canvas background", str(Path.home()),
                                              "Images (*.jpg *.jpeg *.png *.bmp *.webp)")
        if name:
            self.background.setText(name)

    def _apply(self) -> None:
        self.status.setText("Measuring this machine at the new format…")
        self.apply_button.setEnabled(False)
        self.apply_requested.emit(self.chosen(), self.chosen_background())

    def result(self, applied: CoreSettings, message: str) -> None:
        """The runtime's answer: applied, or refused and why."""
        self.apply_button.setEnabled(True)
        self.show_settings(applied)
        self.status.setProperty("role", "notice" if message else "muted")
        self.status.style().unpolish(self.status)
        self.status.style().polish(self.status)
        w, h = applied.output_size
        self.status.setText(message or f"On the program: {w} × {h} at {applied.fps:g} fps on "
                                       f"{'the GPU' if applied.device.startswith('cuda') else 'the CPU'}.")
        if not message:
            save_format(self.qs, applied, self.chosen_background())


def save_format(qs: QSettings, s: CoreSettings, background: Path | None) -> None:
    qs.setValue("format/layout", s.layout.value)
    qs.setValue("format/size", s.size_px)
    qs.setValue("format/canvas_height", s.canvas_height_px)
    qs.setValue("format/fps", s.fps)
    qs.setValue("format/key_stride", s.key_stride)
    qs.setValue("format/device", s.device)
    qs.setValue("format/engine", s.engine)
    qs.setValue("format/background", str(background) if background else "")


def load_format(qs: QSettings, base: CoreSettings, cuda: bool) -> tuple[CoreSettings, Path | None]:
    """The saved format over ``base`` (what is not valid here, e.g. CUDA without a GPU, falls back to ``base``)."""
    try:
        layout = Layout(qs.value("format/layout", base.layout.value))
        size = int(qs.value("format/size", base.size_px))
        height = int(qs.value("format/canvas_height", base.canvas_height_px))
        fps = float(qs.value("format/fps", base.fps))
        stride = int(qs.value("format/key_stride", base.key_stride))
        device = str(qs.value("format/device", base.device))
        engine = str(qs.value("format/engine", base.engine))
    except (TypeError, ValueError):
        return base, None
    if device.startswith("cuda") and not cuda:
        device = "cpu"
    if fps not in RATES or stride not in KEY_DIVISORS or height not in (720, 1080) or not 64 <= size <= 2160:
        return base, None
    bg = str(qs.value("format/background", "") or "")
    s = replace(base, layout=layout, size_px=size, canvas_height_px=height, fps=fps, key_stride=stride,
                device=device, engine=engine)
    return s, (Path(bg) if bg and Path(bg).is_file() else None)
