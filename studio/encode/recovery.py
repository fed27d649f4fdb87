"""Crash recovery of recordings: partial MP4 files a killed writer left behind become visible, playable files.

Every MP4 writer writes into a hidden ``.NAME.mp4.part`` beside its target and renames it on a clean close
(``studio.encode.mp4``). A crash, a ``kill -9`` or a power cut leaves that partial file. Fragmented files (live
recordings, renders) keep everything up to the last complete fragment; ``recover_folder`` turns them into
``NAME-recovered.mp4`` (``-recovered-2`` ... when taken: nothing is ever overwritten), removes partials with nothing
playable in them, and returns one ``RecoveryNote`` per partial for the caller to announce. Drivers call it at start,
before they open a writer (``recover_for_output`` for an ``--out`` path, ``recover_folder`` for the studio's
recordings folder).

A partial still being written is left alone: writers hold an exclusive ``flock`` on it (``hold_partial``), and on
Linux any process with the file open (``/proc/*/fd``) counts as its writer too.

An encoder child process whose parent was killed keeps the playable part itself (``Mp4Writer.salvage``) with nobody
left to tell: it leaves a hidden ``.NAME-recovered.mp4.note`` beside the file (``leave_note``), and the next start's
``recover_folder`` announces that file as it announces the ones it recovers.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

PARTIAL_PREFIX = "."
PARTIAL_SUFFIX = ".part"
NOTE_SUFFIX = ".note"
_BOX_HEADER = 8


class RecoveryAction(enum.Enum):
    RECOVERED = "recovered"  # the playable part was moved into a visible file
    REMOVED = "removed"  # nothing playable in it: the partial was deleted
    IN_USE = "in use"  # another writer is still writing it: left alone
    FAILED = "failed"  # it could not be recovered or removed (permissions, disk): left in place


@dataclass(frozen=True)
class RecoveryNote:
    """What happened to one partial recording; ``message`` is one line for the user."""

    action: RecoveryAction
    partial: Path
    path: Path | None  # the recovered file (RECOVERED), else None
    message: str
    duration_s: float | None = None  # of the recovered video, where it could be read
    bytes_kept: int = 0
    bytes_dropped: int = 0  # the fragment the crash cut off

    def as_pair(self) -> tuple[str, Path]:
        """(what happened, path) for announcing: the recovered file, or the partial for the other actions."""
        return self.message, self.path or self.partial


def target_of_partial(partial: Path) -> Path:
    """``dir/.NAME.mp4.part`` -> ``dir/NAME.mp4`` (the file its writer was making)."""
    name = partial.name
    if not (name.startswith(PARTIAL_PREFIX) and name.endswith(PARTIAL_SUFFIX)):
        raise ValueError(f"{partial} is not a partial recording (.NAME.mp4.part)")
    return partial.with_name(name[len(PARTIAL_PREFIX):-len(PARTIAL_SUFFIX)])


def find_partials(folder: Path) -> list[Path]:
    """The partial MP4 recordings in ``folder`` (regular files named ``.NAME.mp4.part``), sorted by name."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(".*.mp4.part") if p.is_file() and not p.is_symlink())


# -- boxes ------------------------------------------------------------------------------------------------------------

def _boxes(f: BinaryIO, size: int) -> Iterator[tuple[bytes, int, int]]:
    """Top-level MP4 boxes (kind, offset, length) that lie wholly inside the first ``size`` bytes; stops at the cut.

    Reads only the box headers (seeks over the payloads): memory stays constant for a file of any length."""
    offset = 0
    while offset + _BOX_HEADER <= size:
        f.seek(offset)
        head = f.read(16)
        if len(head) < _BOX_HEADER:
            return
        length, kind = struct.unpack(">I4s", head[:8])
        if length == 1:
            if len(head) < 16:
                return
            length = struct.unpack(">Q", head[8:16])[0]
        elif length == 0:  # "to the end of the file": only valid for a finished last box
            length = size - offset
        if length < _BOX_HEADER or offset + length > size:
            return  # the box the crash cut off
        yield kind, offset, length
        offset += length


def playable_end(f: BinaryIO, size: int) -> int:
    """Byte length of the playable prefix of a fragmented MP4: the header (moov) plus every complete moof + mdat
    pair after it; 0 when there is none (a crash before the first fragment, or a non-fragmented file)."""
    have_moov = False
    pending_moof = False
    end = 0
    for kind, offset, length in _boxes(f, size):
        if kind == b"moov":
            have_moov = True
        elif kind == b"moof":
            pending_moof = True
        elif kind == b"mdat" and pending_moof and have_moov:
            pending_moof = False
            end = offset + length
    return end


# -- who is writing ---------------------------------------------------------------------------------------------------

class PartialLock:
    """An exclusive advisory lock on a partial file, held by its writer until ``release()`` (or the process ends)."""

    def __init__(self, partial: Path) -> None:
        self.partial = Path(partial)
        self._fd: int | None = os.open(self.partial, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # no flock (Windows): the /proc check and the writer's own file handle remain
            pass
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the lock


def hold_partial(partial: Path) -> PartialLock:
    """Create ``partial`` if needed (never truncating it) and lock it for its writer. Raises OSError(EWOULDBLOCK)
    when another writer holds it."""
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    os.close(fd)
    return PartialLock(partial)


def _locked_by_someone(partial: Path) -> bool:
    try:
        lock = PartialLock(partial)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
    lock.release()
    return False


def _open_elsewhere(partial: Path) -> bool:
    """True when another process has ``partial`` open (Linux /proc; False where /proc cannot tell)."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return False
    try:
        target = os.stat(partial)
    except OSError:
        return False
    me = str(os.getpid())
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit() or pid_dir.name == me:
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                st = os.stat(fd)
            except OSError:
                continue
            if st.st_ino == target.st_ino and st.st_dev == target.st_dev:
                return True
    return False


def partial_in_use(partial: Path) -> bool:
    """True when a live writer holds ``partial`` (its lock, or on Linux an open handle in another process)."""
    return _locked_by_someone(partial) or _open_elsewhere(partial)


# -- recovery ---------------------------------------------------------------------------------------------------------

def _free_target(path: Path) -> Path:
    target = path.with_name(f"{path.stem}-recovered{path.suffix}")
    n = 2
    while target.exists() or target.is_symlink():
        target = path.with_name(f"{path.stem}-recovered-{n}{path.suffix}")
        n += 1
    return target


def _claim(partial: Path, path: Path) -> Path:
    """Move ``partial`` onto a free ``NAME-recovered[-N].mp4`` without ever replacing an existing file."""
    for _ in range(1000):
        target = _free_target(path)
        try:
            os.link(partial, target)  # fails if the name was taken meanwhile
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSPC):
                raise
            # a file system without hard links, or a full one: rename, after one more look at the name
            if target.exists():
                continue
            os.rename(partial, target)
            return target
        partial.unlink()
        return target
    raise OSError(errno.EEXIST, "no free name for the recovered file", str(path))


def _video_seconds(path: Path) -> float | None:
    """Seconds of video in ``path`` from its packets' timestamps (no decoding); None if it does not open."""
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return None
            stream = container.streams.video[0]
            first = last = None
            for packet in container.demux(stream):
                if packet.pts is None:
                    continue
                end = packet.pts + (packet.duration or 0)
                first = packet.pts if first is None else min(first, packet.pts)
                last = end if last is None else max(last, end)
            if first is None or stream.time_base is None:
                return 0.0
            return float((last - first) * stream.time_base)
    except (av.FFmpegError, OSError, ValueError) as exc:
        log.debug("probing %s failed: %s", path, exc)
        return None


def recover_file(partial: Path, holding_lock: bool = False) -> RecoveryNote:
    """Recover one partial recording (see the module docstring); never raises for the file's own problems.
    ``holding_lock``: the caller is the partial's writer and still holds its lock (a writer keeping its own cut file:
    nobody else can start recovering it meanwhile)."""
    partial = Path(partial)
    path = target_of_partial(partial)
    if not holding_lock and partial_in_use(partial):
        return RecoveryNote(RecoveryAction.IN_USE, partial, None,
                            f"{partial.name} is still being recorded by another program: left alone.")
    try:
        size = partial.stat().st_size
        with open(partial, "rb") as f:
            end = playable_end(f, size)
        if end == 0:
            partial.unlink()
            return RecoveryNote(RecoveryAction.REMOVED, partial, None,
                                f"Removed {partial.name}: a cut recording with nothing playable in it.",
                                bytes_dropped=size)
        if end < size:
            os.truncate(partial, end)  # drop the fragment the crash cut off
        target = _claim(partial, path)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and not partial.exists():  # its writer finished it meanwhile
            return RecoveryNote(RecoveryAction.IN_USE, partial, None,
                                f"{partial.name} was finished by the program writing it: left alone.")
        log.warning("could not recover %s: %s", partial, exc)
        return RecoveryNote(RecoveryAction.FAILED, partial, None,
                            f"Could not recover {partial.name} ({exc.strerror or exc}): it is left in "
                            f"{partial.parent}; free some space or fix the folder's permissions.")
    seconds = _video_seconds(target)
    if seconds is None:
        message = f"Recovered a cut recording into {target.name}, but it does not open here: check it in a player."
    else:
        message = f"Recovered a cut recording into {target.name} ({seconds:.1f} s of video)."
    log.info("recovered %s (%d of %d bytes) into %s", partial, end, size, target)
    return RecoveryNote(RecoveryAction.RECOVERED, partial, target, message, seconds, end, size - end)


def leave_note(recovered: Path) -> None:
    """For a writer that kept a cut recording after its parent died: ``recover_folder`` announces it next time."""
    recovered = Path(recovered)
    try:
        recovered.with_name(f"{PARTIAL_PREFIX}{recovered.name}{NOTE_SUFFIX}").write_text(recovered.name)
    except OSError as exc:  # the file itself is kept either way
        log.warning("could not leave a note for %s: %s", recovered, exc)


def _left_notes(folder: Path) -> list[RecoveryNote]:
    """The recordings kept by writers whose parent died (``leave_note``); each note file is read once."""
    out = []
    for note in sorted(folder.glob(f".*.mp4{NOTE_SUFFIX}")) if folder.is_dir() else ():
        target = note.with_name(note.name[len(PARTIAL_PREFIX):-len(NOTE_SUFFIX)])
        try:
            note.unlink()
        except OSError as exc:
            log.warning("could not remove %s: %s", note, exc)
            continue
        if not target.is_file():
            continue  # moved or deleted since: nothing to announce
        seconds = _video_seconds(target)
        message = (f"Recovered a cut recording into {target.name}" +
                   (f" ({seconds:.1f} s of video)." if seconds is not None else ", but it does not open here: "
                    "check it in a player."))
        out.append(RecoveryNote(RecoveryAction.RECOVERED, target, target, message, seconds,
                                target.stat().st_size))
    return out


def recover_folder(folder: Path) -> list[RecoveryNote]:
    """Recover every partial recording in ``folder``; one note each (empty when there is nothing to do)."""
    notes = _left_notes(Path(folder)) + [recover_file(p) for p in find_partials(Path(folder))]
    for note in notes:
        level = logging.WARNING if note.action is RecoveryAction.FAILED else logging.INFO
        log.log(level, "%s", note.message)
    return notes


def recover_for_output(out: Path) -> list[RecoveryNote]:
    """Before writing ``out``: recover the partial recordings in its folder (the cut ``.out.mp4.part`` among them),
    so that the new writer never destroys one."""
    out = Path(out)
    return recover_folder(out.parent if str(out.parent) else Path("."))
