"""``render``: one segment headless through the core: script or recording -> speech -> motion -> frames -> MP4.

``render_segment`` is a generator worker: it yields ``RenderProgress`` as it goes, checks ``abort`` between steps
and returns a ``RenderResult``. A script is spoken on its own thread from the start (the command starts it before its
heavy imports) while the anchor is loaded and the core, its outputs and the canvas's set and graphics are made; the
frames then wait only for what is left of the first sentence. The frame loop is the core's (``studio.pipeline.core``), run on a worker thread while
this generator reports its progress; the MP4 is written by the one recorder, fragmented, so that a killed render
leaves a recoverable file.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
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
    canvas_style: object = None  # the whole look (studio.graphics.look.CanvasStyle); wins over canvas_background
    streams: tuple = ()  # more outputs (studio.encode.streams), fed as the file is written
    stream_pace: bool = True  # live outputs get the program at real time (the file then takes as long as it lasts)
    encode: object = None  # StreamEncodeSettings of the MP4 and the streams (None: ``render_encode_settings``)
    # the SpeechFeed of ``text``, already started (the command starts it before its heavy imports); None: made here
    speech: object = None


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
    # wall seconds per stage, one after the other: anchor (the pack), setup (the core, its outputs, the canvas),
    # speech (the wait for the first spoken section that is left after them: synthesis runs from the start, beside
    # them), render (the frames), finish (closing the file)
    stage_s: dict[str, float] = field(default_factory=dict)
    # CPU seconds per stage, the whole process (every thread): on a machine shared with other jobs the wall seconds
    # swell with the load, these much less
    stage_cpu_s: dict[str, float] = field(default_factory=dict)
    device: str = "cpu"
    report: object = None  # the core's CoreReport
    warnings: tuple[str, ...] = ()  # what the user should know (left-out letters, clipping, ...)

    def real_time_factors(self) -> dict[str, float]:
        """Stage seconds per second of output (below 1 = faster than real time)."""
        return {k: v / max(self.audio_duration_s, 1e-9) for k, v in self.stage_s.items()}


def _anchor_with_progress(req: RenderRequest, output_px: int) -> Generator[RenderProgress, None, object]:
    """Build the anchor pack in a worker thread, yielding its progress as it comes (adding face detail to a large
    presenter takes tens of seconds the first time)."""
    import queue

    from studio.presenter.anchor import build_anchor

    updates: queue.Queue = queue.Queue()
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["anchor"] = build_anchor(req.anchor_path, output_px=output_px,
                                         progress=lambda f, m: updates.put(RenderProgress("anchor", f, m)))
        except BaseException as exc:  # handed to the generator, which raises it
            box["error"] = exc
        finally:
            updates.put(None)

    thread = threading.Thread(target=work, name="anchor-build", daemon=True)
    thread.start()
    while (item := updates.get()) is not None:
        yield item
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["anchor"]


def render_segment(req: RenderRequest, anchor=None, abort: Callable[[], bool] = lambda: False
                   ) -> Generator[RenderProgress, None, RenderResult]:
    """Render one segment to ``req.out_path`` (see the module docstring)."""
    from studio.pipeline.factory import presenter_px
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource, item_from_audio

    if (req.text is None) == (req.audio_path is None):
        raise InputError("Give exactly one of --text, --script or --audio.")
    stage: dict[str, float] = {}
    cpu: dict[str, float] = {}
    c0 = time.process_time()
    on_air = OnAir(title=req.title)
    warnings: tuple[str, ...] = ()
    feed = None
    if req.text is not None:  # spoken section by section from now on, while the rest is prepared and the render runs
        from studio.pipeline.speech_feed import SpeechFeed

        feed = req.speech if req.speech is not None else SpeechFeed(req.text, req.voice, on_air)
        feed.start()
    source = ProgramSource([])
    prepared = None
    try:
        t0 = time.perf_counter()
        if anchor is None:
            anchor = yield from _anchor_with_progress(req, presenter_px(req.core))
        stage["anchor"] = time.perf_counter() - t0

        motion = ProgramMotion(audio_engine=req.audio_engine, seed=req.core.seed)
        prepared = _prepare(req, anchor, source, motion, on_air, stage)
        warnings = prepared.warnings

        t0 = time.perf_counter()
        yield RenderProgress("speech", 0.0, "synthesizing speech" if req.text is not None else "reading the audio")
        if feed is not None:
            item = None
            while item is None:
                item = feed.wait_first(0.25)
                if abort():
                    raise StudioError("Render cancelled.")
            warnings = (*feed.warnings, *warnings)
        else:
            from studio.audio.io import load_audio

            box2: list[RenderProgress] = []
            decoded = load_audio(req.audio_path,
                                 progress=lambda f, m: box2.append(RenderProgress("audio", f, m)))
            yield from box2[-1:]
            warnings = (*decoded.warnings, *warnings)
            item = item_from_audio(decoded.program_48k, 48000, decoded.analysis_16k, on_air)
        source.queue(item)
        if feed is not None:
            feed.attach(source)
        stage["speech"] = time.perf_counter() - t0
        if abort():
            raise StudioError("Render cancelled.")
    except BaseException:
        if feed is not None:
            feed.cancel()
        if prepared is not None:
            prepared.discard(req)
        raise
    return (yield from _drive(req, prepared, source, feed, warnings, stage, cpu, c0, abort))


def run_program(req: RenderRequest, anchor, source, motion, feed, warnings: tuple[str, ...], stage: dict, cpu: dict,
                c0: float, abort: Callable[[], bool] = lambda: False) -> Generator[RenderProgress, None, RenderResult]:
    """The core over ``source`` (its items placed) with ``motion``, into the file and the streams of ``req``; the
    anchor pack (a cast: the packs in cast order). ``stage`` / ``cpu``: the seconds measured so far, ``c0``: the
    process time they were counted from."""
    prepared = _prepare(req, anchor, source, motion, OnAir(title=req.title), stage)
    return (yield from _drive(req, prepared, source, feed, (*warnings, *prepared.warnings), stage, cpu, c0, abort))


@dataclass
class _Prepared:
    """A core with its outputs open, its canvas drawn: ready for its first chunk."""

    core: object
    recorder: object
    warnings: tuple[str, ...]

    def discard(self, req: RenderRequest) -> None:
        self.recorder.abort()
        for st in req.streams:
            st.close()
        self.core.close()


def _prepare(req: RenderRequest, anchor, source, motion, on_air: OnAir, stage: dict) -> _Prepared:
    """Make the core and open its outputs (the file and every stream share one encode); the set and the graphics are
    drawn meanwhile, on a thread, while the encoder process starts. Times ``stage["setup"]``."""
    from studio.encode.recorder import RecorderOutput
    from studio.pipeline.factory import make_core

    t0 = time.perf_counter()
    s = req.core
    warnings: tuple[str, ...] = ()
    recorder = RecorderOutput(req.out_path, fragmented=True, block=True,
                              settings=req.encode or render_encode_settings(s))
    for st in req.streams:
        if hasattr(st, "pace"):
            st.pace = req.stream_pace
    style = None
    if s.layout is Layout.CANVAS and req.canvas_style is not None:
        style = req.canvas_style
    elif s.layout is Layout.CANVAS and req.canvas_background is not None:
        from studio.pipeline.post import CanvasStyle

        style = CanvasStyle(background_image=req.canvas_background)
    core = make_core(source, motion, s, anchor, [recorder, *req.streams], weights_dir=req.weights_dir,
                     canvas_style=style)
    for pack in (anchor if isinstance(anchor, (tuple, list)) else (anchor,)):
        matte = getattr(pack, "matte", None)
        if s.layout is Layout.CANVAS and matte is not None and matte.poor:
            log.warning("%s", matte.note)
            warnings = (*warnings, matte.note)
    with ThreadPoolExecutor(1, thread_name_prefix="canvas") as pool:
        drawn = pool.submit(core.post.prepare, on_air)
        _open_outputs(core, [recorder, *req.streams])  # closes what it opened, and the pool, when one fails
    try:
        drawn.result()
    except BaseException:
        _Prepared(core, recorder, warnings).discard(req)
        raise
    stage["setup"] = time.perf_counter() - t0
    return _Prepared(core, recorder, warnings)


def _drive(req: RenderRequest, prepared: _Prepared, source, feed, warnings: tuple[str, ...], stage: dict, cpu: dict,
           c0: float, abort: Callable[[], bool]) -> Generator[RenderProgress, None, RenderResult]:
    """Run the prepared core to the end of ``source``, then finish the file: the render stage."""
    core, recorder, s = prepared.core, prepared.recorder, req.core
    cpu["prepare"] = time.process_time() - c0  # the anchor, the first speech and the setup
    c0 = time.process_time()

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
            if feed is not None and feed.error is not None:
                stop.set()
            if recorder.error is not None:  # the first failed write ends the work
                stop.set()
                break
            p, message = _render_progress(source, feed)
            if not math.isnan(p) and abs(p - last) >= 0.01:
                last = p
                yield RenderProgress("render", p, message)
        thread.join()
        if recorder.error is not None:
            raise _failure(recorder)
        if box_err:
            raise box_err[0]
        if feed is not None and feed.error is not None:
            raise feed.error
        if stop.is_set():
            raise StudioError("Render cancelled.")
        yield RenderProgress("render", 1.0, f"frame {source.total_slots}/{source.total_slots}")
        t1 = time.perf_counter()
        for st in req.streams:  # the recorder last: the shared encode's flush (the sound's end) goes to the file
            st.close()
        try:
            out = recorder.close()
        except StudioError as exc:  # the finished file did not check out: say what was kept
            raise _failure(recorder, exc) from exc
        stage["finish"] = time.perf_counter() - t1
    except BaseException:
        stop.set()
        if feed is not None:
            feed.cancel()
        thread.join(timeout=30)
        recorder.abort()
        for st in req.streams:
            st.close()
        core.close()
        raise
    stage["render"] = time.perf_counter() - t0
    cpu["render"] = time.process_time() - c0
    report = core._last_report
    core.close()
    n = source.total_slots
    if req.timings_path is not None and feed is not None:
        feed.write_timings(req.timings_path, n / s.fps)
    return RenderResult(out_path=out, n_frames=n, fps=s.fps, audio_duration_s=n / s.fps, stage_s=stage,
                        device=s.device, report=report, warnings=warnings, stage_cpu_s=cpu)


def _render_progress(source, feed) -> tuple[float, str]:
    """The render's share done, and what to say; while the script is still being spoken, the whole length is
    estimated from the share spoken so far."""
    if feed is None or feed.done:
        return source.progress(), f"frame {source.next_slot}/{source.total_slots}"
    spoken = max(feed.fraction, 1e-3)
    estimate = max(source.total_slots, round(source.total_slots / spoken))
    return (min(0.99, source.next_slot / max(1, estimate)),
            f"frame {source.next_slot} of about {estimate} ({spoken:.0%} of the script spoken)")


def _open_outputs(core, outputs) -> None:
    """Open every output before the first frame: one that cannot open is the command's error, not a warning."""
    opened = []
    try:
        for out in outputs:
            out.open(core.fmt)
            out.opened = True  # the core leaves it as it is
            opened.append(out)
    except BaseException:
        for out in opened:
            try:
                out.abort() if hasattr(out, "abort") else out.close()
            except StudioError as exc:
                log.info("closing %s after a failed start: %s", out.name, exc)
        core.close()
        raise


def render_encode_settings(s: CoreSettings):
    """The encode of a render's file, which its streams share (equal settings: one encode of each frame); the farm
    fixes its thread count, since x264's output depends on it."""
    from studio.encode.encoders import StreamEncodeSettings

    return StreamEncodeSettings()


def _failure(recorder, err: BaseException | None = None) -> StudioError:
    """The recorder's error as the command's one line, naming the kept part, if any."""
    from studio.encode.recorder import failure_line

    return failure_line(recorder, err)


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
