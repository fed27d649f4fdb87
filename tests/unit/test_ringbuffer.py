"""AudioRing: absolute addressing, wrap-around, overwrite accounting, arrival times."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from studio.audio.ringbuffer import AudioRing


def test_wraps_around_and_reads_by_absolute_index() -> None:
    ring = AudioRing(capacity_samples=10, sample_rate_hz=16000)
    ring.write(np.arange(7, dtype=np.float32))
    ring.write(np.arange(7, 14, dtype=np.float32))  # wraps: samples 4..13 held
    assert ring.total_written == 14
    assert ring.oldest_sample == 4
    np.testing.assert_array_equal(ring.read(4, 10), np.arange(4, 14, dtype=np.float32))
    np.testing.assert_array_equal(ring.read(8, 3), [8, 9, 10])
    np.testing.assert_array_equal(ring.latest(5), np.arange(9, 14, dtype=np.float32))


def test_overwritten_audio_returns_none_and_is_counted() -> None:
    ring = AudioRing(capacity_samples=8, sample_rate_hz=16000)
    ring.write(np.ones(5, np.float32))
    assert ring.overwritten_samples == 0
    ring.write(np.ones(6, np.float32))
    assert ring.overwritten_samples == 3
    assert ring.read(0, 4) is None
    assert ring.read_misses == 1
    ring.write(np.arange(20, dtype=np.float32))  # longer than the ring: only the newest 8 stay
    assert ring.total_written == 31
    assert ring.overwritten_samples == 31 - 8
    np.testing.assert_array_equal(ring.read(23, 8), np.arange(12, 20, dtype=np.float32))


def test_reading_the_future_is_an_error() -> None:
    ring = AudioRing(capacity_samples=8, sample_rate_hz=16000)
    ring.write(np.zeros(4, np.float32))
    with pytest.raises(ValueError):
        ring.read(2, 3)
    assert ring.latest(100).shape == (4,)


def test_arrival_time_of_each_sample() -> None:
    ring = AudioRing(capacity_samples=100, sample_rate_hz=16000)
    ring.write(np.zeros(10, np.float32), arrival_ns=1_000)
    ring.write(np.zeros(5, np.float32), arrival_ns=2_000)
    assert ring.arrival_ns(0) == 1_000
    assert ring.arrival_ns(9) == 1_000
    assert ring.arrival_ns(10) == 2_000
    assert ring.arrival_ns(14) == 2_000
    assert ring.arrival_ns(15) is None  # not written yet


def test_arrival_records_are_bounded() -> None:
    ring = AudioRing(capacity_samples=100, sample_rate_hz=16000, max_blocks=4)
    for i in range(10):
        ring.write(np.zeros(2, np.float32), arrival_ns=i)
    assert ring.arrival_ns(19) == 9
    assert ring.arrival_ns(12) == 6
    assert ring.arrival_ns(0) is None


def test_concurrent_reader_sees_consistent_data() -> None:
    """One writer, one reader: every successful read is a contiguous ramp (no torn blocks)."""
    ring = AudioRing(capacity_samples=1000, sample_rate_hz=16000)
    done = threading.Event()
    bad: list[int] = []

    def reader() -> None:
        while not done.is_set():
            total = ring.total_written
            if total < 64:
                continue
            x = ring.read(total - 64, 64)
            if x is not None and not np.array_equal(np.diff(x), np.ones(63, np.float32)):
                bad.append(total)

    t = threading.Thread(target=reader)
    t.start()
    for i in range(0, 200_000, 37):  # float32 counts exactly up to 2**24
        ring.write(np.arange(i, i + 37, dtype=np.float32))
    done.set()
    t.join()
    assert not bad
