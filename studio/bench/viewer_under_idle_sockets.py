"""The browser server under idle connections: how long a real viewer waits to connect and what frame rate it gets.

    python -m studio.bench.viewer_under_idle_sockets [--idle 200] [--kind tcp|ws] [--seconds 10] [--json FILE]

A ``WebSocketOutput`` on 127.0.0.1 is fed a 640x360, 25 fps program in real time. ``--idle`` connections are opened
first and never read: ``tcp`` ones only connect (no request), ``ws`` ones finish the WebSocket handshake and then
read nothing (the server keeps sending to them). A real viewer (handshake timed, then video frames per second of wall
clock over ``--seconds``) is measured three times in the same run: alone (the baseline), while the idle connections
are opened, and connecting just after they are open (the server closes sockets that never finish their handshake
after ``handshake_timeout_s``). Loopback only; every loop is bounded and everything is closed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np

from studio.contracts import ProgramBatch, ProgramFormat
from studio.encode.websocket import WebSocketOutput, WebSocketSettings

FMT = ProgramFormat(640, 360, 25.0)


def _feed(out: WebSocketOutput, stop: threading.Event, limit_s: float) -> None:
    """The program in real time, one frame per batch, until ``stop`` or ``limit_s``."""
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (FMT.height, FMT.width, 3), np.uint8)
    t0 = time.monotonic()
    k = 0
    while not stop.is_set() and time.monotonic() - t0 < limit_s:
        due = t0 + k / FMT.fps
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        a0, a1 = FMT.samples_at(k), FMT.samples_at(k + 1)
        frame = np.roll(base, 4 * k, axis=1)[None]
        out.write(ProgramBatch(slots=np.array([k]), pts_s=np.array([k / FMT.fps]), frames=frame,
                               audio=np.zeros(a1 - a0, np.float32), audio_start=a0))
        k += 1


def _viewer(port: int, seconds: float) -> dict:
    """One real viewer: time to the handshake, to the first video frame, and video frames per second after it."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    t0 = time.monotonic()
    try:
        ws = connect(f"ws://127.0.0.1:{port}/ws", origin=f"http://127.0.0.1:{port}", open_timeout=30,
                     max_queue=None)
    except (InvalidStatus, OSError, TimeoutError) as exc:
        return {"refused": f"{type(exc).__name__}: {exc}", "connect_s": time.monotonic() - t0}
    connect_s = time.monotonic() - t0
    first_s, frames = None, 0
    with ws:
        end = time.monotonic() + seconds + 30
        start = None
        while time.monotonic() < end:
            try:
                msg = ws.recv(timeout=5)
            except TimeoutError:
                break
            if isinstance(msg, bytes) and msg[0] == 1:
                if start is None:
                    start = time.monotonic()
                    first_s = start - t0
                    end = start + seconds
                else:
                    frames += 1
        span = (time.monotonic() - start) if start is not None else 0.0
    return {"connect_s": connect_s, "first_frame_s": first_s, "fps": frames / span if span > 0 else 0.0}


def _idle(port: int, n: int, kind: str) -> tuple[list, list[str]]:
    held: list = []
    refused: list[str] = []
    for _ in range(n):
        if kind == "tcp":
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            held.append(s)
        else:
            from websockets.exceptions import InvalidStatus
            from websockets.sync.client import connect

            try:
                held.append(connect(f"ws://127.0.0.1:{port}/ws", origin=f"http://127.0.0.1:{port}",
                                    open_timeout=10, max_queue=1))
            except (InvalidStatus, OSError, TimeoutError) as exc:
                refused.append(str(exc))
    return held, refused


def run(idle: int, kind: str, seconds: float) -> dict:
    out = WebSocketOutput(WebSocketSettings(port=0))
    out.open(FMT)
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(out, stop, 4 * seconds + 120), daemon=True)
    feeder.start()
    held: list = []
    try:
        port = out.server.port
        time.sleep(1.0)
        baseline = _viewer(port, seconds)
        during: dict = {}
        watcher = threading.Thread(target=lambda: during.update(_viewer(port, seconds)), daemon=True)
        watcher.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        held, refused = _idle(port, idle, kind)
        opened_s = time.monotonic() - t0
        loaded = _viewer(port, seconds)
        watcher.join(seconds + 60)
    finally:
        for h in held:
            try:
                h.close()
            except OSError:
                pass
        stop.set()
        feeder.join(10)
        out.close()
    settings = out.ws_settings
    return {"idle": idle, "kind": kind, "seconds": seconds, "fps_sent": FMT.fps,
            "max_viewers": getattr(settings, "max_viewers", None), "idle_open_s": opened_s,
            "idle_refused": len(refused), "idle_refusal": refused[0] if refused else None,
            "baseline": baseline, "watching_while_idle_open": during, "connecting_after_idle_open": loaded}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--idle", type=int, default=200)
    p.add_argument("--kind", choices=["tcp", "ws"], default="tcp")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    result = run(args.idle, args.kind, args.seconds)
    result["command"] = "python -m studio.bench.viewer_under_idle_sockets " + " ".join(argv or sys.argv[1:])
    result["load_1min"] = os.getloadavg()[0]
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
