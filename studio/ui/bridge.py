"""The only door between the Qt front end and the presenter runtime.

The studio runtime's blocking control loop runs in a QThread; commands go in through ``send`` (a queue put, never blocks); events
come back as a Qt signal, which Qt delivers on the GUI thread (the signal is emitted from runtime threads, so the
connection is queued). Frames and telemetry are pulled by the window's timer through ``runtime``.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QThread, Signal

from studio.pipeline.commands import Command, Event, Shutdown
from studio.runtime import StudioRuntime, StudioSettings

log = logging.getLogger(__name__)


class _RuntimeThread(QThread):
    def __init__(self, runtime: StudioRuntime) -> None:
        super().__init__()
        self.setObjectName("presenter-runtime")
        self.runtime = runtime

    def run(self) -> None:
        try:
            self.runtime.run()
        except BaseException:  # already reported through an Error event; the thread just ends
            log.debug("runtime thread ended with an error", exc_info=True)


class RuntimeBridge(QObject):
    """Owns the runtime and its thread; ``event`` carries every runtime event to the GUI thread."""

    event = Signal(object)

    def __init__(self, settings: StudioSettings | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runtime = StudioRuntime(settings, on_event=self._forward)
        self._thread = _RuntimeThread(self.runtime)

    def _forward(self, event: Event) -> None:  # runtime threads
        self.event.emit(event)

    def start(self) -> None:
        self._thread.start()

    def send(self, command: Command) -> None:
        self.runtime.submit(command)

    @property
    def running(self) -> bool:
        return self._thread.isRunning()

    def shutdown(self, timeout_ms: int = 20000) -> bool:
        """Ask the runtime to stop (it closes any recording), then quit() and wait() its thread."""
        if self._thread.isRunning():
            self.runtime.submit(Shutdown())
        self._thread.quit()
        done = self._thread.wait(timeout_ms)
        if not done:
            log.error("the presenter runtime did not stop within %d ms", timeout_ms)
        return done
