"""Anchor pack: everything the renderer needs from one portrait, built once and cached by image content.

A pack holds the framed head-and-shoulders image, its 478 landmarks, a triangle mesh over the landmarks plus a fixed
outer frame (eye and mouth holes filled), the person mask, an inpainted background plate and the colours of the mouth
interior (teeth, cavity, tongue) that suit this face.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from studio.errors import AnchorError
from studio.paths import cache_dir
from studio.presenter import landmarks as lm
from studio.presenter.matte import MATTE_VERSION, Matte, build_matte
from studio.presenter.portrait import read_portrait, rgb8

log = logging.getLogger(__name__)

ANCHOR_FORMAT_VERSION = 9
DEFAULT_ANCHOR_NAME = "Astronaut (default)"
DEFAULT_GUEST_NAME = "Grace Hopper (default guest)"
MIN_FACE_PX = 64  # cheek to cheek in the photo: smaller faces, upscaled to the anchor's size, look soft

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class AnchorSettings:
    """How a portrait is framed and stored."""

    face_width_frac: float = 0.36  # face width (cheek to cheek) as a fraction of the framed square
    eye_line_frac: float = 0.40  # height of the eye line from the top, as a fraction of the square
    min_side_px: int = 512  # small crops are upscaled (Lanczos) to at least this
    max_side_px: int = 1024  # large crops are downscaled to at most this
    use_cache: bool = True


@dataclass(frozen=True)
class MouthMaterial:
    """Colours (RGB 0..1) for the mouth interior, taken from this face, and where the photo's own teeth are."""

    teeth_rgb: tuple[float, float, float]
    cavity_rgb: tuple[float, float, float]
    tongue_rgb: tuple[float, float, float]
    lip_rgb: tuple[float, float, float]
    teeth_from_photo: bool  # True when the photo shows teeth and their colour was measured
    gum_rgb: tuple[float, float, float] = (0.72, 0.38, 0.38)
    # Where the photo shows teeth: the share of the inner-lip gap (per column, from the upper inner lip down) above
    # which they are upper teeth (they move with the skull) and below which lower teeth (they move with the jaw);
    # 1.0 = every visible tooth is an upper one (a smile whose lower lip hides the lower teeth).
    teeth_split_frac: float = 1.0


@dataclass(frozen=True)
class TeethLayer:
    """The photo's own teeth, cut out around the inner-lip polygon (anchor pixels), for the renderer to move."""

    box: tuple[int, int, int, int]  # x0, y0, x1, y1 in the framed image
    rgb: np.ndarray  # h x w x 3 uint8: the photo, with teeth colour inpainted outward over the non-teeth pixels
    upper: np.ndarray  # h x w float32 0..1: upper teeth (continued upward under the upper lip)
    lower: np.ndarray  # h x w float32 0..1: lower teeth (continued downward under the lower lip)


@dataclass(frozen=True)
class AnchorPack:
    name: str
    key: str  # content hash of the source image + framing settings
    image: np.ndarray  # S x S x 3 uint8 RGB, framed
    render_image: np.ndarray  # S x S x 3 uint8, the framed image with the open mouth's gap filled with lip (for warping)
    lid_image: np.ndarray  # S x S x 3 uint8, render_image with the eye openings filled with lid skin (for blinks)
    eye_masks: np.ndarray  # 2 x S x S float32 0..1, the image-left and image-right eye openings (soft, a little grown)
    landmarks: np.ndarray  # 478 x 3 float32 (x, y pixels; z pixels, smaller = nearer)
    frame_points: np.ndarray  # K x 2 float32, outer frame vertices (pixels)
    frame_head_weight: np.ndarray  # K float32, share of the head motion each frame vertex follows (0 = fixed)
    triangles: np.ndarray  # M x 3 int32 into [landmarks; frame_points]
    mask: np.ndarray  # S x S float32 0..1, person
    background: np.ndarray  # S x S x 3 uint8, the scene with the person inpainted away
    mouth: MouthMaterial
    extra: dict = field(default_factory=dict)
    matte: Matte | None = None  # the person cut out of the backdrop, for a set behind it (``studio.presenter.matte``)

    @property
    def size_px(self) -> int:
        return int(self.image.shape[0])

    @property
    def face_width_px(self) -> float:
        return float(np.linalg.norm(self.landmarks[lm.CHEEK_LEFT, :2] - self.landmarks[lm.CHEEK_RIGHT, :2]))

    @property
    def face_height_px(self) -> float:
        return float(np.linalg.norm(self.landmarks[lm.FOREHEAD_TOP, :2] - self.landmarks[lm.CHIN, :2]))


# ---------------------------------------------------------------------------------------------------------------------
# loading

def default_portrait() -> np.ndarray:
    """The built-in anchor: NASA's astronaut portrait (public domain) from the scikit-image wheel, its PNG read by
    PIL (``skimage.data`` imports ``skimage.io`` first: 0.22 s of CPU on the way to a render's first frame on the
    2-core machine, against 0.04; the same pixels)."""
    import importlib.util

    spec = importlib.util.find_spec("skimage")
    png = Path(list(spec.submodule_search_locations)[0]) / "data" / "astronaut.png" if spec else None
    if png is not None and png.is_file():
        from PIL import Image

        with Image.open(png) as im:
            return np.ascontiguousarray(np.asarray(im.convert("RGB")))
    from skimage import data  # a layout without the file in the wheel: its own loader

    return np.ascontiguousarray(data.astronaut()[:, :, :3])


def default_guest_portrait() -> np.ndarray:
    """The built-in second presenter (an interview's guest): Grace Hopper's portrait (public domain, US Navy) from
    the matplotlib wheel."""
    import matplotlib

    return load_image(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg")


def load_image(path: Path | str) -> np.ndarray:
    """Read a portrait file as H x W x 3 uint8 RGB (EXIF orientation applied; size bounded, any bit depth: see
    ``studio.presenter.portrait``)."""
    return read_portrait(path)


def _content_key(image: np.ndarray, settings: AnchorSettings, output_px: int | None = None) -> str:
    h = hashlib.sha256()
    h.update(f"v{ANCHOR_FORMAT_VERSION}|m{MATTE_VERSION}|{image.shape}|{output_px}|".encode())
    h.update(repr(sorted(asdict(settings).items())).encode())
    h.update(np.ascontiguousarray(image).tobytes())
    return h.hexdigest()[:24]


# ---------------------------------------------------------------------------------------------------------------------
# building

def _frame_crop(image: np.ndarray, pts: np.ndarray, settings: AnchorSettings) -> tuple[int, int, int]:
    """Square head-and-shoulders crop (x0, y0, side) inside the image around the detected face."""
    h, w = image.shape[:2]
    face_w = float(np.linalg.norm(pts[lm.CHEEK_LEFT, :2] - pts[lm.CHEEK_RIGHT, :2]))
    side = int(round(face_w / settings.face_width_frac))
    side = max(64, min(side, h, w))
    eyes = pts[list(lm.LEFT_EYE_UPPER + lm.RIGHT_EYE_UPPER), :2].mean(axis=0)
    face_cx = float(pts[list(lm.FACE_OVAL), 0].mean())
    x0 = int(round(face_cx - side / 2))
    y0 = int(round(eyes[1] - settings.eye_line_frac * side))
    x0 = min(max(x0, 0), w - side)
    y0 = min(max(y0, 0), h - side)
    return x0, y0, side


def _frame_vertices(pts: np.ndarray, side: int) -> tuple[np.ndarray, np.ndarray]:
    """Outer frame: rings around the face (hair and neck follow the head, with falloff) and the fixed image border."""
    oval = pts[list(lm.FACE_OVAL), :2]
    centre = oval.mean(axis=0)
    face_h = float(np.linalg.norm(pts[lm.FOREHEAD_TOP, :2] - pts[lm.CHIN, :2]))
    chin_y = float(pts[lm.CHIN, 1])
    verts, weights = [], []
    for scale, weight in ((1.28, 1.0), (1.65, 0.55), (2.2, 0.15)):
        ring = centre + (oval[::2] - centre) * scale
        below = np.clip((ring[:, 1] - chin_y) / (0.6 * face_h), 0.0, 1.0)
        ring_w = weight * (1.0 - 0.8 * below)  # the neck follows the head less the lower it is
        verts.append(ring)
        weights.append(ring_w)
    n_side = 8
    t = np.linspace(0.0, side - 1.0, n_side + 1)
    border = np.concatenate([
        np.stack([t, np.zeros_like(t)], 1), np.stack([t, np.full_like(t, side - 1.0)], 1),
        np.stack([np.zeros_like(t[1:-1]), t[1:-1]], 1), np.stack([np.full_like(t[1:-1], side - 1.0), t[1:-1]], 1),
    ])
    verts.append(border)
    weights.append(np.zeros(len(border)))
    v = np.concatenate(verts).astype(np.float32)
    wts = np.concatenate(weights).astype(np.float32)
    inside = (v[:, 0] > 1) & (v[:, 0] < side - 2) & (v[:, 1] > 1) & (v[:, 1] < side - 2)
    keep = inside | (wts == 0)
    # Ring points that fall outside the image are dropped; the border stays.
    return v[keep], wts[keep]


def _triangulate(points: np.ndarray) -> np.ndarray:
    from scipy.spatial import Delaunay

    tri = Delaunay(points.astype(np.float64))
    simplices = tri.simplices.astype(np.int32)
    # Drop degenerate slivers (area below a hundredth of a pixel).
    a, b, c = points[simplices[:, 0]], points[simplices[:, 1]], points[simplices[:, 2]]
    area = 0.5 * np.abs((b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0]))
    return simplices[area > 1e-2]


def lip_seam_px(side_px: int) -> float:
    """The smallest gap kept between the inner lip lines (anchor pixels), closed or not: the mesh between the lips
    keeps an area, so that opening them never folds the warp."""
    return max(1.0, side_px / 400)


def _part_lips(pts: np.ndarray, side_px: int) -> np.ndarray:
    """Landmarks with the inner lip lines at least ``lip_seam_px`` apart in every column (a closed mouth traces them on
    top of each other, sometimes crossed): moved apart about their middle, so that the mesh between them has an area
    and an inner lip line that is a seam, never a fold."""
    out = pts.copy()
    seam = lip_seam_px(side_px)
    for u, lo in zip(lm.INNER_UPPER_LIP[1:-1], lm.INNER_LOWER_LIP[1:-1]):
        if out[lo, 1] - out[u, 1] < seam:
            mid = 0.5 * (out[u, 1] + out[lo, 1])
            out[u, 1], out[lo, 1] = mid - 0.5 * seam, mid + 0.5 * seam
    return out


def _polygon_mask(shape: tuple[int, int], polygon: np.ndarray) -> np.ndarray:
    from skimage.draw import polygon as draw_polygon

    mask = np.zeros(shape, bool)
    rr, cc = draw_polygon(polygon[:, 1], polygon[:, 0], shape)
    mask[rr, cc] = True
    return mask


def _inner_polygon(pts: np.ndarray) -> np.ndarray:
    return np.concatenate([pts[list(lm.INNER_UPPER_LIP), :2], pts[list(lm.INNER_LOWER_LIP[::-1]), :2]])


def _teeth_alpha(img: np.ndarray) -> np.ndarray:
    """Soft teeth mask of RGB 0..1 pixels (H x W x 3 -> H x W): bright and unsaturated."""
    value = img.max(axis=-1)
    sat = (value - img.min(axis=-1)) / np.maximum(value, 1e-3)
    bright = np.clip((value - 0.40) / 0.12, 0.0, 1.0)
    pale = np.clip((0.42 - sat) / 0.12, 0.0, 1.0)
    return (bright * pale).astype(np.float32)


def _chain_y_at(pts: np.ndarray, chain: tuple[int, ...], xs: np.ndarray) -> np.ndarray:
    order = np.argsort(pts[list(chain), 0])
    return np.interp(xs, pts[list(chain), 0][order], pts[list(chain), 1][order])


def _teeth_split(img: np.ndarray, pts: np.ndarray, inner_mask: np.ndarray) -> float:
    """Share of the inner gap above which the photo's teeth are upper teeth (see ``MouthMaterial``).

    Per column of the open mouth: a dark row between two bright runs (the occlusal line or a gap) splits upper from
    lower teeth; a single run that starts at the upper lip is upper teeth, one that starts well below it lower teeth.
    The columns vote (the median of the split shares); fewer than a third with a lower run: all upper."""
    teeth = _teeth_alpha(img) * inner_mask
    ys, xs = np.nonzero(inner_mask)
    if len(xs) == 0:
        return 1.0
    fracs = []
    for x in range(int(xs.min()), int(xs.max()) + 1):
        col = np.nonzero(inner_mask[:, x])[0]
        if len(col) < 4:
            continue
        a = teeth[col, x]
        on = a > 0.5
        if on.sum() < 2:
            continue
        rows = np.nonzero(on)[0]
        first, last = rows[0], rows[-1]
        gaps = np.nonzero(~on[first:last + 1])[0]
        value = img[col, x].max(axis=-1)
        if len(gaps):  # a dark stretch between two bright runs
            fracs.append((first + gaps.mean() + 0.5) / len(col))
        elif first > 0.45 * len(col):  # one run starting well below the upper lip: lower teeth only
            fracs.append(0.0)
        else:
            seg = value[first:last + 1]
            k = int(np.argmin(seg[1:-1])) + 1 if len(seg) > 2 else 0
            if k and seg[k] < 0.72 * np.median(seg):  # an occlusal line across one bright run
                fracs.append((first + k + 0.5) / len(col))
            else:
                fracs.append(1.0)
    if not fracs:
        return 1.0
    f = np.asarray(fracs)
    if (f < 0.95).mean() < 1 / 3:
        return 1.0
    return float(np.clip(np.median(f[f < 0.95]), 0.0, 1.0))


def face_light(img: np.ndarray, pts: np.ndarray) -> float:
    """The face's own brightest light (0..1): the 98th percentile of the brightest channel over the skin of the face
    oval (eyes and mouth left out), RGB 0..1 input."""
    shape = img.shape[:2]
    skin = _polygon_mask(shape, pts[list(lm.FACE_OVAL), :2]) & ~_polygon_mask(shape, np.concatenate(
        [pts[list(lm.OUTER_UPPER_LIP), :2], pts[list(lm.OUTER_LOWER_LIP[::-1]), :2]]))
    for upper, lower in ((lm.LEFT_EYE_UPPER, lm.LEFT_EYE_LOWER), (lm.RIGHT_EYE_UPPER, lm.RIGHT_EYE_LOWER)):
        skin &= ~_polygon_mask(shape, np.concatenate([pts[list(upper), :2], pts[list(lower[::-1]), :2]]))
    values = img[skin].max(axis=-1) if skin.sum() > 20 else img.max(axis=-1).ravel()
    return float(np.percentile(values, 98))


def _mouth_material(image: np.ndarray, pts: np.ndarray) -> MouthMaterial:
    """Colours for teeth, gums, cavity, tongue and lips measured on this face, and the photo's teeth split."""
    img = image.astype(np.float32) / 255.0
    shape = image.shape[:2]
    outer = np.concatenate([pts[list(lm.OUTER_UPPER_LIP), :2], pts[list(lm.OUTER_LOWER_LIP[::-1]), :2]])
    inner_mask = _polygon_mask(shape, _inner_polygon(pts))
    lip_mask = _polygon_mask(shape, outer) & ~inner_mask
    lip_rgb = img[lip_mask].mean(axis=0) if lip_mask.sum() > 10 else np.array([0.6, 0.3, 0.3], np.float32)
    teeth_rgb = None
    split = 1.0
    if inner_mask.sum() > 20:
        px = img[inner_mask]
        teeth = px[_teeth_alpha(px) > 0.5]
        if len(teeth) >= 12:
            teeth_rgb = np.median(teeth, axis=0)
            split = _teeth_split(img, pts, inner_mask)
    from_photo = teeth_rgb is not None
    cheeks = img[int(pts[lm.CHEEK_LEFT, 1]), int(pts[lm.CHEEK_LEFT, 0]):int(pts[lm.CHEEK_RIGHT, 0])]
    skin = np.median(cheeks, axis=0) if len(cheeks) else np.array([0.75, 0.6, 0.5], np.float32)
    if teeth_rgb is None:
        # Synthesize from the face's own colours: ivory, a little warmer where the skin is warm, and lit like it: a
        # little brighter than the cheeks (enamel reflects more than skin) and never brighter than the face's own
        # brightest skin, so that a dark or backlit portrait gets teeth in the same shadow.
        skin_v = float(skin.max())
        warm = float(np.clip((skin[0] - skin[2]) / max(skin_v, 1e-3), 0.0, 0.6))
        ivory = np.array([1.0, 0.96 - 0.06 * warm, 0.88 - 0.12 * warm], np.float32)
        teeth_rgb = ivory * min(1.0, 1.1 * skin_v, face_light(img, pts))
    # Gums and tongue are mucosa: the lips' own red, a little lighter and pinker; the cavity is that red in shadow.
    gum = np.clip(lip_rgb * np.array([1.0, 0.78, 0.80]) * 1.02 + np.array([0.05, 0.02, 0.03]), 0, 1)
    cavity = np.clip(lip_rgb * np.array([0.42, 0.27, 0.27]), 0, 1)
    tongue = np.clip(lip_rgb * np.array([0.92, 0.62, 0.62]) + np.array([0.06, 0.02, 0.03]), 0, 1)
    return MouthMaterial(tuple(map(float, teeth_rgb)), tuple(map(float, cavity)), tuple(map(float, tongue)),
                         tuple(map(float, lip_rgb)), from_photo, tuple(map(float, gum)), split)


def teeth_layer(pack: AnchorPack) -> TeethLayer | None:
    """The photo's own teeth as a layer the renderer moves (upper with the skull, lower with the jaw), or None when
    the photo shows none. Non-teeth pixels of the cut-out get the teeth's colour inpainted from their neighbours, so
    that sampling across a mask edge never drags lip or cavity colour into a tooth."""
    import cv2

    if not pack.mouth.teeth_from_photo:
        return None
    pts, size = pack.landmarks, pack.size_px
    poly = _inner_polygon(pts)
    mw = float(np.ptp(poly[:, 0]))
    x0, x1 = int(max(0, np.floor(poly[:, 0].min() - 0.1 * mw))), int(min(size, np.ceil(poly[:, 0].max() + 0.1 * mw)))
    y0, y1 = int(max(0, np.floor(poly[:, 1].min() - 0.2 * mw))), int(min(size, np.ceil(poly[:, 1].max() + 0.2 * mw)))
    crop = np.ascontiguousarray(pack.image[y0:y1, x0:x1])
    # The polygon drawn at 4x and averaged down: an antialiased edge, which the renderer magnifies at large sizes.
    fine = _polygon_mask(((y1 - y0) * 4, (x1 - x0) * 4), (poly - [x0, y0]) * 4 + 1.5)
    inside = cv2.GaussianBlur(fine.reshape(y1 - y0, 4, x1 - x0, 4).mean((1, 3)).astype(np.float32), (0, 0), 0.5)
    teeth = _teeth_alpha(crop.astype(np.float32) / 255.0) * inside
    xs = np.arange(x0, x1, dtype=np.float64)
    top = _chain_y_at(pts, lm.INNER_UPPER_LIP, xs) - y0
    bottom = _chain_y_at(pts, lm.INNER_LOWER_LIP, xs) - y0
    split = top + pack.mouth.teeth_split_frac * (bottom - top)
    rows = np.arange(y1 - y0, dtype=np.float64)[:, None]
    is_up = np.clip(split[None, :] - rows + 0.5, 0.0, 1.0)
    upper, lower = teeth * is_up, teeth * (1 - is_up)
    # Teeth go on under the lips: the upper layer continues upward from its top teeth row, the lower one downward.
    up_reach = np.maximum.accumulate(upper[::-1], axis=0)[::-1]  # the most of any row at or below
    lo_reach = np.maximum.accumulate(lower, axis=0)  # the most of any row at or above
    upper = np.where(inside > 0.5, upper, up_reach)
    lower = np.where(inside > 0.5, lower, lo_reach)
    hole = (teeth < 0.5).astype(np.uint8) * 255
    rgb = cv2.inpaint(crop, hole, 3, cv2.INPAINT_TELEA) if hole.any() and (~hole.astype(bool)).any() else crop
    return TeethLayer((x0, y0, x1, y1), rgb, upper.astype(np.float32), lower.astype(np.float32))


def _fill_mouth_gap(image: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Replace what the photo shows between the inner lips (teeth, cavity) with lip texture.

    The rest pose closes the lips, so the warp squeezes this gap into the line where they meet; without the fill,
    teeth would streak along that line. When the mouth opens, the synthesized interior covers the gap again.
    """
    import cv2

    hole = _polygon_mask(image.shape[:2], _inner_polygon(pts)).astype(np.uint8) * 255
    if hole.sum() == 0:
        return image.copy()
    grow = max(1, int(round(image.shape[0] / 400)))
    hole = cv2.dilate(hole, np.ones((2 * grow + 1, 2 * grow + 1), np.uint8))
    return cv2.inpaint(np.ascontiguousarray(image), hole, 3, cv2.INPAINT_TELEA)


def _eye_layers(image: np.ndarray, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lid skin over the eye openings (inpainted from the surrounding skin) and soft masks of the two openings.

    A closed eye is this skin, warped like the rest of the face: the upper lid comes down as skin, not as a squeezed
    picture of the eyeball.
    """
    import cv2

    side = image.shape[0]
    grow = max(1, int(round(side / 220)))
    kernel = np.ones((2 * grow + 1, 2 * grow + 1), np.uint8)
    masks, holes = [], np.zeros(image.shape[:2], np.uint8)
    for upper, lower in ((lm.LEFT_EYE_UPPER, lm.LEFT_EYE_LOWER), (lm.RIGHT_EYE_UPPER, lm.RIGHT_EYE_LOWER)):
        poly = np.concatenate([pts[list(upper), :2], pts[list(lower[::-1]), :2]])
        hole = cv2.dilate(_polygon_mask(image.shape[:2], poly).astype(np.uint8) * 255, kernel)
        holes |= hole
        masks.append(cv2.GaussianBlur(hole.astype(np.float32) / 255.0, (0, 0), max(0.7, grow * 0.6)))
    lid = cv2.inpaint(np.ascontiguousarray(image), cv2.dilate(holes, kernel), 2 * grow + 3, cv2.INPAINT_TELEA)
    return lid, np.clip(np.stack(masks), 0.0, 1.0).astype(np.float32)


def _background_plate(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The scene without the person (OpenCV inpainting at reduced size), used where the head uncovers background."""
    import cv2

    side = image.shape[0]
    small = max(128, side // 4)
    img_s = cv2.resize(image, (small, small), interpolation=cv2.INTER_AREA)
    hole = cv2.resize((mask > 0.2).astype(np.uint8) * 255, (small, small), interpolation=cv2.INTER_NEAREST)
    hole = cv2.dilate(hole, np.ones((5, 5), np.uint8))
    filled = cv2.inpaint(img_s, hole, 6, cv2.INPAINT_TELEA)
    up = cv2.resize(filled, (side, side), interpolation=cv2.INTER_CUBIC)
    m = cv2.GaussianBlur((mask > 0.2).astype(np.float32), (0, 0), 3)[..., None]
    return (up * m + image * (1 - m)).astype(np.uint8)


def build_anchor(
    source: Path | str | np.ndarray | None = None,
    settings: AnchorSettings | None = None,
    name: str | None = None,
    progress: Progress | None = None,
    output_px: int | None = None,
) -> AnchorPack:
    """Build (or load from the cache) the anchor pack of a portrait; ``None`` gives the built-in default.

    ``output_px``: the presenter's size; the pack is framed at that size, the photo enhanced once where that enlarges it
    (``studio.presenter.detail``), so that the face is as sharp as the output. ``None``: the photo's own crop size,
    within ``AnchorSettings``' bounds."""
    settings = settings or AnchorSettings()
    report = progress or (lambda fraction, what: None)
    report(0.0, "reading the portrait")
    if source is None:
        image, name = default_portrait(), name or DEFAULT_ANCHOR_NAME
    elif isinstance(source, np.ndarray):
        image, name = rgb8(source), name or "portrait"
    else:
        image, name = load_image(source), name or Path(source).stem
    if output_px is not None and not 64 <= output_px <= 4096:
        raise AnchorError(f"The presenter size {output_px} px is out of range: use 64 to 4096.")
    key = _content_key(image, settings, output_px)
    cache_file = cache_dir("anchors") / f"{key}.npz"
    if settings.use_cache and cache_file.exists():
        try:
            pack = _load_pack(cache_file, name)
            if pack.matte is None:
                raise ValueError("made without the matte")
            report(1.0, "loaded from cache")
            log.info("anchor %s loaded from cache %s", name, cache_file)
            return pack
        except Exception as exc:  # a corrupt cache entry is rebuilt, never fatal
            log.warning("anchor cache %s unreadable (%s); rebuilding", cache_file, exc)
    report(0.1, "finding the face")
    found = lm.find_face(image)
    if found.landmarks is None:
        if found.box is not None:
            raise AnchorError("A face was found but its features could not be traced: use a front-facing photo where "
                              "the whole face is visible and evenly lit.")
        raise AnchorError("No face found in this portrait: use a front-facing photo where the whole face is visible.")
    if found.face_width_px < MIN_FACE_PX:
        raise AnchorError(f"The face is only {found.face_width_px:.0f} px wide in this {image.shape[1]}x"
                          f"{image.shape[0]} photo; the presenter needs at least {MIN_FACE_PX} px across the face: "
                          "use a closer or higher-resolution photo.")
    pts = found.landmarks
    x0, y0, side = _frame_crop(image, pts, settings)
    out_side = int(output_px or min(max(side, settings.min_side_px), settings.max_side_px))
    from studio.presenter.detail import enhance_to

    framed = enhance_to(np.ascontiguousarray(image[y0:y0 + side, x0:x0 + side]), out_side,
                        lambda f, what: report(0.12 + 0.16 * f, what), use_cache=settings.use_cache)
    report(0.3, "measuring the face")
    traced = lm.detect_landmarks(framed)
    if traced is None:  # an upscaled small face can be too soft to trace again: carry the first tracing over
        k = out_side / side
        traced = np.concatenate([(pts[:, :2] - np.array([x0, y0], np.float32)) * k, pts[:, 2:] * k], axis=1)
    pts = _part_lips(traced.astype(np.float32), out_side)
    report(0.5, "separating the person from the background")
    mask = lm.person_mask(framed)
    report(0.65, "building the face mesh")
    frame_pts, frame_w = _frame_vertices(pts, out_side)
    triangles = _triangulate(np.concatenate([pts[:, :2], frame_pts]))
    report(0.75, "preparing the mouth interior")
    mouth = _mouth_material(framed, pts)
    report(0.85, "filling in the background")
    background = _background_plate(framed, mask)
    render_image = _fill_mouth_gap(framed, pts)
    lid_image, eye_masks = _eye_layers(render_image, pts)
    report(0.92, "cutting the presenter out of the backdrop")
    matte = build_matte(framed, render_image, pts, mask, background)
    # the soft masks at the precision the cache keeps them: a pack built now renders the same frames as the same pack
    # loaded from the cache later (or on another machine)
    matte = replace(matte, alpha=_as_stored(matte.alpha))
    pack = AnchorPack(name=name, key=key, image=framed, render_image=render_image, lid_image=lid_image,
                      eye_masks=_as_stored(eye_masks), landmarks=pts, frame_points=frame_pts,
                      frame_head_weight=frame_w, triangles=triangles, mask=_as_stored(mask), background=background,
                      mouth=mouth, matte=matte)
    if settings.use_cache:
        _save_pack(pack, cache_file)
    report(1.0, "ready")
    return pack


# ---------------------------------------------------------------------------------------------------------------------
# cache

def _as_stored(a: np.ndarray) -> np.ndarray:
    """A soft mask as the cache stores it (float16) and loads it (float32)."""
    return a.astype(np.float16).astype(np.float32)


def _save_pack(pack: AnchorPack, path: Path) -> None:
    buf = io.BytesIO()
    np.savez_compressed(
        buf, image=pack.image, render_image=pack.render_image, lid_image=pack.lid_image,
        eye_masks=pack.eye_masks.astype(np.float16), landmarks=pack.landmarks, frame_points=pack.frame_points,
        frame_head_weight=pack.frame_head_weight, triangles=pack.triangles, mask=pack.mask.astype(np.float16),
        background=pack.background, mouth=np.array(repr(asdict(pack.mouth))), key=np.array(pack.key),
        **_matte_arrays(pack.matte),
    )
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_bytes(buf.getvalue())
        tmp.replace(path)
    except OSError as exc:  # a cache that cannot be written only costs time next run
        log.warning("cannot write the anchor cache %s: %s", path, exc)
        tmp.unlink(missing_ok=True)


def _load_pack(path: Path, name: str) -> AnchorPack:
    import ast

    with np.load(path, allow_pickle=False) as z:
        mouth = MouthMaterial(**ast.literal_eval(str(z["mouth"])))
        return AnchorPack(
            name=name, key=str(z["key"]), image=z["image"], render_image=z["render_image"],
            lid_image=z["lid_image"], eye_masks=z["eye_masks"].astype(np.float32), landmarks=z["landmarks"], frame_points=z["frame_points"],
            frame_head_weight=z["frame_head_weight"], triangles=z["triangles"], mask=z["mask"].astype(np.float32),
            background=z["background"], mouth=mouth, matte=_matte_from(z),
        )


def _matte_arrays(matte: Matte | None) -> dict:
    if matte is None:
        return {}
    facts = {"soft_frac": matte.soft_frac, "island_frac": matte.island_frac, "poor": matte.poor, "note": matte.note,
             "stray_frac": matte.stray_frac}
    return {"matte_alpha": matte.alpha.astype(np.float16), "matte_rgb": matte.foreground,
            "matte_facts": np.array(repr(facts))}


def _matte_from(z) -> Matte | None:
    import ast

    if "matte_alpha" not in z.files:
        return None
    facts = ast.literal_eval(str(z["matte_facts"]))
    return Matte(alpha=z["matte_alpha"].astype(np.float32), foreground=z["matte_rgb"], **facts)
