"""The presenter's matte: the person (hair, face, neck, shoulders) cut out of the portrait's backdrop.

Built once with the anchor pack (``build_matte``): MediaPipe's selfie segmentation (the general model, already run by
``landmarks.person_mask``) gives a coarse soft mask; the face mesh makes the face itself certainly the person; a guided
filter steered by the photo's own edges turns the uncertain band into a soft edge that follows strands of hair; detached
islands of "person" out in the backdrop are dropped. The edge is then fitted to the photo's own colours
(``_decontaminate``): where the segmentation's soft ramp reaches past the hair into plain backdrop its alpha is lowered,
and the backdrop's colour is taken out of the edge pixels (``foreground``: what the hair looks like without the wall
behind it), so that over a new set there is no halo of the old backdrop.

Where the matte is poor (a busy backdrop: a wide uncertain band, or the segmentation in pieces), ``Matte.poor`` says so
and ``Matte.note`` tells the producer; the canvas then shows the framed photo instead (``studio.graphics``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from studio.presenter import landmarks as lm

MATTE_VERSION = 4  # part of the anchor cache's key: a pack made by an older matte is made again

# the share of the person's area that may be uncertain edge (alpha between 0.1 and 0.9) before the matte is called poor;
# the two bundled portraits measured 0.11-0.12 of their area
POOR_SOFT_FRAC = 0.2
# the share of the segmentation's "person" that may lie in pieces detached from the head before the matte is poor
POOR_ISLAND_FRAC = 0.06
# the share of the person that may lie beside the head (above the chin, more than a face width from the face's centre
# line) before the matte is poor: hair stays inside that (0.002 on the bundled portraits and on the astronaut pasted
# on three scenes); a backdrop object taken for the person (a cup's rim behind the head) measured 0.049
POOR_STRAY_FRAC = 0.02
# the edge fitted to the photo's colours (``_decontaminate``): the alpha is kept as it is from EDGE_KEEP_ALPHA up and
# may be lowered fully below EDGE_FULL_ALPHA (a ramp between); only where the person's nearby colour and the
# backdrop's differ by EDGE_CONTRAST (RGB distance, 0..255 levels: not at all below the first, fully from the second);
# a pixel within EDGE_FIT levels of the line between the two colours is placed on that line (fully within the first,
# not at all beyond the second); a share of the person below EDGE_NOISE counts as none (from twice it, in full).
# Backdrop pixels 1-10 px outside the bundled portraits' mattes, with the backdrop's colour spread from beyond them,
# lay a median 2 (astronaut) and 7 (Grace Hopper: sky and flag) levels off that line, 90 % within 4 and 43, and 90 %
# within 0.03 and 0.18 of the backdrop's end of it
EDGE_KEEP_ALPHA = 0.8
EDGE_FULL_ALPHA = 0.5
EDGE_CONTRAST = (20.0, 50.0)
EDGE_FIT = (20.0, 45.0)
EDGE_NOISE = 0.1


@dataclass(frozen=True)
class Matte:
    """The person's alpha and colours at the pack's size, and how trustworthy the cut is."""

    alpha: np.ndarray  # S x S float32 0..1, 1 = person (the segmentation's edge fitted to the photo's colours)
    foreground: np.ndarray  # S x S x 3 uint8: the render image with the backdrop taken out of the edge pixels
    soft_frac: float  # uncertain edge pixels (0.1 < alpha < 0.9) per person pixel
    island_frac: float  # segmentation "person" detached from the head (dropped) per person pixel
    poor: bool  # True: show the framed photo rather than a cut-out (a busy backdrop)
    note: str = ""  # what the producer is told when ``poor``
    stray_frac: float = 0.0  # the person beside the head (see POOR_STRAY_FRAC) per person pixel


def _guided(guide: np.ndarray, src: np.ndarray, radius: int, eps: float) -> np.ndarray:
    """He et al.'s guided filter with a colour guide (box filters; OpenCV's contrib version where present)."""
    import cv2

    try:
        return cv2.ximgproc.guidedFilter(guide, src, radius, eps)
    except AttributeError:  # OpenCV without contrib: the grey-guide filter, written out
        g = cv2.cvtColor(guide, cv2.COLOR_RGB2GRAY) if guide.ndim == 3 else guide
        k = (2 * radius + 1, 2 * radius + 1)
        mean = lambda x: cv2.boxFilter(x, -1, k)  # noqa: E731
        mg, ms = mean(g), mean(src)
        a = (mean(g * src) - mg * ms) / (mean(g * g) - mg * mg + eps)
        b = ms - a * mg
        return mean(a) * g + mean(b)


def _face_region(shape: tuple[int, int], pts: np.ndarray) -> np.ndarray:
    """The face oval (a little grown toward the forehead), filled: certainly the person."""
    from skimage.draw import polygon as draw_polygon

    oval = pts[list(lm.FACE_OVAL), :2].astype(np.float64)
    c = oval.mean(axis=0)
    oval = c + (oval - c) * 0.97
    out = np.zeros(shape, np.float32)
    rr, cc = draw_polygon(oval[:, 1], oval[:, 0], shape)
    out[rr, cc] = 1.0
    return out


def _keep_head_piece(alpha: np.ndarray, face: np.ndarray) -> tuple[np.ndarray, float]:
    """Zero the pieces of ``alpha > 0.5`` that do not touch the face; returns the cleaned alpha and the dropped
    share of the person's area."""
    import cv2

    solid = (alpha > 0.5).astype(np.uint8)
    n, labels = cv2.connectedComponents(solid, connectivity=8)
    if n <= 2:
        return alpha, 0.0
    keep_ids = set(np.unique(labels[(face > 0) & (solid > 0)])) - {0}
    if not keep_ids:  # the segmentation missed the face: keep the largest piece
        sizes = np.bincount(labels.ravel())[1:]
        keep_ids = {int(np.argmax(sizes)) + 1}
    keep = np.isin(labels, list(keep_ids)).astype(np.uint8)
    # grow the kept piece a little so that its own soft edge stays; everything further out goes
    grow = max(3, alpha.shape[0] // 64)
    near = cv2.dilate(keep, np.ones((2 * grow + 1, 2 * grow + 1), np.uint8)).astype(np.float32)
    dropped = float(((solid > 0) & (keep == 0)).sum()) / max(1.0, float(solid.sum()))
    return alpha * near, dropped


def _spread_colour(rgb: np.ndarray, weight: np.ndarray, levels: int = 7) -> np.ndarray:
    """Colours of the weighted pixels spread outward into the rest (a push-pull pyramid of weighted means)."""
    import cv2

    num, den = [rgb * weight[..., None]], [weight]
    for _ in range(levels):
        num.append(cv2.pyrDown(num[-1]))
        den.append(cv2.pyrDown(den[-1]))
    filled = num[-1] / np.maximum(den[-1], 1e-6)[..., None]
    for k in range(levels - 1, -1, -1):
        up = cv2.pyrUp(filled, dstsize=(num[k].shape[1], num[k].shape[0]))
        own = num[k] / np.maximum(den[k], 1e-6)[..., None]
        w = np.clip(den[k] * 4.0, 0.0, 1.0)[..., None]
        filled = own * w + up * (1 - w)
    return filled


def _decontaminate(image: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The soft edge made to agree with the photo's own colours: returns (alpha, foreground), S x S float32 and
    S x S x 3 uint8.

    Every pixel of the edge is taken as a mix of the person's nearby colour F (the certain person's colours spread
    outward) and the backdrop's B (the certain backdrop's colours spread inward): image = a F + (1 - a) B.
    - The alpha. The segmentation's ramp is wider than the hair: in its outer part (alpha below EDGE_KEEP_ALPHA) a
      pixel whose colour is the backdrop's is backdrop. Its alpha is lowered (never raised) to the share of F its
      colour shows: its place on the line from B to F where it lies near that line, else how far its colour is from F
      (a pixel that is neither: a busy backdrop, a dark outline in the photo); only where F and B differ enough to
      tell (EDGE_CONTRAST).
    - The colour (blur-fusion foreground estimation, Forte and Pitie 2021, with F and B from the push-pull spread):
      foreground = F + a (image - a F - (1 - a) B), the photo's own detail kept in proportion to alpha and to how well
      the mix explains the pixel; at alpha 1 the photo itself, untouched."""
    import cv2

    img = image.astype(np.float32)
    a = alpha.astype(np.float32)
    sure_fg = np.clip((a - 0.9) / 0.08, 0.0, 1.0).astype(np.float32)
    sure_bg = np.clip((0.1 - a) / 0.08, 0.0, 1.0).astype(np.float32)
    if sure_fg.sum() < 1.0 or sure_bg.sum() < 1.0:  # nothing certain on one side: no mix to solve
        return a, image.copy()
    fg = _spread_colour(img, sure_fg)
    bg = _spread_colour(img, sure_bg)
    d = fg - bg
    d2 = np.maximum((d * d).sum(-1), 1e-6)
    dist = np.sqrt(d2)
    t = ((img - bg) * d).sum(-1) / d2  # the pixel's place on the line from B (0) to F (1)
    off_line = np.linalg.norm(img - bg - t[..., None] * d, axis=-1)
    lo, hi = EDGE_FIT
    fit = cv2.GaussianBlur(np.clip((hi - off_line) / (hi - lo), 0.0, 1.0).astype(np.float32), (0, 0),
                           max(1.0, a.shape[0] / 360))
    like_f = np.clip(1.0 - np.linalg.norm(img - fg, axis=-1) / dist, 0.0, 1.0)
    share = fit * np.clip(t, 0.0, 1.0) + (1.0 - fit) * like_f
    # the photo's grain moves a backdrop pixel a little along the line: the share is taken over a few pixels and
    # below EDGE_NOISE counts as none, so that no speckle of the person's colour is left outside the edge
    share = cv2.GaussianBlur(share.astype(np.float32), (0, 0), max(1.0, a.shape[0] / 360))
    share = share * np.clip((share - EDGE_NOISE) / EDGE_NOISE, 0.0, 1.0)  # 0 up to EDGE_NOISE, itself from twice it
    lo, hi = EDGE_CONTRAST
    contrast = np.clip((dist - lo) / (hi - lo), 0.0, 1.0)
    outer = np.clip((EDGE_KEEP_ALPHA - a) / (EDGE_KEEP_ALPHA - EDGE_FULL_ALPHA), 0.0, 1.0)
    lowered = a - contrast * outer * np.maximum(a - share, 0.0)
    lowered = cv2.GaussianBlur(lowered.astype(np.float32), (0, 0), max(0.5, a.shape[0] / 1000))
    a_out = np.where(a >= EDGE_KEEP_ALPHA, a, np.minimum(lowered, a)).astype(np.float32)
    A = a_out[..., None]
    trust = np.maximum(contrast * fit, np.clip((a_out - 0.9) / 0.09, 0.0, 1.0))[..., None]
    out = fg + trust * A * (img - A * fg - (1.0 - A) * bg)
    out = np.where(A >= 0.998, img, out)
    return a_out, (out + 0.5).clip(0, 255).astype(np.uint8)


def build_matte(image: np.ndarray, render_image: np.ndarray, pts: np.ndarray, person: np.ndarray,
                plate: np.ndarray) -> Matte:
    """The matte of a framed portrait (``image``, S x S x 3 uint8) from its selfie segmentation ``person`` (S x S
    0..1), its landmarks ``pts`` and its backdrop plate (``plate``: the person inpainted away). ``render_image`` is
    what the renderer warps; the matte's ``foreground`` is it with the backdrop taken out of the edge. The plate is
    not used for that: solving the edge's mix against it overshoots to a bright rim wherever the inpainting is a few
    levels off (the backdrop's colour is spread from the certain backdrop instead). ``soft_frac``, ``island_frac``
    and ``stray_frac`` describe the segmentation's cut, before the edge is fitted to the photo's colours."""
    import cv2

    side = image.shape[0]
    seg = np.clip(person.astype(np.float32), 0.0, 1.0)
    if seg.shape != image.shape[:2]:
        seg = cv2.resize(seg, (image.shape[1], image.shape[0]), interpolation=cv2.INTER_LINEAR)
    face = _face_region(seg.shape, pts)
    seg = np.maximum(seg, cv2.GaussianBlur(face, (0, 0), max(1.0, side / 256)))
    seg, island_frac = _keep_head_piece(seg, face)
    # the segmentation's ramp is wide (a 256-px model scaled up): steepen it about its middle, then let a guided
    # filter soften it again where the photo itself has an edge (strands of hair), and only there
    steep = np.clip((seg - 0.5) * 6.0 + 0.5, 0.0, 1.0).astype(np.float32)
    band = max(2, side // 80)
    kernel = np.ones((2 * band + 1, 2 * band + 1), np.uint8)
    sure_fg = cv2.erode((steep > 0.99).astype(np.uint8), kernel).astype(np.float32)
    sure_bg = cv2.erode((steep < 0.01).astype(np.uint8), kernel).astype(np.float32)
    guide = image.astype(np.float32) / 255.0
    refined = _guided(guide, steep, max(2, side // 100), 2e-5)
    alpha = np.clip(refined, 0.0, 1.0)
    alpha = np.where(sure_fg > 0, 1.0, np.where(sure_bg > 0, 0.0, alpha))
    # a gentle blur across the trimap's seams only (no hard cut where the band meets the certain regions)
    alpha = cv2.GaussianBlur(alpha.astype(np.float32), (0, 0), max(0.6, side / 700))
    alpha = np.maximum(alpha, face).astype(np.float32)
    area = max(1.0, float(alpha.sum()))
    soft = float(((alpha > 0.1) & (alpha < 0.9)).sum()) / area
    stray = _stray_frac(alpha, pts)
    poor = soft > POOR_SOFT_FRAC or island_frac > POOR_ISLAND_FRAC or stray > POOR_STRAY_FRAC
    note = ""
    if poor:
        why = (f"{soft:.0%} of the outline is uncertain" if soft > POOR_SOFT_FRAC
               else f"{island_frac:.0%} of the cut lies in pieces" if island_frac > POOR_ISLAND_FRAC
               else f"{stray:.0%} of the cut lies beside the head")
        note = (f"The portrait's backdrop is too busy to cut the presenter out cleanly ({why}): the framed photo is "
                "shown instead. For a cut-out, use a photo in front of a plain wall.")
    alpha, fg = _decontaminate(render_image, alpha)
    return Matte(alpha=alpha, foreground=fg, soft_frac=soft, island_frac=island_frac, poor=poor, note=note,
                 stray_frac=stray)


def _stray_frac(alpha: np.ndarray, pts: np.ndarray) -> float:
    """The matte's mass above the chin and more than a face width from the face's centre line, per its whole mass:
    backdrop taken for the person beside the head."""
    face_w = float(np.linalg.norm(pts[lm.CHEEK_LEFT, :2] - pts[lm.CHEEK_RIGHT, :2]))
    cx = float(pts[list(lm.FACE_OVAL), 0].mean())
    chin = int(max(0, min(alpha.shape[0], round(float(pts[lm.CHIN, 1])))))
    xs = np.abs(np.arange(alpha.shape[1]) - cx) > face_w
    return float(alpha[:chin, xs].sum()) / max(1.0, float(alpha.sum()))


def _torch():
    import torch

    return torch


class MatteWarp:
    """The renderer with the matte carried by its own warp: ``warp_field`` returns the renderer's sampling grid and
    the pack's matte sampled through that grid at full resolution (the same field that moves the face moves the
    matte), ``compose`` the renderer's picture of the person alone (its backdrop plate left out: the set goes
    behind) with the matte as a fourth channel (0..255). The renderer samples the matte's ``foreground``: the photo
    with the backdrop's colour taken out of the edge."""

    out_channels = 4

    def __init__(self, renderer, matte: Matte) -> None:
        torch = _torch()
        import torch.nn.functional as F

        self.r = renderer
        s = renderer.size
        dev = renderer.image.device
        a = torch.from_numpy(np.ascontiguousarray(matte.alpha, np.float32))[None, None]
        fg = torch.from_numpy(np.ascontiguousarray(matte.foreground)).permute(2, 0, 1).float()[None] / 255.0
        if a.shape[-1] != s:
            a = F.interpolate(a, size=(s, s), mode="bilinear", align_corners=False, antialias=True)
            fg = F.interpolate(fg, size=(s, s), mode="bilinear", align_corners=False, antialias=True)
        self.alpha = a.clamp(0, 1).to(dev)
        renderer.image.copy_((fg * 255.0 + 0.5).to(dev))  # this renderer draws the person for a set behind it
        # the person and the matte as one texture: a frame made in full samples both in one pass (1 x 4 x S x S)
        self.rgba = torch.cat([renderer.image, self.alpha], 1)

    @property
    def size(self) -> int:
        return self.r.size

    def landmarks(self, *args, **kwargs):
        return self.r.landmarks(*args, **kwargs)

    def warp_field(self, coeffs):
        import torch.nn.functional as F

        grid, _ = self.r.warp_field(coeffs, with_mask=False)  # the renderer's own person mask goes unused here
        alpha = F.grid_sample(self.alpha.expand(coeffs.shape[0], -1, -1, -1), grid, mode="bilinear",
                              padding_mode="border", align_corners=False)
        return grid, alpha

    def compose(self, coeffs, grid, alpha):
        torch = _torch()
        rgb = self.r.compose(coeffs, grid, None)  # the person alone: the set goes behind
        return torch.cat([rgb, alpha * 255.0], 1)

    def __call__(self, coeffs):
        """``compose(coeffs, *warp_field(coeffs))``, the person and its matte sampled together (the same values:
        one four-channel pass costs less than a three- and a one-channel pass and their concatenation)."""
        import torch.nn.functional as F

        grid, _ = self.r.warp_field(coeffs, with_mask=False)
        frames = F.grid_sample(self.rgba.expand(coeffs.shape[0], -1, -1, -1), grid, mode="bilinear",
                               padding_mode="border", align_corners=False)  # B x 4 x S x S
        self.r.finish(coeffs, grid, frames[:, :3])
        frames[:, 3:].mul_(255.0)
        return frames
