"""Background threads of the studio runtime: lower priority, and imports warmed before anything is on air."""

from __future__ import annotations

import logging
import time

from studio.pipeline.threads import lower_thread_priority

__all__ = ["lower_thread_priority", "warm_imports"]

log = logging.getLogger(__name__)


def warm_imports() -> None:
    """Import what recording and the microphone mode need while nothing is on air: a first import holds the GIL for
    100-300 ms on a busy 2-core machine, which froze the window when recording started."""
    t0 = time.perf_counter()
    try:
        import studio.audio.mic_motion  # noqa: F401  (recognizer, silence sieve: pocketsphinx, onnxruntime)
        import studio.encode.recorder  # noqa: F401  (PyAV's encoders and muxer)
        import studio.neural.mic  # noqa: F401
    except ImportError as exc:  # reported when the feature is used
        log.warning("warming imports: %s", exc)
    log.info("imports for recording and the microphone mode warmed in %.0f ms", (time.perf_counter() - t0) * 1e3)
