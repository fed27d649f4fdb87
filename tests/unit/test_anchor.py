"""Anchor pack: framing, geometry, cache and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from studio.errors import AnchorError
from studio.presenter import anchor as anchor_mod
from studio.presenter import landmarks as lm
from studio.presenter.anchor import AnchorSettings, build_anchor


def test_default_anchor_is_a_framed_presenter(default_anchor):
    a = default_anchor
    side = a.size_px
    assert a.image.shape == (side, side, 3) and a.image.dtype == np.uint8
    assert a.landmarks.shape == (478, 3)
    # Head-and-shoulders framing: face about 36 % of the width, eyes about 40 % down.
    assert 0.30 < a.face_width_px / side < 0.42
    eyes_y = a.landmarks[list(lm.LEFT_EYE_UPPER + lm.RIGHT_EYE_UPPER), 1].mean()
    assert 0.33 < eyes_y / side < 0.47
    # The person mask covers the face and not the top corners (background).
    nose = a.landmarks[1, :2].astype(int)
    assert a.mask[nose[1], nose[0]] > 0.9
    assert a.mask[5, 5] < 0.2 and a.mask[5, side - 5] < 0.2
    # Mesh over landmarks + frame, all indices valid, every vertex used.
    n_verts = 478 + len(a.frame_points)
    assert a.triangles.max() < n_verts
    assert len(np.unique(a.triangles)) == n_verts
    # The photo shows teeth: their colour is measured, bright and unsaturated.
    assert a.mouth.teeth_from_photo
    assert min(a.mouth.teeth_rgb) > 0.5


def test_mouth_gap_is_filled_with_lip_for_warping(default_anchor):
    a = default_anchor
    inner = np.concatenate([a.landmarks[list(lm.INNER_UPPER_LIP), :2], a.landmarks[list(lm.INNER_LOWER_LIP[::-1]), :2]])
    mask = anchor_mod._polygon_mask(a.image.shape[:2], inner)
    assert mask.sum() > 50

    def whiteness(img):
        px = img[mask].astype(float) / 255
        return (px.min(1) > 0.75).mean()  # teeth are bright in every channel; lips are low in blue

    assert whiteness(a.image) > 0.2  # teeth in the photo
    assert whiteness(a.render_image) < 0.3 * whiteness(a.image)  # lip texture where the teeth were


def test_second_build_loads_the_cache(default_anchor, monkeypatch):
    def no_detector(*args, **kwargs):
        raise AssertionError("the face detector ran although the pack is cached")

    monkeypatch.setattr(lm, "detect_landmarks", no_detector)
    again = build_anchor()
    assert again.key == default_anchor.key
    np.testing.assert_array_equal(again.landmarks, default_anchor.landmarks)


def test_corrupt_cache_is_rebuilt(tmp_path, monkeypatch, hopper_path):
    monkeypatch.setenv("NEWSSTUDIO_HOME", str(tmp_path))
    first = build_anchor(hopper_path)
    cache = tmp_path / "cache" / "anchors" / f"{first.key}.npz"
    assert cache.exists()
    cache.write_bytes(b"not a zip file")
    rebuilt = build_anchor(hopper_path)
    assert rebuilt.key == first.key and rebuilt.landmarks.shape == (478, 3)


def test_not_an_image(tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("this is not a picture")
    with pytest.raises(AnchorError, match="Cannot read notes.png as an image"):
        build_anchor(bad)


def test_missing_file(tmp_path):
    with pytest.raises(AnchorError, match="not found"):
        build_anchor(tmp_path / "nobody.jpg")


def test_image_without_a_face(tmp_path):
    from PIL import Image
    from skimage import data

    path = tmp_path / "coffee.png"
    Image.fromarray(data.coffee()).save(path)
    with pytest.raises(AnchorError, match="No face found"):
        build_anchor(path, AnchorSettings(use_cache=False))


def test_other_portrait_frames_around_its_face(hopper_path):
    a = build_anchor(hopper_path, AnchorSettings(use_cache=False))
    assert a.name == "grace_hopper"
    assert a.size_px >= 512
    assert 0.2 < a.face_width_px / a.size_px < 0.6


def test_a_pack_just_built_equals_the_same_pack_from_the_cache(tmp_path, monkeypatch) -> None:
    """The soft masks are kept at the cache's precision from the start: the frames of a fresh pack and of the cached
    one are the same (a fresh machine and a warm one render identical pictures)."""
    import numpy as np

    monkeypatch.setenv("NEWSSTUDIO_HOME", str(tmp_path))
    from studio.presenter.anchor import build_anchor

    fresh = build_anchor(output_px=256)
    cached = build_anchor(output_px=256)
    for field in ("mask", "eye_masks", "image", "render_image", "landmarks"):
        np.testing.assert_array_equal(getattr(fresh, field), getattr(cached, field), err_msg=field)
    np.testing.assert_array_equal(fresh.matte.alpha, cached.matte.alpha)


def test_the_default_portrait_is_scikit_images_astronaut() -> None:
    from skimage import data

    from studio.presenter.anchor import default_portrait

    got = default_portrait()
    assert got.dtype == np.uint8 and got.flags.c_contiguous
    assert np.array_equal(got, data.astronaut()[:, :, :3])
