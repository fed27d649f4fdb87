"""Headless render of one segment: script or audio -> speech -> motion -> frames -> MP4.

``render_segment`` is a generator worker: it yields ``RenderProgress`` as it goes, checks ``abort`` between steps and
returns a ``RenderResult`` with the wall time of every stage. Rendering and encoding overlap (encoding runs on its own
thread behind a bounded queue).
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from studio.audio.io import load_audio_file
from studio.audio.settings import DEFAULT_AUDIO_ENGINE
from studio.errors import EncoderError, InputError, StudioError
from studio.presenter.anchor import AnchorPack, build_anchor
from studio.presenter.motion import script_motion
from studio.presenter.renderer import Presenter, RenderSettings, resolve_device
from studio.speech.types import Utterance

if TYPE_CHECKING:
    from studio.neural.engine import NeuralMotion

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenderRequest:
    out_path: Path
    text: str | None = None
    audio_path: Path | None = None
    anchor_path: Path | None = None
    voice: str | None = None
    size_px: int = 512
    fps: float = 25.0
    device: str = "auto"
    timings_path: Path | None = None  # optional JSON with the phone and word timings of the speech
    seed: int = 0
    # What turns --audio into mouth motion: studio.audio.settings.DEFAULT_AUDIO_ENGINE (why: its comment); the other
    # stays selectable.
    audio_engine: str = DEFAULT_AUDIO_ENGINE.value


@dataclass(frozen=True)
class RenderProgress:
    stage: str  # "anchor", "speech", "motion", "render"
    fraction: float  # 0..1 of that stage
    message: str


@dataclass(frozen=True)
class RenderResult:
    out_path: Path
    n_frames: int
    fps: float
    audio_duration_s: float
    stage_s: dict[str, float] = field(default_factory=dict)  # wall seconds per stage
    device: str = "cpu"

    def real_time_factors(self) -> dict[str, float]:
        """Stage seconds per second of output (below 1 = faster than real time)."""
        return {k: v / max(self.audio_duration_s, 1e-9) for k, v in self.stage_s.items()}


def check_output_path(path: Path) -> None:
    """Fail fast, before any work, when the output cannot be written."""
    import os

    from studio.errors import OutputPathError

    if path.suffix.lower() != ".mp4":
        raise InputError(f"The output must be an .mp4 file, got {path.name}: use --out NAME.mp4.")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise OutputPathError(f"The folder {folder} does not exist: create it or choose another --out path.")
    if not os.access(folder, os.W_OK):
        raise OutputPathError(f"Cannot write to {folder}: choose a folder you have write permission for.")
    if path.is_dir():
        raise OutputPathError(f"{path} is a folder: give a file name ending in .mp4.")


def _speech_from_audio(path: Path, engine: str = DEFAULT_AUDIO_ENGINE.value) -> tuple[Utterance, "NeuralMotion | None"]:
    """Audio input: the neural audio-to-motion engine (``neural``, the default: mouth motion straight from the audio),
    or phones from the streaming phone recognizer (``pocketsphinx``)."""
    audio, rate = load_audio_file(path)
    if engine == "pocketsphinx":
        from studio.audio.recognizer import recognize_file_phones

        phones = recognize_file_phones(audio, rate)
        return Utterance(audio=audio, sample_rate_hz=rate, phonemes=tuple(phones), voice="audio file", text=""), None
    if engine != "neural":
        raise InputError(f"Unknown audio engine '{engine}': use neural or pocketsphinx.")
    from studio.neural.engine import default_engine

    motion = default_engine().motion(audio)
    return Utterance(audio=audio, sample_rate_hz=rate, phonemes=(), voice="audio file", text=""), motion


class _EncodeThread:
    """Encodes frame batches on its own thread behind a bounded queue, timing its own work."""

    def __init__(self, writer) -> None:  # writer: studio.encode.Mp4Writer
        self.writer = writer
        self.q: queue.Queue[np.ndarray | None] = queue.Queue(maxsize=4)
        self.busy_s = 0.0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="encode", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            batch = self.q.get()
            if batch is None:
                return
            if self.error is not None:
                continue
            t0 = time.perf_counter()
            try:
                self.writer.write_video(batch)
            except BaseException as exc:  # handed to the producer thread, which raises it
                self.error = exc
            self.busy_s += time.perf_counter() - t0

    def put(self, batch: np.ndarray) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(batch)

    def finish(self) -> None:
        self.q.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


def render_segment(
    req: RenderRequest,
    anchor: AnchorPack | None = None,
    abort: Callable[[], bool] = lambda: False,
) -> Generator[RenderProgress, None, RenderResult]:
    """Render one segment to ``req.out_path`` (see module docstring)."""
    from studio.encode import Mp4Writer

    if (req.text is None) == (req.audio_path is None):
        raise InputError("Give exactly one of --text, --script or --audio.")
    if not 64 <= req.size_px <= 4096:
        raise InputError(f"--size {req.size_px} is out of range: use 64 to 4096 pixels.")
    if not 1 <= req.fps <= 120:
        raise InputError(f"--fps {req.fps} is out of range: use 1 to 120.")
    check_output_path(req.out_path)
    if req.text is not None:
        from studio.speech import check_request

        check_request(req.text, req.voice)
    resolve_device(req.device)
    stage: dict[str, float] = {}

    t0 = time.perf_counter()
    if anchor is None:
        progress_box: list[RenderProgress] = []
        anchor = build_anchor(req.anchor_path, progress=lambda f, m: progress_box.append(RenderProgress("anchor", f, m)))
        yield from progress_box
    stage["anchor"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    yield RenderProgress("speech", 0.0, "synthesizing speech" if req.text is not None else "analysing the audio")
    if req.text is not None:
        from studio.speech import synthesize

        utt = synthesize(req.text, req.voice)
        neural = None
    else:
        utt, neural = _speech_from_audio(req.audio_path, req.audio_engine)
    stage["speech"] = time.perf_counter() - t0
    if abort():
        raise StudioError("Render cancelled.")

    # The video is exactly as long as the audio: pad the audio with silence up to a whole number of frames.
    n_frames = max(1, math.ceil(utt.duration_s * req.fps - 1e-9))
    n_samples = int(round(n_frames / req.fps * utt.sample_rate_hz))
    audio = np.zeros(n_samples, np.float32)
    audio[: min(n_samples, len(utt.audio))] = utt.audio[:n_samples]

    t0 = time.perf_counter()
    yield RenderProgress("motion", 0.0, "animating")
    motion = script_motion(utt.phonemes, audio, utt.sample_rate_hz, req.fps, n_frames, seed=req.seed)
    if neural is not None:
        from studio.presenter.coeffs import MOUTH_COEFFS

        motion.values[:, [int(c) for c in MOUTH_COEFFS]] = neural.resample(req.fps, n_frames)
    stage["motion"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    presenter = Presenter(anchor, RenderSettings(size_px=req.size_px, device=req.device))
    stage["renderer_setup"] = time.perf_counter() - t0

    render_s = 0.0
    t_total = time.perf_counter()
    writer = Mp4Writer(req.out_path, req.size_px, req.size_px, req.fps, utt.sample_rate_hz)
    encoder = None
    try:
        writer.write_audio(audio)
        encoder = _EncodeThread(writer)
        bs = presenter.settings.batch_frames
        for i in range(0, n_frames, bs):
            if abort():
                raise StudioError("Render cancelled.")
            t1 = time.perf_counter()
            frames = presenter.render_batch(motion.values[i:i + bs])
            render_s += time.perf_counter() - t1
            encoder.put(frames)
            done = min(n_frames, i + bs)
            yield RenderProgress("render", done / n_frames, f"frame {done}/{n_frames}")
        encoder.finish()
        t1 = time.perf_counter()
        out = writer.close()
        close_s = time.perf_counter() - t1
    except BaseException:
        if encoder is not None and encoder.thread.is_alive():
            encoder.q.put(None)
            encoder.thread.join(timeout=5)
        writer.abort()
        raise
    stage["render"] = render_s
    stage["encode"] = encoder.busy_s + close_s
    stage["render_and_encode_wall"] = time.perf_counter() - t_total
    if req.timings_path is not None:
        _write_timings(req.timings_path, utt)
    return RenderResult(out_path=out, n_frames=n_frames, fps=req.fps, audio_duration_s=n_frames / req.fps,
                        stage_s=stage, device=str(presenter.device))


def _write_timings(path: Path, utt: Utterance) -> None:
    import json

    from studio.bench.lipsync import utterance_timings_to_json

    try:
        path.write_text(json.dumps(utterance_timings_to_json(utt), indent=1))
    except OSError as exc:
        raise EncoderError(f"Cannot write the timings file {path}: {exc.strerror}. Choose another path.") from exc
