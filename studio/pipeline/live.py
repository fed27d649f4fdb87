"""``live``: the core headless from the microphone (for tests and kiosks), optionally recording and streaming.

The same core as the studio's microphone mode: ``MicSource`` paces it by the arrival of audio, ``MicMotion`` turns the
voice into motion (the neural engine, or pocketsphinx), the outputs are a latency meter, the recorder and any streams.
Prints one summary line at the end: frames, drops, sound-to-pixel latency (from the arrival of a sample in the
capture ring to the frame that shows it leaving the core), the model's time, the microphone's state.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from studio.audio.capture import CaptureStatus, MicCapture
from studio.audio.settings import AudioEngine, CaptureSettings
from studio.errors import AudioDeviceError, StudioError
from studio.pipeline.settings import CoreSettings, Optimization

log = logging.getLogger(__name__)


def live_optimizations(device: str, engine: str = "builtin") -> frozenset[Optimization]:
    """What the microphone path runs with by default: everything but keyframe interpolation, which would show each
    in-between frame one frame period later (+40 ms at 25 fps) against a 150 ms sound-to-pixel target."""
    from studio.pipeline.factory import default_optimizations

    return default_optimizations(device, engine) - {Optimization.FRAME_INTERPOLATION}


@dataclass(frozen=True)
class LiveSummary:
    elapsed_s: float
    frames: int
    dropped: int
    latency_ms_median: float
    latency_ms_p95: float
    motion: dict
    engine: str
    microphone: str
    cpu_load: float
    cores: int
    recorder_dropped: int = 0
    recorder_repeated: int = 0
    stages_ms: dict = None  # median ms per chunk of each stage of the core
    first_frame_s: float | None = None  # from the command's start to the first program frame written
    first_frame_from_core_s: float | None = None  # the same from the core's creation (models opened and warmed)
    interview: str = ""  # interview mode: what the turns and the listeners did, in words ("" otherwise)

    def line(self) -> str:
        m = self.motion
        fps = self.frames / max(self.elapsed_s, 1e-9)
        model = (f"neural engine (model {m.get('model_ms_per_frame', math.nan):.1f} ms a frame, "
                 f"{int(m.get('frames_missing', 0))} frames shown before the model had them)"
                 if self.engine == "neural" else
                 f"pocketsphinx (recognizer saw {100 * m.get('recognizer_share', 0):.0f}% of the audio)")
        seen, skipped = int(m.get("sieve_frames_seen", 0)), int(m.get("sieve_frames_skipped", 0))
        return (f"{self.elapsed_s:.1f} s: {self.frames} frames shown ({fps:.1f} fps), {self.dropped} dropped; "
                f"sound-to-pixel latency median {self.latency_ms_median:.0f} ms, p95 {self.latency_ms_p95:.0f} ms "
                f"(motion {m.get('motion_ms_median', math.nan):.1f} ms); core stages "
                + " / ".join(f"{k} {v:.1f}" for k, v in (self.stages_ms or {}).items())
                + f" ms a chunk; {model}; sieve skipped {skipped}/{seen} "
                f"frames; CPU load {100 * self.cpu_load:.0f}% of {self.cores} cores; recorder dropped "
                f"{self.recorder_dropped}, repeated {self.recorder_repeated}; microphone {self.microphone}; "
                f"first frame {_secs(self.first_frame_s)} after the command's start "
                f"({_secs(self.first_frame_from_core_s)} after the core's)"
                + (f"; interview: {self.interview}" if self.interview else ""))


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def run_live(settings: CoreSettings, seconds: float, out: Path | None = None, input_device: str | None = None,
             anchor_path: Path | None = None, audio_engine: AudioEngine = AudioEngine.NEURAL,
             motion_thread: bool = True, streams: tuple[str, ...] = (), say=lambda m: None,
             canvas_style=None, interview=None) -> LiveSummary:
    """Run the core from the microphone for ``seconds``; returns what it measured. ``canvas_style``: the canvas's
    set and graphics (``studio.graphics.look.CanvasStyle``). ``interview``: a
    ``studio.pipeline.interview.InterviewRequest``: the host on its script, the microphone's voice the guest."""
    from studio.encode.recorder import RecorderOutput
    from studio.pipeline.factory import make_core, presenter_px
    from studio.pipeline.motion import MicMotion, warm_microphone
    from studio.pipeline.outputs import LatencyMeter
    from studio.pipeline.sources import MicSource
    from studio.presenter.anchor import build_anchor

    # Open the microphone first: no device fails fast, and the slow first open overlaps the presenter's set-up.
    capture = MicCapture(CaptureSettings(device=input_device))
    try:
        capture.start()
    except AudioDeviceError as exc:
        if interview is None:
            raise
        raise AudioDeviceError(f"The interview's guest needs a microphone. {exc}") from exc
    recorder = None
    core = None
    speaker = None
    try:
        warm_microphone(audio_engine)  # before the core: its first load beside a running core dropped frames
        shown: set[str] = set()

        def anchor_progress(fraction: float, what: str) -> None:  # the first build at a size adds face detail
            if what.startswith("adding face detail") and "detail" not in shown:
                shown.add("detail")
                say("live: adding face detail to the portrait (once for this size; it is cached)")

        if interview is None:
            anchor = build_anchor(anchor_path, output_px=presenter_px(settings), progress=anchor_progress)
            source = MicSource(capture)
            motion = MicMotion(engine=audio_engine, motion_thread=motion_thread)
        else:
            settings, anchor, source, motion, canvas_style, speaker = _interview(
                interview, settings, MicSource(capture), audio_engine, motion_thread, canvas_style, anchor_progress)
        meter = LatencyMeter()
        outputs = [meter]
        if out is not None:
            recorder = RecorderOutput(out, fragmented=True)
            outputs.append(recorder)
        outputs += list(streams)
        core = make_core(source, motion, settings, anchor, outputs, bus_source="live", canvas_style=canvas_style)
        core.warm()  # the forms the run needs, and the set and graphics of what it will have on air
        if speaker is not None:  # the script is known: all of it is spoken before the guest's microphone opens
            say(f"live: speaking the host's {len(speaker.turns)} turn(s)")
            speaker.speak_ahead(None if settings.device == "cpu" else 1)
        if recorder is not None:  # a recording that cannot start is the command's error, not a warning
            try:
                recorder.open(core.fmt)
            except BaseException:
                core.close()
                raise
            recorder.opened = True  # the core leaves it as it is
    except BaseException:
        capture.stop()
        raise
    if speaker is not None:
        speaker.start()
    stop = threading.Event()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            core.run(stop)
        except BaseException as exc:  # reported after the loop
            errors.append(exc)
            stop.set()

    cpu0, t0 = time.process_time(), time.monotonic()
    thread = threading.Thread(target=work, name="live-core", daemon=True)
    thread.start()
    status = capture.status
    try:
        # "listening" once the first frame is out: the motion model and the generator are ready (nothing said after
        # the line is lost to their start-up), and the motion source's note, if any, is known
        ready_by = time.monotonic() + 120
        while core.produced == 0 and not stop.is_set() and time.monotonic() < ready_by:
            time.sleep(0.01)
        if not stop.is_set():
            say(f"live: listening on '{capture.device.name if capture.device else '?'}' for {seconds:g} s")
            for out in streams:
                page = getattr(out, "page_url", None)
                say(f"live: streaming to {page or getattr(out, 'url', out.name)}")
            if motion.note:
                say(f"live: {motion.note}")
        cpu0, t0 = time.process_time(), time.monotonic()
        end = t0 + seconds
        announced = 0
        while time.monotonic() < end and not stop.is_set():
            time.sleep(0.05)
            if speaker is not None:
                announced = _announce_turns(source, speaker, announced, say)
            if capture.status != status:
                status = capture.status
                say("live: microphone is back" if status is CaptureStatus.RUNNING
                    else f"live: {capture.last_error or status.value}")
    finally:
        stop.set()
        thread.join(timeout=30)
        if speaker is not None:
            speaker.stop()
        elapsed = time.monotonic() - t0
        cpu = time.process_time() - cpu0
        motion.close()
        final_status = capture.status
        capture.stop()
        for o in core.outputs():
            if o is not recorder:
                o.close()
    path = None
    if recorder is not None:
        try:
            path = recorder.close()
        except StudioError as exc:
            from studio.encode.recorder import failure_line

            raise failure_line(recorder, exc) from exc
    if errors:
        raise errors[0]
    core.close()
    rep = core._last_report
    summary = LiveSummary(
        elapsed_s=elapsed, frames=rep.frames_produced, dropped=rep.frames_dropped,
        latency_ms_median=meter.percentile(50), latency_ms_p95=meter.percentile(95), motion=motion.stats(),
        engine=motion.engine.value, microphone=final_status.value, cpu_load=cpu / (elapsed * (os.cpu_count() or 1)),
        cores=os.cpu_count() or 1, recorder_dropped=recorder.dropped if recorder else 0,
        recorder_repeated=recorder.repeated if recorder else 0,
        stages_ms={k: v.median_ms for k, v in rep.stages.items()}, first_frame_s=rep.first_frame_from_command_s,
        first_frame_from_core_s=rep.first_frame_from_core_s,
        interview=_interview_line(source, motion, speaker) if interview is not None else "")
    if path is not None:
        say(f"live: wrote {path}")
    return summary


def _interview(req, settings: CoreSettings, mic, audio_engine: AudioEngine, motion_thread: bool, canvas_style,
               progress):
    """The interview's settings (a cast of two), anchors, source, motion, canvas style and speech worker."""
    from studio.contracts import CastLayout
    from studio.pipeline.factory import presenter_px
    from studio.pipeline.interview import (InterviewMotion, InterviewSource, TurnSpeaker, interview_anchors,
                                           interview_style)
    from studio.pipeline.programme import programme_settings

    settings = programme_settings(settings, 2, req.layout or CastLayout.TWO_SHOT)
    host, guest = interview_anchors(req.host_portrait, req.guest_portrait, presenter_px(settings), progress)
    source = InterviewSource(mic, req.settings)
    motion = InterviewMotion(audio_engine, seed=settings.seed, motion_thread=motion_thread)
    style = interview_style(canvas_style, host.name, guest.name)
    return settings, (host, guest), source, motion, style, TurnSpeaker(source, req.turns, req.voice)


def _announce_turns(source, speaker, announced: int, say) -> int:
    """Say each host turn that went on air since ``announced`` (its time on the programme's timeline: 0 at its
    first frame), and a turn that could not be spoken; returns how many are announced."""
    fps = source.fmt.fps
    placed = list(source.placed)
    for p in placed[announced:]:
        first = source.first_slot or 0
        say(f"live: host turn {p.number} of {len(speaker.turns)} on air at {(p.start_slot - first) / fps:.2f} s "
            f"({p.n_slots / fps:.2f} s)")
    if speaker.error:
        say(f"live: {speaker.error}")
        speaker.error = ""
    return len(placed)


def _interview_line(source, motion, speaker) -> str:
    guest_s = source.floor.guest_spoken_s if source.floor is not None else 0.0
    return (f"host turns on air {len(source.placed)} of {len(speaker.turns)}, guest heard speaking {guest_s:.1f} s, "
            f"nods: host {motion.nods_cued[0]}, guest {motion.nods_cued[1]}")


def print_line(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
