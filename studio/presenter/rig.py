"""Face rig: how each motion coefficient moves the 478 landmarks of one anchor (linear bases, built once).

The rest pose has the lips closed: a photo that shows teeth gets a ``close`` basis that brings the inner lips
together, and every mouth coefficient acts on top of it. Local bases are in pixels of the anchor image at the
coefficient value 1. Head pose is applied later as a small 3D rotation using the landmarks' relative depth.

One basis, the last, follows no coefficient of its own: the smile lift, which the renderer weights by LIP_SPREAD where
the mouth is closed (``studio.presenter.renderer.smile_weight``), so that a closed mouth's spread reads as a small
smile (the corners further up and a little out, the cheeks beside them lifted) while the spread of speech ("ee", "s")
keeps its own shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from studio.presenter import landmarks as lm
from studio.presenter.anchor import AnchorPack, lip_seam_px
from studio.contracts.coeffs import Coeff

# The lips as rings of landmarks, outer contour to inner lip line (corners left out), and the corner columns from the
# outer corner to the inner one: a point between two rings moves between them, so the lips never fold over themselves.
UPPER_RINGS = (lm.OUTER_UPPER_LIP[1:-1], (184, 74, 73, 72, 11, 302, 303, 304, 408),
               (183, 42, 41, 38, 12, 268, 271, 272, 407), lm.INNER_UPPER_LIP[1:-1])
LOWER_RINGS = (lm.OUTER_LOWER_LIP[1:-1], (77, 90, 180, 85, 16, 315, 404, 320, 307),
               (96, 89, 179, 86, 15, 316, 403, 319, 325), lm.INNER_LOWER_LIP[1:-1])
CORNER_COLUMNS = ((61, 76, 62, 78), (291, 306, 292, 308))

# Order of the local bases (rows of ``FaceRig.bases``); the first one is always applied with weight 1.
BASIS_CLOSE = 0
LOCAL_COEFFS = (Coeff.JAW_OPEN, Coeff.LIP_PART, Coeff.LIP_ROUND, Coeff.LIP_SPREAD, Coeff.LIP_PRESS,
                Coeff.BLINK_L, Coeff.BLINK_R, Coeff.BROW)
SMILE_CORNER_LIFT = 0.016  # of the face height: how much further the corners rise at full smile
SMILE_CORNER_OUT = 0.04  # of each lip point's distance from the mouth's middle: how much further out
SMILE_CHEEK_LIFT = 0.006  # of the face height: the cheeks beside the corners
SMILE_OPEN_RANGE = 0.3  # JAW_OPEN + LIP_PART + LIP_ROUND at which the smile lift has faded out (an opening mouth)


@dataclass(frozen=True)
class FaceRig:
    bases: np.ndarray  # (2 + len(LOCAL_COEFFS)) x 478 x 2, pixels at coefficient 1 (close, LOCAL_COEFFS, smile)
    jaw_only: np.ndarray  # 478 x 2, the jaw basis alone (for placing the lower teeth)
    pivot: np.ndarray  # 3, head rotation centre (x, y, z pixels)
    face_width_px: float
    face_height_px: float


def _smoothstep(e0: float, e1: float, x: np.ndarray) -> np.ndarray:
    t = np.clip((x - e0) / (e1 - e0), 0.0, 1.0)
    return t * t * (3 - 2 * t)


def _spread(pts2: np.ndarray, driver_idx: list[int], driver_disp: np.ndarray, sigma_px: float,
            reach_px: float, exclude: set[int]) -> np.ndarray:
    """Carry the displacements of driver landmarks onto the surrounding skin with a Gaussian falloff."""
    out = np.zeros((len(pts2), 2), np.float32)
    drivers = pts2[driver_idx]
    d2 = ((pts2[:, None, :] - drivers[None, :, :]) ** 2).sum(-1)  # 478 x D
    kern = np.exp(-d2 / (2 * sigma_px**2))
    avg = (kern @ driver_disp) / np.maximum(kern.sum(1, keepdims=True), 1e-9)
    falloff = np.exp(-d2.min(1) / (2 * reach_px**2))
    out[:] = avg * falloff[:, None]
    for i in exclude:
        out[i] = 0.0
    out[driver_idx] = driver_disp
    return out


def _fill_rings(disp: np.ndarray) -> np.ndarray:
    """Displacements of the lips' middle rings and corner columns, interpolated between the outer contour and the inner
    lip line of their column (in place on a 478 x 2 array whose outer and inner chains and corners are set)."""
    for rings in (UPPER_RINGS, LOWER_RINGS):
        outer, inner = np.asarray(rings[0]), np.asarray(rings[-1])
        for k in range(1, len(rings) - 1):
            t = k / (len(rings) - 1)
            disp[list(rings[k])] = (1 - t) * disp[outer] + t * disp[inner]
    for col in CORNER_COLUMNS:
        for k in range(1, len(col) - 1):
            t = k / (len(col) - 1)
            disp[col[k]] = (1 - t) * disp[col[0]] + t * disp[col[-1]]
    return disp


def _seam_sides(p2: np.ndarray) -> np.ndarray:
    """Per landmark: True below the line where the lips meet (carried out sideways at the corners' height)."""
    xs = np.concatenate([p2[list(lm.INNER_UPPER_LIP), 0], p2[list(lm.INNER_LOWER_LIP), 0]])
    ys = np.concatenate([p2[list(lm.INNER_UPPER_LIP), 1], p2[list(lm.INNER_LOWER_LIP), 1]])
    order = np.argsort(xs)
    seam = np.interp(p2[:, 0], xs[order], ys[order])
    below = p2[:, 1] > seam
    below[[i for r in UPPER_RINGS for i in r]] = False
    below[[i for r in LOWER_RINGS for i in r]] = True
    return below


def _spread_sided(p2: np.ndarray, disp: np.ndarray, sigma_px: float, reach_px: float) -> np.ndarray:
    """``_spread`` of the lips' displacements with the lip line as a seam: skin above it follows the upper lip (and the
    corners), skin below it the lower lip, so that parting the lips never drags one lip's skin with the other."""
    upper = sorted({i for r in UPPER_RINGS for i in r})
    lower = sorted({i for r in LOWER_RINGS for i in r})
    corners = sorted({i for col in CORNER_COLUMNS for i in col})
    below = _seam_sides(p2)
    out = np.zeros((len(p2), 2), np.float32)
    for side_below, drivers in ((False, upper + corners), (True, lower + corners)):
        part = _spread(p2, drivers, disp[drivers], sigma_px, reach_px, exclude=set())
        out[below == side_below] = part[below == side_below]
    everyone = upper + lower + corners
    out[everyone] = disp[everyone]
    return out


def _profile(x: np.ndarray, left: float, right: float) -> np.ndarray:
    """1 at the middle of the mouth, 0 at the corners."""
    u = (x - (left + right) / 2) / max((right - left) / 2, 1e-6)
    return np.clip(1 - u * u, 0.0, 1.0)


def build_rig(anchor: AnchorPack) -> FaceRig:
    pts = anchor.landmarks
    p2 = pts[:, :2].astype(np.float64)
    fw, fh = anchor.face_width_px, anchor.face_height_px
    n = len(pts)
    lips = list(dict.fromkeys(lm.INNER_UPPER_LIP + lm.INNER_LOWER_LIP + lm.OUTER_UPPER_LIP + lm.OUTER_LOWER_LIP))
    corners = {lm.INNER_UPPER_LIP[0], lm.INNER_UPPER_LIP[-1], lm.MOUTH_LEFT, lm.MOUTH_RIGHT}
    left_x, right_x = p2[lm.MOUTH_LEFT, 0], p2[lm.MOUTH_RIGHT, 0]
    mouth_c = p2[list(lm.INNER_UPPER_LIP + lm.INNER_LOWER_LIP)].mean(0)
    lip_sigma, lip_reach = 0.07 * fw, 0.09 * fw
    seam_px = lip_seam_px(anchor.size_px)

    def lip_basis(disp_of: dict[int, np.ndarray]) -> np.ndarray:
        d = np.zeros((n, 2), np.float64)
        for i in lips:
            d[i] = disp_of.get(i, np.zeros(2))
        return _spread_sided(p2, _fill_rings(d), lip_sigma, lip_reach)

    # Rest closure: inner lips meet; the outer contours follow most of the way.
    close: dict[int, np.ndarray] = {}
    for ui, li, uo, lo in zip(lm.INNER_UPPER_LIP, lm.INNER_LOWER_LIP, lm.OUTER_UPPER_LIP, lm.OUTER_LOWER_LIP):
        if ui in corners:
            continue
        gap = max(0.0, p2[li, 1] - p2[ui, 1] - seam_px)  # closed, the lips keep the pack's parting (see anchor)
        close[ui] = np.array([0.0, 0.55 * gap])
        close[li] = np.array([0.0, -0.45 * gap])
        close[uo] = np.array([0.0, 0.45 * gap])
        close[lo] = np.array([0.0, -0.35 * gap])
    b_close = lip_basis(close)

    # Jaw: rotation about the ear axis, seen from the front as a drop of the lower face that grows with depth.
    drop = 0.085 * fh
    z = pts[:, 2].astype(np.float64)
    z_pivot = z[[lm.CHEEK_LEFT, lm.CHEEK_RIGHT]].mean()
    depth = np.clip((z_pivot - z) / max(z_pivot - z[lm.CHIN], 1e-6), 0.4, 1.25)
    line_y = np.interp(p2[:, 0], [left_x, right_x], [p2[lm.MOUTH_LEFT, 1], p2[lm.MOUTH_RIGHT, 1]])
    chin_y = p2[lm.CHIN, 1]
    v = (p2[:, 1] - line_y) / max(chin_y - np.mean(line_y), 1e-6)
    lateral = 1 - _smoothstep(0.5, 1.0, np.abs(p2[:, 0] - mouth_c[0]) / (fw / 2))
    w_jaw = _smoothstep(0.0, 0.35, v) * lateral
    for ring in LOWER_RINGS:  # the whole lower lip drops with the jaw, tapering to the corners' share
        u = np.abs(p2[list(ring), 0] - mouth_c[0]) / max((right_x - left_x) / 2, 1e-6)
        w_jaw[list(ring)] = 0.45 + 0.55 * _smoothstep(0.0, 0.5, 1 - u)
    for ring in UPPER_RINGS:
        w_jaw[list(ring)] = 0.0
    for col in CORNER_COLUMNS:
        w_jaw[list(col)] = 0.45
    amount = w_jaw * depth
    # Skin below the lower lip drops at least as far as the lip above it (else the lip slides over it and folds),
    # fading out sideways past the corners.
    chain = list(lm.OUTER_LOWER_LIP)
    order = np.argsort(p2[chain, 0])
    cx, cy, ca = p2[chain, 0][order], p2[chain, 1][order], amount[chain][order]
    past = np.maximum(left_x - p2[:, 0], p2[:, 0] - right_x).clip(min=0)
    under = np.interp(p2[:, 0], cx, ca) * (1 - _smoothstep(0.0, 0.12 * fw, past))
    lips_all = [i for r in UPPER_RINGS + LOWER_RINGS + CORNER_COLUMNS for i in r]
    skin_below = p2[:, 1] > np.interp(p2[:, 0], cx, cy)
    skin_below[lips_all] = False
    amount = np.where(skin_below, np.maximum(amount, under), amount)
    b_jaw = np.zeros((n, 2))
    b_jaw[:, 1] = drop * amount

    # Lip part: upper lip up, lower lip down, most in the middle.
    part: dict[int, np.ndarray] = {}
    for chain, dy in ((lm.INNER_UPPER_LIP, -0.020), (lm.OUTER_UPPER_LIP, -0.016),
                      (lm.INNER_LOWER_LIP, 0.028), (lm.OUTER_LOWER_LIP, 0.022)):
        for i in chain:
            if i not in corners:
                part[i] = np.array([0.0, dy * fh * _profile(p2[i, 0], left_x, right_x)])
    b_part = lip_basis(part)

    # Round: corners in, a small central opening, lips pout.
    rnd: dict[int, np.ndarray] = {}
    for i in lips:
        prof = _profile(p2[i, 0], left_x, right_x)
        dx = -(p2[i, 0] - mouth_c[0]) * 0.26
        dy = 0.0
        if i in lm.INNER_UPPER_LIP:
            dy = -0.010 * fh * prof
        elif i in lm.INNER_LOWER_LIP:
            dy = 0.016 * fh * prof
        elif i in lm.OUTER_UPPER_LIP:
            dy = -0.012 * fh * prof
        elif i in lm.OUTER_LOWER_LIP:
            dy = 0.014 * fh * prof
        rnd[i] = np.array([dx, dy])
    b_round = lip_basis(rnd)

    # Spread: corners out and up.
    spr: dict[int, np.ndarray] = {}
    for i in lips:
        u = (p2[i, 0] - mouth_c[0]) / max((right_x - left_x) / 2, 1e-6)
        spr[i] = np.array([(p2[i, 0] - mouth_c[0]) * 0.10, -0.014 * fh * u * u])
    b_spread = lip_basis(spr)

    # Smile lift (on top of the spread, with the mouth closed): the corners further up and out, the lip lines curving
    # up towards them; both lips move alike at each column, so the closed lips stay together. The cheeks beside and
    # above the corners rise a little with them (skin only: the eyes and brows stay).
    half_w = max((right_x - left_x) / 2, 1e-6)
    sml: dict[int, np.ndarray] = {}
    for i in lips:
        u = (p2[i, 0] - mouth_c[0]) / half_w
        sml[i] = np.array([(p2[i, 0] - mouth_c[0]) * SMILE_CORNER_OUT, -SMILE_CORNER_LIFT * fh * abs(u) ** 1.5])
    b_smile = lip_basis(sml)
    cheek_pts = np.array([p2[lm.MOUTH_LEFT] + [-0.05 * fw, -0.07 * fh], p2[lm.MOUTH_RIGHT] + [0.05 * fw, -0.07 * fh]])
    d2 = ((p2[:, None, :] - cheek_pts[None]) ** 2).sum(-1).min(1)
    cheek = np.exp(-d2 / (2 * (0.09 * fw) ** 2)) * SMILE_CHEEK_LIFT * fh
    skin = np.ones(n, bool)
    skin[lips] = False
    skin[[i for r in UPPER_RINGS + LOWER_RINGS + CORNER_COLUMNS for i in r]] = False
    skin[list(lm.LEFT_EYE_UPPER + lm.LEFT_EYE_LOWER + lm.RIGHT_EYE_UPPER + lm.RIGHT_EYE_LOWER + lm.LEFT_IRIS
              + lm.RIGHT_IRIS + lm.LEFT_BROW + lm.RIGHT_BROW)] = False
    skin &= ~_seam_sides(p2)  # above the lips' line
    b_smile[skin, 1] = np.minimum(b_smile[skin, 1], -cheek[skin])

    # Press: lips thin towards the closed line.
    prs: dict[int, np.ndarray] = {}
    for ui, li, uo, lo in zip(lm.INNER_UPPER_LIP, lm.INNER_LOWER_LIP, lm.OUTER_UPPER_LIP, lm.OUTER_LOWER_LIP):
        if ui in corners:
            continue
        meet = p2[ui, 1] + b_close[ui, 1]
        prs[uo] = np.array([0.0, 0.22 * (meet - (p2[uo, 1] + b_close[uo, 1]))])
        prs[lo] = np.array([0.0, 0.22 * (meet - (p2[lo, 1] + b_close[lo, 1]))])
    b_press = lip_basis(prs)

    # Blinks: the upper lid comes down onto the lower lid; the eye content is squeezed under it.
    def blink_basis(upper: tuple[int, ...], lower: tuple[int, ...], iris: tuple[int, ...]) -> np.ndarray:
        disp: dict[int, np.ndarray] = {}
        ux, uy = p2[list(upper), 0], p2[list(upper), 1]
        lx, ly = p2[list(lower), 0], p2[list(lower), 1]
        order_u, order_l = np.argsort(ux), np.argsort(lx)

        def close_y(x: float) -> float:
            yu = np.interp(x, ux[order_u], uy[order_u])
            yl = np.interp(x, lx[order_l], ly[order_l])
            return yu + 0.78 * (yl - yu)

        for i in upper[1:-1] + lower[1:-1] + iris:
            target = close_y(p2[i, 0])
            disp[i] = np.array([0.0, 0.96 * (target - p2[i, 1])])
        idx = list(disp)
        eye_w = float(np.ptp(ux))
        return _spread(p2, idx, np.array([disp[i] for i in idx]), 0.18 * eye_w, 0.14 * eye_w,
                       exclude=set(lm.LEFT_BROW + lm.RIGHT_BROW))

    b_blink_l = blink_basis(lm.LEFT_EYE_UPPER, lm.LEFT_EYE_LOWER, lm.LEFT_IRIS)
    b_blink_r = blink_basis(lm.RIGHT_EYE_UPPER, lm.RIGHT_EYE_LOWER, lm.RIGHT_IRIS)

    brows = list(lm.LEFT_BROW + lm.RIGHT_BROW)
    b_brow = _spread(p2, brows, np.tile([0.0, -0.035 * fh], (len(brows), 1)), 0.06 * fw, 0.08 * fw,
                     exclude=set(lm.LEFT_EYE_UPPER + lm.LEFT_EYE_LOWER + lm.RIGHT_EYE_UPPER + lm.RIGHT_EYE_LOWER))

    bases = np.stack([b_close, b_jaw, b_part, b_round, b_spread, b_press, b_blink_l, b_blink_r, b_brow, b_smile])
    oval = p2[list(lm.FACE_OVAL)]
    pivot = np.array([oval[:, 0].mean(), oval[:, 1].mean(), z[list(lm.FACE_OVAL)].mean() + 0.55 * fw])
    return FaceRig(bases=bases.astype(np.float32), jaw_only=b_jaw.astype(np.float32), pivot=pivot.astype(np.float32),
                   face_width_px=fw, face_height_px=fh)
