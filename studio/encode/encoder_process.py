"""The hub's encoder in a child process, so that encoding never holds the studio's interpreter lock.

PyAV runs swscale and libx264 while holding the GIL for much of each frame (measured in this project: the core fell
from 24 to 18 fps on 2 cores while an in-process encoder ran beside it), so ``ChildEncoder`` runs a
``StreamEncoder`` in ``python -m studio.encode.encoder_process FD``: each picture is copied into one shared-memory
slot (about 1 ms for a 720p frame), the request and the encoded packets go through a pipe. It has the
``StreamEncoder`` interface; the hub's encode thread calls it and waits, without the lock, for the packets. The
segment's name is unlinked as soon as the child has attached it, so a process killed with ``kill -9`` leaves nothing
in ``/dev/shm``.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from fractions import Fraction
from multiprocessing import connection, resource_tracker, shared_memory

import numpy as np

from studio.encode.encoders import (
    EncodedPacket,
    EncoderChoice,
    StreamEncodeSettings,
    choose_video_encoder,
)
from studio.errors import EncoderError

log = logging.getLogger(__name__)


def _pack(packets: list[EncodedPacket]) -> list[tuple]:
    return [(p.video, p.data, p.pts, p.duration, p.time_base.numerator, p.time_base.denominator, p.keyframe,
             p.capture_ns) for p in packets]


def _unpack(rows: list[tuple]) -> list[EncodedPacket]:
    return [EncodedPacket(video=v, data=d, pts=pts, duration=dur, time_base=Fraction(num, den), keyframe=k,
                          capture_ns=c) for v, d, pts, dur, num, den, k, c in rows]


def _child(fd: int) -> None:
    from studio.encode.encoders import StreamEncoder

    conn = connection.Connection(fd)
    shm = None
    try:
        shm_name, _slot_bytes, width, height, fps, rate, settings, choice = conn.recv()
        shm = shared_memory.SharedMemory(name=shm_name)
        resource_tracker.unregister(shm._name, "shared_memory")  # the parent unlinks it once this one is attached
        enc = StreamEncoder(width, height, fps, rate, settings, choice)
        conn.send(("ready", enc.aac_config, enc.aac_frame_samples))
        while True:
            msg = conn.recv()
            kind = msg[0]
            if kind == "v":
                _, pix, shape, index, key, capture_ns = msg
                pic = np.ndarray(shape, np.uint8, buffer=shm.buf)
                out = enc.encode_picture(pic, pix, index, keyframe=key, capture_ns=capture_ns)
            elif kind == "a":
                out = enc.encode_audio(msg[1], msg[2])
            elif kind == "flush":
                out = enc.flush()
            else:
                return
            conn.send(("p", _pack(out), enc.video_bytes, enc.audio_bytes))
    except EOFError:
        return
    except Exception as exc:  # noqa: BLE001  (every failure is the parent's to report, in words)
        try:
            conn.send(("error", type(exc).__name__, str(exc)))
        except OSError:
            pass
    finally:
        if shm is not None:
            shm.close()


class ChildEncoder:
    """``StreamEncoder``'s interface, encoding in a child process (see the module docstring)."""

    def __init__(self, width: int, height: int, fps: float, audio_rate_hz: int,
                 settings: StreamEncodeSettings | None = None, choice: EncoderChoice | None = None) -> None:
        self.width, self.height, self.fps, self.audio_rate_hz = width, height, fps, audio_rate_hz
        self.settings = settings or StreamEncodeSettings()
        self.choice = choice or choose_video_encoder(self.settings.prefer_hardware)
        self.rate = Fraction(fps).limit_denominator(1001)
        self.video_time_base = 1 / self.rate
        self.audio_time_base = Fraction(1, audio_rate_hz)
        self.frames_in = 0
        self.video_bytes = self.audio_bytes = 0
        slot_bytes = width * height * 3
        self._shm = shared_memory.SharedMemory(create=True, size=slot_bytes)
        self._unlinked = False
        self._conn, child = connection.Pipe()
        fd = child.fileno()
        self._proc = subprocess.Popen([sys.executable, "-m", "studio.encode.encoder_process", str(fd)],
                                      pass_fds=(fd,), stdin=subprocess.DEVNULL)
        child.close()
        try:
            self._conn.send((self._shm.name, slot_bytes, width, height, fps, audio_rate_hz, self.settings,
                             self.choice))
            reply = self._recv(timeout_s=60.0)
        except BaseException:
            self.close()
            raise
        # both processes have it mapped now: its name goes, so that no kill (not even -9) leaves it in /dev/shm
        self._unlink()
        self.aac_config, self.aac_frame_samples = reply[1], reply[2]

    def _recv(self, timeout_s: float | None = None):
        try:
            if timeout_s is not None and not self._conn.poll(timeout_s):
                raise EncoderError(f"The encoder process did not answer within {timeout_s:g} s.")
            msg = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise EncoderError(f"The encoder process stopped (exit code {self._proc.poll()}).") from exc
        if msg[0] == "error":
            raise EncoderError(f"The encoder process failed: {msg[1]}: {msg[2]}")
        return msg

    def _call(self, msg: tuple) -> list[EncodedPacket]:
        try:
            self._conn.send(msg)
        except OSError as exc:
            raise EncoderError(f"The encoder process is gone (exit code {self._proc.poll()}).") from exc
        reply = self._recv()
        self.video_bytes, self.audio_bytes = reply[2], reply[3]
        return _unpack(reply[1])

    def encode_picture(self, picture: np.ndarray, pix: str, index: int, keyframe: bool = False,
                       capture_ns: int = 0) -> list[EncodedPacket]:
        view = np.ndarray(picture.shape, np.uint8, buffer=self._shm.buf)
        view[...] = picture
        self.frames_in += 1
        return self._call(("v", pix, picture.shape, index, keyframe, capture_ns))

    def encode_audio(self, samples: np.ndarray, capture_ns: int = 0) -> list[EncodedPacket]:
        return self._call(("a", np.ascontiguousarray(samples, np.float32), capture_ns))

    def flush(self) -> list[EncodedPacket]:
        return self._call(("flush",))

    def close(self) -> None:
        try:
            self._conn.send(("close",))
        except OSError:
            pass
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._conn.close()
        self._shm.close()
        self._unlink()

    def _unlink(self) -> None:
        if not self._unlinked:
            self._unlinked = True
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass


if __name__ == "__main__":
    _child(int(sys.argv[1]))
