"""The warp renderer, checked from the outside: pixels and an independent face mesh on its frames."""

from __future__ import annotations

import numpy as np
import pytest

from studio.presenter import landmarks as lm
from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.presenter.renderer import Presenter, RenderSettings


@pytest.fixture(scope="module")
def presenter(default_anchor):
    return Presenter(default_anchor, RenderSettings(size_px=512, device="cpu"))


def _coeffs(**values: float) -> np.ndarray:
    c = np.zeros((1, N_COEFFS), np.float32)
    for name, v in values.items():
        c[0, Coeff[name]] = v
    return c


def _mouth_opening(frame: np.ndarray) -> float:
    pts = lm.detect_landmarks(frame)
    assert pts is not None, "no face found in a rendered frame"
    return float(np.linalg.norm(pts[13, :2] - pts[14, :2]) / np.linalg.norm(pts[10, :2] - pts[152, :2]))


def _eye_aperture(frame: np.ndarray) -> float:
    pts = lm.detect_landmarks(frame)
    assert pts is not None
    return float((pts[145, 1] - pts[159, 1] + pts[374, 1] - pts[386, 1]) / 2)


def test_frames_have_the_requested_shape_and_are_deterministic(presenter):
    c = np.repeat(_coeffs(JAW_OPEN=0.4, BLINK_L=0.3), 3, axis=0)
    a = presenter.render(c)
    b = presenter.render(c)
    assert a.shape == (3, 512, 512, 3) and a.dtype == np.uint8
    np.testing.assert_array_equal(a, b)
    # A batch renders each frame as alone, up to float rounding: the sums of a batch of three and of one frame run in
    # another order (BLAS), which can move a value that sits on a rounding edge by one grey level
    alone = presenter.render(c[1:2])[0].astype(np.int16)
    diff = np.abs(a[1].astype(np.int16) - alone)
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-4


def test_rest_pose_keeps_the_face_and_background_intact(presenter, default_anchor):
    frame = presenter.render(_coeffs())[0].astype(np.float64)
    src = default_anchor.render_image.astype(np.float64)
    pts = default_anchor.landmarks
    keep = np.ones(frame.shape[:2], bool)
    mouth = pts[list(lm.OUTER_UPPER_LIP + lm.OUTER_LOWER_LIP), :2]
    x0, y0 = mouth.min(0) - 12
    x1, y1 = mouth.max(0) + 12
    keep[int(y0):int(y1), int(x0):int(x1)] = False  # the rest pose closes the lips: the mouth may change
    mse = ((frame - src) ** 2)[keep].mean()
    assert 10 * np.log10(255**2 / mse) > 34


def test_lips_are_closed_at_rest_and_open_with_the_jaw(presenter):
    rest = _mouth_opening(presenter.render(_coeffs())[0])
    wide = _mouth_opening(presenter.render(_coeffs(JAW_OPEN=1.0))[0])
    pressed = _mouth_opening(presenter.render(_coeffs(JAW_OPEN=1.0, LIP_PRESS=1.0))[0])
    assert rest < 0.02
    assert wide > rest + 0.05
    assert pressed < 0.02


def test_blink_closes_the_eyes(presenter):
    open_eyes = _eye_aperture(presenter.render(_coeffs())[0])
    closed = _eye_aperture(presenter.render(_coeffs(BLINK_L=1.0, BLINK_R=1.0))[0])
    assert closed < 0.45 * open_eyes


def test_open_mouth_shows_teeth_and_a_dark_cavity(presenter, default_anchor):
    frame = presenter.render(_coeffs(JAW_OPEN=0.8, LIP_PART=0.4))[0].astype(np.float64) / 255
    pts = default_anchor.landmarks
    cx = int(pts[list(lm.INNER_UPPER_LIP), 0].mean())
    top = int(pts[13, 1])
    column = frame[top - 2:top + 45, cx - 3:cx + 3].mean(1)  # down the middle of the mouth
    value = column.max(1)
    sat = (column.max(1) - column.min(1)) / np.maximum(value, 1e-3)
    assert ((value > 0.6) & (sat < 0.3)).any(), "no teeth below the upper lip"
    assert (value < 0.3).any(), "no dark cavity"


def test_head_pose_moves_the_face_a_little(presenter):
    still = presenter.render(_coeffs())[0]
    turned = presenter.render(_coeffs(HEAD_YAW_DEG=3.0))[0]
    p0, p1 = lm.detect_landmarks(still), lm.detect_landmarks(turned)
    nose_shift = p1[1, 0] - p0[1, 0]
    assert 1.0 < nose_shift < 15.0
    # The image border stays where it was.
    np.testing.assert_allclose(still[:4].astype(int), turned[:4].astype(int), atol=2)


def test_a_closed_mouths_spread_is_a_small_smile_that_opens_nothing(presenter) -> None:
    """LIP_SPREAD on a closed mouth (a listener's smile): the corners go up and out, further than the spread of an
    open mouth (speech) takes them; no mouth interior is drawn and no triangle of the mesh turns over."""
    import torch
    from scipy.spatial import Delaunay

    r = presenter.module
    c = torch.zeros(4, N_COEFFS)
    c[1:, Coeff.LIP_SPREAD] = torch.tensor([0.6, 0.9, 0.9])
    c[3, Coeff.JAW_OPEN] = 0.5  # an open mouth's spread (speech): no smile lift
    with torch.inference_mode():
        full = r.landmarks(c)
        frames = torch.zeros(4, 3, r.size, r.size)
        r.mouth_interior(frames, full, r.landmarks(c, mouth_scale=0.0), r.landmarks(c, jaw_only=True), c)
        w = r._mouth_weights(c)
        spread_only = full - w[:, -1, None, None] * r.bases[-1]  # without the smile lift (no head pose here)
    assert float(w[3, -1]) == 0 and float(w[2, -1]) > 0.8
    face_h = r.face_h
    for corner in (lm.MOUTH_LEFT, lm.MOUTH_RIGHT):
        rise = (full[0, corner, 1] - full[:, corner, 1]) / face_h  # up, in face heights
        out = (full[:, corner, 0] - full[0, corner, 0]).abs() / face_h
        assert rise[2] > 0.02 and out[2] > 0.015  # corners up and out: a smile
        assert rise[2] > 1.5 * (full[0, corner, 1] - spread_only[2, corner, 1]) / face_h  # more than spread alone
    assert float(frames[:3].abs().max()) == 0  # closed: no teeth, no cavity drawn
    src = torch.cat([r.lm_src[:, :2], r.frame_src]).numpy()
    tri = Delaunay(src).simplices

    def area(p: np.ndarray) -> np.ndarray:
        a, b, d = p[tri[:, 0]], p[tri[:, 1]], p[tri[:, 2]]
        return (b[:, 0] - a[:, 0]) * (d[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (d[:, 0] - a[:, 0])

    with torch.inference_mode():
        targets = torch.cat([full, r._frame_targets(c)], 1).numpy()
    rest = area(targets[0])
    for k in (1, 2):
        assert not np.any((np.sign(area(targets[k])) != np.sign(rest)) & (np.abs(rest) > 0.1))  # no fold, no tear
