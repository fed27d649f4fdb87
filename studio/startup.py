"""When the command started, so that every mode can report its time to the first program frame from there.

``mark()`` is called first thing by ``main.py`` (before the heavy imports); a process that never called it (a test,
an embedding program) counts from the first import of the ``studio`` package instead.
"""

from __future__ import annotations

import time

_started_s = time.perf_counter()


def mark() -> None:
    """The command starts now."""
    global _started_s
    _started_s = time.perf_counter()


def since_start_s(at_s: float | None = None) -> float:
    """Seconds from the command's start to ``at_s`` (a ``time.perf_counter()`` reading; default now)."""
    return (time.perf_counter() if at_s is None else at_s) - _started_s


def first_frame_fields(at_s: float | None, run_s: float, core_s: float) -> dict[str, float]:
    """The core report's time-to-first-frame fields from perf_counter() readings: the first frame written at
    ``at_s`` (None: none yet), the run started at ``run_s``, the core made at ``core_s``."""
    if at_s is None:
        return {}
    return {"first_frame_s": at_s - run_s, "first_frame_from_core_s": at_s - core_s,
            "first_frame_from_command_s": since_start_s(at_s)}
