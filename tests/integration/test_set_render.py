"""Renders on a 16:9 canvas with different sets: the presenter is cut out, the set shows around the head."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _render(tmp: Path, name: str, *extra: str) -> np.ndarray:
    out = tmp / f"{name}.mp4"
    subprocess.run([sys.executable, str(ROOT / "main.py"), "render", "--text", "Good evening.", "--device", "cpu",
                    "--canvas", "720p", "--voice", "espeak:en-us", "--out", str(out), *extra],
                   check=True, capture_output=True, timeout=600, cwd=ROOT)
    import av

    with av.open(str(out)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def _face_box(shape) -> tuple[int, int, int, int]:
    """The face on the 720p canvas: the built-in anchor's landmarks scaled into the centred presenter box."""
    from studio.presenter.anchor import build_anchor
    from studio.presenter import landmarks as lm

    pack = build_anchor()
    h, w = shape[:2]
    k = h / pack.size_px
    x0 = (w - h) // 2
    oval = pack.landmarks[list(lm.FACE_OVAL), :2] * k + [x0, 0]
    return int(oval[:, 0].min()), int(oval[:, 1].min()), int(oval[:, 0].max()), int(oval[:, 1].max())


def background_difference(a: np.ndarray, b: np.ndarray, face: tuple[int, int, int, int]) -> dict[str, float]:
    """Shares of the frame, of a band beside the head at eye height, and of the inner face where two renders
    differ (by more than 12 grey levels in any channel)."""
    diff = (np.abs(a.astype(int) - b.astype(int)).max(-1) > 12)
    fx0, fy0, fx1, fy1 = face
    fw = fx1 - fx0
    eye_y = fy0 + (fy1 - fy0) * 2 // 5
    band = np.concatenate([diff[:, eye_y - 10:eye_y + 10, max(0, fx0 - fw):fx0 - fw // 3],
                           diff[:, eye_y - 10:eye_y + 10, fx1 + fw // 3:fx1 + fw]], -1)
    inner = diff[:, fy0 + (fy1 - fy0) // 4:fy1 - (fy1 - fy0) // 6, fx0 + fw // 5:fx1 - fw // 5]
    return {"frame": float(diff.mean()), "band": float(band.mean()), "face": float(inner.mean())}


def test_two_sets_differ_around_the_presenter_and_not_in_the_face(tmp_path):
    paths = []
    for name, rgb in (("blue", (20, 40, 200)), ("orange", (230, 140, 20))):
        p = tmp_path / f"{name}.png"
        Image.new("RGB", (64, 36), rgb).save(p)
        paths.append(p)
    a = _render(tmp_path, "a", "--background", str(paths[0]))
    b = _render(tmp_path, "b", "--background", str(paths[1]))
    n = min(len(a), len(b))
    got = background_difference(a[:n], b[:n], _face_box(a.shape[1:]))
    assert got["frame"] >= 0.60, got
    assert got["band"] >= 0.80, got
    assert got["face"] <= 0.01, got


def test_a_colour_background_is_the_set(tmp_path):
    frames = _render(tmp_path, "c", "--background", "#10c040")
    corner = frames[:, 20:60, 20:60].reshape(-1, 3).astype(int)
    assert np.abs(np.median(corner, 0) - [0x10, 0xc0, 0x40]).max() <= 4  # the colour, give or take the codec
