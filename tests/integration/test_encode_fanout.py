"""One encode per format, shared by the recorder and every live output; live outputs fed faster than real time are
paced; an encoder killed with its program leaves nothing in /dev/shm."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import av
import pytest

from studio.contracts import ProgramFormat
from studio.encode.check import free_port, listening, receiver_command
from studio.encode.recorder import RecorderOutput
from studio.encode.streams import StreamOutput
from studio.encode.synthetic import SyncSource

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("ffmpeg") is None,
                       reason="Debian's ffmpeg is the receiver: apt-get install ffmpeg"),
]

FMT = ProgramFormat(320, 240, 25.0)
REPO = Path(__file__).resolve().parents[2]


def _wait_for(condition, timeout_s: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _receiver(kind: str, port: int, out: Path) -> subprocess.Popen:
    rx = subprocess.Popen(receiver_command(kind, port, out), stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: listening(port) or rx.poll() is not None, 30, "the receiver to listen")
    assert rx.poll() is None
    return rx


def _frames(path: Path) -> int:
    with av.open(str(path)) as c:
        return sum(1 for _ in c.decode(video=0))


def test_record_rtmp_and_browser_take_one_encode_of_each_frame(tmp_path: Path) -> None:
    from studio.encode.websocket import WebSocketOutput

    seconds, port = 3.0, free_port()
    rx = _receiver("rtmp", port, tmp_path / "got.flv")
    try:
        rec = RecorderOutput(tmp_path / "show.mp4", block=True)
        rtmp = StreamOutput(f"rtmp://127.0.0.1:{port}/live/test", block=True)
        web = WebSocketOutput.from_url(f"ws://127.0.0.1:{free_port()}", block=True)
        outs = [rec, rtmp, web]
        for out in outs:
            out.open(FMT)
        hub = rec.hub
        assert hub is not None and rtmp.hub is hub and web.hub is hub  # one encoder for the format
        n = SyncSource(FMT).play(lambda batch: [out.write(batch) for out in outs], seconds, batch_frames=5,
                                 realtime=False)
        _wait_for(lambda: rtmp.stats().frames == n, what="the RTMP sink to send every frame")
        for out in (rec, web, rtmp):  # the last one out gets the encoder's flush
            out.close()
        rx.wait(30)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    assert n == round(seconds * FMT.fps)
    assert hub.video_encodes == n and hub.stats()["video_encodes"] == n  # once per frame, not once per output
    assert _frames(tmp_path / "show.mp4") == n and _frames(tmp_path / "got.flv") == n


def test_a_stream_fed_faster_than_real_time_is_paced(tmp_path: Path) -> None:
    """A file render hands its frames over as fast as it makes them; the receiver must still get them at the
    program's pace. Only a lower bound on the wall time is checked (a slower machine only takes longer)."""
    seconds, port = 4.0, free_port()
    rx = _receiver("tcp", port, tmp_path / "got.ts")
    try:
        out = StreamOutput(f"tcp://127.0.0.1:{port}", block=True)
        out.pace = True
        out.open(FMT)
        t0 = time.monotonic()
        n = SyncSource(FMT).play(out.write, seconds, batch_frames=5, realtime=False)
        _wait_for(lambda: out.stats().frames == n, what="the sink to send every frame")
        sent_s = time.monotonic() - t0
        out.close()
        rx.wait(30)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    # the last frame leaves at (n - 1) / fps after the first: 3.96 s for 4 s of program
    assert sent_s >= (n - 1) / FMT.fps - 0.02, sent_s
    assert _frames(tmp_path / "got.ts") == n


_KILLED = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import numpy as np
    from studio.encode.recorder import RecorderOutput
    from studio.contracts import ProgramBatch, ProgramFormat

    fmt = ProgramFormat(512, 512, 25.0)
    rec = RecorderOutput(Path(sys.argv[1]), fragmented=True, block=True)
    rec.open(fmt)
    for k in range(10 ** 6):  # until killed
        slots = np.arange(2 * k, 2 * k + 2)
        a0, a1 = fmt.samples_at(2 * k), fmt.samples_at(2 * k + 2)
        rec.write(ProgramBatch(slots=slots, pts_s=slots / fmt.fps, frames=np.full((2, 512, 512, 3), k % 255, np.uint8),
                               audio=np.zeros(a1 - a0, np.float32), audio_start=a0))
        if k == 10:
            print("ready", flush=True)
        time.sleep(0.02)
""")


def _tree(pid: int) -> list[int]:
    out = [pid]
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for k in kids:
        out += _tree(int(k))
    return out


def _shm_paths(pids: list[int]) -> set[Path]:
    """The /dev/shm files the processes have mapped, named as they are in /dev/shm."""
    found = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            if "/dev/shm/" in line:
                found.add(Path(line[line.index("/dev/shm/"):].removesuffix(" (deleted)")))
    return found


@pytest.mark.skipif(not Path("/proc/self/maps").is_file() or not Path("/dev/shm").is_dir(),
                    reason="needs Linux /proc and /dev/shm")
def test_kill_9_of_a_recording_program_leaves_nothing_in_dev_shm(tmp_path: Path) -> None:
    """``kill -9`` of the program and its children: the encoder's frame slot is in no folder by then."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(tmp_path / "take.mp4")], stdout=subprocess.PIPE,
                            env=env, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        pids = _tree(proc.pid)
        mapped = _shm_paths(pids)
        assert mapped, "the encoder hands frames over through shared memory"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group, as a closed terminal or a timeout kills it: no
        proc.wait()  # resource tracker is left to clean up after it
    _wait_for(lambda: not any(Path(f"/proc/{p}").exists() and "zombie" not in _state(p) for p in pids[1:]), 30,
              "the encoder child to end")
    assert [p for p in mapped if p.exists()] == []


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"
