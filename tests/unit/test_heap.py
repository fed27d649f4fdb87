"""Freed heap memory goes back to the system (``studio.pipeline.heap``), and the studio warms the microphone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from studio.pipeline import heap


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


@pytest.mark.skipif(not heap.available(), reason="no glibc malloc_trim on this system")
def test_trim_returns_freed_heap_memory_to_the_system() -> None:
    # 100 KB blocks come from the heap (under glibc's mmap threshold); one block kept after them pins the heap's top,
    # so that free() alone cannot give the space back: only the trim can
    blocks = [np.ones(100_000 // 8) for _ in range(1500)]
    pin = np.ones(100_000 // 8)
    before = _rss_mb()
    del blocks
    freed = _rss_mb()
    ms = heap.trim()
    after = _rss_mb()
    assert math.isfinite(ms)
    assert before - after > 100, (before, freed, after)
    assert pin.sum() == 100_000 // 8


def test_the_microphone_engine_is_loaded_at_start_only_where_there_is_a_microphone(monkeypatch) -> None:
    import studio.audio.capture as capture
    import studio.neural.engine as engine
    from studio.audio.settings import AudioEngine
    from studio.pipeline.motion import warm_microphone

    monkeypatch.setattr(engine, "_DEFAULT", None)
    monkeypatch.setattr(capture, "list_input_devices", lambda: [])
    warm_microphone(AudioEngine.NEURAL)
    assert engine._DEFAULT is None  # no input device: nothing loaded
    monkeypatch.setattr(capture, "list_input_devices", lambda: ["a microphone"])
    warm_microphone(AudioEngine.NEURAL)
    assert engine._DEFAULT is not None


def test_settle_freezes_what_exists_so_a_full_collection_walks_only_later_objects() -> None:
    import gc

    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    try:
        before = len(gc.get_objects())
        frozen, ms = heap.settle()
        assert frozen >= before // 2 and ms >= 0
        assert len(gc.get_objects()) < before // 2  # the collector no longer walks them
        junk = Node()
        del junk
        assert gc.collect() >= 1  # cycles made after the freeze are still collected
    finally:
        gc.unfreeze()
