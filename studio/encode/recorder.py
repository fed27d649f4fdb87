"""The one recorder: the program (picture and sound) into an MP4, as an output of the pipeline core.

The recorder does not encode: it is one more sink of the shared encode for its format (``studio.encode.hub``, the
OBS model), so a recording beside a stream and the browser page costs no second encode of any frame. The hub keeps
the timeline (program slot ``first_slot + i`` is video frame ``i``; a slot with no picture repeats the previous one,
the audio is never dropped), encodes in a child process (``studio.encode.encoder_process``: PyAV holds the
interpreter lock while it converts and encodes), and hands the packets to ``Mp4FileSink``
(``studio.encode.streams``), which writes the fragmented, crash-safe file (a hidden ``.name.mp4.part`` renamed on
close; ``studio.encode.recovery`` turns a cut one into ``NAME-recovered.mp4``) and checks that what it calls written
is on the disk.

``block=True`` (offline renders) waits for room instead of dropping, so every frame is kept; live recordings drop
and count.
"""

from __future__ import annotations

import logging
from pathlib import Path

from studio.contracts import OutputState, OutputStats, ProgramFormat
from studio.encode.encoders import StreamEncodeSettings
from studio.encode.hub import HubOutput, Sink
from studio.encode.settings import EncodeSettings
from studio.errors import EncoderError, StudioError

log = logging.getLogger(__name__)


def stream_settings(settings: StreamEncodeSettings | EncodeSettings | None) -> StreamEncodeSettings:
    """The shared encode's settings for a recorder. From an ``EncodeSettings`` only the x264 preset carries over:
    the encode (its threads, its rate control) is the one every output of the format shares."""
    if settings is None or isinstance(settings, StreamEncodeSettings):
        return settings or StreamEncodeSettings()
    return StreamEncodeSettings(x264_preset=settings.preset)


class RecorderOutput(HubOutput):
    """See the module docstring."""

    name = "recorder"

    def __init__(self, path: Path, fragmented: bool = True,
                 settings: StreamEncodeSettings | EncodeSettings | None = None, queue_frames: int | None = None,
                 block: bool = False) -> None:
        super().__init__(stream_settings(settings), block, queue_frames)
        self.path = Path(path)
        self.fragmented = fragmented
        self._base = (0, 0, 0)  # the hub's frames / repeated / dropped when this recording joined it

    def make_sink(self) -> Sink:
        from studio.encode.streams import Mp4FileSink

        return Mp4FileSink(self.path, self.fragmented)

    def open(self, fmt: ProgramFormat) -> None:
        joined = self.hub is None
        super().open(fmt)
        if joined and self.hub is not None:
            self._base = (self.hub.frames, self.hub.repeated, self.hub.dropped)

    def _hub_count(self, i: int) -> int:
        if self.hub is None:
            return 0
        return (self.hub.frames, self.hub.repeated, self.hub.dropped)[i] - self._base[i]

    @property
    def frames(self) -> int:
        """Program pictures encoded since this recording started."""
        return self._hub_count(0)

    @property
    def repeated(self) -> int:
        return self._hub_count(1)

    @property
    def dropped(self) -> int:
        return self._hub_count(2) + (self.sink.dropped if self.sink is not None else 0)

    @property
    def error(self) -> BaseException | None:
        if self.sink is not None and self.sink.error is not None:
            return self.sink.error
        return self.hub.error if self.hub is not None else None

    @property
    def salvaged(self) -> Path | None:
        """After a failure (a full disk): the playable part of the recording, kept as a visible file, if any."""
        return getattr(self.sink, "salvaged", None)

    @property
    def duration_s(self) -> float:
        if self.sink is None or not getattr(self, "fmt", None):
            return 0.0
        return self.sink.frames_sent / self.fmt.fps

    def close(self) -> Path | None:
        """Finish the file; returns its path. Raises EncoderError / OutputPathError when it could not be finished
        (the message names the kept part, if any)."""
        if self._closed:
            return self._result
        if self.sink is None:
            self._closed = True
            return None
        path = super().close()
        if path is None:
            raise EncoderError(f"No frame was recorded, so {self.path.name} was not written: record for longer.")
        return path

    def abort(self) -> None:
        """Stop without keeping the file."""
        if self.sink is not None:
            self.sink.discard = True
        try:
            super().close()
        except StudioError as exc:
            log.info("aborting %s: %s", self.path, exc)

    def stats(self) -> OutputStats:
        st = super().stats()
        return OutputStats(self.name, st.state, frames=self.frames, dropped=self.dropped, repeated=self.repeated,
                           bitrate_kbps=st.bitrate_kbps, fps=st.fps,
                           detail=st.detail if st.state is OutputState.FAILED else str(self.path))


def failure_line(rec: RecorderOutput, err: BaseException | None = None) -> StudioError:
    """The recording's failure in one line, with what was kept of it: the command's error."""
    err = err if err is not None else rec.error
    kept = rec.salvaged
    text = str(err).rstrip() if isinstance(err, StudioError) else f"Recording {rec.path} failed ({err})."
    tail = (f" What was recorded until then is kept in {kept}." if kept is not None
            else f" Nothing playable was written, so {rec.path.name} was not kept.")
    return (type(err) if isinstance(err, StudioError) else EncoderError)(text + tail)

