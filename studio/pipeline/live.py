"""Live microphone mode: the presenter speaks with the person at the mic, paced by one frame clock.

``LiveSession`` is plain Python (no Qt), so the studio window's microphone mode and ``python main.py live`` share it.
It owns the ``MicCapture`` (ring buffer), the ``MicMotionSource`` (sieve + phone recognizer + coarticulation +
idle motion), the ``Presenter`` and an optional ``LiveRecorder``.

The frame clock is the audio itself. Session time runs in samples of the pipeline rate (``session = ring + offset``);
frame ``k`` shows session time ``k / fps`` and becomes due once the ring holds ``lead_ms`` of audio after it (the
loudness window and the sieve frame around that instant). ``step()`` renders only the newest due frame: frames that
fell due meanwhile are dropped and counted, never queued. When no audio arrives for ``stall_ms`` (device lost, or the
stream not started yet) session time advances on the wall clock instead, as silence: the presenter keeps idling and
the recording keeps its audio and video aligned (``offset`` grows by the silence inserted).

Sound-to-pixel latency of a frame = its presentation time (after rendering) - the arrival time, in the ring, of the
sample it shows. What it is made of: ``lead_ms`` (waiting for the audio around the shown instant), the capture block
(10 ms), polling, the motion step (sieve + recognizer on the new audio) and the render. Phones from the recognizer
arrive ~0.1 s after they end, later than the frame: the jaw follows the loudness envelope at once and the recognized
phones shape the mouth where they are known (no look-ahead wait).
"""

from __future__ import annotations

import collections
import logging
import math
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from studio.audio.capture import CaptureStatus, MicCapture
from studio.audio.mic_motion import MicMotionSource
from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine, CaptureSettings, MicMotionSettings
from studio.errors import EncoderError, InputError, ModelLoadError
from studio.neural.mic import NeuralMicMotionSource
from studio.presenter.anchor import AnchorPack
from studio.pipeline.threads import ThreadChooser
from studio.presenter.renderer import Presenter, RenderSettings

log = logging.getLogger(__name__)

_KEEP_SAMPLES = 3000  # bounded history of per-frame measurements (2 minutes at 25 fps)


@dataclass(frozen=True)
class LiveSettings:
    """How the live session paces, animates and renders."""

    fps: float = 25.0
    size_px: int = 512
    device: str = "auto"
    input_device: str | None = field(default=None, metadata={"help": "Input device name (substring); None = default"})
    lead_ms: float = field(default=40.0, metadata={"help": "Audio after the shown instant that must have arrived"})
    stall_ms: float = field(default=250.0, metadata={"help": "No audio for this long: the clock runs on as silence"})
    envelope_jaw: float = field(default=0.6, metadata={"help": "Jaw opening from loudness alone at full level (0..1)"})
    coart_lookahead_s: float = field(default=0.02, metadata={"help": "Coarticulation look-ahead of the live mouth"})
    render_threads: int = field(
        default=0, metadata={"help": "Torch CPU threads of the headless command; 0 = torch's default, -1 = adaptive "
                                     "(the faster of 1 and 2 threads, measured while running; not better than the "
                                     "default in 2+2 alternated 20 s runs here, so not the default)"}
    )
    field_divisor: int = field(
        default=8, metadata={"help": "Warp field at size / this: 4 = the plain renderer, 8 = pyramidal (the default: "
                                     "face PSNR 40 dB against plain; measured at 512 px on 2 cores, alternated 20 s "
                                     "runs: render 18-19 vs 19-20 ms, latency 61-63 vs 64-65 ms)"}
    )
    motion_thread: bool = field(
        default=True, metadata={"help": "Neural engine: run the model on its own thread as the audio arrives, so that "
                                        "its time overlaps the rendering instead of adding to each frame's"}
    )
    audio_engine: AudioEngine = field(
        default=DEFAULT_AUDIO_ENGINE, metadata={"help": "What turns the voice into mouth motion: neural (the project's "
                                                       "audio-to-motion model) or pocketsphinx (phone recognition)"}
    )
    recorder_queue_frames: int = field(default=8, metadata={"help": "Frames waiting for the encoder before drops"})
    record_preset: str = field(default="ultrafast", metadata={"help": "libx264 preset of live recordings (real time)"})
    record_threads: int = field(default=1, metadata={"help": "libx264 threads of live recordings (leave a core free)"})
    seed: int = 0


@dataclass(frozen=True)
class VideoFrame:
    """One presented frame: RGB pixels and when / what it shows."""

    index: int  # frame-clock slot: shows session time index / fps
    pixels: np.ndarray  # H x W x 3 uint8 RGB
    session_time_s: float  # the instant of the audio it shows (seconds since the session started)
    presented_ns: int  # time.monotonic_ns() when rendering finished
    latency_ms: float | None  # presented_ns - arrival of the shown sample; None where no audio was heard (silence gap)
    speaking: bool


@dataclass(frozen=True)
class LiveStats:
    """A snapshot of the live session (frames, latency, load, sieve, capture)."""

    elapsed_s: float
    frames_shown: int
    frames_dropped: int  # fell due while another frame was rendering: never rendered
    frames_late: int  # rendered, but presented more than one frame period after falling due
    fps_shown: float
    latency_ms_median: float  # sound to pixel; NaN until a frame has shown heard audio
    latency_ms_p95: float
    render_ms_median: float
    motion_ms_median: float  # sieve + recognizer + coarticulation for one frame
    cpu_load: float  # CPU time of this process / (wall time x cores): 1.0 = every core busy
    cpu_cores: int
    sieve_frames_seen: int
    sieve_frames_skipped: int  # 32 ms frames on which no recognition work was done (silence)
    recognizer_share: float  # share of the audio the recognizer had to look at
    recognizer_emit_delay_ms_median: float
    silence_inserted_s: float  # session time that ran on the wall clock (no audio from the device)
    capture_status: CaptureStatus  # while running; after stop(): as it was when stopped
    last_error: str
    recorder_frames_dropped: int
    recorder_frames_repeated: int
    audio_engine: str = "pocketsphinx"  # what turned the voice into mouth motion
    frames_missing: int = 0  # neural engine: frames shown before the model had them (its latest shape was shown)
    model_ms_median: float = math.nan  # neural engine: the model's time per frame (on its own thread when it has one)

    def summary(self) -> str:
        """One line for logs and the headless command."""
        skipped = self.sieve_frames_skipped / self.sieve_frames_seen if self.sieve_frames_seen else 0.0
        return (
            f"{self.elapsed_s:.1f} s: {self.frames_shown} frames shown ({self.fps_shown:.1f} fps), "
            f"{self.frames_dropped} dropped, {self.frames_late} late; sound-to-pixel latency median "
            f"{self.latency_ms_median:.0f} ms, p95 {self.latency_ms_p95:.0f} ms (render {self.render_ms_median:.0f} ms, "
            f"motion {self.motion_ms_median:.1f} ms); CPU load {self.cpu_load * 100:.0f}% of {self.cpu_cores} cores; "
            + (f"sieve skipped {self.sieve_frames_skipped}/{self.sieve_frames_seen} frames ({skipped * 100:.0f}%), "
               f"recognizer saw {self.recognizer_share * 100:.0f}% of the audio" if self.audio_engine == "pocketsphinx"
               else f"neural engine (hears all the audio; model {self.model_ms_median:.1f} ms a frame), "
                    f"{self.frames_missing} frames shown before the model had them")
            + f"; microphone {self.capture_status.value}"
        )


def _pct(values: collections.deque[float] | list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if len(values) else math.nan


class LiveRecorder:
    """Writes what was heard and what was shown into one fragmented MP4, aligned by session time.

    Video slot ``k`` (media time ``k / fps``) holds the frame that showed session time ``k / fps``; slots whose frame
    was dropped repeat the previous frame (that is what the screen held). Audio sample ``s`` of the session plays at
    ``s / rate``. Encoding runs on its own thread behind a bounded queue: when it falls behind, new frames are
    dropped and counted (their slots repeat), audio is never dropped.
    """

    def __init__(self, path: Path, size_px: int, fps: float, sample_rate_hz: int, max_queued_frames: int = 8,
                 preset: str = "ultrafast", encoder_threads: int = 1) -> None:
        from studio.encode import EncodeSettings, Mp4Writer

        self.path = Path(path)
        self.fps = fps
        self.rate_hz = sample_rate_hz
        self.max_queued_frames = max_queued_frames
        self._writer = Mp4Writer(self.path, size_px, size_px, fps, sample_rate_hz, fragmented=True,
                                 settings=EncodeSettings(preset=preset, encoder_threads=encoder_threads))
        self._q: queue.Queue[tuple[str, object]] = queue.Queue()
        self._queued_frames = 0
        self._lock = threading.Lock()
        self.frames_dropped = 0
        self.frames_repeated = 0
        self.error: BaseException | None = None
        self._audio_pending: list[np.ndarray] = []  # encoder thread only
        self._audio_written = 0  # session samples handed to the writer
        self._last_pixels: np.ndarray | None = None
        self._thread = threading.Thread(target=self._run, name="live-recorder", daemon=True)
        self._thread.start()

    def add_audio(self, samples: np.ndarray) -> None:
        """Append session audio (mono float32, in order, never dropped)."""
        if samples.size:
            self._q.put(("audio", np.asarray(samples, np.float32)))

    def add_frame(self, index: int, pixels: np.ndarray) -> None:
        """Offer frame ``index``; dropped (and counted) when the encoder is behind."""
        with self._lock:
            if self._queued_frames >= self.max_queued_frames:
                self.frames_dropped += 1
                return
            self._queued_frames += 1
        self._q.put(("frame", (index, pixels)))

    def close(self) -> Path:
        """Drain the queue, pad the audio to the video's length and finalize the file."""
        self._q.put(("close", None))
        self._thread.join()
        if self.error is not None:
            self._writer.abort()
            raise self.error
        w = self._writer
        if w.n_video_frames == 0 and self._last_pixels is None:
            self._writer.abort()
            raise EncoderError(f"No frame was rendered, so {self.path} was not written: run for longer.")
        self._write_audio_until(self._slot_end_sample(w.n_video_frames), pad=True)
        return w.close()

    def abort(self) -> None:
        self._q.put(("close", None))
        self._thread.join(timeout=10)
        self._writer.abort()

    def _slot_end_sample(self, n_frames: int) -> int:
        return int(round(n_frames * self.rate_hz / self.fps))

    def _write_audio_until(self, end_sample: int, pad: bool) -> None:
        need = end_sample - self._audio_written
        while need > 0 and self._audio_pending:
            chunk = self._audio_pending[0]
            take = chunk[:need]
            self._writer.write_audio(take)
            self._audio_written += take.size
            need -= take.size
            if take.size < chunk.size:
                self._audio_pending[0] = chunk[take.size:]
            else:
                self._audio_pending.pop(0)
        if pad and need > 0:
            self._writer.write_audio(np.zeros(need, np.float32))
            self._audio_written += need

    def _run(self) -> None:
        while True:
            kind, item = self._q.get()
            if kind == "close":
                return
            if self.error is not None:
                continue
            try:
                if kind == "audio":
                    self._audio_pending.append(item)  # type: ignore[arg-type]
                    continue
                with self._lock:
                    self._queued_frames -= 1
                index, pixels = item  # type: ignore[misc]
                w = self._writer
                while w.n_video_frames < index and self._last_pixels is not None:
                    w.write_video(self._last_pixels)  # the screen held the previous frame
                    self.frames_repeated += 1
                if w.n_video_frames < index:  # nothing shown before: start the file at this frame's slot
                    while w.n_video_frames < index:
                        w.write_video(pixels)
                        self.frames_repeated += 1
                w.write_video(pixels)
                self._last_pixels = pixels
                self._write_audio_until(self._slot_end_sample(w.n_video_frames), pad=False)
            except BaseException as exc:  # handed to close()
                self.error = exc


class LiveSession:
    """Microphone -> motion -> presenter, one frame at a time, with measured sound-to-pixel latency.

    ``anchor`` None = the default portrait. ``capture`` and ``presenter`` may be given (a capture already started
    by the caller, a presenter shared with another mode). Call ``start()``, then ``step()`` as often as you like
    (a timer or a loop: it returns None until a frame is due), then ``stop()``.
    """

    def __init__(
        self,
        anchor: AnchorPack | None = None,
        settings: LiveSettings | None = None,
        capture: MicCapture | None = None,
        recorder_path: Path | None = None,
        presenter: Presenter | None = None,
    ) -> None:
        self.settings = settings or LiveSettings()
        s = self.settings
        self.capture = capture or MicCapture(CaptureSettings(device=s.input_device))
        self.ring = self.capture.ring
        self.rate_hz = self.ring.sample_rate_hz
        if presenter is None:
            from studio.enhance.upscale import warp_field_settings
            from studio.presenter.anchor import build_anchor

            rs = RenderSettings(size_px=s.size_px, device=s.device)
            if s.field_divisor != 4:
                rs = warp_field_settings(rs, s.field_divisor)
            presenter = Presenter(anchor or build_anchor(None), rs)
        self.presenter = presenter
        ms = MicMotionSettings(fps=s.fps, envelope_min_jaw=s.envelope_jaw, coart_lookahead_s=s.coart_lookahead_s,
                               seed=s.seed)
        self.audio_engine, self.engine_note = s.audio_engine, ""
        self.motion: MicMotionSource | NeuralMicMotionSource
        if s.audio_engine is AudioEngine.NEURAL:
            try:
                self.motion = NeuralMicMotionSource(self.ring, ms)
            except ModelLoadError as exc:  # weights missing or broken: the phone recognizer still works
                self.audio_engine = AudioEngine.POCKETSPHINX
                self.engine_note = f"{exc} Using the pocketsphinx engine instead."
                log.warning("%s", self.engine_note)
        if self.audio_engine is AudioEngine.POCKETSPHINX:
            self.motion = MicMotionSource(self.ring, ms)
        self._recorder_path = recorder_path
        self.recorder: LiveRecorder | None = None
        self._closed_recorder: LiveRecorder | None = None
        self._final_status, self._final_error = CaptureStatus.STOPPED, ""  # as they were when stop() was called
        # The neural model needs its look-ahead of audio after a frame before it knows that frame's mouth.
        self._lead = int(round(max(s.lead_ms / 1000.0, self.motion.min_lead_s) * self.rate_hz))
        self._stall_ns = int(s.stall_ms * 1e6)
        self._started = False
        self.thread_chooser: ThreadChooser | None = None  # set by the headless command: adaptive torch threads
        self._latency_ms: collections.deque[float] = collections.deque(maxlen=_KEEP_SAMPLES)
        self._render_ms: collections.deque[float] = collections.deque(maxlen=_KEEP_SAMPLES)
        self._motion_ms: collections.deque[float] = collections.deque(maxlen=_KEEP_SAMPLES)
        self._shown = self._dropped = self._late = 0
        self._silence_samples = 0

    # -- life cycle -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Open the microphone (raises AudioDeviceError when there is none) and the recorder; start the clock."""
        self.capture.start()
        now = time.monotonic_ns()
        total = self.ring.total_written
        self._offset = -total  # session sample = ring sample + offset
        self.motion.skip_to(total)  # what the ring held before the session is not ours to show
        if self.settings.motion_thread:
            self.motion.start_worker()
        self._rec_ring_cursor = total  # next ring sample to hand to the recorder
        self._rec_k0 = 0  # frame slot that is the recording's first video frame
        self._seen_total = total
        self._last_audio_ns = now
        self._virtual_ns: int | None = None  # wall time up to which silence was inserted (while stalled)
        self._next_k = 0
        self._t0_ns = now
        self._cpu0 = time.process_time()
        self._started = True
        if self._recorder_path is not None and self.recorder is None:
            self.start_recording(self._recorder_path)

    def start_recording(self, path: Path) -> None:
        """Record what is heard and shown from the next frame on into ``path`` (a fragmented MP4)."""
        if not self._started:
            raise RuntimeError("LiveSession.start_recording() before start()")
        if self.recorder is not None:
            raise RuntimeError("LiveSession is already recording")
        s = self.settings
        self.recorder = LiveRecorder(Path(path), s.size_px, s.fps, self.rate_hz, s.recorder_queue_frames,
                                     preset=s.record_preset, encoder_threads=s.record_threads)
        self._closed_recorder = None
        self._rec_k0 = self._next_k
        # The recording's audio starts at the instant its first frame shows (in ring samples).
        self._rec_ring_cursor = int(round(self._rec_k0 * self.rate_hz / s.fps)) - self._offset

    def stop_recording(self) -> Path | None:
        """Finalize the recording (if any) and return its path; the session keeps running."""
        recorder, self.recorder = self.recorder, None
        if recorder is None:
            return None
        self._closed_recorder = recorder
        self._feed_recorder_audio(recorder)
        return recorder.close()

    @property
    def recording_s(self) -> float:
        """Length of the recording so far (session seconds); 0 when not recording."""
        if self.recorder is None:
            return 0.0
        return max(0, self._next_k - self._rec_k0) / self.settings.fps

    @property
    def frames_shown(self) -> int:
        return self._shown

    @property
    def frames_dropped(self) -> int:
        return self._dropped

    @property
    def frames_late(self) -> int:
        return self._late

    def stop(self, close_capture: bool = True) -> Path | None:
        """Stop the clock, close the microphone (unless ``close_capture`` is False: the caller owns it) and finalize
        the recording (if any); returns its path."""
        if not self._started:
            return None
        self._started = False
        self.motion.stop_worker()
        self._t_end_ns = time.monotonic_ns()
        self._cpu_end = time.process_time()
        self._final_status, self._final_error = self.capture.status, self.capture.last_error
        if close_capture:
            self.capture.stop()
        return self.stop_recording()

    def abort(self) -> None:
        """Stop without keeping the recording."""
        self._started = False
        self.motion.stop_worker()
        self.capture.stop()
        if self.recorder is not None:
            self.recorder.abort()
            self.recorder = None

    # -- the frame clock ------------------------------------------------------------------------------------------

    def _feed_recorder_audio(self, recorder: LiveRecorder) -> None:
        total = self.ring.total_written
        if total <= self._rec_ring_cursor:  # the recording starts at a sample that has not arrived yet
            return
        start = max(self._rec_ring_cursor, self.ring.oldest_sample)
        if start > self._rec_ring_cursor:  # fell a whole ring behind: keep the timeline, lose the audio
            recorder.add_audio(np.zeros(start - self._rec_ring_cursor, np.float32))
        if total > start:
            audio = self.ring.read(start, total - start)
            recorder.add_audio(audio if audio is not None else np.zeros(total - start, np.float32))
        self._rec_ring_cursor = total

    def _advance_clock(self, now_ns: int) -> int:
        """Account for new audio or, while none comes, for wall time as silence; returns session samples known."""
        total = self.ring.total_written
        if total != self._seen_total:
            self._seen_total = total
            self._last_audio_ns = now_ns
            self._virtual_ns = None
        if self.recorder is not None:
            self._feed_recorder_audio(self.recorder)
        if now_ns - self._last_audio_ns > self._stall_ns:
            if self._virtual_ns is None:
                self._virtual_ns = self._last_audio_ns
            gap = int((now_ns - self._virtual_ns) * self.rate_hz // 1_000_000_000)
            if gap > 0:
                self._offset += gap
                self._silence_samples += gap
                self._virtual_ns += gap * 1_000_000_000 // self.rate_hz
                if self.recorder is not None:
                    self.recorder.add_audio(np.zeros(gap, np.float32))
        return total + self._offset

    def step(self) -> VideoFrame | None:
        """Render the frame that is due now, or return None when none is; frames overtaken meanwhile are dropped."""
        if not self._started:
            raise RuntimeError("LiveSession.step() before start()")
        s = self.settings
        now_ns = time.monotonic_ns()
        known = self._advance_clock(now_ns)
        k = math.floor((known - self._lead) * s.fps / self.rate_hz)
        if k < self._next_k:
            return None
        self._dropped += k - self._next_k
        self._next_k = k + 1
        session_sample = int(round(k * self.rate_hz / s.fps))
        ring_sample = session_sample - self._offset
        due_ns = self.ring.arrival_ns(ring_sample + self._lead - 1) or now_ns

        t0 = time.perf_counter_ns()
        coeffs = self.motion.frame(ring_sample / self.rate_hz, idle_t_s=k / s.fps)
        t1 = time.perf_counter_ns()
        t_render = time.perf_counter()
        pixels = self.presenter.render_batch(coeffs[None])[0]
        if self.thread_chooser is not None:
            threads = self.thread_chooser.record(time.perf_counter() - t_render)
            if threads != self.thread_chooser.previous:
                import torch

                torch.set_num_threads(threads)
        presented_ns = time.monotonic_ns()
        self._motion_ms.append((t1 - t0) / 1e6)
        self._render_ms.append((presented_ns - now_ns - (t1 - t0)) / 1e6)

        heard_ns = self.ring.arrival_ns(ring_sample) if 0 <= ring_sample < self.ring.total_written else None
        latency_ms = (presented_ns - heard_ns) / 1e6 if heard_ns is not None else None
        if latency_ms is not None:
            self._latency_ms.append(latency_ms)
        if presented_ns - due_ns > 1e9 / s.fps:
            self._late += 1
        self._shown += 1
        if self.recorder is not None and k >= self._rec_k0:
            self.recorder.add_frame(k - self._rec_k0, pixels)
        return VideoFrame(index=k, pixels=pixels, session_time_s=k / s.fps, presented_ns=presented_ns,
                          latency_ms=latency_ms, speaking=self.motion.speaking_at(ring_sample / self.rate_hz))

    def seconds_until_due(self) -> float:
        """Roughly how long until the next frame falls due (for a polling loop; 0 when it is due or unknown)."""
        if not self._started:
            return 0.0
        need = int(round(self._next_k * self.rate_hz / self.settings.fps)) + self._lead - self._offset
        missing = need - self.ring.total_written
        return max(0.0, missing / self.rate_hz)

    # -- telemetry ------------------------------------------------------------------------------------------------

    def stats(self) -> LiveStats:
        end_ns = time.monotonic_ns() if self._started else getattr(self, "_t_end_ns", time.monotonic_ns())
        t0 = getattr(self, "_t0_ns", end_ns)
        elapsed = max(1e-9, (end_ns - t0) / 1e9)
        cpu = (time.process_time() if self._started else getattr(self, "_cpu_end", time.process_time())) - getattr(
            self, "_cpu0", time.process_time())
        cores = os.cpu_count() or 1
        m = self.motion.stats()
        rec = self.recorder or self._closed_recorder
        return LiveStats(
            elapsed_s=elapsed,
            frames_shown=self._shown,
            frames_dropped=self._dropped,
            frames_late=self._late,
            fps_shown=self._shown / elapsed,
            latency_ms_median=_pct(self._latency_ms, 50),
            latency_ms_p95=_pct(self._latency_ms, 95),
            render_ms_median=_pct(self._render_ms, 50),
            motion_ms_median=_pct(self._motion_ms, 50),
            cpu_load=cpu / (elapsed * cores),
            cpu_cores=cores,
            sieve_frames_seen=m.sieve.frames_seen,
            sieve_frames_skipped=m.sieve.frames_skipped,
            recognizer_share=m.recognizer_share,
            recognizer_emit_delay_ms_median=m.recognizer.emit_delay_ms_median,
            silence_inserted_s=self._silence_samples / self.rate_hz,
            capture_status=self.capture.status if self._started else self._final_status,
            last_error=self.capture.last_error if self._started else self._final_error,
            recorder_frames_dropped=rec.frames_dropped if rec else 0,
            recorder_frames_repeated=rec.frames_repeated if rec else 0,
            audio_engine=self.audio_engine.value,
            frames_missing=m.frames_missing,
            model_ms_median=m.recognizer.cpu_ms_per_chunk_median if self.audio_engine is AudioEngine.NEURAL
            else math.nan,
        )


def run_live_headless(args) -> int:  # args: argparse.Namespace from studio.cli
    """``python main.py live``: run for ``args.seconds``, optionally record, print a summary line; returns 0."""
    from studio.pipeline.offline import check_output_path
    from studio.presenter.anchor import build_anchor

    seconds = float(args.seconds)
    if not 0 < seconds <= 24 * 3600:
        raise InputError(f"--seconds {seconds} is out of range: use more than 0 and at most 86400.")
    if not 64 <= args.size <= 4096 or args.size % 2:
        raise InputError(f"--size {args.size} is out of range: use an even number of pixels from 64 to 4096.")
    if not 1 <= args.fps <= 120:
        raise InputError(f"--fps {args.fps} is out of range: use 1 to 120.")
    if args.out is not None:
        check_output_path(Path(args.out))
    settings = LiveSettings(fps=float(args.fps), size_px=int(args.size), device=args.device,
                            input_device=getattr(args, "input", None),
                            field_divisor=int(getattr(args, "field_divisor", 8)),
                            audio_engine=AudioEngine(getattr(args, "engine", DEFAULT_AUDIO_ENGINE.value)),
                            motion_thread=bool(getattr(args, "motion_thread", True)))
    chooser = None
    if settings.render_threads != 0 and not settings.device.startswith("cuda"):
        import os

        import torch

        if settings.render_threads < 0:
            chooser = ThreadChooser(max(1, min(2, os.cpu_count() or 1)))
        torch.set_num_threads(chooser.current if chooser else settings.render_threads)  # process-wide: headless only
    # Open the microphone first: no device fails fast, and the slow first open overlaps the presenter's set-up.
    capture = MicCapture(CaptureSettings(device=settings.input_device))
    capture.start()
    try:
        anchor = build_anchor(getattr(args, "anchor", None))
        session = LiveSession(anchor, settings, capture=capture, recorder_path=args.out)
        session.thread_chooser = chooser
        session.start()
    except BaseException:
        capture.stop()
        raise
    out: Path | None = None
    sys.stderr.write(f"live: listening on '{capture.device.name if capture.device else '?'}' for {seconds:g} s\n")
    sys.stderr.flush()
    status = capture.status
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            session.step()
            if capture.status != status:
                status = capture.status
                if status is CaptureStatus.RUNNING:
                    sys.stderr.write("live: microphone is back\n")
                else:
                    sys.stderr.write(f"live: {capture.last_error or status.value}\n")
                sys.stderr.flush()
            time.sleep(min(0.002, max(0.0005, session.seconds_until_due())))
    finally:
        out = session.stop()
    stats = session.stats()
    print(f"live: {stats.summary()}" + (f"; wrote {out}" if out else ""), flush=True)
    return 0
