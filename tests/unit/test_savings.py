"""The windowed compute-saved estimator behind the HUD's ribbon (studio/pipeline/savings.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from studio.pipeline.savings import PairedSavings, median, median_interval


def test_no_figure_until_enough_pairs_then_the_median_of_the_window():
    s = PairedSavings(pairs=4, min_pairs=3)
    s.add("normal", 10.0)
    for i in range(2):
        s.add("plain", 20.0)
        s.add("normal", 10.0)
    assert s.saved() is None and s.count() == 2  # measuring
    s.add("plain", 20.0)
    s.add("normal", 10.0)
    fig = s.saved()
    assert fig.fraction == pytest.approx(0.5) and fig.pairs == 3
    assert (fig.baseline_ms_per_frame, fig.actual_ms_per_frame) == (20.0, 10.0)
    for _ in range(10):  # the window keeps the last 4 pairs only
        s.add("plain", 40.0)
        s.add("normal", 10.0)
    assert s.saved().fraction == pytest.approx(0.75) and s.saved().pairs == 4


def test_a_baseline_chunk_is_paired_with_the_mean_of_the_normal_chunks_on_either_side():
    s = PairedSavings(pairs=8, min_pairs=1)
    s.add("normal", 8.0)
    s.add("plain", 20.0)
    s.add("normal", 12.0)  # neighbours 8 and 12: 10
    assert s.saved().fraction == pytest.approx(0.5)
    assert s.saved(extra_baseline_ms=20.0).fraction == pytest.approx(0.75)  # the motion stage's savings added
    s.add("plain", float("nan"))  # a chunk without a cost is left out
    s.add("normal", 10.0)
    assert s.count() == 1


def test_a_share_is_the_flag_less_chunks_against_their_neighbours_over_the_baseline():
    s = PairedSavings(pairs=8, min_pairs=2)
    for _ in range(2):
        s.add("normal", 10.0)
        s.add("minus:pyramidal", 14.0)
    s.add("normal", 10.0)
    assert s.share("pyramidal", 20.0).fraction == pytest.approx(0.2)
    assert s.share("silence_sieve", 20.0) is None and s.share("pyramidal", math.nan) is None


def test_the_median_interval_holds_the_median_and_narrows_with_more_pairs():
    rng = np.random.default_rng(0)
    few = list(rng.normal(0.3, 0.1, 8))
    many = list(rng.normal(0.3, 0.1, 200))
    lo8, hi8 = median_interval(few)
    lo200, hi200 = median_interval(many)
    assert lo8 <= median(few) <= hi8 and lo200 <= median(many) <= hi200
    assert hi200 - lo200 < hi8 - lo8
    assert median_interval([0.5]) == (0.5, 0.5) and all(math.isnan(x) for x in median_interval([]))


def test_one_outlying_pair_moves_the_windowed_figure_little():
    """The point of the window: one pair's noise (a baseline chunk that landed on silence, a burst of load) does not
    swing the figure as the single-pair ratio did."""
    s = PairedSavings(pairs=12, min_pairs=5)
    rng = np.random.default_rng(1)
    for _ in range(12):
        s.add("normal", 10.0)
        s.add("plain", float(15.0 + rng.normal(0, 0.5)))
    s.add("normal", 10.0)
    before = s.saved().fraction
    s.add("plain", 9.0)  # one pair at -11 %
    s.add("normal", 10.0)
    assert abs(s.saved().fraction - before) < 0.02
