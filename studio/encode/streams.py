"""Live outputs through PyAV's muxers: RTMP (FLV), MPEG-TS over TCP / UDP, and the recorder's MP4 file sink.

Every one is a ``Sink`` of the shared encode (``studio.encode.hub``): no output encodes on its own.

Timestamps and the AAC priming trap: the hub's first AAC frame carries 1024 priming samples at
a negative time. The MP4 sink muxes it as it is, so the MP4 muxer writes an edit list that makes players skip it
(zero offset, measured: tests/integration/test_streams.py). FLV and MPEG-TS have no edit list and clamp negative
times, so their sinks shift the whole timeline, video and audio alike, by ``PRIMING_SHIFT_S``: the priming plays
before the first picture and every later sample stays at its picture's time.

Network sinks never stop the program: when the receiver goes away, the sink says so (``OutputState.RECONNECTING``
and the error in ``detail``), drops what arrives, and tries again with a growing backoff; on success a new stream
(new header, new timestamps) starts at a keyframe.
"""

from __future__ import annotations

import logging
import os
import time
import urllib.parse
from collections import deque
from fractions import Fraction
from pathlib import Path

import av

from studio.encode.encoders import (
    AAC_PRIMING_SAMPLES,
    EncodedPacket,
    StreamEncodeSettings,
)
from studio.encode.hub import HubOutput, Sink
from studio.encode.mp4 import (
    _FRAGMENTED_MOVFLAGS,
    _PLAIN_MOVFLAGS,
    _is_path_error,
    _path_error,
    claim_partial,
    partial_path_for,
)
from studio.errors import EncoderError, InputError, OutputPathError, StudioError
from studio.contracts import Output, OutputState

log = logging.getLogger(__name__)

PRIMING_SHIFT_S = Fraction(2 * AAC_PRIMING_SAMPLES, 48_000)  # a run's first AAC frame starts up to 2 frames early
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # waits between reconnect attempts; the last one repeats


class ContainerSink(Sink):
    """Muxes the hub's packets into one PyAV container (a file or a network URL)."""

    def __init__(self, target: str, container_format: str, label: str, network: bool,
                 options: dict[str, str] | None = None, shift_s: Fraction = Fraction(0),
                 max_queue_frames: int = 50) -> None:
        super().__init__(label, max_queue_frames)
        self.target = target
        self.container_format = container_format
        self.network = network
        self.options = dict(options or {})
        self.shift_s = shift_s
        self._container: av.container.OutputContainer | None = None
        self._v = self._a = None
        self._backoff_i = 0
        self._next_attempt = 0.0
        self.connects = 0  # successful (re)connections
        self.display = target  # what the Outputs panel shows as the destination
        self.detail = target

    # -- container --------------------------------------------------------------------------------------------------

    def _open(self) -> None:
        hub = self._hub
        assert hub is not None
        enc = hub.encoder
        c = av.open(self.target, "w", format=self.container_format, options=self.options)
        try:
            v = c.add_mux_stream("h264", rate=enc.rate, width=enc.width, height=enc.height)
            # The MP4 keeps the encoder's frame clock (frame-exact times); the others take 90 kHz, which also holds
            # the priming shift exactly.
            v.time_base = enc.video_time_base if self.shift_s == 0 else Fraction(1, 90_000)
            # An AAC stream whose codec PyAV opens at the header: it gives the muxer the same AudioSpecificConfig as
            # the hub's encoder (same codec, rate, layout); it encodes nothing.
            a = c.add_stream("aac", rate=enc.audio_rate_hz, layout="mono")
            a.bit_rate = enc.settings.audio_bitrate_kbps * 1000
            a.time_base = enc.audio_time_base
        except BaseException:
            c.close()
            raise
        self._container, self._v, self._a = c, v, a

    def _close_container(self) -> None:
        c, self._container = self._container, None
        if c is not None:
            try:
                c.close()
            except (av.FFmpegError, OSError, ValueError) as exc:
                log.debug("closing %s: %s", self.target, exc)

    # -- the sink thread --------------------------------------------------------------------------------------------

    def send(self, pkt: EncodedPacket, rel_s: Fraction) -> int:
        if self.state is OutputState.RECONNECTING and time.monotonic() < self._next_attempt:
            self.restart(keyframe_now=False)  # not yet: wait for the backoff (``idle`` asks again)
            return 0
        try:
            if self._container is None:
                self._open()
            stream = self._v if pkt.video else self._a
            tb = stream.time_base
            p = av.Packet(pkt.data)
            p.stream = stream
            p.time_base = tb
            p.pts = p.dts = round((rel_s + self.shift_s) / tb)
            p.duration = round(pkt.duration * pkt.time_base / tb)
            p.is_keyframe = pkt.keyframe
            self._container.mux(p)
        except (av.FFmpegError, OSError) as exc:
            self._lost(exc)
            return 0
        if self.state is not OutputState.ON:
            self.connects += 1
            self._backoff_i = 0
            self.state = OutputState.ON
            self.detail = self.display
            log.info("%s: sending to %s", self.label, self.display)
        return len(pkt.data)

    def _lost(self, exc: BaseException) -> None:
        self._close_container()
        if not self.network:
            if _is_path_error(exc, Path(self.target)):
                raise _path_error(exc, Path(self.target)) from exc  # type: ignore[arg-type]
            raise EncoderError(f"Writing {self.target} failed: {exc}") from exc
        wait = BACKOFF_S[min(self._backoff_i, len(BACKOFF_S) - 1)]
        self._backoff_i += 1
        self._next_attempt = time.monotonic() + wait
        self.state = OutputState.RECONNECTING
        self.detail = f"{self.display}: {getattr(exc, 'strerror', None) or exc}; reconnecting in {wait:g} s"
        log.warning("%s", self.detail)
        self.restart(keyframe_now=False)

    def idle(self) -> None:
        if self.state is OutputState.RECONNECTING and time.monotonic() >= self._next_attempt:
            self.restart(keyframe_now=True)  # the next keyframe tries the receiver again

    def finish(self) -> None:
        self._close_container()
        if self.state is not OutputState.FAILED:
            self.state = OutputState.OFF


class Mp4FileSink(ContainerSink):
    """The recorder's file: an MP4 with the guarantees of ``studio.encode.mp4`` - written into a hidden
    ``.name.mp4.part`` and renamed on close (atomic), fragmented for live recordings (what was written before a crash
    plays; ``recover_partial`` rescues it), zero A/V offset through the AAC priming edit list (``delay_moov`` keeps it
    in fragmented files). ``close()`` returns the final path.

    Nothing is called written that is not: FFmpeg's muxer does not always report a failed write (the last fragment
    at close, a fragment cut on a full disk), so the sink checks the file itself - on disk, every fragment before the
    one still open must be there (checked at each keyframe); before finishing, the free space must hold the open
    fragment; after, the file is synced and read back (as many video packets as were sent). On a failure the
    playable part is kept as ``NAME-recovered.mp4`` (``salvaged``; ``recorder.failure_line`` words it)."""

    def __init__(self, path: Path | str, fragmented: bool = True, max_queue_frames: int = 250) -> None:
        self.path = Path(path)
        folder = self.path.parent
        if not folder.is_dir():
            raise OutputPathError(f"The folder {folder} does not exist: create it or choose another output path.")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputPathError(f"Cannot write to {folder}: choose a folder you may write to.")
        options = {"movflags": _FRAGMENTED_MOVFLAGS if fragmented else _PLAIN_MOVFLAGS}
        if fragmented:
            options["flush_packets"] = "1"
        super().__init__(str(partial_path_for(self.path)), "mp4", f"recording {self.path.name}", network=False,
                         options=options, max_queue_frames=max_queue_frames)
        self.fragmented = fragmented
        self.display = self.detail = str(self.path)
        self.discard = False  # finish without keeping anything (an aborted recording)
        self.salvaged: Path | None = None  # after a failure: the playable part, kept under a visible name
        self.bytes_sent = 0  # payload bytes handed to the muxer
        self.video_sent = 0
        self._sent_at_keys: deque[int] = deque([0, 0, 0], maxlen=3)  # bytes sent before the last keyframes
        self._lock = claim_partial(self.path)  # another writer is refused; a crash's leftover is recovered first

    def send(self, pkt: EncodedPacket, rel_s: Fraction) -> int:
        if pkt.video and pkt.keyframe and self._container is not None:
            # what came before the keyframe two back is on disk by now: the muxer holds a keyframe until sound
            # past it arrives (interleaving), and only then writes the fragment that the keyframe ends
            self._sent_at_keys.append(self.bytes_sent)
            if self.fragmented:
                self._check_on_disk(self._sent_at_keys[0])
        n = super().send(pkt, rel_s)
        if n:
            self.bytes_sent += n
            self.video_sent += pkt.video
        return n

    def _lost(self, exc: BaseException) -> None:
        try:
            super()._lost(exc)
        except (OutputPathError, EncoderError) as err:
            raise self._failed(err) from exc

    def _check_on_disk(self, expected: int) -> None:
        try:
            size = os.stat(self.target).st_size
        except OSError as exc:
            raise self._failed(_path_error(exc, self.path)) from exc
        if size < expected:
            raise self._failed(self._short_write())

    def _short_write(self) -> OutputPathError:
        try:
            st = os.statvfs(self.path.parent)
            full = st.f_bavail * st.f_frsize < 1 << 20
        except OSError:
            full = False
        if full:
            return OutputPathError(f"The disk holding {self.path.parent} is full: free some space or choose "
                                   "another folder.")
        return OutputPathError(f"Writing {self.path} failed: part of it did not reach the disk; choose another "
                               "folder.")

    def _check_room(self) -> None:
        """Before finishing: the free space must hold what the muxer still keeps (the open fragment), with room."""
        try:
            st = os.statvfs(self.path.parent)
        except OSError as exc:
            raise _path_error(exc, self.path) from exc
        pending = self.bytes_sent - self._sent_at_keys[0] + (1 << 16)
        if st.f_bavail * st.f_frsize < pending:
            raise OutputPathError(f"The disk holding {self.path.parent} is full: free some space or choose another "
                                  "folder.")

    def _check_written(self) -> None:
        """After the muxer closed: synced to the disk, and read back with every video packet that was sent."""
        try:
            fd = os.open(self.target, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            size = os.stat(self.target).st_size
        except OSError as exc:
            raise _path_error(exc, self.path) from exc
        if size < self.bytes_sent:
            raise self._short_write()
        try:
            with av.open(self.target) as c:
                got = sum(1 for p in c.demux(c.streams.video[0]) if p.size)
        except (av.FFmpegError, OSError, ValueError, IndexError) as exc:
            raise EncoderError(f"{self.path.name} does not read back ({exc}): choose another folder.") from exc
        if got != self.video_sent:
            raise self._short_write()

    def _failed(self, err: StudioError) -> StudioError:
        """Keep the playable part as ``NAME-recovered.mp4`` (``salvaged``); returns ``err`` to raise."""
        self._close_container()
        from studio.encode.recovery import RecoveryAction, recover_file

        kept = None
        lock, self._lock = self._lock, None
        try:
            if self.fragmented and Path(self.target).exists():
                note = recover_file(Path(self.target), holding_lock=True)
                kept = note.path if note.action is RecoveryAction.RECOVERED else None
            else:
                Path(self.target).unlink(missing_ok=True)
        except OSError as exc:
            log.info("keeping the cut %s failed: %s", self.target, exc)
        finally:
            if lock is not None:
                lock.release()
        self.salvaged = kept
        return err

    def finish(self) -> None:
        wrote = self._container is not None
        partial = Path(self.target)
        if self._lock is None:  # failed before: kept or removed already
            super().finish()
            return
        try:
            if wrote and not self.discard:
                self._check_room()
            super().finish()
            if not wrote or self.discard:
                partial.unlink(missing_ok=True)
                self.result = None
                return
            self._check_written()
            try:
                os.replace(partial, self.path)
            except OSError as exc:
                raise _path_error(exc, self.path) from exc
            self.result = self.path
        except (OutputPathError, EncoderError) as err:
            raise self._failed(err) from err
        finally:
            lock, self._lock = self._lock, None
            if lock is not None:
                lock.release()


def network_sink(url: str) -> ContainerSink:
    """The sink for an ``rtmp://``, ``rtmps://``, ``tcp://`` or ``udp://`` URL (MPEG-TS over TCP / UDP)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("rtmp", "rtmps"):
        # no duration / file size rewrite at the end: a live connection cannot seek back
        return ContainerSink(url, "flv", f"RTMP {parts.netloc}", network=True,
                             options={"flvflags": "no_duration_filesize", "flush_packets": "1"},
                             shift_s=PRIMING_SHIFT_S)
    if scheme in ("tcp", "udp"):
        if not parts.hostname or not parts.port:
            raise InputError(f"{url}: give host and port, e.g. {scheme}://127.0.0.1:9000")
        target = url
        if scheme == "udp" and "pkt_size" not in parts.query:
            target += ("&" if parts.query else "?") + "pkt_size=1316"  # 7 TS packets per datagram
        if scheme == "tcp" and "timeout" not in parts.query:
            # a receiver that stops reading (not gone: no reset comes) fails a write after 5 s -> reconnect
            target += ("&" if parts.query else "?") + "timeout=5000000"
        sink = ContainerSink(target, "mpegts", f"MPEG-TS/{scheme.upper()} {parts.netloc}", network=True,
                             options={"flush_packets": "1"}, shift_s=PRIMING_SHIFT_S)
        sink.display = sink.detail = url  # the address as the producer gave it
        return sink
    raise InputError(f"Cannot stream to {url!r}: use rtmp://host[:port]/app/key, tcp://host:port or udp://host:port.")


# -- outputs of the core ---------------------------------------------------------------------------------------------

class StreamOutput(HubOutput):
    """RTMP (FLV) or MPEG-TS over TCP / UDP to ``url`` (OBS, ffmpeg, any RTMP server)."""

    def __init__(self, url: str, settings: StreamEncodeSettings | None = None, block: bool = False,
                 max_queue_frames: int = 50) -> None:
        super().__init__(settings, block)
        self.url = url
        self.max_queue_frames = max_queue_frames
        self.name = network_sink(url).label  # also checks the URL now, before the program starts

    def make_sink(self) -> Sink:
        sink = network_sink(self.url)
        sink.max_queue_frames = self.max_queue_frames
        return sink


def output_for_url(url: str, settings: StreamEncodeSettings | None = None, block: bool = False) -> Output:
    """The output for a ``--stream`` URL or an Outputs-panel entry: rtmp(s)://..., tcp://host:port and
    udp://host:port (MPEG-TS), ws://127.0.0.1:PORT (the WebCodecs page), v4l2[:/dev/videoN] or virtualcam."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme in ("ws", "http"):
        from studio.encode.websocket import WebSocketOutput

        return WebSocketOutput.from_url(url, settings=settings, block=block)
    if scheme in ("v4l2", "virtualcam") or url in ("v4l2", "virtualcam"):
        from studio.encode.virtualcam import VirtualCamOutput

        device = url.split(":", 1)[1] if ":" in url else None
        return VirtualCamOutput(device=device or None)
    return StreamOutput(url, settings=settings, block=block)
