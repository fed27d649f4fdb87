"""The COMPILE panel: inference engines for this machine's silicon, built in the background, verified, timed, cached.

It shows the silicon fingerprint (the GPU and its tensor-core generation, or the CPU and its instruction sets), offers
the backends and precisions this device supports (the others are greyed out with the reason in their tooltip) and the
batch sizes, and runs a compile as a cancellable background job (``studio.compile.jobs.compile_generator``: a
generator worker that yields progress and checks an abort flag; a cancelled or failed build leaves no file) with a
progress bar and a log. Each engine is checked against eager output and timed before it is cached in ``engines/``;
the studio then runs on it (the HUD's "graphs / engine" pill), and the panel lists what is cached.
"""

from __future__ import annotations

import threading
import traceback

from PySide6.QtCore import QThread, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFormLayout, QHBoxLayout, QLabel, QListWidget, QPlainTextEdit,
                               QProgressBar, QPushButton, QVBoxLayout, QWidget)

from studio.errors import StudioError


class CompileWorker(QThread):
    """Runs one compile job off the GUI thread; ``progress(fraction, message, log)``, then ``done(reports)`` or
    ``failed(message)``. ``cancel()`` sets the job's abort flag (it stops at its next step)."""

    progress = Signal(float, str, str)
    done = Signal(object)
    failed = Signal(str)

    def __init__(self, model: str, anchor, device: str, size_px: int, pyramidal: bool, settings) -> None:
        super().__init__()
        self.model, self.anchor, self.device = model, anchor, device
        self.size_px, self.pyramidal, self.build = size_px, pyramidal, settings
        self.abort = threading.Event()

    def cancel(self) -> None:
        self.abort.set()

    def run(self) -> None:
        from studio.compile.jobs import compile_generator
        from studio.contracts import GENERATORS, GeneratorSettings

        try:
            kwargs = {"field_divisor": 8 if self.pyramidal else 4} if self.model == "builtin" else {}
            gen = GENERATORS.create(self.model, **kwargs)
            gen.open(self.anchor, GeneratorSettings(device=self.device, size_px=self.size_px,
                                                    precision=self.build.precision, batch_frames=self.build.batch))
            job = compile_generator(self.model, gen, self.build, abort=self.abort)
            while True:
                try:
                    p = next(job)
                except StopIteration as stop:
                    reports = stop.value
                    break
                self.progress.emit(float(p.fraction), p.message, p.log or "")
            gen.close()
            if reports is None:
                self.failed.emit("Compile cancelled: nothing was written.")
            else:
                self.done.emit(reports)
        except StudioError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # a compiler's own failure: reported, never swallowed
            self.failed.emit(f"The compile failed ({type(exc).__name__}: {exc}).")
            self.progress.emit(0.0, "failed", traceback.format_exc(limit=3))


class CompilePanel(QWidget):
    """See the module docstring. ``anchor_of`` gives the portrait on air (the built-in engine bakes it in);
    ``settings_of`` the core's settings now; ``compiled`` fires after an engine was cached."""

    compiled = Signal(str)

    def __init__(self, device: str, anchor_of, settings_of, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from studio.compile.settings import BACKEND_LABELS, BACKENDS
        from studio.compile.silicon import fingerprint

        self.device = device
        self.anchor_of, self.settings_of = anchor_of, settings_of
        self.fp = fingerprint(device)
        self.silicon = QLabel(self.fp.summary())
        self.silicon.setWordWrap(True)
        self.model = QComboBox()
        from studio.contracts import GENERATORS

        for name in GENERATORS.names():
            self.model.addItem(name, name)
        self.backend = QComboBox()
        from studio.compile.builders import backend as backend_of

        for i, name in enumerate(BACKENDS):
            self.backend.addItem(BACKEND_LABELS[name], name)
            why = backend_of(name).unavailable(self.fp)
            if why:
                self._disable(self.backend, i, why)
        self.precision = QComboBox()
        self.batch = QComboBox()
        self.pyramidal = QCheckBox("pyramidal (the low-resolution warp field / small native size)")
        self.audio_cache = QCheckBox("audio cache (fingerprint cache in front of the audio encoder)")
        self.flow = QCheckBox("flow interpolation (RIFE between keyframes)")
        self.tiled_vae = QCheckBox("tiled VAE decoding")
        self.tiled_vae.setEnabled(False)
        self.tiled_vae.setToolTip("Not offered by this version's engines: their VAEs decode whole frames.")
        for box in (self.audio_cache, self.flow):
            box.setToolTip("A setting of the running pipeline, not of the engine: it is the same switch as the "
                           "HUD's pill, applied when the engine is installed.")
        self.compile_button = QPushButton("Compile")
        self.compile_button.clicked.connect(self.toggle)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setVisible(False)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(2000)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.cached = QListWidget()
        form = QFormLayout()
        form.addRow("Silicon", self.silicon)
        form.addRow("Engine", self.model)
        form.addRow("Backend", self.backend)
        form.addRow("Precision", self.precision)
        form.addRow("Batch", self.batch)
        row = QHBoxLayout()
        row.addWidget(self.compile_button)
        row.addWidget(self.bar, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.addLayout(form)
        for w in (self.pyramidal, self.audio_cache, self.flow, self.tiled_vae):
            lay.addWidget(w)
        lay.addLayout(row)
        lay.addWidget(self.status)
        lay.addWidget(self.log, 1)
        lay.addWidget(QLabel("Cached engines"))
        lay.addWidget(self.cached, 1)
        self.backend.currentIndexChanged.connect(self._fill_precisions)
        self.worker: CompileWorker | None = None
        self.show_settings()
        first = next((i for i in range(self.backend.count()) if self._enabled(self.backend, i)), 0)
        self.backend.setCurrentIndex(first)
        self._fill_precisions()
        self.refresh_cache()

    @staticmethod
    def _disable(combo: QComboBox, i: int, why: str) -> None:
        model = combo.model()
        if isinstance(model, QStandardItemModel):
            model.item(i).setEnabled(False)
        combo.setItemData(i, why, 3)  # Qt.ToolTipRole

    @staticmethod
    def _enabled(combo: QComboBox, i: int) -> bool:
        model = combo.model()
        return not isinstance(model, QStandardItemModel) or model.item(i).isEnabled()

    def show_settings(self) -> None:
        """Follow the studio's engine, size and flags (the engine must be built for the form the studio runs)."""
        from studio.compile.settings import BATCH_PROFILES
        from studio.pipeline.settings import Optimization

        s = self.settings_of()
        i = self.model.findData(s.engine)
        if i >= 0:
            self.model.setCurrentIndex(i)
        self.batch.clear()
        self.batch.addItem(f"{s.batch_frames} (the studio's batch)", s.batch_frames)
        for b in BATCH_PROFILES:
            if b != s.batch_frames:
                self.batch.addItem(str(b), b)
        self.pyramidal.setChecked(Optimization.PYRAMIDAL in s.optimizations)
        self.audio_cache.setChecked(Optimization.AUDIO_CACHE in s.optimizations)
        self.flow.setChecked(Optimization.FRAME_INTERPOLATION in s.optimizations)

    def _fill_precisions(self, *_) -> None:
        from studio.compile.builders import precision_choices
        from studio.compile.silicon import PRECISION_LABELS

        keep = self.precision.currentData()
        self.precision.clear()
        for i, (p, why) in enumerate(precision_choices(self.fp, self.backend.currentData()).items()):
            self.precision.addItem(PRECISION_LABELS.get(p, p), p)
            if why:
                self._disable(self.precision, i, why)
        j = self.precision.findData(keep)
        if j < 0 or not self._enabled(self.precision, j):
            j = next((k for k in range(self.precision.count()) if self._enabled(self.precision, k)), 0)
        self.precision.setCurrentIndex(j)

    def refresh_cache(self) -> None:
        from studio.compile.cache import scan
        from studio.paths import ENGINES

        self.cached.clear()
        try:
            entries = scan(ENGINES, self.fp)
        except (OSError, ValueError) as exc:
            self.cached.addItem(f"The engine cache cannot be read: {exc}")
            return
        for e in entries:
            self.cached.addItem(e.describe())
        if not entries:
            self.cached.addItem("Nothing compiled for this machine yet.")

    def toggle(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.status.setText("Cancelling at the next step…")
            return
        from studio.compile.settings import BuildSettings
        from studio.pipeline.factory import presenter_px

        anchor = self.anchor_of()
        if anchor is None:
            self.status.setText("Waiting for the portrait: the built-in engine bakes it into its engine.")
            return
        if not self._enabled(self.precision, self.precision.currentIndex()) or not self._enabled(
                self.backend, self.backend.currentIndex()):
            self.status.setText("This backend or precision is not available on this machine (see its tooltip).")
            return
        s = self.settings_of()
        build = BuildSettings(backend=self.backend.currentData(), precision=self.precision.currentData(),
                              batch=int(self.batch.currentData()))
        self.worker = CompileWorker(self.model.currentData(), anchor, self.device, presenter_px(s),
                                    self.pyramidal.isChecked(), build)
        self.worker.progress.connect(self._progress)
        self.worker.done.connect(self._done)
        self.worker.failed.connect(self._failed)
        self.worker.finished.connect(self._finished)
        self.log.clear()
        self.bar.setValue(0)
        self.bar.setVisible(True)
        self.compile_button.setText("Cancel compile")
        self.status.setText(f"Compiling {self.model.currentData()} ({self.backend.currentText()}, "
                            f"{self.precision.currentText()}, batch {build.batch})…")
        self.worker.start()

    def _progress(self, fraction: float, message: str, line: str) -> None:
        self.bar.setValue(int(1000 * fraction))
        self.status.setText(message)
        self.log.appendPlainText(line or message)

    def _done(self, reports) -> None:
        lines = [r.summary() for r in reports]
        self.status.setText("Built, verified and cached: " + "; ".join(lines))
        self.log.appendPlainText("\n".join(lines))
        self.refresh_cache()
        self.compiled.emit(self.model.currentData())

    def _failed(self, message: str) -> None:
        self.status.setText(message)
        self.log.appendPlainText(message)

    def _finished(self) -> None:
        self.worker = None
        self.bar.setVisible(False)
        self.compile_button.setText("Compile")

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.worker.wait(60_000)
