"""The studio's interview mode through the runtime's command table, without Qt or a sound card: a stand-in capture
whose ring a thread fills in real time (silence, and the guest's answer when the test says so)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from studio.audio.capture import CaptureStatus
from studio.audio.settings import AudioEngine
from studio.contracts import PROGRAM_RATE_HZ
from studio.pipeline import commands as cmd
from studio.pipeline.commands import PreviewMode
from studio.pipeline.rundown import Segment
from studio.pipeline.settings import CoreSettings
from studio.pipeline.telemetry import RuntimeState
from studio.runtime import AudioOutputMode, StudioRuntime, StudioSettings

ALSA = Path("/usr/share/sounds/alsa")
SLOT = PROGRAM_RATE_HZ // 25


class _Microphone:
    """What the microphone room reads of a capture: its ring (filled a slot every 40 ms), device, status."""

    def __init__(self) -> None:
        from studio.audio.ringbuffer import AudioRing

        self.ring = AudioRing(10 * PROGRAM_RATE_HZ, PROGRAM_RATE_HZ)
        self.device = SimpleNamespace(name="stand-in")
        self.status = CaptureStatus.RUNNING
        self.last_error = ""
        self._queue = np.zeros(0, np.float32)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def say(self, audio: np.ndarray) -> None:
        with self._lock:
            self._queue = np.concatenate([self._queue, audio.astype(np.float32)])

    @property
    def speaking(self) -> bool:
        with self._lock:
            return len(self._queue) > 0

    def _run(self) -> None:
        t = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                block, self._queue = self._queue[:SLOT], self._queue[SLOT:]
            self.ring.write(np.pad(block, (0, SLOT - len(block))))
            t += SLOT / PROGRAM_RATE_HZ
            time.sleep(max(0.0, t - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _answer() -> np.ndarray:
    from scipy.io import wavfile
    from scipy.signal import resample_poly

    if not (ALSA / "Front_Center.wav").is_file():
        pytest.skip("alsa-utils speech clips missing: apt-get install alsa-utils")
    rate, x = wavfile.read(ALSA / "Front_Center.wav")
    x = x.astype(np.float32) / 32768.0
    return resample_poly(x.mean(axis=1) if x.ndim > 1 else x, PROGRAM_RATE_HZ, rate).astype(np.float32)


def _wait(what, events: list, timeout_s: float = 180.0):
    """Poll ``what`` until it is true (a bounded wait for a condition, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.05)
    pytest.fail(f"gave up waiting after {timeout_s:g} s; events: {events[-10:]}")


def test_an_interview_in_the_studio_takes_turns_with_the_guest(hopper_path: Path) -> None:
    answer = _answer()
    events: list = []
    settings = StudioSettings(core=CoreSettings(size_px=96, fps=25.0, chunk_frames=2, batch_frames=2),
                              audio_output=AudioOutputMode.NONE, warm_up_voice=False, warm_up_microphone=False)
    runtime = StudioRuntime(settings, on_event=events.append)
    mic = _Microphone()
    of = lambda kind: [e for e in list(events) if isinstance(e, kind)]  # noqa: E731
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    try:
        runtime.submit(cmd.SetAudioEngine(AudioEngine.POCKETSPHINX))  # the lighter engine: the guest's mouth is not
        runtime.submit(cmd.LoadAnchor(None))  # what this test watches
        _wait(lambda: of(cmd.AnchorLoaded), events)
        runtime.microphone.mic = mic  # the device the producer chose, open
        runtime.submit(cmd.SetMode(PreviewMode.INTERVIEW))
        _wait(lambda: runtime.supervisor.mode is PreviewMode.INTERVIEW and runtime.core is not None
              and runtime.core.fmt.rows == 2, events)  # a cast of two
        assert type(runtime.supervisor.motion).__name__ == "InterviewMotion"
        _wait(lambda: runtime.latest_frame() is not None and runtime.latest_frame().image.shape[1] == 2 * 96, events)
        _wait(lambda: runtime._state is RuntimeState.MICROPHONE, events)

        question, thanks = "Good evening. What did you see at the river?", "Thank you. Good night."
        runtime.submit(cmd.GoLive(segments=(Segment("question", question), Segment("thanks", thanks))))
        started = _wait(lambda: of(cmd.SegmentStarted), events)
        assert started[0].rundown_row == 0 and runtime._state is RuntimeState.LIVE
        first = runtime.rundown.items[0]
        _wait(lambda: runtime.clock_s() >= first.end_slot / 25.0 + 0.3, events)
        assert len(of(cmd.SegmentStarted)) == 1  # the host waits for the guest's answer
        mic.say(answer)
        _wait(lambda: not mic.speaking, events)
        answered_s = runtime.clock_s()
        _wait(lambda: len(of(cmd.SegmentStarted)) == 2, events)
        second = runtime.rundown.items[-1]
        assert second.start_slot / 25.0 >= answered_s  # after the answer, not over it
        _wait(lambda: of(cmd.RundownFinished), events)

        runtime.submit(cmd.SetGuestPortrait(Path("/no/such/guest.png")))  # a bad guest: one line, the show goes on
        bad = _wait(lambda: [e for e in of(cmd.GuestChanged) if e.message], events)
        assert "\n" not in bad[0].message and runtime.supervisor.mode is PreviewMode.INTERVIEW
        runtime.submit(cmd.SetGuestPortrait(hopper_path))
        _wait(lambda: [e for e in of(cmd.GuestChanged) if e.path == hopper_path and not e.message], events)
        _wait(lambda: runtime.supervisor.interview_cast[1].name == "grace_hopper" and runtime.core is not None, events)

        runtime.submit(cmd.SetFormat(CoreSettings(size_px=128, fps=25.0, chunk_frames=2, batch_frames=2)))
        refused = _wait(lambda: of(cmd.FormatChanged), events)
        assert refused[0].message.startswith("End the interview first") and runtime.core_settings.size_px == 96

        runtime.submit(cmd.SetMode(PreviewMode.SCRIPT))
        _wait(lambda: runtime.supervisor.mode is PreviewMode.SCRIPT and runtime.core is not None
              and runtime.core.fmt.rows == 1, events)
    finally:
        runtime.submit(cmd.Shutdown())
        thread.join(timeout=60)
        mic.stop()
    assert not thread.is_alive()
    assert not [e for e in of(cmd.ModeChanged) if e.requested is PreviewMode.INTERVIEW and e.message
                and "Preparing" not in e.message], of(cmd.ModeChanged)


def test_an_interview_without_a_microphone_says_so_in_one_line() -> None:
    events: list = []
    settings = StudioSettings(core=CoreSettings(size_px=96, fps=25.0, chunk_frames=2, batch_frames=2),
                              audio_output=AudioOutputMode.NONE, warm_up_voice=False, warm_up_microphone=False)
    runtime = StudioRuntime(settings, on_event=events.append)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    try:
        runtime.submit(cmd.LoadAnchor(None))
        _wait(lambda: [e for e in list(events) if isinstance(e, cmd.AnchorLoaded)], events)
        runtime.submit(cmd.SetMicrophone(""))  # the producer chose no microphone
        runtime.submit(cmd.SetMode(PreviewMode.INTERVIEW))
        said = _wait(lambda: [e for e in list(events) if isinstance(e, cmd.ModeChanged)
                              and e.requested is PreviewMode.INTERVIEW], events)
    finally:
        runtime.submit(cmd.Shutdown())
        thread.join(timeout=60)
    assert said[0].active is PreviewMode.SCRIPT
    assert said[0].message == ("The microphone is off: choose one in the Microphone panel. The interview's guest "
                               "needs a microphone.")
