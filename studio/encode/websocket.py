"""The built-in WebSocket server: H.264 access units and AAC frames to a browser page that decodes them with WebCodecs.

The server (the ``websockets`` library, asyncio on its own thread) serves, on one port:

- ``/`` and ``/player.js``: the page (``studio/encode/web/``, no CDN): ``VideoDecoder`` onto a canvas,
  ``AudioDecoder`` into Web Audio, and a stats line (decoded fps, A/V offset, glass-to-glass latency). The page sends
  its stats back over the socket every second (``WebSocketServer.reports``), which is how the tests read them.
- ``/ws``: the media (and from the page: ``{"type": "stats", ...}`` every second, ``{"type": "keyframe"}`` when
  it fell behind and skips to the next keyframe). First a JSON text message ``{"type": "config", ...}`` (the WebCodecs codec strings, the AAC
  AudioSpecificConfig), then one binary message per access unit / AAC frame::

      byte 0      kind: 1 video, 2 audio
      byte 1      flags: bit 0 keyframe
      bytes 2-9   int64 LE: presentation time in microseconds on the program clock (AAC priming is negative)
      bytes 10-17 int64 LE: capture stamp, microseconds since the Unix epoch (0: none; audio: of the picture
                  whose samples completed the AAC frame)
      bytes 18-21 uint32 LE: duration in microseconds
      bytes 22-   the payload: an Annex-B access unit (SPS/PPS in front on keyframes) or one raw AAC frame

- ``/seg/index.json`` and ``/seg/N.bin`` when ``segment_s > 0``: the same messages cut into files at keyframes
  (HLS-like file delivery, each segment served once it is complete; ``N.bin`` waits for segment N), so that the page
  can measure what file-based delivery costs against the push of single access units (``?delivery=segments``).

No network exposure by default: it binds 127.0.0.1; another address needs ``allow_remote=True`` (the command line's
``--stream-allow-remote``, the Outputs panel's "reachable from other machines") and logs a warning. Requests whose
Host or Origin is not this server's are refused (403): another web site cannot read the stream, and DNS rebinding
cannot reach it. Each viewer has a bounded queue: a slow one drops video up to the next keyframe. At most
``max_viewers`` sockets watch at once: one more gets HTTP 503 (or, in a race, close code 1013 "try again later"); a
connection that does not finish its handshake within ``handshake_timeout_s`` is closed, so idle sockets cannot hold
the server.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import struct
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from studio.encode.encoders import EncodedPacket, StreamEncodeSettings, avc_codec_string
from studio.encode.hub import HubOutput, Sink
from studio.errors import EncoderError, InputError
from studio.contracts import OutputState, OutputStats

log = logging.getLogger(__name__)

WEB_DIR = Path(__file__).with_name("web")
HEADER = struct.Struct("<BBqqI")  # kind, flags, pts_us, capture_us, duration_us (22 bytes)
KIND_VIDEO, KIND_AUDIO = 1, 2
_CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


@dataclass(frozen=True)
class WebSocketSettings:
    host: str = "127.0.0.1"
    port: int = 8765  # 0: any free port (``WebSocketServer.port`` tells which)
    allow_remote: bool = False  # must be set to bind an address other than loopback (then a warning is logged)
    extra_origins: tuple[str, ...] = ()  # e.g. "http://studio.local:8765" when viewers use another name
    max_queue_frames: int = 25  # per viewer: about one second at 25 fps
    segment_s: float = 0.0  # > 0: also serve file segments of about this length (delivery comparison)
    segments_kept: int = field(default=8)
    max_viewers: int = 16  # sockets on /ws at once (pages watching, or sending stats); one more is refused (503)
    handshake_timeout_s: float = 5.0  # a connection that has not finished its handshake by then is closed


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _epoch_us(monotonic_ns: int) -> int:
    """A monotonic-clock stamp as microseconds since the Unix epoch (what the page's clock reads)."""
    if monotonic_ns <= 0:
        return 0
    return (time.time_ns() - time.monotonic_ns() + monotonic_ns) // 1000


def frame_message(pkt: EncodedPacket) -> bytes:
    """The binary message of one packet (see the module docstring)."""
    pts_us = round(pkt.pts * pkt.time_base * 1_000_000)
    dur_us = round(pkt.duration * pkt.time_base * 1_000_000)
    head = HEADER.pack(KIND_VIDEO if pkt.video else KIND_AUDIO, 1 if pkt.keyframe else 0, pts_us,
                       _epoch_us(pkt.capture_ns), dur_us)
    return head + pkt.data


class _Viewer:
    def __init__(self, ws, media: bool) -> None:
        self.ws = ws
        self.media = media
        self.q: deque[tuple[bytes | str, bool]] = deque()  # (message, is video)
        self.queued_video = 0
        self.waiting_key = True
        self.dropped = 0
        self.wake = asyncio.Event()
        self.config_sent = False


class WebSocketServer:
    """See the module docstring. ``start()`` binds and returns the port; ``publish`` is thread-safe."""

    def __init__(self, settings: WebSocketSettings | None = None) -> None:
        self.settings = s = settings or WebSocketSettings()
        if not is_loopback(s.host):
            if not s.allow_remote:
                raise InputError(f"Binding the WebSocket server to {s.host} exposes the stream to the network: "
                                 "use 127.0.0.1, or allow it explicitly (--stream-allow-remote on the command "
                                 "line, \"reachable from other machines\" in the Outputs panel).")
            log.warning("the WebSocket server binds %s: anyone who reaches this address can watch the program",
                        s.host)
        if s.max_viewers < 1:
            raise InputError(f"max_viewers is {s.max_viewers}: allow at least one viewer.")
        self.port = s.port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._viewers: set[_Viewer] = set()  # touched on the server's thread only
        self._media_viewers = 0
        self.config: dict | None = None
        self.audio_config: dict | None = None
        self._reports: list[dict] = []
        self._reports_lock = threading.Lock()
        self.published = 0
        self.viewer_drops = 0
        self.viewers_refused = 0  # sockets turned away because max_viewers were watching
        self.on_viewer_joined = None  # called (on the server's thread) when a viewer needs a keyframe
        self._last_key_request = 0.0
        # file segments (segment_s > 0)
        self._segments: deque[tuple[int, bytes]] = deque(maxlen=s.segments_kept)
        self._seg_parts: list[bytes] = []
        self._seg_start_us: int | None = None
        self._seg_next = 0
        self._seg_cond: asyncio.Condition | None = None

    # -- life -------------------------------------------------------------------------------------------------------

    def start(self) -> int:
        self._thread = threading.Thread(target=self._run, name="websocket-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._start_error is not None:
            raise EncoderError(f"Cannot serve on {self.settings.host}:{self.settings.port} ({self._start_error}): "
                               "choose another port.") from self._start_error
        log.info("WebCodecs page on %s", self.url)
        return self.port

    @property
    def url(self) -> str:
        host = self.settings.host if ":" not in self.settings.host else f"[{self.settings.host}]"
        return f"http://{host}:{self.port}/"

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except (OSError, RuntimeError) as exc:  # a bind failure (port taken, no such address), handed to start()
            self._start_error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        from websockets.asyncio.server import serve

        self._seg_cond = asyncio.Condition()
        self._stop = asyncio.Event()
        async with serve(self._handle, self.settings.host, self.settings.port, process_request=self._http,
                         origins=None, max_size=2**16, compression=None,
                         open_timeout=self.settings.handshake_timeout_s) as server:
            self._server = server
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            await self._stop.wait()

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    # -- who may connect --------------------------------------------------------------------------------------------

    def _allowed_hosts(self) -> set[str]:
        names = {"127.0.0.1", "localhost", "[::1]"}
        if self.settings.allow_remote:
            names.add(self.settings.host if ":" not in self.settings.host else f"[{self.settings.host}]")
        hosts = {f"{n}:{self.port}" for n in names}
        for o in self.settings.extra_origins:
            hosts.add(urllib.parse.urlsplit(o).netloc)
        return hosts

    def _allowed_origins(self) -> set[str]:
        return {f"http://{h}" for h in self._allowed_hosts()} | set(self.settings.extra_origins)

    def _refusal(self, request) -> str | None:
        host = request.headers.get("Host", "")
        if host not in self._allowed_hosts():
            return f"host {host!r} refused"
        origin = request.headers.get("Origin")
        if origin is not None and origin not in self._allowed_origins():
            return f"origin {origin!r} refused"
        return None

    # -- HTTP: the page and the segments ----------------------------------------------------------------------------

    async def _http(self, connection, request):
        from websockets.datastructures import Headers
        from websockets.http11 import Response

        why = self._refusal(request)
        if why is not None:
            log.warning("WebSocket server: %s (%s)", why, request.path)
            return connection.respond(403, f"Forbidden: {why}\n")
        path = urllib.parse.urlsplit(request.path).path
        if path == "/ws":
            if len(self._viewers) >= self.settings.max_viewers:
                self.viewers_refused += 1
                log.warning("WebSocket server: a viewer refused, %d are watching (max_viewers)", len(self._viewers))
                return connection.respond(503, f"Service Unavailable: {self._full()}\n")
            return None  # the WebSocket handshake goes on
        if path in ("/", "/index.html", "/player.js"):
            f = WEB_DIR / ("index.html" if path != "/player.js" else "player.js")
            body = f.read_bytes()
            headers = Headers([("Content-Type", _CONTENT_TYPES[f.suffix]), ("Content-Length", str(len(body))),
                               ("Cache-Control", "no-store")])
            return Response(200, "OK", headers, body)
        if path == "/seg/index.json" and self.settings.segment_s > 0:
            body = json.dumps({"segments": [n for n, _ in self._segments], "next": self._seg_next,
                               "segment_s": self.settings.segment_s, "config": self.config}).encode()
            return Response(200, "OK", Headers([("Content-Type", "application/json"),
                                                ("Content-Length", str(len(body))), ("Cache-Control", "no-store")]),
                            body)
        if path.startswith("/seg/") and path.endswith(".bin") and self.settings.segment_s > 0:
            try:
                n = int(path[5:-4])
            except ValueError:
                return connection.respond(404, "Not found\n")
            body = await self._segment(n)
            if body is None:
                return connection.respond(404, "Not found\n")
            return Response(200, "OK", Headers([("Content-Type", "application/octet-stream"),
                                                ("Content-Length", str(len(body))), ("Cache-Control", "no-store")]),
                            body)
        return connection.respond(404, "Not found\n")

    async def _segment(self, n: int, wait_s: float = 10.0) -> bytes | None:
        """Segment ``n`` once it is complete (waits for it, like a blocking playlist reload)."""
        assert self._seg_cond is not None
        async with self._seg_cond:
            try:
                await asyncio.wait_for(self._seg_cond.wait_for(lambda: self._seg_next > n), wait_s)
            except TimeoutError:
                return None
            for k, body in self._segments:
                if k == n:
                    return body
        return None

    # -- WebSocket: the media and the page's reports ----------------------------------------------------------------

    async def _handle(self, ws) -> None:
        origin = ws.request.headers.get("Origin")
        if origin is not None and origin not in self._allowed_origins():
            await ws.close(1008, "origin refused")
            return
        if len(self._viewers) >= self.settings.max_viewers:  # several handshakes passed the check at once
            self.viewers_refused += 1
            await ws.close(1013, self._full()[:120])
            return
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(ws.request.path).query)
        viewer = _Viewer(ws, media=query.get("media", ["1"])[0] != "0")
        self._viewers.add(viewer)
        self._media_viewers += viewer.media
        if viewer.media and self.on_viewer_joined is not None:
            self.on_viewer_joined()
        sender = asyncio.create_task(self._send_loop(viewer))
        try:
            async for msg in ws:
                if isinstance(msg, str):
                    self._take_report(msg)
        except Exception as exc:  # noqa: BLE001  (any connection error ends this viewer only)
            log.debug("viewer left: %s", exc)
        finally:
            self._viewers.discard(viewer)
            self._media_viewers -= viewer.media
            sender.cancel()

    def _full(self) -> str:
        return f"this stream has its {self.settings.max_viewers} viewers; try again when one leaves"

    def _take_report(self, text: str) -> None:
        try:
            report = json.loads(text)
        except json.JSONDecodeError:
            return
        if isinstance(report, dict) and report.get("type") == "keyframe":  # a page that fell behind catches up
            now = time.monotonic()
            if now - self._last_key_request > 0.5 and self.on_viewer_joined is not None:
                self._last_key_request = now
                self.on_viewer_joined()
            return
        if isinstance(report, dict) and report.get("type") == "stats":
            report["received_s"] = time.monotonic()
            with self._reports_lock:
                self._reports.append(report)
                del self._reports[:-200]

    def reports(self) -> list[dict]:
        """The stats the pages sent back (the latest last)."""
        with self._reports_lock:
            return list(self._reports)

    @property
    def viewers(self) -> int:
        """Pages watching now (read from any thread: a count kept by the server's thread)."""
        return self._media_viewers

    async def _send_loop(self, v: _Viewer) -> None:
        while True:
            await v.wake.wait()
            v.wake.clear()
            while v.q:
                msg, is_video = v.q.popleft()
                if is_video:
                    v.queued_video -= 1
                await v.ws.send(msg)

    # -- publishing (any thread) ------------------------------------------------------------------------------------

    def set_audio_config(self, sample_rate_hz: int, aac_config: bytes) -> None:
        self.audio_config = {"codec": "mp4a.40.2", "sampleRate": sample_rate_hz, "numberOfChannels": 1,
                             "description": list(aac_config)}

    def publish(self, pkt: EncodedPacket) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._publish, pkt, frame_message(pkt))

    def _publish(self, pkt: EncodedPacket, msg: bytes) -> None:
        self.published += 1
        if pkt.video and pkt.keyframe and self.config is None:
            codec = avc_codec_string(pkt.data)
            if codec is not None:
                self.config = {"type": "config", "video": {"codec": codec}, "audio": self.audio_config}
        if self.settings.segment_s > 0:
            self._segment_add(pkt, msg)
        for v in list(self._viewers):
            if not v.media:
                continue
            if v.waiting_key:
                if not (pkt.video and pkt.keyframe) or self.config is None:
                    continue
                v.waiting_key = False
            if not v.config_sent:
                v.q.append((json.dumps(self.config), False))
                v.config_sent = True
            if pkt.video:
                if v.queued_video >= self.settings.max_queue_frames:  # a slow viewer: wait for a keyframe
                    v.dropped += v.queued_video + 1
                    self.viewer_drops += v.queued_video + 1
                    v.q = deque(m for m in v.q if not m[1])
                    v.queued_video = 0
                    v.waiting_key = True
                    if self.on_viewer_joined is not None:
                        self.on_viewer_joined()
                    continue
                v.queued_video += 1
            v.q.append((msg, pkt.video))
            v.wake.set()

    def _segment_add(self, pkt: EncodedPacket, msg: bytes) -> None:
        pts_us = round(pkt.pts * pkt.time_base * 1_000_000)
        if pkt.video and pkt.keyframe:
            if self._seg_start_us is not None and pts_us - self._seg_start_us >= self.settings.segment_s * 1e6 * 0.99:
                self._segment_close()
            if self._seg_start_us is None:
                self._seg_start_us = pts_us
        if self._seg_start_us is None:
            return  # a segment starts at a keyframe
        self._seg_parts.append(struct.pack("<I", len(msg)) + msg)

    def _segment_close(self) -> None:
        self._segments.append((self._seg_next, b"".join(self._seg_parts)))
        self._seg_next += 1
        self._seg_parts = []
        self._seg_start_us = None
        cond = self._seg_cond
        if cond is not None:
            async def notify() -> None:
                async with cond:
                    cond.notify_all()

            asyncio.ensure_future(notify())


class WebSocketSink(Sink):
    """Hands the hub's packets to the server (which queues them per viewer, on its own thread)."""

    def __init__(self, server: WebSocketServer) -> None:
        super().__init__(f"WebSocket {server.url}", max_queue_frames=50)
        self.server = server

    def _attach(self, hub) -> None:
        self.server.set_audio_config(hub.fmt.audio_rate_hz, hub.encoder.aac_config)
        self.server.on_viewer_joined = hub.request_keyframe
        super()._attach(hub)
        self.state = OutputState.ON
        self.detail = self.server.url

    def send(self, pkt: EncodedPacket, rel_s: Fraction) -> int:
        self.server.publish(pkt)
        return len(pkt.data)

    def stats(self, name: str) -> OutputStats:
        st = super().stats(name)
        n = self.server.viewers
        detail = f"{self.server.url} ({n} viewer{'s' if n != 1 else ''})"
        return OutputStats(st.name, st.state, st.frames, st.dropped + self.server.viewer_drops, st.repeated,
                           st.bitrate_kbps, st.fps, detail if st.state is not OutputState.FAILED else st.detail)

    def finish(self) -> None:
        self.server.stop()
        self.state = OutputState.OFF


class WebSocketOutput(HubOutput):
    """The program to browsers: the server and its page (see the module docstring)."""

    name = "websocket"

    def __init__(self, settings: WebSocketSettings | None = None, encode: StreamEncodeSettings | None = None,
                 block: bool = False) -> None:
        super().__init__(encode, block)
        self.ws_settings = settings or WebSocketSettings()
        self.server = WebSocketServer(self.ws_settings)  # checks the address now

    @classmethod
    def from_url(cls, url: str, settings: StreamEncodeSettings | None = None, block: bool = False,
                 allow_remote: bool = False) -> WebSocketOutput:
        parts = urllib.parse.urlsplit(url)
        if parts.port is None:
            raise InputError(f"{url}: give the port, e.g. ws://127.0.0.1:8765")
        return cls(WebSocketSettings(host=parts.hostname or "127.0.0.1", port=parts.port,
                                     allow_remote=allow_remote), settings, block)

    def make_sink(self) -> Sink:
        self.server.start()
        return WebSocketSink(self.server)

    @property
    def page_url(self) -> str:
        return self.server.url
