"""An MP4 writer in a child process: live encoding that never takes the studio's GIL.

PyAV converts RGB to YUV (swscale) and runs libx264 while holding the interpreter lock for much of each frame
(measured here: a Python thread beside a 720p encoder ran at 55-73 % of its own speed, and the studio's core dropped
from 24 to 18 fps while recording on 2 cores with half the CPU idle). So recordings and streams encode in a process of
their own: frames cross through a ring of shared-memory slots (one copy, ~1 ms for a 720p frame), audio and control
through a pipe. A slot that is not free when a frame comes is the encoder falling behind: the caller drops the frame
and counts it. The child reports errors with their kind and message; a child that dies is noticed.

The child is ``python -m studio.encode.worker FD`` started with subprocess (not multiprocessing's spawn, which would
run the parent's ``__main__`` again in the child), talking over one end of a socket pair.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections import deque
from multiprocessing import connection, shared_memory
from pathlib import Path

import numpy as np

from studio.errors import EncoderError, OutputPathError, StudioError

log = logging.getLogger(__name__)

_ERRORS = {"OutputPathError": OutputPathError, "EncoderError": EncoderError}


_WRITERS = {"rgb": "write_video", "nv12": "write_video_nv12", "yuv420p": "write_video_yuv420p"}


def _child(conn, shm_name: str, slot_bytes: int, path: str, width: int, height: int, fps: float, rate_hz: int,
           settings, fragmented: bool) -> None:
    """The child: one Mp4Writer fed from the pipe; every failure goes back as ("error", kind, message)."""
    from studio.encode.mp4 import Mp4Writer

    shm = shared_memory.SharedMemory(name=shm_name)
    _untrack(shm)
    writer = None
    try:
        writer = Mp4Writer(path, width, height, fps, rate_hz, settings=settings, fragmented=fragmented)
        conn.send(("ready",))
        last = None
        while True:
            msg = conn.recv()
            kind = msg[0]
            if kind == "frame":
                _, slot, fmt, shape = msg
                arr = np.ndarray(shape, np.uint8, buffer=shm.buf, offset=slot * slot_bytes)
                last = (fmt, arr.copy())
                conn.send(("free", slot))
                getattr(writer, _WRITERS[fmt])(last[1])
            elif kind == "repeat":
                if last is not None:
                    getattr(writer, _WRITERS[last[0]])(last[1])
            elif kind == "audio":
                writer.write_audio(msg[1])
            elif kind == "close":
                out = writer.close()
                conn.send(("closed", str(out)))
                return
            elif kind == "abort":
                writer.abort()
                conn.send(("closed", ""))
                return
    except BaseException as exc:  # every failure is the parent's to report, with what of the file was kept
        kept = None
        if writer is not None:
            try:
                kept = writer.salvage()
            except Exception:  # noqa: BLE001 (the first failure is the one to report)
                writer.abort()
        try:
            conn.send(("error", type(exc).__name__, str(exc), str(kept or "")))
            orphaned = isinstance(exc, (EOFError, ConnectionError))
        except OSError:
            orphaned = True
        if orphaned and kept is not None:  # the parent is gone: the next start announces the kept file
            from studio.encode.recovery import leave_note

            leave_note(kept)
    finally:
        shm.close()


class EncoderProcess:
    """See the module docstring. ``write_frame`` returns False when no slot is free (the frame is dropped)."""

    def __init__(self, path: Path, width: int, height: int, fps: float, rate_hz: int, settings,
                 fragmented: bool = True, slots: int = 16) -> None:
        self.path = Path(path)
        self.slot_bytes = width * height * 3
        self.shm = shared_memory.SharedMemory(create=True, size=self.slot_bytes * slots)
        self._free: deque[int] = deque(range(slots))
        self._cv = threading.Condition()
        self.error: StudioError | None = None
        self.result: Path | None = None
        self.salvaged: Path | None = None  # after a failure: the playable part of the file, kept (Mp4Writer.salvage)
        self._closed = threading.Event()
        self._conn, child_conn = connection.Pipe()
        self._send_lock = threading.Lock()
        fd = child_conn.fileno()
        self.proc = subprocess.Popen([sys.executable, "-m", "studio.encode.worker", str(fd)], pass_fds=(fd,),
                                     stdin=subprocess.DEVNULL)
        child_conn.close()
        self._conn.send((self.shm.name, self.slot_bytes, str(self.path), width, height, fps, rate_hz, settings,
                         fragmented))
        first = self._recv(timeout=60.0)
        if first is None or first[0] != "ready":
            self._cleanup()
            if first is not None and first[0] == "error":
                raise _ERRORS.get(first[1], EncoderError)(first[2])
            raise EncoderError(f"The encoder process for {self.path.name} did not start.")
        self._reader = threading.Thread(target=self._read, name="encoder-replies", daemon=True)
        self._reader.start()

    def _recv(self, timeout: float):
        if self._conn.poll(timeout):
            try:
                return self._conn.recv()
            except (EOFError, OSError):
                return None
        return None

    def _read(self) -> None:
        while True:
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                if not self._closed.is_set() and self.error is None:
                    self.error = EncoderError(f"The encoder process for {self.path.name} ended unexpectedly "
                                              f"(exit code {self.proc.poll()}).")
                self._closed.set()
                with self._cv:
                    self._cv.notify_all()
                return
            kind = msg[0]
            if kind == "free":
                with self._cv:
                    self._free.append(msg[1])
                    self._cv.notify_all()
            elif kind == "error":
                self.salvaged = Path(msg[3]) if len(msg) > 3 and msg[3] else None  # before error: readers see both
                self.error = _ERRORS.get(msg[1], EncoderError)(msg[2])
                log.error("encoder process: %s: %s", msg[1], msg[2])
            elif kind == "closed":
                self.result = Path(msg[1]) if msg[1] else None
                self._closed.set()
                with self._cv:
                    self._cv.notify_all()
                return

    def _send(self, msg) -> None:
        if self.error is not None:
            raise self.error
        try:
            with self._send_lock:
                self._conn.send(msg)
        except (BrokenPipeError, OSError) as exc:
            raise self.error or EncoderError(f"The encoder process for {self.path.name} is gone.") from exc

    def write_frame(self, frame: np.ndarray, fmt: str = "rgb", wait_s: float = 0.0) -> bool:
        """Copy one frame (H x W x 3 RGB, or H * 3 / 2 x W NV12) into a free slot and send it; False when none frees
        up within ``wait_s``."""
        with self._cv:
            if not self._free and wait_s > 0:
                self._cv.wait_for(lambda: self._free or self._closed.is_set() or self.error is not None, wait_s)
            if not self._free:
                if self.error is not None:
                    raise self.error
                return False
            slot = self._free.popleft()
        view = np.ndarray(frame.shape, np.uint8, buffer=self.shm.buf, offset=slot * self.slot_bytes)
        view[...] = frame
        self._send(("frame", slot, fmt, frame.shape))
        return True

    def repeat_frame(self) -> None:
        self._send(("repeat",))

    def write_audio(self, samples: np.ndarray) -> None:
        if len(samples):
            self._send(("audio", np.ascontiguousarray(samples, np.float32)))

    def close(self, timeout_s: float = 120.0) -> Path | None:
        """Finish the file (the child flushes and renames it); returns its path. Raises what the child raised."""
        try:
            if self.error is None:
                self._send(("close",))
            self._closed.wait(timeout_s)
        finally:
            self._wait_child(10)
            self._cleanup()
        if self.error is not None:
            raise self.error
        if not self._closed.is_set():
            raise EncoderError(f"The encoder did not finish {self.path.name} within {timeout_s:g} s.")
        return self.result

    def abort(self) -> None:
        try:
            self._send(("abort",))
            self._closed.wait(10)
        except StudioError:
            pass
        finally:
            self._wait_child(5)
            self._cleanup()

    def _wait_child(self, timeout_s: float) -> None:
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def _cleanup(self) -> None:
        try:
            self._conn.close()
        except OSError:
            pass
        try:
            self.shm.close()
            self.shm.unlink()
        except (FileNotFoundError, OSError):
            pass


def _untrack(shm: shared_memory.SharedMemory) -> None:
    """The parent owns (and unlinks) the segment: the child's resource tracker must not unlink it too."""
    try:
        from multiprocessing import resource_tracker

        resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
    except (ImportError, AttributeError, KeyError):
        pass


if __name__ == "__main__":
    _conn = connection.Connection(int(sys.argv[1]))
    _child(_conn, *_conn.recv())
