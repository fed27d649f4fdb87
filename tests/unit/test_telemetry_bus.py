"""The telemetry bus: latest value per source, thread-safe publishing, stage windows, compute saved, and the
pipeline publishing one sample per chunk."""

from __future__ import annotations

import json
import math
import os
import platform
import threading

import numpy as np
import pytest

from studio.pipeline.telemetry import (CacheRate, ComputeSaved, OptimizationStatus, StageWindow, TelemetryBus,
                                       TelemetrySample, load_bench, shares_from, stage_timing)


def test_latest_value_per_source_and_overall() -> None:
    bus = TelemetryBus()
    assert bus.latest() is None
    bus.publish(TelemetrySample(taken_s=1.0, source="runtime", frames_produced=3))
    bus.publish(TelemetrySample(taken_s=2.0, source="pipeline", frames_produced=7))
    bus.publish(TelemetrySample(taken_s=3.0, source="runtime", frames_produced=4))
    assert bus.latest().frames_produced == 4
    assert bus.latest("pipeline").frames_produced == 7
    assert bus.latest("bench") is None
    assert set(bus.sources()) == {"runtime", "pipeline"}
    assert bus.published == 3


def test_concurrent_publishers_never_lose_the_count() -> None:
    bus = TelemetryBus()

    def pub(name: str) -> None:
        for i in range(500):
            bus.publish(TelemetrySample(taken_s=float(i), source=name, frames_produced=i))

    threads = [threading.Thread(target=pub, args=(f"s{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bus.published == 2000
    assert all(bus.latest(f"s{k}").frames_produced == 499 for k in range(4))


def test_stage_timing_matches_numpy() -> None:
    vals = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    t = stage_timing(vals)
    assert t.median_ms == pytest.approx(np.median(vals))
    assert t.p95_ms == pytest.approx(np.percentile(vals, 95))
    assert t.n == 6 and t.total_ms == pytest.approx(27.0)
    assert math.isnan(stage_timing([]).median_ms)


def test_stage_window_slides() -> None:
    w = StageWindow(size=3)
    for v in (100.0, 1.0, 2.0, 3.0):
        w.add("render", v)
    t = w.timings()["render"]
    assert t.n == 3 and t.median_ms == 2.0  # the 100 ms call slid out


def test_compute_saved_and_cache_rate() -> None:
    c = ComputeSaved(baseline_ms_per_frame=40.0, actual_ms_per_frame=10.0, baseline_source="test")
    assert c.saved_fraction == pytest.approx(0.75)
    assert math.isnan(ComputeSaved(0.0, 1.0, "none").saved_fraction)
    assert CacheRate(hits=3, misses=1).hit_rate == pytest.approx(0.75)
    assert math.isnan(CacheRate(0, 0).hit_rate)


def _bench(tmp_path, machine: dict) -> object:
    p = tmp_path / "bench.json"
    p.write_text(json.dumps({
        "machine": machine,
        "ablation": [{"optimization": "pyramidal", "saved_fraction": 0.5},
                     {"optimization": "silence_sieve", "saved_fraction": 0.1}],
        "skipped": [{"optimization": "gpu_encode", "reason": "no hardware video encoder"}]}))
    return p


def test_bench_of_this_machine_gives_the_pills(tmp_path) -> None:
    here = {"platform": platform.platform(), "cpu_count": os.cpu_count()}
    bench = load_bench(_bench(tmp_path, here))
    assert bench is not None
    assert load_bench(_bench(tmp_path, {"platform": "elsewhere", "cpu_count": 999})) is None
    shares = {s.name: s for s in shares_from({"pyramidal"}, bench, {"cuda_graphs": "no CUDA GPU"})}
    assert shares["pyramidal"].status is OptimizationStatus.ACTIVE
    assert shares["pyramidal"].saved_fraction == pytest.approx(0.5)
    assert shares["silence_sieve"].status is OptimizationStatus.INACTIVE
    assert shares["gpu_encode"].status is OptimizationStatus.UNAVAILABLE
    assert "hardware" in shares["gpu_encode"].reason
    assert shares["cuda_graphs"].status is OptimizationStatus.UNAVAILABLE
    assert math.isnan(shares["kv_cache"].saved_fraction)
