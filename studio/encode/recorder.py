"""The one recorder: the program (picture and sound) into an MP4, as an output of the pipeline core.

Slot-based: video frame ``i`` of the file is program slot ``first_slot + i``; a slot with no frame (dropped upstream
because the loop fell behind, or dropped here because the encoder fell behind) repeats the previous picture, so the
video always covers the timeline and stays in step with the audio, which is never dropped. Program audio sample ``s``
plays at ``(s - first_sample) / rate``, ``first_sample`` being where the first recorded slot starts.

The slot bookkeeping runs on a thread behind a bounded queue; the encoding itself runs in a child process
(``studio.encode.worker``: PyAV holds the interpreter lock while it converts and encodes, which starved the core).
``block=True`` (offline renders) waits for room instead of dropping, so every frame is kept; live recordings drop and
count. Live recordings are fragmented MP4 (everything
written before a crash plays; ``studio.encode.recovery`` turns the partial file into a playable one), written
atomically (a hidden ``.name.mp4.part`` renamed on close).
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path

import numpy as np

from studio.encode.settings import EncodeSettings
from studio.errors import EncoderError, StudioError
from studio.contracts import Output, OutputState, OutputStats, ProgramBatch, ProgramFormat

log = logging.getLogger(__name__)


class RecorderOutput(Output):
    """See the module docstring."""

    name = "recorder"
    needs_rgb = False  # with GPU_ENCODE on a GPU the core hands I420 only; otherwise RGB, converted in the child
    wants_yuv = True

    def __init__(self, path: Path, fragmented: bool = True, settings: EncodeSettings | None = None,
                 queue_frames: int = 100, block: bool = False) -> None:
        self.path = Path(path)
        self.fragmented = fragmented
        self.settings = settings or EncodeSettings(preset="ultrafast", encoder_threads=1)
        self.queue_frames = queue_frames
        self.block = block
        self._q: queue.Queue = queue.Queue()
        self._room = threading.Semaphore(queue_frames)
        self._writer = None
        self._thread: threading.Thread | None = None
        self.first_slot: int | None = None
        self.first_sample: int | None = None
        self.next_slot = 0
        self.frames = 0
        self.dropped = 0
        self.repeated = 0
        self.error: BaseException | None = None
        self._last: np.ndarray | None = None
        self._last_kind = "rgb"
        self._audio_written = 0  # samples handed to the writer, from first_sample
        self._audio_pending: list[tuple[int, np.ndarray]] = []
        self._closed = False
        self._result: Path | None = None

    def open(self, fmt: ProgramFormat) -> None:
        from studio.encode.worker import EncoderProcess

        super().open(fmt)
        if self._writer is not None:
            return
        self._writer = EncoderProcess(self.path, fmt.width, fmt.height, fmt.fps, fmt.audio_rate_hz, self.settings,
                                      fragmented=self.fragmented)
        self._n_video = 0
        self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self._thread.start()

    # the core's side

    def write(self, batch: ProgramBatch) -> None:
        if self._closed:
            return
        if self.error is not None:
            raise EncoderError(self._error_text())
        n = len(batch.slots)
        pics = batch.yuv if batch.yuv is not None else batch.frames
        kind = "yuv420p" if batch.yuv is not None else "rgb"
        keep: list[int] = []
        audio = batch.audio
        for j in range(n):
            if self._room.acquire(blocking=False):
                keep.append(j)
            elif self.block:
                if keep:  # hand over what fits before waiting: a batch larger than the queue would wait forever
                    self._q.put(("batch", batch.slots[keep], pics[keep], kind, batch.audio_start, audio))
                    audio, keep = audio[:0], []
                self._room.acquire()
                keep.append(j)
            else:
                self.dropped += 1  # its slot will repeat the previous picture
        self._q.put(("batch", batch.slots[keep], pics[keep], kind, batch.audio_start, audio))

    @property
    def salvaged(self) -> Path | None:
        """After a failure (a full disk): the playable part of the recording, kept as a visible file, if any."""
        return getattr(self._writer, "salvaged", None)

    @property
    def duration_s(self) -> float:
        return 0.0 if self.first_slot is None else max(0, self.next_slot - self.first_slot) / self.fmt.fps

    def close(self) -> Path | None:
        """Drain, pad the audio to the video's length and finalize the file; returns its path (None when nothing was
        recorded). Raises EncoderError / OutputPathError when the file could not be finished."""
        if self._closed:
            return self._result
        self._closed = True
        if self._thread is not None:
            self._q.put(("close",))
            self._thread.join()
        w = self._writer
        if w is None:
            return None
        if self.error is not None:
            w.abort()
            if isinstance(self.error, StudioError):
                raise self.error
            raise EncoderError(self._error_text()) from self.error
        if self._n_video == 0:
            w.abort()
            raise EncoderError(f"No frame was recorded, so {self.path.name} was not written: record for longer.")
        self._flush_audio(pad=True)
        self._result = w.close()
        return self._result

    def abort(self) -> None:
        """Stop without keeping the file."""
        self._closed = True
        if self._thread is not None:
            self._q.put(("close",))
            self._thread.join(timeout=10)
        if self._writer is not None:
            self._writer.abort()

    def stats(self) -> OutputStats:
        state = OutputState.FAILED if self.error is not None else (OutputState.OFF if self._closed else OutputState.ON)
        return OutputStats(self.name, state, frames=self.frames, dropped=self.dropped, repeated=self.repeated,
                           detail=self._error_text() if self.error is not None else str(self.path))

    def _error_text(self) -> str:
        e = self.error
        return str(e) if isinstance(e, StudioError) else f"Recording failed: {e}"

    # the encoder thread

    def _slot_sample(self, slot: int) -> int:
        return self.fmt.samples_at(slot)

    def _write_picture(self, pic: np.ndarray, kind: str) -> None:
        if not self._writer.write_frame(pic, kind, wait_s=30.0):
            raise EncoderError(f"The encoder of {self.path.name} stopped taking frames for 30 s.")
        self._n_video += 1

    def _repeat_picture(self) -> None:
        self._writer.repeat_frame()
        self._n_video += 1

    def _flush_audio(self, pad: bool) -> None:
        """Write the audio up to the end of the video written so far (all of it, padded, when ``pad``)."""
        w = self._writer
        end = self._slot_sample(self.first_slot + self._n_video) - self.first_sample \
            if self.first_slot is not None else 0
        while self._audio_pending and self._audio_written < end:
            start, a = self._audio_pending[0]
            rel = start - self.first_sample
            if rel + len(a) <= self._audio_written:  # already written (or before the recording)
                self._audio_pending.pop(0)
                continue
            if rel > self._audio_written:  # a hole in the audio: silence
                w.write_audio(np.zeros(min(rel, end) - self._audio_written, np.float32))
                self._audio_written = min(rel, end)
                if self._audio_written >= end:
                    break
            a0 = self._audio_written - rel
            take = a[a0:a0 + (end - self._audio_written)]
            w.write_audio(take)
            self._audio_written += len(take)
            if a0 + len(take) >= len(a):
                self._audio_pending.pop(0)
        if pad and self._audio_written < end:
            w.write_audio(np.zeros(end - self._audio_written, np.float32))
            self._audio_written = end

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item[0] == "close":
                return
            if self.error is not None:
                for _ in range(len(item[1])):
                    self._room.release()
                continue
            _, slots, pics, kind, a_start, audio = item
            try:
                if self.first_slot is None:
                    first = int(slots[0]) if len(slots) else None
                    if first is None:
                        continue
                    self.first_slot = self.next_slot = first
                    self.first_sample = self._slot_sample(first)
                if len(audio):
                    self._audio_pending.append((int(a_start), audio))
                for slot, pic in zip(slots, pics):
                    slot = int(slot)
                    self._room.release()
                    if slot < self.next_slot:
                        continue
                    while self.next_slot < slot and self._last is not None:  # the screen held the last picture
                        self._repeat_picture()
                        self.repeated += 1
                        self.next_slot += 1
                    self._write_picture(pic, kind)
                    self._last, self._last_kind = pic, kind
                    self.next_slot = slot + 1
                    self.frames += 1
                self._flush_audio(pad=False)
            except BaseException as exc:  # handed to write() / close()
                self.error = exc
                log.exception("recording %s failed", self.path)
