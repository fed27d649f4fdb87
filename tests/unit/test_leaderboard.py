"""The leaderboard's runs of one engine: each run's engine is gone before the next run builds its own (a 14 B DiT
twin is 37 GB: two at once do not fit an 80 GB GPU)."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

ENGINE = "test-leaderboard-release"


@pytest.fixture()
def probe(monkeypatch):
    """Registers ``ENGINE`` (the built-in engine) and notes, at each open, which earlier runs' engines are alive."""
    from studio.bench import harness
    from studio.generators.builtin import BuiltinGenerator
    from studio.pipeline.roles import GENERATORS

    state = {"run": 0, "opened": [], "stale": []}  # opened: (run, weakref)

    class Probe(BuiltinGenerator):
        def open(self, anchor, settings):
            state["stale"] += [run for run, ref in state["opened"] if run != state["run"] and ref() is not None]
            state["opened"].append((state["run"], weakref.ref(self)))
            super().open(anchor, settings)

    real = harness.run_config

    def counted(*args, **kwargs):
        state["run"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(harness, "run_config", counted)
    GENERATORS.names()  # the registry loads its modules first, so that the test's entry stays
    GENERATORS.register(ENGINE)(lambda **kw: Probe(**kw))
    yield state
    GENERATORS._factories.pop(ENGINE, None)


def test_each_run_releases_its_engine_before_the_next_opens_one(probe, default_anchor, tmp_path):
    from studio.bench.harness import BenchItem, BenchSettings
    from studio.bench.leaderboard import _measure

    rng = np.random.default_rng(0)
    program = [BenchItem((0.1 * rng.standard_normal(8000)).astype(np.float32), "one")]
    b = BenchSettings(device="cpu", seconds=0.5, size_px=64, fps=25.0, repeats=1, engine=ENGINE)
    runs = _measure(default_anchor, program, program, b, "cpu", tmp_path, cuda=False, progress=lambda m: None,
                    minus_one=False)
    assert len(runs["plain"]) == 1 and len(runs["optimized"]) == 2
    assert all(r[1] is None for r in runs["plain"] + runs["optimized"])  # no run keeps its core
    assert probe["run"] == 4 and {run for run, _ in probe["opened"]} == {1, 2, 3, 4}  # warm-up, plain, optimized x2
    assert probe["stale"] == []  # no earlier run's engine was alive when a later run opened one
