"""The mouth of a closed-mouth portrait opens without tearing; synthesized teeth take the face's own light; the pack's
enhanced portrait is cached."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from studio.presenter import landmarks as lm
from studio.presenter.anchor import AnchorSettings, build_anchor
from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.presenter.renderer import Presenter, RenderSettings

OPENINGS = ((0.15, 0.25), (0.45, 0.35), (1.0, 0.5))  # small, mid, wide: (JAW_OPEN, LIP_PART)


def _hopper() -> np.ndarray:
    import matplotlib
    from PIL import Image

    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    return np.asarray(Image.open(path).convert("RGB"))


@pytest.fixture(scope="module")
def hopper():
    return build_anchor(_hopper(), name="hopper")


def _coeffs(openings) -> torch.Tensor:
    c = torch.zeros(len(openings), N_COEFFS)
    for i, (jaw, part) in enumerate(openings):
        c[i, Coeff.JAW_OPEN], c[i, Coeff.LIP_PART] = jaw, part
    return c


def _chain_y(pts: np.ndarray, chain: tuple[int, ...], xs: np.ndarray) -> np.ndarray:
    order = np.argsort(pts[list(chain), 0])
    return np.interp(xs, pts[list(chain), 0][order], pts[list(chain), 1][order])


@pytest.mark.parametrize("size", [512, 1080])
def test_closed_mouth_lower_lip_does_not_tear(hopper, size):
    """Across the lower lip of the opened mouth, neighbouring output pixels come from neighbouring photo pixels: a tear
    (a fold of the warp where the photo's lips touch) makes them jump across the lip, which shows as red blotches and
    streaks. Measured as the largest step of the backward map (photo pixels per output pixel) in the lower lip's band;
    the lip is stretched a little when it drops, never torn."""
    module = Presenter(hopper, RenderSettings(size_px=size)).module
    c = _coeffs(OPENINGS)
    with torch.no_grad():
        grid, _ = module.warp_field(c)
        full = module.landmarks(c).numpy()
    src = ((grid.numpy() + 1) * size - 1) / 2 * (hopper.size_px / size)  # photo pixels
    for i, (jaw, part) in enumerate(OPENINGS):
        pts = full[i]
        left, right = pts[lm.MOUTH_LEFT, 0], pts[lm.MOUTH_RIGHT, 0]
        width = right - left
        xs = np.arange(int(left + 0.15 * width), int(right - 0.15 * width))
        top = _chain_y(pts, lm.INNER_LOWER_LIP, xs) + 0.02 * width
        bottom = _chain_y(pts, lm.OUTER_LOWER_LIP, xs) + 0.08 * width
        worst = 0.0
        for x, t, b in zip(xs, top, bottom):
            band = src[i, int(np.ceil(t)):int(b) + 1, x - 1:x + 2]
            worst = max(worst, float(np.linalg.norm(np.diff(band[:, 1], axis=0), axis=-1).max()),
                        float(np.linalg.norm(np.diff(band, axis=1), axis=-1).max()))
        per_output_px = hopper.size_px / size
        assert worst < 2.5 * per_output_px, f"lower lip torn at jaw {jaw}, part {part}: a step of {worst:.2f} px"


def test_lip_mesh_never_folds(hopper):
    """No triangle of the warp mesh turns over for any mix of the mouth coefficients (a turned triangle is a fold:
    two parts of the photo land on the same pixels)."""
    from scipy.spatial import Delaunay

    module = Presenter(hopper, RenderSettings(size_px=hopper.size_px)).module
    src = torch.cat([module.lm_src[:, :2], module.frame_src]).numpy()
    tri = Delaunay(src).simplices

    def area(p: np.ndarray) -> np.ndarray:
        a, b, c = p[tri[:, 0]], p[tri[:, 1]], p[tri[:, 2]]
        return (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])

    rng = np.random.default_rng(3)
    c = torch.zeros(40, N_COEFFS)
    c[:, Coeff.JAW_OPEN:Coeff.LIP_PRESS + 1] = torch.tensor(rng.uniform(0, 1, (40, 5)), dtype=torch.float32)
    c[:6, Coeff.JAW_OPEN:Coeff.LIP_PRESS + 1] = torch.tensor([[1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [0, 1, 0, 0, 0],
                                                             [1, 1, 1, 1, 0], [0, 0, 0, 1, 0], [0, 0, 0, 1, 1]],
                                                            dtype=torch.float32)  # ... a closed smile, pressed
    with torch.no_grad():
        targets = torch.cat([module.landmarks(c), module._frame_targets(c)], 1).numpy()
    before = area(src)
    for k in range(len(c)):
        flipped = np.sign(area(targets[k])) != np.sign(before)
        assert not flipped.any(), f"{flipped.sum()} triangles fold at {c[k, :5].tolist()}: {tri[flipped][:4].tolist()}"


def test_synthesized_teeth_take_the_face_light():
    """A dark portrait (its brightest skin about 30/255) gets teeth in the same shadow: nothing inside the open mouth
    is brighter than the face's own bright skin."""
    dark = (_hopper().astype(np.float32) * 0.12).astype(np.uint8)
    anchor = build_anchor(dark, name="dark", settings=AnchorSettings(use_cache=False))
    assert not anchor.mouth.teeth_from_photo
    pres = Presenter(anchor, RenderSettings(size_px=512))
    frames = pres.render(_coeffs(((0.0, 0.0), (1.0, 0.5))).numpy())
    with torch.no_grad():
        pts = pres.module.landmarks(_coeffs(((1.0, 0.5),)))[0].numpy()
    from skimage.draw import polygon

    inner = np.concatenate([pts[list(lm.INNER_UPPER_LIP)], pts[list(lm.INNER_LOWER_LIP[::-1])]])
    rr, cc = polygon(inner[:, 1], inner[:, 0], (512, 512))
    mouth = frames[1][rr, cc].max(-1)
    oval = pts[list(lm.FACE_OVAL)]
    fr, fc = polygon(oval[:, 1], oval[:, 0], (512, 512))
    face = np.percentile(frames[0][fr, fc].max(-1), 99)
    assert mouth.max() <= 1.15 * face + 3, f"teeth at {mouth.max()} in a face whose bright skin is {face:.0f}"


def test_face_detail_is_sharper_and_cached(monkeypatch):
    """An enlargement goes through the super-resolution model once: sharper than Lanczos (variance of the Laplacian),
    written to the cache, and read back from it the next time without running the model."""
    import cv2
    from PIL import Image

    from studio.presenter import detail

    img = _hopper()
    crop = np.ascontiguousarray(img[150:246, 210:306])  # the eyes and nose, 96 px
    sharp = detail.enhance_to(crop, 192)
    soft = np.asarray(Image.fromarray(crop).resize((192, 192), Image.LANCZOS))

    def lap(x: np.ndarray) -> float:
        return float(cv2.Laplacian(cv2.cvtColor(x, cv2.COLOR_RGB2GRAY).astype(np.float64), cv2.CV_64F).var())

    assert sharp.shape == (192, 192, 3)
    assert lap(sharp) > 1.3 * lap(soft)
    cached = detail.detail_cache_path(crop, 192, detail.MODELS[2])
    assert cached.is_file()

    def no_model(*args, **kwargs):
        raise AssertionError("the model ran again")

    monkeypatch.setattr(detail, "super_resolve", no_model)
    assert np.array_equal(detail.enhance_to(crop, 192), sharp)


def test_pack_is_built_at_the_output_size(hopper):
    anchor = build_anchor(_hopper(), name="hopper", output_px=384)
    assert anchor.size_px == 384 and anchor.image.shape == (384, 384, 3)
    assert anchor.key != hopper.key
    k = 384 / hopper.size_px
    assert np.abs(anchor.landmarks[:, :2] - hopper.landmarks[:, :2] * k).max() < 0.05 * anchor.face_width_px


@pytest.mark.parametrize("size", [512, 1080])
def test_lower_teeth_are_not_a_comb(hopper, size):
    """Across the lower row, brightness and the incisal edge change smoothly: the separations between the small lower
    teeth are barely shaded and the edge does not step tooth by tooth (an even row of dark lines and blocks reads as a
    comb). Ripple = the largest departure from a 6 mm moving average."""
    module = Presenter(hopper, RenderSettings(size_px=size)).module
    step = 0.05
    x_mm = torch.arange(-20.0, 20.0, step).view(1, 1, -1)
    shade, rise, _ = (t.flatten().numpy() for t in module._tooth_row(x_mm, upper=False))
    k = int(6 / step)

    def ripple(v: np.ndarray) -> float:
        padded = np.pad(v, (k // 2, k // 2), mode="edge")
        smooth = np.convolve(padded, np.ones(k) / k, mode="same")[k // 2:-(k // 2)]
        return float(np.abs(v - smooth).max())

    assert ripple(shade) / shade.mean() < 0.12
    assert ripple(rise) < 0.25  # mm
