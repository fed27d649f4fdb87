"""The mouth interior: the photo's own teeth where it shows them (upper with the skull, lower with the jaw), teeth
synthesized tooth by tooth where it does not, and the same pixels on the CUDA-graph path (static shapes)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from studio.presenter import landmarks as lm
from studio.presenter.anchor import build_anchor, teeth_layer
from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.presenter.renderer import Presenter, RenderSettings


@pytest.fixture(scope="module")
def hopper_anchor(hopper_path):
    return build_anchor(hopper_path)


def _coeffs(rows: list[dict[str, float]]) -> np.ndarray:
    c = np.zeros((len(rows), N_COEFFS), np.float32)
    for i, values in enumerate(rows):
        for name, v in values.items():
            c[i, Coeff[name]] = v
    return c


def _column(frame: np.ndarray, anchor, size: int) -> tuple[np.ndarray, int]:
    """Value (max of RGB, 0..1) down the middle of the mouth, from just above the upper inner lip; and its top row."""
    s = size / anchor.size_px
    cx = int(round(anchor.landmarks[list(lm.INNER_UPPER_LIP), 0].mean() * s))
    top = int(anchor.landmarks[13, 1] * s) - 4
    col = frame[top:top + int(0.35 * anchor.face_height_px * s), cx - 1:cx + 2].astype(np.float64).mean(1) / 255
    return col.max(1), top


def test_the_default_portraits_teeth_are_upper_teeth_from_the_photo(default_anchor):
    layer = teeth_layer(default_anchor)
    assert layer is not None and default_anchor.mouth.teeth_split_frac == 1.0
    assert layer.upper.max() > 0.9 and layer.lower.max() < 0.5  # the smile's lower lip hides the lower teeth
    x0, y0, x1, y1 = layer.box
    assert layer.rgb.shape == (y1 - y0, x1 - x0, 3) == layer.upper.shape + (3,)


def test_a_closed_mouth_gets_synthesized_teeth_in_its_own_colours(hopper_anchor):
    mat = hopper_anchor.mouth
    assert not mat.teeth_from_photo and teeth_layer(hopper_anchor) is None
    assert min(mat.teeth_rgb) > 0.5 and mat.teeth_rgb[0] >= mat.teeth_rgb[2]  # ivory, not blue-white
    assert mat.gum_rgb[0] > mat.gum_rgb[1] and mat.cavity_rgb[0] > mat.cavity_rgb[2]  # mucosa red


@pytest.mark.parametrize("size", [256, 512, 1080])
def test_static_shapes_give_the_same_pixels_and_every_pixel_is_finite(default_anchor, hopper_anchor, size):
    c = torch.tensor(_coeffs([{}, {"JAW_OPEN": 0.15, "LIP_PART": 0.25}, {"JAW_OPEN": 1.0, "LIP_PART": 0.5},
                              {"JAW_OPEN": 0.6, "HEAD_YAW_DEG": 2.0, "SHIFT_X": 0.01}]))
    for anchor in (default_anchor, hopper_anchor):
        module = Presenter(anchor, RenderSettings(size_px=size)).module
        with torch.inference_mode():
            plain = module(c)
            module.static_shapes = True
            static = module(c)
        assert torch.isfinite(plain).all()
        torch.testing.assert_close(plain, static, rtol=0, atol=1e-3)


def test_upper_teeth_stay_with_the_skull_and_lower_teeth_drop_with_the_jaw(default_anchor):
    size = 512
    pres = Presenter(default_anchor, RenderSettings(size_px=size))
    frames = pres.render(_coeffs([{"JAW_OPEN": 0.5, "LIP_PART": 0.4}, {"JAW_OPEN": 1.0, "LIP_PART": 0.4}]))
    bottoms, tops = [], []
    for f in frames:
        value, _ = _column(f, default_anchor, size)
        bright = np.flatnonzero(value > 0.6)
        dark = np.flatnonzero(value < 0.35)
        assert len(bright) and len(dark), "teeth and a dark cavity down the middle of the open mouth"
        first_dark = dark[0]
        bottoms.append(bright[bright < first_dark].max())  # lowest row of the upper teeth
        below = bright[bright > dark[-1]] if (bright > dark[-1]).any() else bright[bright > first_dark]
        tops.append(below.min() if len(below) else len(value))  # first row of the lower teeth
    assert abs(bottoms[0] - bottoms[1]) <= 1  # the upper teeth did not move with the jaw
    assert tops[1] >= tops[0] + 3  # the lower teeth went down with it


def test_synthesized_teeth_are_separate_teeth_not_a_band(hopper_anchor):
    size = 1080
    frame = Presenter(hopper_anchor, RenderSettings(size_px=size)).render(_coeffs([{"JAW_OPEN": 0.6,
                                                                                  "LIP_PART": 0.5}]))[0]
    s = size / hopper_anchor.size_px
    value, top = _column(frame, hopper_anchor, size)
    row = top + int(np.flatnonzero(value > 0.55)[0]) + 3  # a few rows into the upper teeth
    pts = hopper_anchor.landmarks
    x0, x1 = int(pts[lm.INNER_UPPER_LIP[0], 0] * s), int(pts[lm.INNER_UPPER_LIP[-1], 0] * s)
    cx = (x0 + x1) // 2
    half = (x1 - x0) // 4
    line = frame[row, cx - half:cx + half].astype(np.float64).max(1) / 255
    assert line.mean() > 0.55  # teeth, lit
    # Per-tooth shading: dips between the teeth, at least three across the front teeth.
    smooth = np.convolve(line, np.ones(3) / 3, mode="same")[2:-2]
    dips = np.flatnonzero((smooth[1:-1] < smooth[:-2]) & (smooth[1:-1] <= smooth[2:])
                          & (smooth[1:-1] < np.median(smooth) - 0.03))
    assert len(dips) >= 3, smooth
