"""The rooms' one way out: events to the listener (the window), and the last error the producer was told."""

from __future__ import annotations

import logging
from typing import Callable

from studio.pipeline import commands as cmd

log = logging.getLogger(__name__)


class Outbox:
    """Hands every event to ``listener``; a broken listener never stops the studio. ``last_error`` is what the
    telemetry shows as the latest failure."""

    def __init__(self, listener: Callable[[cmd.Event], None]) -> None:
        self.listener = listener
        self.last_error = ""

    def emit(self, event: cmd.Event) -> None:
        try:
            self.listener(event)
        except Exception:  # a broken listener must not stop the studio
            log.exception("event listener failed on %s", type(event).__name__)

    def fail(self, message: str, event: cmd.Event | None = None) -> None:
        """Report a failure (``event``, or an ``Error`` with ``message``) and keep it as the last error."""
        self.last_error = message
        self.emit(event if event is not None else cmd.Error(message))
