"""The leaderboard's runs of one engine: each form of the engine (plain, pyramidal, graphed) is built once for the
row and shared by its runs (a DiT's compile takes minutes; a 14 B DiT twin is 37 GB, and two copies of a form do not
fit an 80 GB GPU), and every form is closed when the row ends."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

ENGINE = "test-leaderboard-release"


@pytest.fixture()
def probe(monkeypatch):
    """Registers ``ENGINE`` (the built-in engine) and notes each open (the run and the form's settings) and close."""
    from studio.bench import harness
    from studio.generators.builtin import BuiltinGenerator
    from studio.contracts import GENERATORS

    state = {"run": 0, "opened": [], "closed": 0}

    class Probe(BuiltinGenerator):
        def open(self, anchor, settings):
            state["opened"].append((state["run"], (settings.size_px, settings.cuda_graphs, self.field_divisor)))
            super().open(anchor, settings)

        def close(self):
            state["closed"] += 1
            super().close()

    real = harness.run_config

    def counted(*args, **kwargs):
        state["run"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(harness, "run_config", counted)
    GENERATORS.names()  # the registry loads its modules first, so that the test's entry stays
    GENERATORS.register(ENGINE)(lambda **kw: Probe(**kw))
    yield state
    GENERATORS._factories.pop(ENGINE, None)


def test_a_row_builds_each_form_once_and_closes_them_at_its_end(probe, default_anchor, tmp_path):
    from studio.bench.harness import BenchItem, BenchSettings
    from studio.bench.leaderboard import LeaderboardBudget, _measure

    rng = np.random.default_rng(0)
    program = [BenchItem((0.1 * rng.standard_normal(8000)).astype(np.float32), "one")]
    b = BenchSettings(device="cpu", seconds=0.5, size_px=64, fps=25.0, repeats=1, engine=ENGINE)
    budget = LeaderboardBudget(frames=12, repeats=2, budget_s=0.0)
    steps = []

    class Fits:
        def __call__(self, est, ms):
            return est > 0 and ms > 0

        def left_s(self):
            return math.inf

    runs = _measure(default_anchor, program, program[:1], b, "cpu", tmp_path, False, budget,
                    fits=Fits(), step=lambda k, m, left: steps.append((k, m)))
    assert len(runs["plain"]) == 2 and len(runs["optimized"]) == 2  # a third brackets all-but-one runs only
    assert all(r[1] is None for r in runs["plain"] + runs["optimized"])  # no run keeps its core
    assert probe["run"] == 8  # the probe (optimized, plain; twice), then plain and optimized interleaved, twice
    assert steps == [(1, 4), (2, 4), (3, 4), (4, 4)]  # each measured run announced, with the row's count
    # the probe opens the optimized (pyramidal) form, then the plain one; the measured runs reuse them
    assert [run for run, _ in probe["opened"]] == [1, 2]
    forms = [form for _, form in probe["opened"]]
    assert len(set(forms)) == len(forms) == 2 and forms[0][2] != forms[1][2]  # two field sizes, each built once
    assert probe["closed"] == 2  # both closed when the row ended


def _fake_runs(monkeypatch, base_ms: dict[str, float] | None = None) -> list:
    """harness.run_config replaced: a run's time depends only on the engine and the flags (async costs 3 ms,
    pyramidal saves 2)."""
    from types import SimpleNamespace

    from studio.bench import harness
    from studio.pipeline.settings import Optimization as O

    calls = []

    def fake_run_config(anchor, program, b, flags, tmp, keep_core=False, forms=None, stop=None):
        calls.append(frozenset(flags))
        ms = (base_ms or {}).get(b.engine, 10.0) - 2.0 * (O.PYRAMIDAL in flags) + 3.0 * (O.ASYNC_PIPELINE in flags)
        rep = SimpleNamespace(ms_per_frame=ms, frames_produced=25, frames_full=25, frames_interpolated=0,
                              silent_frames=0, gpu_mem_peak_mb=0.0, stages={}, wall_s=25 * ms / 1e3,
                              first_frame_s=0.5)
        gen = SimpleNamespace(twin=False, settings=SimpleNamespace(precision="fp32"), precision_label="fp32")
        core = SimpleNamespace(features=None, pool=SimpleNamespace(forms=lambda: {(False, False): gen}),
                               close=lambda: None)
        return (rep, {}, core) if keep_core else (rep, {})

    monkeypatch.setattr(harness, "run_config", fake_run_config)
    return calls


def test_a_leaderboard_measured_in_parts_keeps_the_earlier_rows_of_the_same_machine(monkeypatch, tmp_path):
    from studio.bench import harness, leaderboard

    _fake_runs(monkeypatch, {"builtin": 10.0, "wav2lip": 5.0})
    monkeypatch.setattr(leaderboard, "_leaderboard_file", lambda: tmp_path / "last.json")
    program = tmp_path / "p.npz"
    harness.save_program([harness.BenchItem(np.zeros(16000, np.float32), "one")], program)
    b = harness.BenchSettings(device="cpu", seconds=1.0, size_px=64, fps=25.0, repeats=1, program=program)
    out = tmp_path / "lb.json"

    def run(engines, **kw):
        assert leaderboard.run_leaderboard(kw.pop("b", b), out, progress=lambda m: None, engines=engines, **kw) == 0
        return json.loads(out.read_text())

    first = run(("builtin",))
    second = run(("wav2lip",), append=True)
    assert [(r["engine"], r["rank"]) for r in second["rows"]] == [("wav2lip", 1), ("builtin", 2)]  # re-ranked
    assert second["parts"] == [first["started"], second["started"]]
    again = run(("builtin",), append=True)  # measured again: replaced, not doubled
    assert sorted(r["engine"] for r in again["rows"]) == ["builtin", "wav2lip"]
    other = run(("builtin",), append=True, b=harness.BenchSettings(**{**b.__dict__, "fps": 50.0}))
    assert [r["engine"] for r in other["rows"]] == ["builtin"]  # another output: the file's rows are replaced
    assert [r["engine"] for r in run(("builtin",))["rows"]] == ["builtin"]  # without --append: a new leaderboard


def test_the_rank_is_the_measured_set_without_the_flags_the_engine_ran_slower_with(monkeypatch, tmp_path):
    """Runs replaced by fakes whose time depends only on the flags (async costs 3 ms here, pyramidal saves 2): the
    row keeps every-flag time, drops what it ran faster without, measures that set once more and ranks by it."""
    from studio.bench import harness, leaderboard
    from studio.pipeline.settings import Optimization as O

    calls = _fake_runs(monkeypatch)
    monkeypatch.setattr(leaderboard, "_leaderboard_file", lambda: tmp_path / "last.json")
    program = tmp_path / "p.npz"
    harness.save_program([harness.BenchItem(np.zeros(16000, np.float32), "one")], program)
    b = harness.BenchSettings(device="cpu", seconds=1.0, size_px=64, fps=25.0, repeats=1, program=program)
    budget = leaderboard.LeaderboardBudget(repeats=1, shares=True, budget_s=0.0)
    assert leaderboard.run_leaderboard(b, tmp_path / "lb.json", progress=lambda m: None, engines=("builtin",),
                                       budget=budget) == 0
    row = json.loads((tmp_path / "lb.json").read_text())["rows"][0]
    assert O.ASYNC_PIPELINE.value in row["optimizations"] and O.PYRAMIDAL.value in row["optimizations"]
    assert row["ms_per_frame_plain"] == 10.0 and row["ms_per_frame_optimized"] == 11.0
    assert row["saved_share"][O.ASYNC_PIPELINE.value] == pytest.approx(-0.3)  # (8 - 11) / 10
    assert O.ASYNC_PIPELINE.value not in row["best_optimizations"] and O.PYRAMIDAL.value in row["best_optimizations"]
    assert row["ms_per_frame_best"] == row["ms_per_frame_best_run"] == 8.0 and row["rank"] == 1
    assert row["compute_saved_best"] == pytest.approx(0.2)
    assert calls[-1] == frozenset(O(v) for v in row["best_optimizations"])  # the set it is ranked by was run


def test_the_chart_is_drawn_for_long_engine_labels_and_rows_left_out(tmp_path):
    """A leaderboard whose labels run to 100 characters, with a row not measured: the chart is written, its labels
    wrapped (the image no wider than the figure)."""
    from PIL import Image

    from studio.bench.leaderboard import write_chart

    rows = [{"status": "measured", "label": "An engine with a long name " * 4 + f"{i}", "ms_per_frame_plain": 100.0,
             "ms_per_frame_optimized": 5.0 + i, "ms_per_frame_best": 4.0 + i} for i in range(3)]
    rows.append({"status": "needs a GPU", "label": "left out", "reason": "no GPU"})
    path = write_chart({"rows": rows, "machine": {}, "output": "1080p canvas at 60 fps"}, tmp_path / "lb.png")
    with Image.open(path) as im:
        assert im.width <= 1200 and im.height > 200


def _tiny(tmp_path):
    from studio.bench import harness

    program = tmp_path / "p.npz"
    harness.save_program([harness.BenchItem(np.zeros(16000, np.float32), "one")], program)
    return harness.BenchSettings(device="cpu", seconds=1.0, size_px=64, fps=25.0, repeats=1, program=program)


def test_without_shares_an_engine_gets_only_its_probe_and_its_plain_and_optimized_repeats(monkeypatch, tmp_path):
    from studio.bench import leaderboard

    calls = _fake_runs(monkeypatch)
    monkeypatch.setattr(leaderboard, "_leaderboard_file", lambda: tmp_path / "last.json")
    budget = leaderboard.LeaderboardBudget(frames=25, repeats=3, budget_s=0.0)
    assert leaderboard.run_leaderboard(_tiny(tmp_path), tmp_path / "lb.json", progress=lambda m: None,
                                       engines=("builtin",), budget=budget) == 0
    assert len(calls) == 4 + 2 * 3 and calls[4] == calls[3] == frozenset() and calls[5] == calls[0]  # interleaved
    row = json.loads((tmp_path / "lb.json").read_text())["rows"][0]
    assert row["saved_share"] == {} and "--shares" in row["shares_note"]
    assert row["repeats"] == {"plain": 3, "optimized": 3}


def test_a_cancel_keeps_the_rows_measured_so_far_in_both_files(monkeypatch, tmp_path):
    """Cancelled (Ctrl-C, or the panel's terminate) while the second engine runs: the first engine's row stays in
    --json and in the file the studio's panel reads, the second says it was cut short, and the files are whole."""
    from studio.bench import leaderboard

    _fake_runs(monkeypatch, {"builtin": 10.0, "wav2lip": 5.0})
    last = tmp_path / "last.json"
    monkeypatch.setattr(leaderboard, "_leaderboard_file", lambda: last)
    budget = leaderboard.LeaderboardBudget(frames=25, repeats=1, budget_s=0.0)
    seen = []

    def progress(line):
        seen.append(line)
        if "[2/2]" in line and "run 2 of 2" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        leaderboard.run_leaderboard(_tiny(tmp_path), tmp_path / "lb.json", progress=progress,
                                    engines=("builtin", "wav2lip"), budget=budget)
    for path in (tmp_path / "lb.json", last):
        data = json.loads(path.read_text())
        assert data["complete"] is False
        rows = {r["engine"]: r for r in data["rows"]}
        assert rows["builtin"]["status"] == "measured" and rows["builtin"]["ms_per_frame_optimized"] > 0
        assert rows["wav2lip"]["status"] == "cut short" and "progress" not in rows["wav2lip"]
    assert not list(tmp_path.glob(".*.tmp"))  # every rewrite replaced its file whole


def test_an_engine_whose_estimate_does_not_fit_the_budget_is_listed_with_it(monkeypatch, tmp_path):
    """A budget that no probe can fit: the row says how long it would take and what to do, and is not measured."""
    from studio.bench import leaderboard

    calls = _fake_runs(monkeypatch)
    monkeypatch.setattr(leaderboard, "_leaderboard_file", lambda: tmp_path / "last.json")
    monkeypatch.setattr(leaderboard, "row_estimate_s", lambda *a: 1e9)  # a row that needs more than any budget
    budget = leaderboard.LeaderboardBudget(frames=25, repeats=2, budget_s=1e6)
    assert leaderboard.run_leaderboard(_tiny(tmp_path), tmp_path / "lb.json", progress=lambda m: None,
                                       engines=("builtin",), budget=budget) == 0
    row = json.loads((tmp_path / "lb.json").read_text())["rows"][0]
    assert row["status"] == "over budget" and "--engines builtin" in row["reason"]
    assert row["estimate_s"] > 0 and row["probe_ms_per_frame"] == pytest.approx(11.0)  # every flag on
    assert len(calls) == 4  # the probe only (optimized and plain, each twice)


def test_a_row_estimate_counts_every_run_of_the_row():
    from studio.bench.leaderboard import LeaderboardBudget, row_estimate_s, runs_per_row

    assert runs_per_row(LeaderboardBudget(repeats=2), 5) == 4
    assert runs_per_row(LeaderboardBudget(repeats=2, shares=True), 5) == 4 + 5 + 2
    assert row_estimate_s(0.1, 8, 4, 0.5) == pytest.approx(4 * (0.8 + 0.5))


def test_once_the_budget_is_spent_the_engines_left_are_listed_without_a_probe(monkeypatch, tmp_path):
    from studio.bench import leaderboard

    calls = _fake_runs(monkeypatch)
    monkeypatch.setattr(leaderboard, "_leaderboard_file", lambda: tmp_path / "last.json")
    budget = leaderboard.LeaderboardBudget(frames=25, repeats=1, budget_s=1e-9)
    assert leaderboard.run_leaderboard(_tiny(tmp_path), tmp_path / "lb.json", progress=lambda m: None,
                                       engines=("builtin", "wav2lip"), budget=budget) == 0
    rows = {r["engine"]: r for r in json.loads((tmp_path / "lb.json").read_text())["rows"]}
    assert rows["builtin"]["status"] == rows["wav2lip"]["status"] == "over budget"
    assert "budget was spent" in rows["builtin"]["reason"] and "--engines wav2lip" in rows["wav2lip"]["reason"]
    assert calls == []


def test_a_probe_that_outlasts_the_budget_left_is_stopped_and_the_row_says_so(monkeypatch, tmp_path):
    """The probe runs under a deadline (what is left of the budget): stopped there, the row is over budget without
    an estimate and the run goes on to the next engine."""
    import contextlib
    import threading

    from studio.bench import harness, leaderboard

    calls = _fake_runs(monkeypatch)
    fake = harness.run_config
    stops = []

    def watched(*args, stop=None, **kwargs):
        stops.append(stop)
        return fake(*args, **kwargs)

    @contextlib.contextmanager
    def passed(seconds):  # the deadline has passed by the end of the probe's first run
        ev = threading.Event()
        ev.set()
        yield ev

    monkeypatch.setattr(harness, "run_config", watched)
    monkeypatch.setattr(leaderboard, "_deadline", passed)
    monkeypatch.setattr(leaderboard, "_leaderboard_file", lambda: tmp_path / "last.json")
    budget = leaderboard.LeaderboardBudget(frames=25, repeats=1, budget_s=1e6)
    assert leaderboard.run_leaderboard(_tiny(tmp_path), tmp_path / "lb.json", progress=lambda m: None,
                                       engines=("builtin", "wav2lip"), budget=budget) == 0
    rows = json.loads((tmp_path / "lb.json").read_text())["rows"]
    assert [r["status"] for r in rows] == ["over budget"] * 2 and all("probe" in r["reason"] for r in rows)
    assert len(calls) == 2 and all(st is not None for st in stops)  # one probe run each, under the deadline


def test_the_deadline_fires_after_its_seconds_and_never_when_there_is_no_budget():
    from studio.bench.leaderboard import _deadline

    with _deadline(0.0) as stop:
        assert stop.wait(10.0)
    with _deadline(math.inf) as stop:
        assert not stop.is_set()
