"""Live outputs against real receivers on this machine: Debian's ffmpeg as an RTMP server (``ffmpeg -listen 1``) and
as a TCP MPEG-TS listener, the MP4 recording through the shared encode, a receiver killed and restarted, and the
WebCodecs page in headless Chromium. Each receiver's file is decoded and the A/V offset measured against the source
(the sync test: a white frame and a beep every second, plus never-repeating noise for cross-correlation).

The 60-second real-time runs and the latency measurements are ``python -m studio.encode.check`` (benchmarks/README.md).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from studio.encode import partial_path_for, probe_mp4, recover_partial
from studio.encode.check import free_port, listening, receiver_command
from studio.encode.encoders import StreamEncodeSettings
from studio.encode.recorder import RecorderOutput
from studio.encode.streams import Mp4FileSink, StreamOutput
from studio.encode.synthetic import SyncSource, decode_media, measure_sync
from studio.errors import OutputPathError
from studio.contracts import OutputState, ProgramFormat

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="Debian's ffmpeg is the receiver: apt-get install ffmpeg"),
]

FMT = ProgramFormat(320, 240, 25.0)
SECONDS = 5.0


def wait_for(condition: Callable[[], bool], timeout_s: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Callable[[str, int, str], subprocess.Popen]]:
    procs: list[subprocess.Popen] = []

    def start(kind: str, port: int, name: str) -> subprocess.Popen:
        p = subprocess.Popen(receiver_command(kind, port, tmp_path / name), stdin=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        procs.append(p)
        wait_for(lambda: listening(port) or p.poll() is not None, 30, "the receiver to listen")
        assert p.poll() is None, p.stderr.read().decode(errors="replace")
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def url_for(kind: str, port: int) -> str:
    return f"rtmp://127.0.0.1:{port}/live/test" if kind == "rtmp" else f"tcp://127.0.0.1:{port}"


@pytest.mark.parametrize("kind", ["rtmp", "tcp"])
def test_receiver_gets_every_frame_and_the_sound_in_sync(receiver, tmp_path: Path, kind: str) -> None:
    port = free_port()
    rx = receiver(kind, port, f"got.{kind}")
    src = SyncSource(FMT)
    out = StreamOutput(url_for(kind, port), block=True)  # every frame kept: the verdict must not depend on speed
    out.open(FMT)
    src.play(out.write, SECONDS, batch_frames=5, realtime=False)
    wait_for(lambda: out.stats().frames == round(SECONDS * FMT.fps), what="the sink to send every frame")
    stats = out.stats()
    out.close()
    rx.wait(30)
    assert stats.state is OutputState.ON and stats.dropped == 0 and stats.bitrate_kbps > 0

    got = decode_media(tmp_path / f"got.{kind}")
    assert len(got.levels) == round(SECONDS * FMT.fps)  # the receiver counts every frame
    assert len(got.audio) / got.audio_rate_hz == pytest.approx(SECONDS, abs=0.05)  # and decodes the sound
    sync = measure_sync(got, src, SECONDS)
    assert sync.flashes == sync.beeps == 5
    assert sync.within(late_ms=45, early_ms=125)
    assert abs(sync.offset_xcorr_ms) < 2 and abs(sync.offset_onsets_ms) < 2  # measured: FLV 0.7 ms, TS 0.0 ms


@pytest.mark.parametrize("fragmented", [True, False], ids=["fragmented", "plain"])
def test_mp4_sink_keeps_the_recorder_guarantees(tmp_path: Path, fragmented: bool) -> None:
    path = tmp_path / "rec.mp4"
    src = SyncSource(FMT)
    out = RecorderOutput(path, fragmented=fragmented, block=True)
    out.open(FMT)
    src.play(out.write, 3.0, batch_frames=8, realtime=False)
    if fragmented:  # what was written before a crash plays: rescue a copy of the partial file now
        wait_for(lambda: out.stats().frames >= 60, what="the recording to be under way")
        time.sleep(0.2)
        crash = tmp_path / "crash.mp4"
        shutil.copy(partial_path_for(path), partial_path_for(crash))
        rescued = recover_partial(crash)
        assert rescued is not None and probe_mp4(rescued).n_video_frames > 0
    assert not path.exists()  # atomic: no final file before close
    assert out.close() == path
    assert not partial_path_for(path).exists()
    info = probe_mp4(path)
    assert (info.video_codec, info.audio_codec, info.n_video_frames) == ("h264", "aac", 75)
    sync = measure_sync(decode_media(path), src, 3.0)
    assert abs(sync.offset_xcorr_ms) < 1  # the priming edit list: zero offset, as Mp4Writer's


def test_mp4_sink_refuses_a_file_being_written_and_recovers_a_crashs_leftover(tmp_path: Path) -> None:
    path = tmp_path / "rec.mp4"
    src = SyncSource(FMT)
    out = RecorderOutput(path, block=True)
    out.open(FMT)
    src.play(out.write, 2.0, batch_frames=8, realtime=False)
    with pytest.raises(OutputPathError, match="being written"):
        Mp4FileSink(path)  # a second writer on the same name is refused, the first goes on
    assert out.close() == path and probe_mp4(path).n_video_frames == 50
    crashed = tmp_path / "crashed.mp4"  # what a killed studio leaves: the hidden fragmented partial, never truncated
    os.replace(path, partial_path_for(crashed))
    again = Mp4FileSink(crashed)  # the leftover is made playable under a visible name before the new file starts
    recovered = sorted(p.name for p in tmp_path.glob("*.mp4"))
    assert recovered == ["crashed-recovered.mp4"] and probe_mp4(tmp_path / recovered[0]).n_video_frames == 50
    again.finish()  # nothing written: no file, and the name is free again
    assert not crashed.exists() and not partial_path_for(crashed).exists()
    Mp4FileSink(crashed).finish()


@pytest.mark.parametrize("kind", ["tcp", "rtmp"])
def test_output_reconnects_when_the_receiver_comes_back(receiver, tmp_path: Path, kind: str) -> None:
    port = free_port()
    first = receiver(kind, port, f"first.{kind}")
    src = SyncSource(FMT)
    out = StreamOutput(url_for(kind, port), settings=StreamEncodeSettings(keyframe_interval_s=1.0))
    out.open(FMT)
    stop = threading.Event()
    played: list[int] = []
    feeder = threading.Thread(target=lambda: played.append(src.play(out.write, 120, batch_frames=2, stop=stop)))
    feeder.start()
    try:
        wait_for(lambda: out.stats().state is OutputState.ON and out.stats().frames > 25, what="streaming")
        first.send_signal(signal.SIGKILL)
        first.wait()
        wait_for(lambda: out.stats().state is OutputState.RECONNECTING, what="RECONNECTING")
        assert "reconnecting in" in out.stats().detail
        frames_before = out.stats().frames
        second = receiver(kind, port, f"second.{kind}")
        wait_for(lambda: out.stats().state is OutputState.ON and out.stats().frames > frames_before + 25,
                 what="the output to reconnect")
        assert out.sink.connects == 2
    finally:
        stop.set()
        feeder.join(60)
        out.close()
    assert not feeder.is_alive() and played  # the program kept going throughout
    assert out.stats().dropped > 0  # what could not be sent while the receiver was away was counted
    second.wait(30)
    got = decode_media(tmp_path / f"second.{kind}")
    assert len(got.levels) > 25 and len(got.audio) > 0


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium: apt-get install chromium")
def test_webcodecs_page_decodes_the_stream_in_chromium() -> None:
    from studio.encode.check import chromium_command
    from studio.encode.websocket import WebSocketOutput, WebSocketSettings

    fmt = ProgramFormat(640, 360, 25.0)
    src = SyncSource(fmt)
    out = WebSocketOutput(WebSocketSettings(port=0))
    out.open(fmt)
    stop = threading.Event()
    feeder = threading.Thread(target=src.play, args=(out.write, 120), kwargs={"batch_frames": 1, "stop": stop})
    feeder.start()
    profile = tempfile.mkdtemp(prefix="newsstudio-chromium-")
    browser = subprocess.Popen(chromium_command(out.page_url + "?measure=1", profile), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: any(r["decoded"] >= 75 and r["flashes"] >= 2 and r["latency_samples"] > 0
                             for r in out.server.reports()), 90, "the page to decode three seconds")
        report = out.server.reports()[-1]
    finally:
        browser.kill()
        browser.wait()
        stop.set()
        feeder.join(30)
        out.close()
        shutil.rmtree(profile, ignore_errors=True)
    assert report["codec"].startswith("avc1.") and report["errors"] == []
    assert report["fps"] > 0 and report["latency_ms"] > 0  # measured and sent back (values: the check script)
    assert report["beeps"] >= 2
    assert -125 <= report["stream_av_offset_ms"] <= 45  # the decoded flashes against the decoded beeps


def test_doctor_says_which_encoder_the_outputs_use_and_why() -> None:
    from studio.doctor import collect, format_report

    text = format_report(collect())
    assert "live encode   NVENC (PyAV h264_nvenc): " in text  # "available: ..." or "unavailable: <reason>"
    assert "live encode   streams and recordings use: " in text
    assert "virtual cam   " in text


def test_a_recording_started_while_streaming_is_in_sync(tmp_path: Path) -> None:
    """Start recording mid-program (the hub already encoding for another output): the file starts at a forced
    keyframe with one AAC frame of priming before it, cut by the edit list."""
    from studio.encode.hub import EncodeHub
    from studio.encode.streams import Mp4FileSink

    src = SyncSource(FMT)
    hub = EncodeHub(FMT, block=True)
    streaming = Mp4FileSink(tmp_path / "other.mp4")
    hub.add_sink(streaming)
    for k in range(10):  # 1.6 s before the recording starts
        hub.submit(src.batch(4 * k, 4))
    wait_for(lambda: hub.frames == 40, what="the hub to be under way")
    rec = Mp4FileSink(tmp_path / "late.mp4")
    hub.add_sink(rec)
    for k in range(10, 50):
        hub.submit(src.batch(4 * k, 4))
    hub.close()
    path = rec.result
    assert path == tmp_path / "late.mp4"
    got = decode_media(path)
    assert 150 <= len(got.levels) <= 160  # from the forced keyframe on (the 41st frame at the earliest)
    sync = measure_sync(got, src, 8.0)
    assert sync.flashes >= 6
    assert abs(sync.offset_xcorr_ms) < 1 and abs(sync.offset_onsets_ms) < 1
