"""The MP4 writer against the real encoders: sync measured on what it writes, atomic files, crash recovery."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest
import scipy.signal

from studio.encode import (
    EncodeSettings,
    Mp4Writer,
    available_video_encoders,
    partial_path_for,
    probe_mp4,
    recover_partial,
)
from studio.encode.probe import VIDEO_ENCODER_CANDIDATES
from studio.errors import EncoderError, OutputPathError

pytestmark = pytest.mark.integration

FPS = 25
SIZE = 128  # pixels, square; small keeps the test fast
DURATION_S = 3.0
FLASH_S = 1.0  # the white frame and the tone burst both start here
REPO_ROOT = Path(__file__).resolve().parents[2]


def synthetic_audio(sample_rate_hz: int, duration_s: float = DURATION_S) -> np.ndarray:
    """A 440 Hz sine plus low noise (makes cross-correlation unambiguous) plus a loud 1 kHz burst at FLASH_S."""
    n = round(duration_s * sample_rate_hz)
    t = np.arange(n) / sample_rate_hz
    rng = np.random.default_rng(0)
    x = 0.1 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(n)
    burst = (t >= FLASH_S) & (t < FLASH_S + 0.03)
    x[burst] = 0.8 * np.sin(2 * np.pi * 1000 * (t[burst] - FLASH_S))
    return x.astype(np.float32)


def synthetic_frames(n_frames: int) -> np.ndarray:
    """N x SIZE x SIZE x 3 uint8: dark grey, the frame shown at FLASH_S is white."""
    frames = np.full((n_frames, SIZE, SIZE, 3), 30, np.uint8)
    frames[round(FLASH_S * FPS)] = 255
    return frames


def write_clip(path: Path, sample_rate_hz: int, fragmented: bool = False, chunk: int = 777) -> np.ndarray:
    """Write the synthetic clip with interleaved odd-sized audio chunks; returns the source audio."""
    audio = synthetic_audio(sample_rate_hz)
    n_frames = round(DURATION_S * FPS)
    frames = synthetic_frames(n_frames)
    per_frame = len(audio) / n_frames
    with Mp4Writer(path, SIZE, SIZE, FPS, sample_rate_hz, fragmented=fragmented) as writer:
        sent = 0
        for i in range(n_frames):
            writer.write_video(frames[i])
            target = round((i + 1) * per_frame)
            while sent < target:
                step = min(chunk, target - sent)
                writer.write_audio(audio[sent : sent + step])
                sent += step
    return audio


def decode_audio(path: Path) -> tuple[np.ndarray, int, float]:
    """(samples, rate, time of the first decoded sample in s) of the first audio track."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        chunks = []
        first_time = None
        for frame in container.decode(stream):
            if first_time is None:
                first_time = float(frame.time)
            chunks.append(frame.to_ndarray().reshape(-1))
        return np.concatenate(chunks).astype(np.float32), stream.rate, float(first_time or 0.0)


def decode_video(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(mean brightness per frame, display time per frame in s)."""
    with av.open(str(path)) as container:
        levels, times = [], []
        for frame in container.decode(video=0):
            levels.append(frame.to_ndarray(format="rgb24").mean())
            times.append(float(frame.time))
        return np.array(levels), np.array(times)


def audio_offset_s(path: Path, source: np.ndarray, source_rate_hz: int) -> float:
    """When the source's first sample plays in the written file (0 = in sync), by cross-correlation."""
    decoded, rate, first_time = decode_audio(path)
    if rate != source_rate_hz:
        decoded = scipy.signal.resample_poly(decoded, source_rate_hz, rate).astype(np.float32)
    corr = scipy.signal.correlate(decoded, source, mode="full", method="fft")
    lag = int(np.argmax(corr)) - (len(source) - 1)
    return first_time + lag / source_rate_hz


@pytest.mark.parametrize(
    ("sample_rate_hz", "fragmented"),
    [(48_000, False), (22_050, False), (17_000, False), (22_050, True)],
    ids=["48k", "22k-piper", "17k-resampled", "22k-fragmented"],
)
def test_clip_is_in_sync_and_exact(tmp_path: Path, sample_rate_hz: int, fragmented: bool) -> None:
    out = tmp_path / "clip.mp4"
    source = write_clip(out, sample_rate_hz, fragmented=fragmented)

    info = probe_mp4(out)
    assert (info.video_codec, info.audio_codec) == ("h264", "aac")
    assert (info.width, info.height, info.fps) == (SIZE, SIZE, FPS)
    assert info.n_video_frames == round(DURATION_S * FPS)
    assert info.video_duration_s == pytest.approx(DURATION_S, abs=1e-6)
    assert info.audio_duration_s == pytest.approx(DURATION_S, abs=0.5 / info.audio_sample_rate_hz + 1e-6)
    assert info.audio_sample_rate_hz == EncodeSettings().aac_rate_for(sample_rate_hz)

    assert abs(audio_offset_s(out, source, sample_rate_hz)) < 0.001

    levels, times = decode_video(out)
    assert len(levels) == round(DURATION_S * FPS)
    np.testing.assert_allclose(times, np.arange(len(times)) / FPS, atol=1e-6)  # frame i shows at i / fps
    flash_s = times[int(np.argmax(levels))]
    decoded, rate, first_time = decode_audio(out)
    burst_s = first_time + int(np.argmax(np.abs(decoded) > 0.5)) / rate
    assert flash_s == pytest.approx(FLASH_S, abs=1e-6)
    assert burst_s == pytest.approx(FLASH_S, abs=0.001)
    assert abs(burst_s - flash_s) < 1 / FPS


def test_sine_survives_encoding(tmp_path: Path) -> None:
    rate = 48_000
    sine = (0.5 * np.sin(2 * np.pi * 440 * np.arange(2 * rate) / rate)).astype(np.float32)
    out = tmp_path / "sine.mp4"
    with Mp4Writer(out, SIZE, SIZE, FPS, rate) as writer:
        writer.write_video(np.zeros((2 * FPS, SIZE, SIZE, 3), np.uint8))
        writer.write_audio(sine)
    decoded, decoded_rate, first_time = decode_audio(out)
    assert decoded_rate == rate and first_time == 0.0
    middle = slice(rate // 2, 3 * rate // 2)  # away from the encoder's start-up and tail
    error = decoded[middle] - sine[middle]
    snr_db = 10 * np.log10(np.mean(sine[middle] ** 2) / np.mean(error**2))
    assert snr_db > 20


def test_no_final_file_until_close(tmp_path: Path) -> None:
    out = tmp_path / "clip.mp4"
    writer = Mp4Writer(out, SIZE, SIZE, FPS, 48_000)
    writer.write_video(np.zeros((30, SIZE, SIZE, 3), np.uint8))
    writer.write_audio(np.zeros(48_000, np.float32))
    assert not out.exists()
    assert partial_path_for(out).exists()
    assert partial_path_for(out).name == ".clip.mp4.part"
    assert writer.close() == out
    assert out.exists() and not partial_path_for(out).exists()


def test_abort_and_exception_leave_nothing(tmp_path: Path) -> None:
    out = tmp_path / "clip.mp4"
    writer = Mp4Writer(out, SIZE, SIZE, FPS, 48_000)
    writer.write_video(np.zeros((10, SIZE, SIZE, 3), np.uint8))
    writer.abort()
    with pytest.raises(KeyError), Mp4Writer(out, SIZE, SIZE, FPS, 48_000) as writer:
        writer.write_video(np.zeros((10, SIZE, SIZE, 3), np.uint8))
        raise KeyError("boom")
    assert list(tmp_path.iterdir()) == []


def test_bad_folders_raise_output_path_error(tmp_path: Path) -> None:
    with pytest.raises(OutputPathError, match="does not exist"):
        Mp4Writer(tmp_path / "missing" / "clip.mp4", SIZE, SIZE, FPS, 48_000)
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(OutputPathError):
        Mp4Writer(tmp_path / "a_file" / "clip.mp4", SIZE, SIZE, FPS, 48_000)
    if os.geteuid() != 0:  # root writes through permission bits; the read-only mount below covers it
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(OutputPathError, match="Cannot write"):
            Mp4Writer(locked / "clip.mp4", SIZE, SIZE, FPS, 48_000)


@pytest.fixture
def tiny_mount(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A small tmpfs (options from the test's param), or skip where mounting is not allowed."""
    point = tmp_path / "mnt"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", request.param, "tmpfs", str(point)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)


@pytest.mark.parametrize("tiny_mount", ["ro,size=64k"], indirect=True)
def test_read_only_folder_raises_output_path_error(tiny_mount: Path) -> None:
    with pytest.raises(OutputPathError, match="Cannot write"):
        Mp4Writer(tiny_mount / "clip.mp4", SIZE, SIZE, FPS, 48_000)


@pytest.mark.parametrize("tiny_mount", ["size=200k"], indirect=True)
def test_full_disk_raises_output_path_error_and_cleans_up(tiny_mount: Path) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(OutputPathError, match="full"):
        with Mp4Writer(tiny_mount / "clip.mp4", SIZE, SIZE, FPS, 48_000) as writer:
            for _ in range(2000):  # noise frames: ~50 kB/s of H.264, far more than 200 kB in total
                writer.write_video(rng.integers(0, 255, (SIZE, SIZE, 3), dtype=np.uint8))
                writer.write_audio(np.zeros(48_000 // FPS, np.float32))
    assert list(tiny_mount.iterdir()) == []


_RECORDER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from studio.encode import EncodeSettings, Mp4Writer

    writer = Mp4Writer(sys.argv[1], 128, 128, 25, 48000, EncodeSettings(gop_frames=10), fragmented=True)
    t = np.arange(1920) / 48000
    for i in range(100000):
        frame = np.full((128, 128, 3), i % 256, np.uint8)
        writer.write_video(frame)
        writer.write_audio((0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
        if i == 40:
            print("ready", flush=True)
        time.sleep(0.005)
    """
)


def test_killed_fragmented_recording_is_recoverable(tmp_path: Path) -> None:
    out = tmp_path / "live.mp4"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _RECORDER_SCRIPT, str(out)], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)  # let it get into the middle of a fragment
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not out.exists()
    assert partial_path_for(out).exists()

    recovered = recover_partial(out)
    assert recovered == tmp_path / "live-recovered.mp4"
    assert not partial_path_for(out).exists()
    info = probe_mp4(recovered)
    assert info.n_video_frames >= 20
    assert info.audio_duration_s is not None and info.audio_duration_s > 1.0
    _, times = decode_video(recovered)
    assert len(times) == info.n_video_frames
    assert recover_partial(out) is None  # nothing left to recover


def test_available_encoders_probe_without_crashing() -> None:
    found = available_video_encoders()
    assert "libx264" in found
    assert set(found) <= set(VIDEO_ENCODER_CANDIDATES)


def test_encoder_that_does_not_open_raises_encoder_error(tmp_path: Path) -> None:
    if "h264_nvenc" in available_video_encoders():
        pytest.skip("this machine has NVENC")
    with pytest.raises(EncoderError, match="Cannot start the encoder"):
        Mp4Writer(tmp_path / "clip.mp4", SIZE, SIZE, FPS, 48_000, EncodeSettings(video_codec="h264_nvenc"))
    assert list(tmp_path.iterdir()) == []
