"""Freed memory handed back to the system, and a garbage collector that does not stop the studio.

glibc's allocator keeps the memory that Python, NumPy and PyTorch free on its own lists (one arena a thread); after a
core restart or a mode switch the studio's resident size stays tens of megabytes above what it uses, and over a day on
air that reads as a leak. ``trim()`` asks glibc to return what it holds free (``malloc_trim(0)``); elsewhere (another
C library, another system) it does nothing.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import functools
import gc
import logging
import math
import sys
import time

log = logging.getLogger(__name__)

# The last trims, (monotonic s at the start, ms taken), and whether one is running now: read by the soak, which puts
# a GUI stall beside what the allocator was doing at the time.
recent: collections.deque[tuple[float, float]] = collections.deque(maxlen=256)
trimming = False


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim  # glibc only (musl has none)
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def available() -> bool:
    return _malloc_trim() is not None


def trim() -> float:
    """Return freed heap memory to the system; the milliseconds it took (the GIL is released meanwhile), NaN where
    the C library cannot."""
    fn = _malloc_trim()
    if fn is None:
        return math.nan
    global trimming
    started, t0 = time.monotonic(), time.perf_counter()
    trimming = True
    try:
        fn(0)
    finally:
        trimming = False
    ms = (time.perf_counter() - t0) * 1e3
    recent.append((started, ms))
    return ms


def settle(collect: bool = True) -> tuple[int, float]:
    """Move every object alive into the permanent generation (``gc.freeze``), after a full collection with
    ``collect``: a full collection holds the interpreter, so every thread waits for it, the GUI's included, and its
    time grows with the objects it walks; after this it walks only what was made later. The freeze alone takes
    microseconds; the collection before it as long as a full one, so collect only while nothing is on air. Returns
    (objects frozen so far, ms taken)."""
    t0 = time.perf_counter()
    if collect:
        gc.collect()
    gc.freeze()
    return gc.get_freeze_count(), (time.perf_counter() - t0) * 1e3
