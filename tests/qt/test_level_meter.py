"""The microphone's level meter asks for a repaint only when its bar or peak moves by a pixel, at most
``MAX_PAINTS_PER_S`` times a second, and at once when its input is switched (offscreen, on a fake clock)."""

from __future__ import annotations

import math

import pytest

from studio.ui import preview
from studio.ui.preview import LevelMeter

pytestmark = pytest.mark.qt


@pytest.fixture
def meter(qtbot, monkeypatch):
    clock = {"t": 100.0}
    monkeypatch.setattr(preview.time, "monotonic", lambda: clock["t"])
    m = LevelMeter()
    qtbot.addWidget(m)
    m.resize(300, 20)
    m.show()
    asks = []
    monkeypatch.setattr(m, "update", lambda: asks.append(clock["t"]))
    return m, clock, asks


def test_a_steady_level_stops_asking_for_repaints(meter):
    m, clock, asks = meter
    for _ in range(200):  # 60 per second, as the window's timer calls it
        clock["t"] += 1 / 60
        m.set_level(-20.0)
    assert len(asks) == 1  # the bar rose once; then bar and peak stay on their pixels


def test_silence_after_speech_settles_to_no_repaints(meter):
    m, clock, asks = meter
    for _ in range(600):  # the bar falls, the peak holds and falls, then both rest on the floor
        clock["t"] += 1 / 60
        m.set_level(-12.0 if clock["t"] < 101.0 else -math.inf)
    settled = len(asks)
    for _ in range(300):
        clock["t"] += 1 / 60
        m.set_level(-math.inf)
    assert len(asks) == settled > 1


def test_repaints_are_capped_per_second_and_follow_the_input_switch(meter):
    m, clock, asks = meter
    for i in range(120):  # a level that moves every call, for two seconds
        clock["t"] += 1 / 60
        m.set_level(-50.0 + (i % 40))
    assert LevelMeter.MAX_PAINTS_PER_S <= len(asks) <= 2 * LevelMeter.MAX_PAINTS_PER_S + 1
    n = len(asks)
    m.enabled_input = False  # switched at once, whatever the cap
    assert len(asks) == n + 1 and not m.enabled_input
