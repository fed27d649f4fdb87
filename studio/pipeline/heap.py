"""Freed memory handed back to the system.

glibc's allocator keeps the memory that Python, NumPy and PyTorch free on its own lists (one arena a thread); after a
core restart or a mode switch the studio's resident size stays tens of megabytes above what it uses, and over a day on
air that reads as a leak. ``trim()`` asks glibc to return what it holds free (``malloc_trim(0)``); elsewhere (another
C library, another system) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import math
import sys
import time

log = logging.getLogger(__name__)


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
    t0 = time.perf_counter()
    fn(0)
    return (time.perf_counter() - t0) * 1e3
