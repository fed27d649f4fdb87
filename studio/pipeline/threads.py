"""Worker threads beside the core (speech, anchors): they yield the CPU to the frames."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


def lower_thread_priority(nice: int = 10) -> None:
    """Make the calling thread yield the CPU to the core and the GUI (Linux: per-thread nice; elsewhere a no-op).

    On a 2-core machine the speech and anchor workers otherwise compete with the frames the producer watches."""
    import os

    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except (AttributeError, OSError) as exc:
        log.debug("cannot lower the priority of %s: %s", threading.current_thread().name, exc)
