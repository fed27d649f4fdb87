"""Audio files with odd headers, levels and rates, written by the tests: checked, capped, 48 kHz program audio."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import numpy as np
import pytest

from studio.audio.io import (
    ANALYSIS_RATE_HZ,
    PROGRAM_RATE_HZ,
    analysis_chunks,
    load_audio,
    load_audio_file,
    probe_audio,
    stream_audio,
)
from studio.errors import InputError


def write_wav(path: Path, rate: int, samples: np.ndarray, bits: int = 16, fmt: int = 1,
              data_size: int | None = None) -> Path:
    """A WAV file written byte by byte (any header, even a lying one). ``samples``: N or N x channels, -1..1."""
    x = samples.reshape(len(samples), -1)
    channels = x.shape[1]
    if fmt == 3:
        data = x.astype("<f4").tobytes()
    elif bits == 8:
        data = np.clip(x * 127 + 128, 0, 255).astype(np.uint8).tobytes()
    elif bits == 24:
        ints = np.clip(np.round(x * 8388607), -8388608, 8388607).astype("<i4")
        data = ints.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
    else:
        data = np.clip(np.round(x * 32767), -32768, 32767).astype("<i2").tobytes()
    block = channels * bits // 8
    header = b"RIFF" + struct.pack("<I", (36 + len(data)) & 0xFFFFFFFF) + b"WAVE" + b"fmt "
    header += struct.pack("<IHHIIHH", 16, fmt, channels, rate, (rate * block) & 0xFFFFFFFF, block, bits)
    header += b"data" + struct.pack("<I", len(data) if data_size is None else data_size)
    path.write_bytes(header + data)
    return path


def sine(rate: int, seconds: float, freq: float = 440.0, level: float = 0.5) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (level * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_one_hertz_header_is_refused_before_decoding(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "one_hz.wav", 1, sine(16000, 2.0))
    with pytest.raises(InputError) as exc:
        load_audio(path)
    text = str(exc.value)
    assert "1 Hz" in text and "export it again" in text and "\n" not in text


@pytest.mark.parametrize("rate", [0, 4_000_000_000])
def test_impossible_rates_are_refused(tmp_path: Path, rate: int) -> None:
    path = write_wav(tmp_path / "bad.wav", rate, sine(16000, 0.5))
    with pytest.raises(InputError, match="export it again|Cannot decode"):
        probe_audio(path)


def test_48k_studio_recording_stays_48k_untouched(tmp_path: Path) -> None:
    left, right = sine(48000, 1.0, 440), sine(48000, 1.0, 660, 0.25)
    path = write_wav(tmp_path / "studio.wav", 48000, np.stack([left, right], 1))
    got = load_audio(path)
    assert got.source_rate_hz == 48000 and got.channels == 2
    expect = (np.round(left * 32767) / 32768 + np.round(right * 32767) / 32768) / 2
    assert got.program_48k.shape == (48000,)
    assert np.abs(got.program_48k - expect).max() < 1e-6  # no resampling: the mix of the source samples
    assert abs(len(got.analysis_16k) - 16000) <= 16
    assert got.duration_s == pytest.approx(1.0)


@pytest.mark.parametrize("rate", [8000, 11025, 22050, 37800, 44100, 96000])
def test_other_rates_resample_to_48k_cleanly(tmp_path: Path, rate: int) -> None:
    freq = 1000.0
    path = write_wav(tmp_path / f"r{rate}.wav", rate, sine(rate, 2.0, freq), bits=24)
    got = load_audio(path)
    n = len(got.program_48k)
    assert abs(n - 2 * PROGRAM_RATE_HZ) <= 64
    mid = got.program_48k[n // 4: 3 * n // 4].astype(np.float64)
    t = np.arange(len(mid)) / PROGRAM_RATE_HZ
    basis = np.stack([np.sin(2 * np.pi * freq * t), np.cos(2 * np.pi * freq * t)], 1)
    coef, *_ = np.linalg.lstsq(basis, mid, rcond=None)
    residual = mid - basis @ coef
    snr_db = 10 * np.log10(np.sum((basis @ coef) ** 2) / np.sum(residual**2))
    assert snr_db > 60 and np.hypot(*coef) == pytest.approx(0.5, abs=0.01)
    assert abs(len(got.analysis_16k) - 2 * ANALYSIS_RATE_HZ) <= 32


@pytest.mark.parametrize("bits, fmt", [(8, 1), (24, 1), (32, 3)])
def test_sample_formats(tmp_path: Path, bits: int, fmt: int) -> None:
    got = load_audio(write_wav(tmp_path / "f.wav", 16000, sine(16000, 0.5), bits=bits, fmt=fmt))
    assert abs(float(np.abs(got.analysis_16k).max()) - 0.5) < 0.02


def test_silent_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="silent"):
        load_audio(write_wav(tmp_path / "quiet.wav", 16000, np.zeros(16000, np.float32)))


def test_clipped_file_is_kept_with_a_warning(tmp_path: Path) -> None:
    loud = np.clip(sine(16000, 1.0, level=3.0), -1, 1)
    got = load_audio(write_wav(tmp_path / "loud.wav", 16000, loud))
    assert len(got.warnings) == 1 and "clipped" in got.warnings[0]


def test_cancelling_channels_fall_back_to_the_first(tmp_path: Path) -> None:
    x = sine(16000, 1.0)
    got = load_audio(write_wav(tmp_path / "inverted.wav", 16000, np.stack([x, -x], 1)))
    assert any("cancel" in w for w in got.warnings)
    assert float(np.abs(got.analysis_16k).max()) > 0.45


def test_three_channels_are_mixed(tmp_path: Path) -> None:
    x = sine(16000, 0.5)
    got = load_audio(write_wav(tmp_path / "three.wav", 16000, np.stack([x, x, x], 1)))
    assert got.channels == 3 and abs(float(np.abs(got.analysis_16k).max()) - 0.5) < 0.01


def test_too_short_and_too_long(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="at least 0.1 s"):
        load_audio(write_wav(tmp_path / "blip.wav", 16000, sine(16000, 0.05)))
    with pytest.raises(InputError, match="limit"):
        load_audio(write_wav(tmp_path / "long.wav", 16000, sine(16000, 3.0)), max_seconds=2.0)


def _without_length(path: Path):
    """The probe of ``path`` as a container that does not state its length (raw streams, some broken files)."""
    return dataclasses.replace(probe_audio(path), duration_s=None)


def test_decoding_is_capped_where_the_header_gives_no_length(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "stream.wav", 16000, sine(16000, 3.0), data_size=0xFFFFFFFF)
    with pytest.raises(InputError, match="longer than"):
        list(stream_audio(path, max_seconds=2.0, info=_without_length(path)))
    assert load_audio(path, max_seconds=10.0).duration_s == pytest.approx(3.0)


def test_damaged_and_missing_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.wav"
    junk.write_bytes(np.random.default_rng(0).integers(0, 255, 5000, dtype=np.uint8).tobytes())
    with pytest.raises(InputError, match="Cannot decode"):
        load_audio(junk)
    with pytest.raises(InputError, match="not found"):
        load_audio(tmp_path / "nope.wav")
    with pytest.raises(InputError, match="not a file"):
        load_audio(tmp_path)


def test_streaming_progress_moves_and_blocks_stay_small(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "long.wav", 44100, sine(44100, 12.0))
    seen: list[float] = []
    total_program = 0
    for block in stream_audio(path, progress=lambda f, m: seen.append(f), block_s=0.5):
        assert len(block.program) <= 0.5 * PROGRAM_RATE_HZ + 8192
        total_program += len(block.program)
    assert seen[0] == 0.0 and seen[-1] == 1.0 and len(seen) >= 12
    assert all(b >= a for a, b in zip(seen, seen[1:]))
    assert abs(total_program - 12 * PROGRAM_RATE_HZ) <= 64
    chunks = list(analysis_chunks(path, block_s=1.0))
    assert abs(sum(len(c) for c in chunks) - 12 * ANALYSIS_RATE_HZ) <= 32 and len(chunks) >= 11


def test_progress_without_a_length_in_the_header(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "nolen.wav", 16000, sine(16000, 6.0), data_size=0xFFFFFFFF)
    seen: list[float] = []
    list(stream_audio(path, progress=lambda f, m: seen.append(f), block_s=0.5, info=_without_length(path)))
    assert len(seen) >= 6 and 0 < seen[len(seen) // 2] < 1 and seen[-1] == 1.0


def test_load_audio_file_keeps_its_contract(tmp_path: Path) -> None:
    audio, rate = load_audio_file(write_wav(tmp_path / "a.wav", 48000, sine(48000, 1.0)), 16000)
    assert rate == 16000 and abs(len(audio) - 16000) <= 16 and audio.dtype == np.float32
    with pytest.raises(InputError, match="1 Hz"):
        load_audio_file(write_wav(tmp_path / "b.wav", 1, sine(16000, 1.0)))


def test_a_silent_channel_does_not_halve_the_level(tmp_path: Path) -> None:
    x = sine(48000, 1.0)
    hiss = (np.random.default_rng(0).standard_normal(len(x)) * 1e-4).astype(np.float32)  # -80 dBFS: an empty input
    got = load_audio(write_wav(tmp_path / "one_side.wav", 48000, np.stack([x, hiss], 1), bits=24))
    assert float(np.abs(got.program_48k).max()) == pytest.approx(0.5, abs=0.01)
    assert len(got.warnings) == 1 and "channel 2 of 2 is silent" in got.warnings[0] and "channel 1" in got.warnings[0]


def test_a_quiet_channel_is_still_mixed(tmp_path: Path) -> None:
    x = sine(48000, 1.0)
    got = load_audio(write_wav(tmp_path / "quiet_side.wav", 48000, np.stack([x, 0.1 * x], 1), bits=24))
    assert float(np.abs(got.program_48k).max()) == pytest.approx(0.275, abs=0.01) and got.warnings == ()


@pytest.mark.parametrize("rate", [16000, 48000])
def test_a_dc_offset_is_removed_and_the_length_kept(tmp_path: Path, rate: int) -> None:
    x = sine(rate, 3.0, freq=300.0, level=0.3) + 0.1
    got = load_audio(write_wav(tmp_path / "offset.wav", rate, x, bits=24))
    assert len(got.program_48k) == 3 * PROGRAM_RATE_HZ
    for audio, r in ((got.program_48k, PROGRAM_RATE_HZ), (got.analysis_16k, ANALYSIS_RATE_HZ)):
        settled = audio[int(0.5 * r):].astype(np.float64)
        assert abs(settled.mean()) < 1e-3
        assert settled.max() == pytest.approx(0.3, abs=0.01) and settled.min() == pytest.approx(-0.3, abs=0.01)
    start = sine(PROGRAM_RATE_HZ, 0.001, freq=300.0, level=0.3)
    assert float(np.abs(got.program_48k[:len(start)] - start).max()) < 0.01  # no step of 0.1 at the start
