"""Portraits as users really give them: small faces in big frames, huge files, 16-bit and greyscale PNGs, damaged
files; every message says what was really wrong. All images are made by the tests."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from studio.errors import AnchorError
from studio.presenter.anchor import MIN_FACE_PX, AnchorSettings, build_anchor, default_portrait
from studio.presenter.landmarks import find_face
from studio.presenter.portrait import read_portrait, rgb8

NO_CACHE = AnchorSettings(use_cache=False)


def _paste(img: np.ndarray, width: int, height: int, scale: float, x: int, y: int) -> np.ndarray:
    canvas = np.full((height, width, 3), 90, np.uint8)
    small = np.asarray(Image.fromarray(img).resize((int(img.shape[1] * scale), int(img.shape[0] * scale)),
                                                   Image.LANCZOS))
    canvas[y:y + small.shape[0], x:x + small.shape[1]] = small
    return canvas


def _png_header_only(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims ``width`` x ``height`` (no pixel data is needed to be refused)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
                     + chunk(b"IEND", b""))
    return path


def test_default_portrait_small_in_a_720p_frame_is_found() -> None:
    frame = _paste(default_portrait(), 1280, 720, 1.0, 700, 100)
    found = find_face(frame)
    assert found.landmarks is not None and found.method == "tile search"
    assert abs(found.face_width_px - 91) < 6
    assert 700 < found.landmarks[:, 0].min() and found.landmarks[:, 0].max() < 1212
    pack = build_anchor(frame, NO_CACHE)
    assert pack.face_width_px > 0.25 * pack.size_px


def test_small_face_in_a_4000x3000_photo_is_found(hopper_path: Path) -> None:
    hopper = np.asarray(Image.open(hopper_path).convert("RGB"))
    photo = _paste(hopper, 4000, 3000, 0.6, 2500, 1800)
    found = find_face(photo)
    assert found.landmarks is not None
    assert 2500 < found.landmarks[:, 0].mean() < 2500 + 0.6 * hopper.shape[1]
    assert 1800 < found.landmarks[:, 1].mean() < 1800 + 0.6 * hopper.shape[0]


def test_face_too_small_is_said_so() -> None:
    frame = _paste(default_portrait(), 1280, 720, 0.5, 100, 300)  # a face of about 45 px
    with pytest.raises(AnchorError) as exc:
        build_anchor(frame, NO_CACHE)
    text = str(exc.value)
    assert "only" in text and f"at least {MIN_FACE_PX} px" in text and "No face" not in text


def test_no_face_only_when_there_is_none() -> None:
    rng = np.random.default_rng(1)
    scenery = (rng.random((600, 900, 3)) * 60 + np.linspace(80, 160, 900)[None, :, None]).astype(np.uint8)
    with pytest.raises(AnchorError, match="No face found"):
        build_anchor(scenery, NO_CACHE)
    noise = (rng.random((900, 1200, 3)) * 255).astype(np.uint8)  # weak false detections are traced, not believed
    with pytest.raises(AnchorError, match="No face found"):
        build_anchor(noise, NO_CACHE)


def test_huge_png_gets_a_size_message(tmp_path: Path) -> None:
    path = _png_header_only(tmp_path / "huge.png", 20000, 20000)
    with pytest.raises(AnchorError) as exc:
        read_portrait(path)
    text = str(exc.value)
    assert "400 million pixels" in text and "scale it down" in text and "JPEG or PNG" not in text


def test_sixteen_bit_greyscale_png_is_converted_and_found(tmp_path: Path) -> None:
    grey8 = np.asarray(Image.fromarray(default_portrait()).convert("L"))
    grey16 = grey8.astype(np.uint16) * 257
    path = tmp_path / "grey16.png"
    Image.fromarray(grey16).save(path)
    assert Image.open(path).mode.startswith("I")  # what Pillow gives for it (its convert("RGB") clips to white)
    rgb = read_portrait(path)
    assert rgb.shape == (512, 512, 3) and np.abs(rgb[:, :, 0].astype(int) - grey8).max() <= 1
    assert np.array_equal(rgb[:, :, 0], rgb[:, :, 2])
    assert build_anchor(path, NO_CACHE).face_width_px > 0


def test_other_modes(tmp_path: Path) -> None:
    astro = default_portrait()
    Image.fromarray(astro).convert("L").save(tmp_path / "l.png")
    Image.fromarray(astro).convert("P").save(tmp_path / "p.png")
    rgba = np.dstack([astro, np.full(astro.shape[:2], 255, np.uint8)])
    rgba[:100, :100, 3] = 0
    Image.fromarray(rgba).save(tmp_path / "rgba.png")
    assert read_portrait(tmp_path / "l.png").shape == (512, 512, 3)
    assert read_portrait(tmp_path / "p.png").shape == (512, 512, 3)
    out = read_portrait(tmp_path / "rgba.png")
    assert (out[:100, :100] == 255).all() and np.array_equal(out[200:, 200:], astro[200:, 200:])


def test_damaged_and_wrong_files(tmp_path: Path) -> None:
    Image.fromarray(default_portrait()).save(tmp_path / "a.jpg", quality=90)
    data = (tmp_path / "a.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) // 3])
    with pytest.raises(AnchorError, match="damaged|Cannot decode"):
        read_portrait(tmp_path / "cut.jpg")
    (tmp_path / "text.png").write_text("not a picture", encoding="utf-8")
    with pytest.raises(AnchorError, match="Cannot read text.png as an image"):
        read_portrait(tmp_path / "text.png")
    Image.fromarray(np.zeros((40, 40, 3), np.uint8)).save(tmp_path / "tiny.png")
    with pytest.raises(AnchorError, match="only 40x40"):
        read_portrait(tmp_path / "tiny.png")


def test_rgb8_arrays() -> None:
    assert rgb8(np.full((4, 4, 3), 65535, np.uint16)).max() == 255
    assert rgb8(np.full((4, 4), 0.5, np.float32))[0, 0].tolist() == [128, 128, 128]
    x = np.zeros((4, 4, 3), np.uint8)
    assert rgb8(x) is x or np.array_equal(rgb8(x), x)
    with pytest.raises(AnchorError, match="shape"):
        rgb8(np.zeros((4, 4, 5), np.uint8))


def test_a_photo_with_two_faces_says_which_is_used(caplog: pytest.LogCaptureFixture) -> None:
    portrait = default_portrait()
    photo = _paste(portrait, 1100, 560, 0.7, 740, 150)
    photo[24:24 + portrait.shape[0], 24:24 + portrait.shape[1]] = portrait
    with caplog.at_level("WARNING", logger="studio.presenter.landmarks"):
        found = find_face(photo)
    assert found.landmarks is not None and found.landmarks[:, 0].max() < 24 + portrait.shape[1]  # the larger one
    said = [r.getMessage() for r in caplog.records if "faces" in r.getMessage()]
    assert len(said) == 1 and "2 faces" in said[0], said
    import re

    x = float(re.search(r"x=(\d+)", said[0]).group(1))  # names the face used: the larger one, on the left
    assert 24 < x < 24 + portrait.shape[1] and abs(x - found.landmarks[:, 0].mean()) < 2
