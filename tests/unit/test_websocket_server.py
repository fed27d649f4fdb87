"""The WebSocket output without a browser: what it binds, whom it refuses, and what a viewer receives."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import struct
import time
from fractions import Fraction

import numpy as np
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from studio.encode.encoders import EncodedPacket, avc_codec_string
from studio.encode.websocket import (
    HEADER,
    WebSocketOutput,
    WebSocketServer,
    WebSocketSettings,
    frame_message,
)
from studio.errors import InputError
from studio.contracts import ProgramBatch, ProgramFormat

FMT = ProgramFormat(160, 96, 25.0)


def get(port: int, path: str, host: str | None = None, origin: str | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Host": host or f"127.0.0.1:{port}"}
    if origin:
        headers["Origin"] = origin
    conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    return r.status, r.read()


@pytest.fixture
def server():
    s = WebSocketServer(WebSocketSettings(port=0))
    s.start()
    yield s
    s.stop()


def test_binds_loopback_only_unless_told(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(InputError, match="allow it explicitly") as refused:
        WebSocketServer(WebSocketSettings(host="0.0.0.0"))
    assert "--stream-allow-remote" in str(refused.value) and "allow_remote" not in str(refused.value)
    with pytest.raises(InputError):
        WebSocketServer(WebSocketSettings(host=""))
    with caplog.at_level(logging.WARNING, logger="studio.encode.websocket"):
        WebSocketServer(WebSocketSettings(host="0.0.0.0", allow_remote=True))
    assert "anyone who reaches this address" in caplog.text


def test_serves_the_page_and_refuses_other_hosts_and_origins(server: WebSocketServer) -> None:
    status, body = get(server.port, "/")
    assert status == 200 and b"/player.js" in body
    status, body = get(server.port, "/player.js")
    assert status == 200 and b"VideoDecoder" in body and b"AudioDecoder" in body
    assert b"http" not in body.split(b"\n", 1)[1].replace(b"performance", b"")  # nothing loads from elsewhere
    assert get(server.port, "/", host="evil.example:80")[0] == 403  # DNS rebinding
    assert get(server.port, "/", origin="http://evil.example")[0] == 403
    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://127.0.0.1:{server.port}/ws", origin="http://evil.example").close()
    assert refused.value.response.status_code == 403


def test_message_layout() -> None:
    pkt = EncodedPacket(video=True, data=b"\x00\x00\x00\x01\x65", pts=3, duration=1, time_base=Fraction(1, 25),
                        keyframe=True, capture_ns=0)
    msg = frame_message(pkt)
    kind, flags, pts_us, cap_us, dur_us = HEADER.unpack(msg[:HEADER.size])
    assert (kind, flags, pts_us, cap_us, dur_us) == (1, 1, 120_000, 0, 40_000)
    assert msg[HEADER.size:] == pkt.data


def test_a_viewer_gets_the_config_then_a_keyframe_and_audio() -> None:
    out = WebSocketOutput(WebSocketSettings(port=0), block=True)
    out.open(FMT)
    try:
        with connect(f"ws://127.0.0.1:{out.server.port}/ws", origin=f"http://127.0.0.1:{out.server.port}",
                     max_queue=None) as ws:  # no read backpressure: it closes without reading everything
            for k in range(10):
                slots = np.arange(4 * k, 4 * k + 4)
                a0, a1 = FMT.samples_at(4 * k), FMT.samples_at(4 * k + 4)
                out.write(ProgramBatch(slots=slots, pts_s=slots / FMT.fps,
                                       frames=np.full((4, FMT.height, FMT.width, 3), 40 + k, np.uint8),
                                       audio=np.zeros(a1 - a0, np.float32), audio_start=a0))
            config = json.loads(ws.recv(timeout=30))
            first = ws.recv(timeout=30)
            kinds = set()
            for _ in range(20):
                kinds.add(ws.recv(timeout=30)[0])
            ws.send(json.dumps({"type": "stats", "decoded": 3}))
            ws.send("not json")
            for _ in range(200):
                if out.server.reports():
                    break
                time.sleep(0.05)
    finally:
        out.close()
    assert config["type"] == "config" and config["video"]["codec"].startswith("avc1.")
    assert config["audio"]["codec"] == "mp4a.40.2" and config["audio"]["sampleRate"] == FMT.audio_rate_hz
    kind, flags = struct.unpack("<BB", first[:2])
    assert (kind, flags) == (1, 1)  # the stream starts with a keyframe...
    assert avc_codec_string(first[HEADER.size:]) == config["video"]["codec"]  # ...carrying its SPS
    assert kinds == {1, 2}  # video and audio
    assert out.server.reports()[-1]["decoded"] == 3


def _feed(out: WebSocketOutput, first: int, n: int) -> None:
    for k in range(first, first + n):
        a0, a1 = FMT.samples_at(k), FMT.samples_at(k + 1)
        out.write(ProgramBatch(slots=np.array([k]), pts_s=np.array([k / FMT.fps]),
                               frames=np.full((1, FMT.height, FMT.width, 3), 40 + k % 50, np.uint8),
                               audio=np.zeros(a1 - a0, np.float32), audio_start=a0))


def _first_video(ws) -> bytes:
    for _ in range(100):
        msg = ws.recv(timeout=30)
        if isinstance(msg, bytes) and msg[0] == 1:
            return msg
    raise AssertionError("no video")


def test_viewers_over_the_cap_are_refused_with_a_reason() -> None:
    out = WebSocketOutput(WebSocketSettings(port=0, max_viewers=2), block=True)
    out.open(FMT)
    port = out.server.port
    url, origin = f"ws://127.0.0.1:{port}/ws", f"http://127.0.0.1:{port}"
    try:
        with connect(url, origin=origin, max_queue=None) as a, connect(url, origin=origin, max_queue=None):
            with pytest.raises(InvalidStatus) as refused:
                connect(url, origin=origin).close()
            assert refused.value.response.status_code == 503
            assert b"2 viewers" in refused.value.response.body
            _feed(out, 0, 10)
            assert _first_video(a)[1] & 1  # the ones inside still play
        for _ in range(100):  # the server sees them leave
            if out.server.viewers == 0:
                break
            time.sleep(0.05)
        with connect(url, origin=origin, max_queue=None) as c:  # a place is free again
            _feed(out, 10, 30)
            assert _first_video(c)[1] & 1
    finally:
        out.close()
    assert out.server.viewers_refused == 1


def test_a_viewer_plays_with_200_idle_sockets_open_and_the_idle_ones_are_closed() -> None:
    out = WebSocketOutput(WebSocketSettings(port=0, handshake_timeout_s=1.0), block=True)
    out.open(FMT)
    port = out.server.port
    idle = []
    try:
        for _ in range(200):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=30))
        with connect(f"ws://127.0.0.1:{port}/ws", origin=f"http://127.0.0.1:{port}", max_queue=None) as ws:
            _feed(out, 0, 10)
            assert _first_video(ws)[1] & 1
        # the server hangs up on sockets that never finish a handshake (EOF, not the 30 s socket timeout)
        assert all(s.recv(1024) == b"" for s in idle[:20])
    finally:
        for s in idle:
            s.close()
        out.close()


def test_a_cap_of_no_viewers_is_refused() -> None:
    with pytest.raises(InputError, match="at least one viewer"):
        WebSocketServer(WebSocketSettings(max_viewers=0))
