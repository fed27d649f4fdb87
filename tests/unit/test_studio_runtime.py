"""The studio's runtime without Qt or a sound card: its plain parts (program audio, clocks, meters, recovery), the
command loop starting and stopping, errors as events, the compute-saved figure measured live from interleaved baseline
chunks, and a failing stage that restarts the core while the studio goes on."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from studio.pipeline import commands as cmd
from studio.pipeline.clock import MonotonicClock, ProgramAudio
from studio.pipeline.settings import CoreSettings, Optimization
from studio.pipeline.telemetry import ClockSource, MedianWindow, OptimizationStatus, RuntimeState, StallMeter
from studio.runtime import AudioOutputMode, StudioRuntime, StudioSettings, recover_recordings

O = Optimization


def test_program_audio_mixes_clips_at_their_positions_and_cuts() -> None:
    pa = ProgramAudio(1000)
    pa.add(10, np.full(5, 0.5, np.float32))
    pa.add(12, np.full(5, 0.25, np.float32))
    out = pa.read(8, 12)
    np.testing.assert_allclose(out, [0, 0, .5, .5, .75, .75, .75, .25, .25, 0, 0, 0])
    pa.cut(13)
    np.testing.assert_allclose(pa.read(8, 12), [0, 0, .5, .5, .75, 0, 0, 0, 0, 0, 0, 0])
    pa.prune(100)
    assert not pa.read(0, 50).any()


def test_resample_keeps_length_and_pitch() -> None:
    from studio.pipeline.sources import resample

    x = np.sin(2 * np.pi * 441 * np.arange(22050) / 22050).astype(np.float32)
    y = resample(x, 22050, 48000)
    assert len(y) == 48000 and y.dtype == np.float32
    peak_hz = np.argmax(np.abs(np.fft.rfft(y))) * 48000 / len(y)
    assert abs(peak_hz - 441) < 2
    assert len(resample(x[:1001], 22050, 16000)) == round(1001 * 16000 / 22050)


def test_monotonic_clock_pauses() -> None:
    c = MonotonicClock()
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
    assert recover_recordings(tmp_path) == []
    assert not list(tmp_path.iterdir())


# -- the runtime ----------------------------------------------------------------------------------------------------------

def _settings(**core) -> StudioSettings:
    base = dict(size_px=96, fps=25.0, chunk_frames=4, batch_frames=4)
    base.update(core)
    return StudioSettings(core=CoreSettings(**base), audio_output=AudioOutputMode.NONE, warm_up_voice=False,
                          restart_backoff_s=0.2)


class _Running:
    """A runtime on its own thread, with the events it sent; shut down (and joined) on exit."""

    def __init__(self, settings: StudioSettings) -> None:
        self.events: list = []
        self.runtime = StudioRuntime(settings, on_event=self.events.append)
        self.thread = threading.Thread(target=self.runtime.run, name="test-runtime")

    def __enter__(self) -> "_Running":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.runtime.submit(cmd.Shutdown())
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()

    def of(self, kind: type) -> list:
        return [e for e in list(self.events) if isinstance(e, kind)]

    def wait(self, what: Callable[[], object], timeout_s: float = 120.0) -> object:
        """Poll ``what`` until it is true (a bounded wait for a condition, not a timing assertion)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            got = what()
            if got:
                return got
            time.sleep(0.05)
        pytest.fail(f"gave up waiting after {timeout_s:g} s; events: {self.events[-10:]}")


def test_runtime_starts_and_stops_without_an_anchor_or_sound() -> None:
    with _Running(StudioSettings(audio_output=AudioOutputMode.NONE, warm_up_voice=False)) as r:
        r.runtime.submit(cmd.StopRecording())  # harmless when not recording
        r.runtime.submit(cmd.Stop())
        r.runtime.submit(cmd.SetPaused(True))
        r.runtime.submit(cmd.SetPaused(False))
    states = [e.state for e in r.of(cmd.StateChanged)]
    assert states[0] == RuntimeState.STARTING and states[-1] == RuntimeState.STOPPED
    audio = r.of(cmd.AudioOutputStatus)
    assert audio and audio[0].clock_source == ClockSource.MONOTONIC and "No audio output" in audio[0].message
    assert not r.of(cmd.Error)
    assert r.runtime.latest_frame() is None and r.runtime.core is None
    assert r.runtime.telemetry().frames_produced == 0


def test_recording_into_a_missing_folder_is_an_error_event(tmp_path: Path) -> None:
    with _Running(StudioSettings(audio_output=AudioOutputMode.NONE, warm_up_voice=False)) as r:
        r.runtime.submit(cmd.StartRecording(tmp_path / "missing"))
        r.wait(lambda: r.of(cmd.Error), 30)
    errors = r.of(cmd.Error)
    assert "does not exist" in errors[0].message and "\n" not in errors[0].message
    assert not r.of(cmd.RecordingStarted)


def test_runtime_publishes_compute_saved_with_each_flags_share_once_warm() -> None:
    """Idling at 96 px with three generation flags and the async stages; one chunk in two is a baseline variant
    (every flag off, or one flag off in turn): the HUD's figure and every active flag's share come from those."""
    active = frozenset({O.PYRAMIDAL, O.FRAME_INTERPOLATION, O.SILENCE_SIEVE, O.ASYNC_PIPELINE})
    settings = _settings(optimizations=active, measure_baseline=True, baseline_every=2, baseline_pairs_min=3)

    def warm(r: _Running):
        sample = r.runtime.bus.latest("core")
        compute = sample.compute if sample is not None else None
        if compute is None or not math.isfinite(compute.baseline_ms_per_frame):
            return None
        shares = {s.name: s for s in compute.shares}
        return compute if all(math.isfinite(shares[o.value].saved_fraction) for o in active) else None

    with _Running(settings) as r:
        r.runtime.submit(cmd.LoadAnchor(None))
        compute = r.wait(lambda: warm(r), 180)
        frame = r.runtime.latest_frame()
    shares = {s.name: s for s in compute.shares}
    assert set(shares) == {o.value for o in Optimization}
    for o in (O.PYRAMIDAL, O.FRAME_INTERPOLATION, O.SILENCE_SIEVE):
        assert shares[o.value].status is OptimizationStatus.ACTIVE
        assert shares[o.value].reason.startswith("measured live"), shares[o.value]
    assert shares[O.ASYNC_PIPELINE.value].status is OptimizationStatus.ACTIVE
    assert "slowest stage" in shares[O.ASYNC_PIPELINE.value].reason
    for o in (O.CUDA_GRAPHS, O.GPU_ENCODE):
        assert shares[o.value].status is OptimizationStatus.UNAVAILABLE and "CUDA" in shares[o.value].reason
    for o in (O.KV_CACHE, O.AUDIO_CACHE):  # no audio model while the presenter idles on the rundown's clock
        assert shares[o.value].status is OptimizationStatus.UNAVAILABLE
    assert compute.baseline_ms_per_frame > 0 and compute.actual_ms_per_frame > 0
    assert "interleaved 1 in 2" in compute.baseline_source
    assert math.isfinite(compute.saved_fraction)  # measured here, whatever its sign on this machine
    assert frame is not None and frame.image.shape == (96, 96, 3)


class _FailsOnce:
    """Registers generator ``name``: the built-in engine, whose ``calls``-th call raises once (a stage failing), or
    with ``always`` every call from then on (a stage that fails on every chunk)."""

    def __init__(self, name: str, calls: int, always: bool = False) -> None:
        self.name = name
        self.calls = calls
        self.always = always
        self.seen = 0
        self.raised = threading.Event()
        self.failed_gen = None  # the generator that raised
        self.closed: list = []  # generators closed, in order

    def __enter__(self) -> "_FailsOnce":
        from studio.generators.builtin import BuiltinGenerator
        from studio.contracts import GENERATORS

        probe = self

        class Flaky(BuiltinGenerator):
            def _tick(self) -> None:
                probe.seen += 1
                due = probe.seen >= probe.calls if probe.always else probe.seen == probe.calls
                if due and (probe.always or not probe.raised.is_set()):
                    probe.failed_gen = self
                    probe.raised.set()
                    raise RuntimeError("injected failure in stage B")

            def generate(self, coeffs, features=None):
                self._tick()
                return super().generate(coeffs, features)

            def render_span(self, coeffs, strides, carry):
                self._tick()
                return super().render_span(coeffs, strides, carry)

            def close(self) -> None:
                probe.closed.append(self)
                super().close()

        GENERATORS.names()  # load the registry's modules first, so that nothing replaces the test's entry later
        GENERATORS.register(self.name)(lambda **kw: Flaky(**kw))
        return self

    def __exit__(self, *exc) -> None:
        from studio.contracts import GENERATORS

        GENERATORS._factories.pop(self.name, None)


def test_a_failing_stage_restarts_the_core_and_the_studio_goes_on() -> None:
    with _FailsOnce("test-fails-once", calls=5) as flaky, _Running(_settings(engine="test-fails-once")) as r:
        r.runtime.submit(cmd.LoadAnchor(None))
        r.wait(lambda: r.of(cmd.AnchorLoaded))
        first_core = r.runtime.core
        errors = r.wait(lambda: r.of(cmd.Error))
        assert flaky.raised.is_set()
        assert "presenter pipeline failed" in errors[0].message and "injected failure" in errors[0].message
        r.wait(lambda: r.runtime.core is not first_core and r.runtime.core is not None)
        restarted = r.runtime.core
        seen = flaky.seen
        r.wait(lambda: flaky.seen > seen + 3 and r.runtime.latest_frame() is not None)  # frames come again
        assert r.runtime.core is restarted and r.runtime.telemetry().state is RuntimeState.IDLE
        assert flaky.failed_gen in flaky.closed  # the failed core's engines were let go (the soak's memory step)
    assert len(r.of(cmd.Error)) == 1  # one failure, one restart


def test_restarts_back_off_doubling_and_stop_after_the_last() -> None:
    """A failed core restarts after 1, 2, 4 s (at most 3), three times in a row; the fourth failure stops it. A core
    that ran long before failing starts the count again, and so does the producer's change (``reset``)."""
    from studio.runtime.supervisor import Restarts

    r = Restarts(replace(_settings(), restart_backoff_s=1.0, restart_backoff_max_s=3.0, restart_attempts=3,
                         restart_reset_s=60.0))
    waits = [r.failed("RuntimeError: boom", 0.5)[1] for _ in range(3)]
    assert waits == [1.0, 2.0, 3.0] and not r.halted
    said, wait = r.failed("RuntimeError: boom", 0.5)
    assert wait is None and said == r.halted
    assert said.startswith("The presenter pipeline failed 4 times in a row (RuntimeError: boom). It is stopped")
    r.reset()
    assert not r.halted and r.failed("RuntimeError: boom", 0.0)[1] == 1.0
    assert r.failed("RuntimeError: boom", 0.0)[1] == 2.0
    said, wait = r.failed("RuntimeError: boom", 600.0)  # after ten minutes on air: the first failure of a new run
    assert wait == 1.0 and "restarts in 1 s (restart 1 of 3)" in said


def _cores(engine: str) -> list:
    """The cores of ``engine`` still in memory once the cycle collector has run."""
    import gc

    from studio.pipeline.core import Core

    gc.collect()
    return [o for o in gc.get_objects() if type(o) is Core and o.s.engine == engine]


def test_a_core_that_fails_on_every_chunk_is_let_go_and_stops_after_its_restarts(caplog) -> None:
    """Each failed core is let go at once, also while a log handler keeps every record (caplog here, a log window in
    the studio): a kept error's traceback held the whole core, and the process grew by gigabytes. The restarts back
    off, and after the last one the studio says plainly that the presenter is stopped, and stays up."""
    import logging

    caplog.set_level(logging.ERROR)
    settings = replace(_settings(engine="test-fails-always"), restart_backoff_s=0.05, restart_backoff_max_s=0.1,
                       restart_attempts=4)
    with _FailsOnce("test-fails-always", calls=1, always=True) as flaky, _Running(settings) as r:
        r.runtime.submit(cmd.LoadAnchor(None))
        r.wait(lambda: len(r.of(cmd.Error)) >= 3)
        assert len(_cores(flaky.name)) <= 1  # the one on air or starting, if any; no failed one
        r.wait(lambda: r.runtime.telemetry().state is RuntimeState.FAILED)
        assert _cores(flaky.name) == []
        errors = [e.message for e in r.of(cmd.Error)]
        assert r.thread.is_alive()
    assert len(errors) == 5, errors  # the first core and its four restarts
    assert "restarts in 0.05 s (restart 1 of 4)" in errors[0] and "restarts in 0.1 s (restart 3 of 4)" in errors[2]
    assert "failed 5 times in a row" in errors[-1] and "It is stopped" in errors[-1]
    assert "injected failure" in errors[-1]
    assert all(rec.exc_info is None for rec in caplog.records)  # the traceback is in the record as text
    assert any("injected failure" in rec.getMessage() and "Traceback" in rec.getMessage() for rec in caplog.records)


def test_a_restart_that_cannot_start_is_one_more_failure_and_a_new_look_starts_again(tmp_path: Path) -> None:
    """The programme's logo goes missing: the core fails on its next chunk and every restart fails while drawing the
    canvas. The studio stays up, stops the presenter after its restarts and says why; going live with a look that
    works starts the presenter again."""
    from studio.contracts import Layout
    from studio.graphics.look import Graphics

    settings = replace(_settings(layout=Layout.CANVAS, canvas_height_px=144), restart_backoff_s=0.05,
                       restart_backoff_max_s=0.1, restart_attempts=2)
    gone = tmp_path / "logo.png"
    with _Running(settings) as r:
        r.runtime.submit(cmd.LoadAnchor(None))
        r.wait(lambda: r.of(cmd.AnchorLoaded) and r.runtime.latest_frame() is not None)
        r.runtime.submit(cmd.GoLive((), (), Graphics(name="Eileen Collins", logo=str(gone))))
        r.wait(lambda: r.runtime.telemetry().state is RuntimeState.FAILED)
        errors = [e.message for e in r.of(cmd.Error)]
        assert r.runtime.core is None and r.thread.is_alive()
        r.runtime.submit(cmd.GoLive((), (), Graphics(name="Eileen Collins")))
        r.wait(lambda: r.runtime.core is not None and r.runtime.core.produced > 0)
        assert r.runtime.telemetry().state is RuntimeState.IDLE
    assert len(errors) == 3 and all("channel logo" in m for m in errors), errors
    assert "failed 3 times in a row" in errors[-1]


def test_a_recording_that_fails_on_air_is_reported_while_the_show_goes_on(tmp_path: Path, monkeypatch) -> None:
    """The recorder raising (a full disk) takes it out of the program: the producer hears about it at once, not when
    pressing stop, and the presenter keeps going."""
    from studio.encode.recorder import RecorderOutput
    from studio.errors import EncoderError

    writes = {"n": 0}
    real_write = RecorderOutput.write

    def failing_write(self, batch):
        writes["n"] += 1
        if writes["n"] > 3:
            raise EncoderError("The disk is full: free some space and record again.")
        real_write(self, batch)

    monkeypatch.setattr(RecorderOutput, "write", failing_write)
    with _Running(_settings()) as r:
        r.runtime.submit(cmd.LoadAnchor(None))
        r.wait(lambda: r.of(cmd.AnchorLoaded))
        r.runtime.submit(cmd.StartRecording(tmp_path))
        r.wait(lambda: r.of(cmd.RecordingStarted))
        failed = r.wait(lambda: r.of(cmd.RecordingFailed), 60)
        core = r.runtime.core
        produced = core.produced
        r.wait(lambda: r.runtime.core is core and core.produced > produced + 8)  # the show goes on, same core
        assert r.runtime.telemetry().recording_path == ""
    assert "disk is full" in failed[0].message
    assert not r.of(cmd.Error) and not r.of(cmd.RecordingStopped)


def test_a_lost_microphone_is_announced_and_so_is_its_return() -> None:
    """The capture's watchdog reopens a lost device on its own; the runtime says when it went and when it came back
    (the soak's sound-server restart was silent before)."""
    from types import SimpleNamespace

    from studio.audio.capture import CaptureStatus

    events: list = []
    rt_ = StudioRuntime(_settings(), on_event=events.append)
    mic = SimpleNamespace(status=CaptureStatus.RUNNING, device=SimpleNamespace(name="pulse"), last_error="")
    rt_.microphone.mic = mic
    rt_.microphone.poll()
    assert not [e for e in events if isinstance(e, cmd.MicrophoneStatus)]  # nothing changed, nothing said
    mic.status, mic.last_error = CaptureStatus.DEVICE_LOST, "Microphone 'pulse' stopped delivering audio; retrying."
    rt_.microphone.poll()
    rt_.microphone.poll()
    mic.status, mic.last_error = CaptureStatus.RUNNING, ""
    rt_.microphone.poll()
    said = [e for e in events if isinstance(e, cmd.MicrophoneStatus)]
    assert [(e.ok, e.message) for e in said] == [
        (False, "Microphone 'pulse' stopped delivering audio; retrying."), (True, "listening again")]


def test_stop_cuts_the_segment_already_on_the_timeline() -> None:
    """Stop while a segment plays and the next is already scheduled: the next never starts (no teleprompter jump, no
    'live' state for speech that was cut) and the studio goes back to idle."""
    from studio.pipeline.rundown import Segment

    long = "Good evening. " + "Here is the news of the day, read slowly and in full, with every detail. " * 3
    with _Running(_settings()) as r:
        r.runtime.submit(cmd.LoadAnchor(None))
        r.wait(lambda: r.of(cmd.AnchorLoaded), 180)
        r.runtime.submit(cmd.GoLive(segments=(Segment("one", long), Segment("two", "Good night."))))
        r.wait(lambda: len(r.runtime.rundown.items) == 2 and r.of(cmd.SegmentStarted), 120)
        second_s = r.runtime.rundown.items[1].start_slot / 25.0
        assert r.runtime.clock_s() < second_s  # stopped while the first plays
        r.runtime.submit(cmd.Stop())
        r.wait(lambda: r.runtime.clock_s() > second_s + 1.0, 60)
        states = [e.state for e in r.of(cmd.StateChanged)]
    assert [e.rundown_row for e in r.of(cmd.SegmentStarted)] == [0]
    assert states[-1] is RuntimeState.IDLE


def test_every_command_is_routed_to_a_room() -> None:
    """The runtime's table names a handler for each command the window can send, and nothing else."""
    import typing

    runtime = StudioRuntime(_settings())
    assert set(runtime.routes) == set(typing.get_args(cmd.Command))
    with pytest.raises(TypeError, match="unknown command"):
        runtime._handle(object())


def test_a_new_presenter_size_builds_the_anchor_again_at_that_size() -> None:
    """The pack is framed (and its face detail added) at one output size: a format of another size rebuilds it."""
    with _Running(replace(_settings(), check_format_speed=False)) as r:
        r.runtime.submit(cmd.LoadAnchor(None))
        r.wait(lambda: r.of(cmd.AnchorLoaded))
        assert r.runtime.supervisor.anchor.size_px == 96
        r.runtime.submit(cmd.SetFormat(CoreSettings(size_px=128, fps=25.0, chunk_frames=4, batch_frames=4)))
        changed = r.wait(lambda: r.of(cmd.FormatChanged))
        assert changed[0].message == "", changed[0].message
        r.wait(lambda: len(r.of(cmd.AnchorLoaded)) >= 2)
        assert r.runtime.supervisor.anchor.size_px == 128


def test_a_cast_the_engine_cannot_draw_is_refused_and_the_one_anchor_stays_on_air(hopper_path) -> None:
    """An engine that draws one anchor: a cast of two is refused with the reason (the engines that can), and the one
    anchor keeps running on the programme instead of a stopped, black preview."""
    from dataclasses import replace as dc_replace

    from studio.contracts import GENERATORS
    from studio.generators.builtin import BuiltinGenerator
    from studio.pipeline.cast import Member

    class OneFace(BuiltinGenerator):
        info = dc_replace(BuiltinGenerator.info, name="one-face", label="One face", cast_rows=False)

    GENERATORS.register("one-face")(lambda **kw: OneFace(**kw))
    try:
        with _Running(_settings(engine="one-face")) as r:
            r.runtime.submit(cmd.LoadAnchor(None))
            r.wait(lambda: r.of(cmd.AnchorLoaded))
            r.wait(lambda: r.runtime.core is not None)
            r.runtime.submit(cmd.SetCast((Member("Anna"), Member("Grace", portrait=hopper_path))))
            failed = r.wait(lambda: r.of(cmd.CastFailed), 300)
            assert "One face draws one anchor" in failed[0].message and "LivePortrait" in failed[0].message
            sup = r.runtime.supervisor
            assert sup.cast is None and not r.of(cmd.CastOnAir)
            r.wait(lambda: r.runtime.core is not None and r.runtime.core.fmt.rows == 1)
    finally:
        GENERATORS._factories.pop("one-face", None)
