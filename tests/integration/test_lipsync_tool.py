"""The lip-sync evaluator on a real face (Grace Hopper, from matplotlib's sample data) written by our MP4 writer.

A still photo must fail (no correlation); a crude jaw-drop warp driven by the audio's loudness must pass at lag 0,
and the same warp shown three frames late must report lag 3: the tool can fail and can pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from PIL import Image
from scipy.ndimage import map_coordinates

from studio.bench.lipsync import main as lipsync_main
from studio.bench.lipsync import measure_lipsync
from studio.encode import Mp4Writer

pytestmark = pytest.mark.integration

FPS = 25
RATE_HZ = 16_000
N_FRAMES = 75  # 3 s
REPO_ROOT = Path(__file__).resolve().parents[2]

# Grace Hopper's inner-lip centre, mouth width and chin (pixels) in the 512x600 photo, from MediaPipe's face mesh.
MOUTH_X, MOUTH_Y, MOUTH_W, CHIN_Y = 267.7, 279.1, 63.8, 333.0


@pytest.fixture(scope="module")
def portrait() -> np.ndarray:
    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    return np.asarray(Image.open(path).convert("RGB"))  # 600 x 512 x 3


@pytest.fixture(scope="module")
def talking(portrait: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """(frames whose jaw follows the loudness, the loudness per frame, the audio)."""
    level = loudness()
    return [drop_jaw(portrait, lv * MOUTH_W * 0.4) for lv in level], level, speech_like_audio(level)


def loudness(n_frames: int = N_FRAMES) -> np.ndarray:
    """A speech-like loudness per frame (N,), 0..1: smoothed noise."""
    rng = np.random.default_rng(0)
    return np.clip(np.convolve(rng.standard_normal(n_frames + 6), np.ones(7) / 7, "valid") * 2 + 0.5, 0, 1)


def speech_like_audio(level: np.ndarray) -> np.ndarray:
    """A 200 Hz buzz whose amplitude follows ``level`` frame by frame (float32, RATE_HZ)."""
    per_frame = RATE_HZ // FPS
    t = np.arange(len(level) * per_frame) / RATE_HZ
    return ((0.02 + 0.5 * np.repeat(level, per_frame)) * np.sin(2 * np.pi * 200 * t)).astype(np.float32)


def drop_jaw(image: np.ndarray, drop_px: float) -> np.ndarray:
    """Move the face below the lips down by ``drop_px`` (fading out past the chin) and darken the gap."""
    top, bottom = int(MOUTH_Y) - 2, int(CHIN_Y) + 42  # rows the warp touches
    left, right = int(MOUTH_X - 2.5 * MOUTH_W), int(MOUTH_X + 2.5 * MOUTH_W)
    crop = image[top:bottom, left:right].astype(np.float32)
    yy, xx = np.mgrid[top:bottom, left:right].astype(np.float32)
    across = np.exp(-(((xx - MOUTH_X) / (MOUTH_W * 0.9)) ** 2))
    down = np.clip((yy - MOUTH_Y) / 4, 0, 1) * np.clip(1 - (yy - CHIN_Y) / 40, 0, 1)
    src_y = yy - drop_px * across * down
    warped = np.stack([map_coordinates(crop[..., c], [src_y - top, xx - left], order=1) for c in range(3)], -1)
    warped[(yy > MOUTH_Y) & (src_y < MOUTH_Y + 1) & (np.abs(xx - MOUTH_X) < MOUTH_W * 0.45)] = (50, 25, 25)
    out = image.copy()
    out[top:bottom, left:right] = warped.clip(0, 255).astype(np.uint8)
    return out


def write(path: Path, frames: list[np.ndarray], audio: np.ndarray) -> Path:
    h, w = frames[0].shape[:2]
    with Mp4Writer(path, w, h, FPS, RATE_HZ) as writer:
        for frame in frames:
            writer.write_video(frame)
        writer.write_audio(audio)
    return path


def test_still_photo_has_a_face_everywhere_and_fails(tmp_path: Path, portrait: np.ndarray) -> None:
    clip = write(tmp_path / "still.mp4", [portrait] * N_FRAMES, speech_like_audio(loudness()))
    report = measure_lipsync(clip)
    assert report.n_frames == N_FRAMES
    assert report.n_frames_no_face == 0
    assert report.audio_duration_s == pytest.approx(N_FRAMES / FPS, abs=1e-3)
    assert len(report.corr_by_lag) == 11
    assert not report.passes()


def test_mouth_that_follows_the_audio_passes_and_a_late_one_shows_its_lag(
    tmp_path: Path, talking: tuple[list[np.ndarray], np.ndarray, np.ndarray]
) -> None:
    frames, _, audio = talking

    in_sync = measure_lipsync(write(tmp_path / "sync.mp4", frames, audio))
    assert in_sync.n_frames_no_face == 0
    assert in_sync.best_lag_frames == 0
    assert in_sync.best_corr is not None and in_sync.best_corr > 0.8
    assert in_sync.passes()

    late = measure_lipsync(write(tmp_path / "late.mp4", frames[:1] * 3 + frames[:-3], audio))
    assert late.best_lag_frames == 3
    assert not late.passes(max_lag=2)


def test_cli_with_phones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], talking: tuple[list[np.ndarray], np.ndarray, np.ndarray]
) -> None:
    frames, level, audio = talking
    clip = write(tmp_path / "sync.mp4", frames, audio)
    # Phones consistent with the drawn mouth: closed frames are "m", wide ones "a".
    phones = [
        {"phoneme": "m" if lv < 0.2 else "a" if lv > 0.6 else "t", "start_s": i / FPS, "end_s": (i + 1) / FPS}
        for i, lv in enumerate(level)
    ]
    phones_path = tmp_path / "phones.json"
    phones_path.write_text(json.dumps({"phonemes": phones, "words": []}), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    cmd = [sys.executable, "-m", "studio.bench.lipsync", str(clip), "--phones", str(phones_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    out = json.loads(done.stdout)
    assert done.returncode == 0, out["failures"]
    assert out["passes"] is True
    assert out["phones"]["n_pbm_frames"] > 0 and out["phones"]["n_open_frames"] > 0
    assert out["phones"]["pbm_over_open"] < 0.25
    assert out["thresholds"] == {"min_corr": 0.5, "max_lag": 2, "max_pbm_ratio": 0.25}

    assert lipsync_main([str(clip), "--phones", str(phones_path), "--min-corr", "0.999"]) == 1  # in-process: faster
    assert json.loads(capsys.readouterr().out)["passes"] is False
    assert lipsync_main([str(tmp_path / "missing.mp4")]) == 2
