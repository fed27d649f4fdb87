"""The WebSocket output without a browser: what it binds, whom it refuses, and what a viewer receives."""

from __future__ import annotations

import http.client
import json
import logging
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
    with pytest.raises(InputError, match="allow it explicitly"):
        WebSocketServer(WebSocketSettings(host="0.0.0.0"))
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
