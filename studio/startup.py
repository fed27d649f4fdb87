"""When the command started, so that every mode can report its time to the first program frame from there, and the
process-wide settings a command makes at its start.

``mark()`` is called first thing by ``main.py`` (before the heavy imports); a process that never called it (a test,
an embedding program) counts from the first import of the ``studio`` package instead. ``keep_freed_memory()`` is
called next; ``leave()`` ends a command that has closed all its work.
"""

from __future__ import annotations

import time

_started_s = time.perf_counter()


def mark() -> None:
    """The command starts now."""
    global _started_s
    _started_s = time.perf_counter()


def keep_freed_memory() -> bool:
    """Let the C library's allocator keep freed memory for reuse instead of handing it back to the kernel.

    The core allocates and frees a chunk's tensors (1 to 66 MB each at the 720p canvas) every frame. By default glibc
    maps every block over a threshold apart and unmaps it when freed, and trims the heap's free top: the next frame's
    blocks are then mapped afresh and faulted in page by page, and zeroed by the kernel. Here every block comes from
    the heap and up to 512 MiB of free heap is kept. glibc only (``mallopt``); returns whether it applied."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # another C library: its defaults stay
        return False
    m_trim_threshold, m_mmap_max = -1, -4  # glibc's malloc.h
    return bool(mallopt(m_mmap_max, 0)) and bool(mallopt(m_trim_threshold, 512 << 20))


def leave(code: int) -> None:
    """End the process now with exit status ``code``, without the interpreter's teardown (every module's objects
    freed one by one, torch's and ONNX Runtime's among them: 0.7 s after a render's file was finished, on the 2-core
    machine). Only for a command whose work is all closed when it returns; the logs and the standard streams are
    flushed first."""
    import logging
    import os
    import sys

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing left to say
            pass
    os._exit(code)


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
