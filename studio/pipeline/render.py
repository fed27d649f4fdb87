"""``render``: one segment headless through the core: script or recording -> speech -> motion -> frames -> MP4.

``render_segment`` is a generator worker: it yields ``RenderProgress`` as it goes, checks ``abort`` between steps
and returns a ``RenderResult``. The frame loop is the core's (``studio.pipeline.core``), run on a worker thread while
this generator reports its progress; the MP4 is written by the one recorder, fragmented, so that a killed render
leaves a recoverable file.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from pathlib import Path

from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine
from studio.errors import EncoderError, InputError, StudioError
from studio.contracts import Layout, OnAir
from studio.pipeline.settings import CoreSettings, Optimization
from studio.speech.types import Utterance

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenderRequest:
    out_path: Path
    text: str | None = None
    audio_path: Path | None = None
    anchor_path: Path | None = None
    voice: str | None = None
    title: str = ""  # the lower third on a canvas
    core: CoreSettings = field(default_factory=CoreSettings)  # size / canvas, fps, device, engine, flags
    timings_path: Path | None = None  # optional JSON with the phone and word timings of the speech
    audio_engine: AudioEngine = DEFAULT_AUDIO_ENGINE  # what animates a recording (--audio)
    weights_dir: Path | None = None
    canvas_background: Path | None = None
    streams: tuple = ()  # more outputs (studio.encode.streams), fed as the file is written


@dataclass(frozen=True)
class RenderProgress:
    stage: str  # "anchor", "speech", "render"
    fraction: float  # 0..1 of that stage
    message: str


@dataclass(frozen=True)
class RenderResult:
    out_path: Path
    n_frames: int
    fps: float
    audio_duration_s: float
    stage_s: dict[str, float] = field(default_factory=dict)  # wall seconds per stage
    # CPU seconds per stage, the whole process (every thread): on a machine shared with other jobs the wall seconds
    # swell with the load, these much less
    stage_cpu_s: dict[str, float] = field(default_factory=dict)
    device: str = "cpu"
    report: object = None  # the core's CoreReport
    warnings: tuple[str, ...] = ()  # what the user should know (left-out letters, clipping, ...)

    def real_time_factors(self) -> dict[str, float]:
        """Stage seconds per second of output (below 1 = faster than real time)."""
        return {k: v / max(self.audio_duration_s, 1e-9) for k, v in self.stage_s.items()}


def render_segment(req: RenderRequest, anchor=None, abort: Callable[[], bool] = lambda: False
                   ) -> Generator[RenderProgress, None, RenderResult]:
    """Render one segment to ``req.out_path`` (see the module docstring)."""
    if (req.text is None) == (req.audio_path is None):
        raise InputError("Give exactly one of --text, --script or --audio.")
    stage: dict[str, float] = {}
    cpu: dict[str, float] = {}
    c0 = time.process_time()
    speech = _Speech(req) if req.text is not None else None  # on its own thread from now (see _Speech)
    try:
        from studio.encode.recorder import RecorderOutput
        from studio.pipeline.factory import make_core
        from studio.pipeline.motion import ProgramMotion
        from studio.pipeline.sources import ProgramSource, item_from_audio, item_from_utterance
        from studio.presenter.anchor import build_anchor

        on_air = OnAir(title=req.title)
        t0 = time.perf_counter()
        if anchor is None:
            box: list[RenderProgress] = []
            anchor = build_anchor(req.anchor_path,
                                  progress=lambda f, m: box.append(RenderProgress("anchor", f, m)))
            yield from box
        stage["anchor"] = time.perf_counter() - t0

        warnings: tuple[str, ...] = ()
        item = None
        if speech is None:
            t0 = time.perf_counter()
            yield RenderProgress("speech", 0.0, "reading the audio")
            from studio.audio.io import load_audio

            box2: list[RenderProgress] = []
            decoded = load_audio(req.audio_path, progress=lambda f, m: box2.append(RenderProgress("audio", f, m)))
            yield from box2[-1:]
            warnings = tuple(decoded.warnings)
            item = item_from_audio(decoded.program_48k, 48000, decoded.analysis_16k, on_air)
            stage["speech"] = time.perf_counter() - t0
        if abort():
            raise StudioError("Render cancelled.")

        t0 = time.perf_counter()
        s = req.core
        source = ProgramSource([item] if item is not None else [])
        motion = ProgramMotion(audio_engine=req.audio_engine, seed=s.seed)
        recorder = RecorderOutput(req.out_path, fragmented=True, block=True,
                                  settings=_render_encode_settings(s))
        style = None
        if s.layout is Layout.CANVAS and req.canvas_background is not None:
            from studio.pipeline.post import CanvasStyle

            style = CanvasStyle(background_image=req.canvas_background)
        core = make_core(source, motion, s, anchor, [recorder, *req.streams], weights_dir=req.weights_dir,
                         canvas_style=style)
        stage["setup"] = time.perf_counter() - t0
    except BaseException:
        if speech is not None:
            speech.thread.join()
        raise
    utt: Utterance | None = None
    if speech is not None:
        t0 = time.perf_counter()
        yield RenderProgress("speech", 0.0, "synthesizing speech")
        try:
            utt = speech.result()
        except BaseException:
            recorder.abort()
            core.pool.close()
            raise
        warnings = tuple(getattr(utt, "warnings", ()))
        source.queue(item_from_utterance(utt, on_air))
        stage["speech"] = speech.wall_s  # on its own thread, beside the anchor and the setup
        stage["speech_wait"] = time.perf_counter() - t0  # what it added after them
    cpu["prepare"] = time.process_time() - c0  # anchor, speech and setup (the speech overlaps the other two)
    c0 = time.process_time()
    if abort():
        recorder.abort()
        core.pool.close()
        raise StudioError("Render cancelled.")

    t0 = time.perf_counter()
    stop = threading.Event()
    box_err: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            core.run(stop)
        except BaseException as exc:  # handed to the generator, which raises it
            box_err.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=work, name="render-core", daemon=True)
    thread.start()
    last = -1.0
    try:
        while not done.wait(0.1):
            if abort():
                stop.set()
            p = source.progress()
            if not math.isnan(p) and p - last >= 0.01:
                last = p
                yield RenderProgress("render", p, f"frame {source.next_slot}/{source.total_slots}")
        thread.join()
        if box_err:
            raise box_err[0]
        if stop.is_set():
            raise StudioError("Render cancelled.")
        yield RenderProgress("render", 1.0, f"frame {source.total_slots}/{source.total_slots}")
        t1 = time.perf_counter()
        out = recorder.close()
        for st in req.streams:
            st.close()
        stage["finish"] = time.perf_counter() - t1
    except BaseException:
        stop.set()
        thread.join(timeout=30)
        recorder.abort()
        for st in req.streams:
            st.close()
        core.pool.close()
        raise
    stage["render"] = time.perf_counter() - t0
    cpu["render"] = time.process_time() - c0
    report = core._last_report
    core.pool.close()
    if req.timings_path is not None and utt is not None:
        write_timings(req.timings_path, utt)
    n = source.total_slots
    return RenderResult(out_path=out, n_frames=n, fps=s.fps, audio_duration_s=n / s.fps, stage_s=stage,
                        device=s.device, report=report, warnings=warnings, stage_cpu_s=cpu)


class _Speech:
    """The script's speech, synthesized on a worker thread from the start of the render: the text-to-speech model
    loads and speaks while the anchor loads and the core opens the renderer's models (on two cores they take turns
    instead of waiting for each other). ``result()`` waits for it and raises what it raised."""

    def __init__(self, req: RenderRequest) -> None:
        self._req = req
        self._box: dict = {}
        self.wall_s = 0.0
        self.thread = threading.Thread(target=self._run, name="render-speech", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from studio.speech import synthesize

        t0 = time.perf_counter()
        try:
            self._box["utt"] = synthesize(self._req.text, self._req.voice, sample_rate_hz=48000)
        except BaseException as exc:  # handed to the generator, which raises it
            self._box["error"] = exc
        finally:
            self.wall_s = time.perf_counter() - t0

    def result(self) -> Utterance:
        self.thread.join()
        if "error" in self._box:
            raise self._box["error"]
        return self._box["utt"]


def _render_encode_settings(s: CoreSettings):
    from studio.encode.settings import EncodeSettings

    # fragmented (crash-safe) files with no B-frames; veryfast where the machine keeps up, as before
    return EncodeSettings(preset="veryfast" if s.device.startswith("cuda") else "ultrafast",
                          encoder_threads=0)


def write_timings(path: Path, utt: Utterance) -> None:
    import json

    from studio.speech.timings import utterance_timings_to_json

    try:
        path.write_text(json.dumps(utterance_timings_to_json(utt), indent=1))
    except OSError as exc:
        raise EncoderError(f"Cannot write the timings file {path}: {exc.strerror}. Choose another path.") from exc


def with_defaults(core: CoreSettings, **changes) -> CoreSettings:
    return replace(core, **changes)


__all__ = ["RenderProgress", "RenderRequest", "RenderResult", "render_segment", "write_timings", "Optimization"]
