"""The recording room: the program (picture and sound) into a crash-safe fragmented MP4, and recovery of what a
crash cut short.

A recording goes on across a core restart (it is one of the supervisor's attached outputs); a mode switch continues
it in a new file in the same folder (``restart``). A recorder that fails on air (a full disk) is taken out of the
program by the core and reported at once, with where the part recorded so far is kept; the show goes on.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from studio.errors import StudioError
from studio.pipeline import commands as cmd
from studio.runtime.events import Outbox
from studio.runtime.settings import StudioSettings
from studio.runtime.supervisor import CoreSupervisor

log = logging.getLogger(__name__)


def recording_name(now: datetime | None = None) -> str:
    return f"NewsStudio-{(now or datetime.now()).strftime('%Y-%m-%d_%H-%M-%S')}.mp4"


def recover_recordings(folder: Path) -> list[Path]:
    """Turn partial recordings a crash left in ``folder`` into visible playable files (``studio.encode.recovery``:
    never over an existing file; unplayable leftovers removed with a note); returns the recovered files."""
    from studio.encode.recovery import RecoveryAction, recover_folder

    if not folder.is_dir():
        return []
    return [n.path for n in recover_folder(folder) if n.action is RecoveryAction.RECOVERED and n.path is not None]


def with_salvage(why: str, rec) -> str:
    """A recording's failure, and where what was recorded until then is kept (when the encoder could keep it)."""
    kept = getattr(rec, "salvaged", None)
    if kept is None:
        return why
    return f"{why} The recording up to that moment is kept in {kept}."


class RecordingRoom:
    """See the module docstring. ``recorder`` is the recording in progress, or None."""

    def __init__(self, settings: StudioSettings, supervisor: CoreSupervisor, outbox: Outbox) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self.outbox = outbox
        self.recorder = None
        self.folder: Path | None = None

    def start(self, folder: Path) -> None:
        from studio.encode.recorder import RecorderOutput
        from studio.encode.settings import EncodeSettings
        from studio.errors import OutputPathError

        if self.recorder is not None:
            return
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise OutputPathError(f"The folder {folder} does not exist: choose another recording folder.")
        self.recover(folder)
        path = folder / recording_name()
        n = 2
        while path.exists():
            path = folder / f"{path.stem.split('_n')[0]}_n{n}.mp4"
            n += 1
        self.folder = folder
        s = self.settings
        rec = RecorderOutput(path, fragmented=True, queue_frames=s.record_queue_frames,
                             settings=EncodeSettings(preset=s.record_preset))
        try:
            self.supervisor.attach(rec)
        except StudioError as exc:
            self.outbox.emit(cmd.RecordingFailed(str(exc)))
            return
        self.recorder = rec
        self.outbox.emit(cmd.RecordingStarted(path))

    def stop(self) -> None:
        rec, self.recorder = self.recorder, None
        if rec is None:
            return
        duration_s = rec.duration_s
        try:
            path = self.supervisor.detach(rec)
        except Exception as exc:  # EncoderError, or what the encoder thread raised
            msg = str(exc) if isinstance(exc, StudioError) else f"Recording failed: {exc}"
            self.outbox.emit(cmd.RecordingFailed(with_salvage(msg, rec)))
            return
        if path is None:
            self.outbox.emit(cmd.RecordingFailed("Nothing was recorded: record for longer."))
            return
        self.outbox.emit(cmd.RecordingStopped(Path(path), duration_s, rec.repeated))

    def continue_across(self, change) -> None:
        """Run ``change()`` (a mode switch); a recording in progress stops before it and goes on in a new file in
        the same folder after it."""
        folder = self.folder if self.recorder is not None else None
        if folder is not None:
            self.stop()
        change()
        if folder is not None:
            self.start(folder)

    def recover(self, folder: Path) -> None:
        recovered = recover_recordings(folder)
        if recovered:
            self.outbox.emit(cmd.RecordingsRecovered(tuple(recovered)))

    def poll(self) -> None:
        """A recorder the running core took out of the program: the producer hears now, not at stop."""
        rec = self.recorder
        why = self.supervisor.failure_of(rec) if rec is not None else None
        if why is None:
            return
        self.recorder = None
        self.supervisor.forget(rec)
        try:
            rec.close()  # keeps what was written where the encoder still can
        except Exception as exc:  # the error that failed it, again
            log.info("closing the failed recording: %s", exc)
        self.outbox.emit(cmd.RecordingFailed(with_salvage(why, rec)))

    def lost(self, out, why: str) -> None:
        """A core that ended had taken ``out`` out of the program (``CoreSupervisor.poll``)."""
        if out is self.recorder:
            self.recorder = None
            self.supervisor.forget(out)
            self.outbox.emit(cmd.RecordingFailed(with_salvage(why, out)))
