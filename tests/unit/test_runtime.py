"""The live runtime's plain parts, without Qt, a sound card or an anchor: program audio, clocks, meters, recovery,
and the command loop starting and stopping."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np

from studio.pipeline import runtime as rt
from studio.pipeline.telemetry import ClockSource, MedianWindow, RuntimeState, StallMeter


def test_program_audio_mixes_clips_at_their_positions_and_cuts() -> None:
    pa = rt.ProgramAudio(1000)
    pa.add(10, np.full(5, 0.5, np.float32))
    pa.add(12, np.full(5, 0.25, np.float32))
    out = pa.read(8, 12)
    np.testing.assert_allclose(out, [0, 0, .5, .5, .75, .75, .75, .25, .25, 0, 0, 0])
    pa.cut(13)
    np.testing.assert_allclose(pa.read(8, 12), [0, 0, .5, .5, .75, 0, 0, 0, 0, 0, 0, 0])
    pa.prune(100)
    assert not pa.read(0, 50).any()


def test_resample_keeps_length_and_pitch() -> None:
    x = np.sin(2 * np.pi * 441 * np.arange(22050) / 22050).astype(np.float32)
    y = rt._resample(x, 22050, 48000)
    assert len(y) == 48000
    peak_hz = np.argmax(np.abs(np.fft.rfft(y))) * 48000 / len(y)
    assert abs(peak_hz - 441) < 2


def test_monotonic_clock_pauses() -> None:
    c = rt.MonotonicClock()
    c.set_paused(True)
    a = c.now_s()
    threading.Event().wait(0.02)
    assert c.now_s() == a
    c.set_paused(False)
    threading.Event().wait(0.01)
    assert c.now_s() > a


def test_stall_meter_reports_lateness() -> None:
    m = StallMeter(period_ms=16)
    m.tick(0.0)
    m.tick(0.016)
    assert m.max_stall_ms < 1e-6
    m.tick(0.116)  # 100 ms after the previous tick: 84 ms late
    assert abs(m.max_stall_ms - 84.0) < 1e-6


def test_median_window() -> None:
    w = MedianWindow(3)
    assert math.isnan(w.median()[0])
    for v in (1, 100, 3, 5):
        w.add(v)
    assert w.median() == (5.0, 3)


def test_recovery_removes_a_partial_without_fragments(tmp_path: Path) -> None:
    (tmp_path / ".NewsStudio-x.mp4.part").write_bytes(b"\x00\x00\x00\x08free")
    assert rt.recover_recordings(tmp_path) == []
    assert not list(tmp_path.iterdir())


def test_runtime_starts_and_stops_without_an_anchor_or_sound() -> None:
    events: list[rt.Event] = []
    runtime = rt.PresenterRuntime(rt.RuntimeSettings(audio_output=rt.AudioOutputMode.NONE, warm_up_voice=False),
                                  on_event=events.append)
    thread = threading.Thread(target=runtime.run)
    thread.start()
    runtime.submit(rt.StopRecording())  # harmless when not recording
    runtime.submit(rt.Stop())
    runtime.submit(rt.Shutdown())
    thread.join(timeout=30)
    assert not thread.is_alive()
    states = [e.state for e in events if isinstance(e, rt.StateChanged)]
    assert states[0] == RuntimeState.STARTING and states[-1] == RuntimeState.STOPPED
    audio = [e for e in events if isinstance(e, rt.AudioOutputStatus)]
    assert audio and audio[0].clock_source == ClockSource.MONOTONIC and "No audio output" in audio[0].message
    assert runtime.latest_frame() is None
    assert runtime.telemetry().frames_produced == 0


def test_recording_into_a_missing_folder_is_an_error_event(tmp_path: Path) -> None:
    events: list[rt.Event] = []
    runtime = rt.PresenterRuntime(rt.RuntimeSettings(audio_output=rt.AudioOutputMode.NONE, warm_up_voice=False),
                                  on_event=events.append)
    thread = threading.Thread(target=runtime.run)
    thread.start()
    runtime.submit(rt.StartRecording(tmp_path / "missing"))
    runtime.submit(rt.Shutdown())
    thread.join(timeout=30)
    errors = [e for e in events if isinstance(e, rt.Error)]
    assert errors and "does not exist" in errors[0].message


def test_thread_chooser_follows_the_faster_thread_count() -> None:
    from studio.pipeline.runtime import ThreadChooser

    chooser = ThreadChooser(2, explore_every=10, trial_batches=2)
    used = []
    for i in range(80):
        quiet = i < 40  # two threads win on a quiet machine, one wins once another program loads the CPU
        cost = (0.018 if chooser.current == 2 else 0.030) if quiet else (0.120 if chooser.current == 2 else 0.032)
        used.append(chooser.current)
        chooser.record(cost)
    assert used[5:40].count(2) > 0.7 * 35
    assert used[55:].count(1) > 0.7 * 25
    assert 2 in used[55:]  # it keeps checking the other count


def test_thread_chooser_with_one_core_never_switches() -> None:
    from studio.pipeline.runtime import ThreadChooser

    chooser = ThreadChooser(1)
    assert {chooser.record(0.01 * i) for i in range(1, 30)} == {1}


def test_preview_switches_to_the_pyramidal_renderer_after_calibration() -> None:
    """The plain renderer's first batches are the HUD's baseline; then frames come from the warp-field route (every
    8th batch plain, re-measuring the baseline) and the pyramidal pill carries the saving measured live (whatever its
    sign on this machine)."""
    import time

    from studio.pipeline.telemetry import OptimizationStatus

    runtime = rt.PresenterRuntime(rt.RuntimeSettings(size_px=128, batch_frames=2, audio_output=rt.AudioOutputMode.NONE,
                                                     warm_up_voice=False))
    thread = threading.Thread(target=runtime.run)
    thread.start()
    runtime.submit(rt.LoadAnchor(None))
    pill = compute = None
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            sample = runtime.bus.latest("runtime")
            compute = sample.compute if sample is not None else None
            pill = next((x for x in compute.shares if x.name == "pyramidal"), None) if compute else None
            if pill is not None and pill.status is OptimizationStatus.ACTIVE and runtime._live_ms:
                break
            time.sleep(0.1)
    finally:
        runtime.submit(rt.Shutdown())
        thread.join(timeout=30)
    assert pill is not None and pill.status is OptimizationStatus.ACTIVE, pill
    assert "measured live" in pill.reason and "pyramidal renderer" in compute.baseline_source
    assert math.isfinite(compute.baseline_ms_per_frame) and math.isfinite(pill.saved_fraction)
    assert runtime._fast_presenter is not runtime._presenter
    assert runtime._fast_presenter.settings.field_px == 16  # 128 / 8
    assert runtime.latest_frame().image.shape == (128, 128, 3)
