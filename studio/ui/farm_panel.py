"""The FARM tab: the open rundown (or a folder of rundowns) rendered on Ray, with progress, while the studio runs on.

The open rundown goes to the farm whole, as the studio saves it (its segments, graphics and cast, each segment's
speaker) with the rundown panel's cast layout, so that a cast renders on the farm as on air.
The job is ``studio.farm.driver.run_farm``, a generator worker run in a process of its own (``studio.farm.apart``:
Ray's driver never lives in the studio's process), driven by a ``FarmWorker`` thread: its progress comes back through
signals (slots run on the GUI thread), and Cancel sets its abort flag (running segments are stopped;
what was finished stays on disk, and the next run resumes from it). The cluster is this machine (N worker processes)
or a running cluster's head at HOST:PORT.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QThread, Signal
from PySide6.QtWidgets import (QButtonGroup, QFileDialog, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QListWidget,
                               QPlainTextEdit, QProgressBar, QPushButton, QRadioButton, QSpinBox, QVBoxLayout, QWidget)

from studio.contracts import CastLayout
from studio.errors import StudioError


@dataclass(frozen=True)
class OpenRundown:
    """The rundown open in the studio, as the FARM tab submits it."""

    segments: list  # studio.pipeline.rundown.Segment, in air order
    graphics: object = None  # the programme's (studio.graphics.look.Graphics); None: none
    cast: tuple = ()  # studio.pipeline.cast.Member; empty: one anchor
    layout: CastLayout = CastLayout.TWO_SHOT


class FarmWorker(QThread):
    """Runs one farm job off the GUI thread: ``progress(FarmProgress)``, then ``done(FarmResult)`` or
    ``failed(message)``."""

    progress = Signal(object)
    done = Signal(object)
    failed = Signal(str)

    def __init__(self, settings, rundowns: list[Path], anchor_pack=None) -> None:
        super().__init__()
        self.settings, self.rundowns, self.anchor_pack = settings, rundowns, anchor_pack
        self.abort = threading.Event()

    def cancel(self) -> None:
        self.abort.set()

    def run(self) -> None:
        from studio.farm.apart import run_farm_apart

        try:
            job = run_farm_apart(self.settings, self.rundowns, abort=self.abort.is_set, anchor_pack=self.anchor_pack)
            while True:
                try:
                    self.progress.emit(next(job))
                except StopIteration as stop:
                    self.done.emit(stop.value)
                    return
        except StudioError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # shown as one line; the log keeps the traceback
            import logging

            logging.getLogger(__name__).exception("farm job failed")
            self.failed.emit(f"The farm stopped: {type(exc).__name__}: {exc}")


class FarmPanel(QWidget):
    """Submit, watch, cancel. ``rundown_of()`` gives the open rundown (``OpenRundown``), ``core_of()`` the program's
    settings (as ``studio.farm.settings.studio_farm_settings`` takes them), ``anchor_of()`` the loaded anchor pack,
    ``style_of()`` the canvas's look as the studio shows it (its set; None: the plain look). ``farm_finished`` is
    emitted when a job has ended, whichever way."""

    farm_finished = Signal()
    START = "Render on the farm"

    def __init__(self, rundown_of, core_of, anchor_of, out_dir: Path, parent: QWidget | None = None,
                 style_of=lambda: None) -> None:
        super().__init__(parent)
        self._rundown_of, self._core_of, self._anchor_of, self._style_of = rundown_of, core_of, anchor_of, style_of
        self.worker: FarmWorker | None = None
        self._last_message = ""

        self.open_rundown = QRadioButton("the open rundown")
        self.folder_rundowns = QRadioButton("a folder of rundowns:")
        self.open_rundown.setChecked(True)
        self.folder = QLineEdit()
        self.folder.setPlaceholderText("folder with rundown .json files")
        pick_folder = QPushButton("Choose…")
        pick_folder.clicked.connect(lambda: self._pick(self.folder, self.folder_rundowns))
        self.local = QRadioButton("this machine, workers:")
        self.remote = QRadioButton("the cluster at:")
        self.local.setChecked(True)
        self.workers = QSpinBox()
        self.workers.setRange(1, 64)
        self.workers.setValue(2)
        self.address = QLineEdit()
        self.address.setPlaceholderText("HOST:PORT (`ray start --head` prints it)")
        self.address.textEdited.connect(lambda _: self.remote.setChecked(True))
        self.out = QLineEdit(str(out_dir))
        pick_out = QPushButton("Choose…")
        pick_out.clicked.connect(lambda: self._pick(self.out, None))
        for group in ((self.open_rundown, self.folder_rundowns), (self.local, self.remote)):
            buttons = QButtonGroup(self)
            for b in group:
                buttons.addButton(b)

        form = QFormLayout()
        src = QHBoxLayout()
        src.addWidget(self.open_rundown)
        src.addWidget(self.folder_rundowns)
        src.addWidget(self.folder, 1)
        src.addWidget(pick_folder)
        form.addRow("Render", src)
        where = QHBoxLayout()
        where.addWidget(self.local)
        where.addWidget(self.workers)
        where.addWidget(self.remote)
        where.addWidget(self.address, 1)
        form.addRow("On", where)
        out = QHBoxLayout()
        out.addWidget(self.out, 1)
        out.addWidget(pick_out)
        form.addRow("Into", out)

        self.button = QPushButton(self.START)
        self.button.setMinimumWidth(self.button.fontMetrics().horizontalAdvance(self.START) + 32)
        self.button.clicked.connect(self.toggle)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1)
        self.bar.setValue(0)
        self.status = QLabel("Idle.")
        self.status.setWordWrap(True)
        self.nodes = QListWidget()
        self.nodes.setMaximumHeight(90)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(500)

        lay = QVBoxLayout(self)
        lay.addLayout(form)
        row = QHBoxLayout()
        row.addWidget(self.button)
        row.addWidget(self.bar, 1)
        lay.addLayout(row)
        lay.addWidget(self.status)
        lay.addWidget(QLabel("Segments per node"))
        lay.addWidget(self.nodes)
        lay.addWidget(self.log, 1)

    def _pick(self, edit: QLineEdit, select: QRadioButton | None) -> None:
        path = QFileDialog.getExistingDirectory(self, "Choose a folder", edit.text())
        if path:
            edit.setText(path)
            if select is not None:
                select.setChecked(True)

    @property
    def running(self) -> bool:
        return self.worker is not None

    def toggle(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.button.setEnabled(False)
            self.status.setText("Cancelling: running segments are stopped; finished ones stay for the next run.")
            return
        try:
            settings, rundowns = self._job()
        except StudioError as exc:
            self._say(str(exc))
            return
        self.worker = FarmWorker(settings, rundowns, anchor_pack=self._anchor_of())
        self.worker.progress.connect(self._progress)
        self.worker.done.connect(self._done)
        self.worker.failed.connect(self._failed)
        self.worker.finished.connect(self._finished)
        self.button.setText("Cancel")
        self.bar.setRange(0, 0)
        self.nodes.clear()
        self.status.setText("Starting the cluster…")
        self.log.appendPlainText(f"rendering {', '.join(p.name for p in rundowns)} into {settings.out_dir}")
        self.worker.start()

    def _job(self):
        from studio.errors import InputError
        from studio.farm.settings import studio_farm_settings
        from studio.pipeline.rundown import save_rundown

        out = Path(self.out.text().strip() or ".").expanduser()
        address = self.address.text().strip() if self.remote.isChecked() else None
        if self.remote.isChecked() and not address:
            raise InputError("Give the cluster's HOST:PORT, or choose this machine.")
        rundown: OpenRundown = self._rundown_of()
        settings = studio_farm_settings(self._core_of(), out, workers=self.workers.value(), address=address,
                                        cast_layout=rundown.layout, canvas_style=self._style_of())
        if self.folder_rundowns.isChecked():
            folder = Path(self.folder.text().strip()).expanduser()
            if not folder.is_dir():
                raise InputError(f"{folder} is not a folder: choose the folder that holds the rundowns.")
            return settings, [folder]
        if not rundown.segments:
            raise InputError("The rundown is empty: add a segment first.")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"Cannot write to {out} ({exc.strerror}): choose a folder you may write to.") from exc
        # portraits as absolute paths: the file lies in the output folder, not beside them
        cast = tuple(m.resolved() for m in rundown.cast)
        path = save_rundown(list(rundown.segments), out / "studio_rundown.json", graphics=rundown.graphics, cast=cast)
        return settings, [path]

    def _progress(self, p) -> None:
        from studio.farm.console import progress_line

        self.bar.setRange(0, max(1, p.total))
        self.bar.setValue(p.done)
        self.status.setText(progress_line(p, width=0).lstrip("[] "))
        self.nodes.clear()
        for node, n in sorted(p.per_node.items()):
            self.nodes.addItem(f"{node}: {n}")
        if p.message and p.message != self._last_message:
            self._last_message = p.message
            self.log.appendPlainText(p.message)

    def _done(self, result) -> None:
        for name, path in result.bulletins.items():
            self.log.appendPlainText(f"wrote {path}")
        for seg, why in result.failed:
            self.log.appendPlainText(f"not made: {seg}: {why}")
        self.status.setText(f"Done: {result.made} made, {result.resumed} reused, {result.retries} retried, "
                            f"{len(result.failed)} not made, in {result.seconds:.1f} s.")

    def _failed(self, message: str) -> None:
        self._say(message)

    def _say(self, message: str) -> None:
        self.status.setText(message)
        self.log.appendPlainText(f"error: {message}")

    def _finished(self) -> None:
        if self.worker is not None:
            self.worker.wait()
            self.worker.deleteLater()
        self.worker = None
        self.button.setText(self.START)
        self.button.setEnabled(True)
        if self.bar.maximum() == 0:
            self.bar.setRange(0, 1)
        self.farm_finished.emit()

    def shutdown(self) -> None:
        """Cancel a running job and wait for its thread (before the window goes)."""
        if self.worker is not None:
            self.worker.cancel()
            self.worker.wait(30_000)
