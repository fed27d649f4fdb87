"""The built-in presenter renderer: motion coefficients -> frames, one torch code path for CPU and CUDA.

Per frame: target landmarks from the rig and the head pose; a dense backward warp of the portrait computed at low
resolution (piecewise-linear mesh over landmarks + a fixed outer frame, inverted by Newton steps) and applied at full
resolution; the person composited over the inpainted background; a synthesized mouth interior (teeth that move with
the skull and the jaw, a dark cavity, a tongue hint) composited, feathered, where the lips part.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from studio.errors import RenderError
from studio.presenter import landmarks as lm
from studio.presenter.anchor import AnchorPack, lip_seam_px, teeth_layer
from studio.contracts.coeffs import N_COEFFS, OPENING_COEFFS, Coeff
from studio.presenter.rig import LOCAL_COEFFS, SMILE_OPEN_RANGE, build_rig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenderSettings:
    size_px: int = 512  # output frames are size_px x size_px
    field_px: int = 0  # resolution of the warp field; 0 = size_px / 4 (46 dB PSNR against a full-resolution field)
    newton_steps: int = 3
    batch_frames: int = 8
    device: str = "cpu"  # resolved device ("cpu", "cuda", "cuda:0")


# Synthesized teeth, in millimetres of an adult face scaled by this face's width (cheek to cheek, landmarks 234-454).
FACE_WIDTH_MM = 140.0
# Per tooth from the midline back (incisors, lateral incisors, canine, two premolars, first molar): crown width along
# the arch, visible crown length, how far its incisal edge sits above the central incisors' (the smile arc), its
# cusp (canines come to a point) and its brightness (teeth further back are yellower and in shadow).
UPPER_TEETH_MM = ((8.5, 10.5, 0.0, 0.0, 1.0), (6.6, 9.0, 0.8, 0.0, 0.97), (7.6, 10.0, 0.5, 0.6, 0.93),
                  (7.0, 8.5, 1.1, 0.2, 0.88), (6.6, 7.5, 1.5, 0.2, 0.84), (10.0, 7.0, 2.0, 0.1, 0.78))
LOWER_TEETH_MM = ((5.4, 9.0, 0.0, 0.0, 0.95), (5.9, 9.0, 0.2, 0.0, 0.93), (7.0, 10.0, 0.4, 0.5, 0.9),
                  (7.0, 8.0, 0.9, 0.2, 0.86), (7.1, 7.5, 1.3, 0.2, 0.82), (11.0, 7.0, 1.8, 0.1, 0.76))
# The arch seen from the front: x = W tanh(s / W) for arc length s from the midline (upper, lower W in mm): the
# front teeth face the camera, the back ones turn away and narrow.
ARCH_HALF_WIDTH_MM = (27.0, 24.0)
OVERBITE_MM = 2.5  # the lower incisal edges sit this far above the upper ones at rest (hidden behind them)
UPPER_EDGE_MM = 2.5  # synthesized upper incisal edges below the closed-lip line


def _count_below(sorted_: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """torch.searchsorted(sorted_, q) (left side) for short sorted rows, as a comparison count: the same indices,
    and it exports to ONNX (searchsorted has no translation). ``sorted_`` ... x C broadcasts against ``q`` ... x 1,
    or is 1-D against any ``q``."""
    if sorted_.dim() == 1:
        return (sorted_ < q.unsqueeze(-1)).sum(-1)
    return (sorted_ < q).sum(-1)


def _gradient(f: torch.Tensor, dim: int, spacing: float) -> torch.Tensor:
    """torch.gradient(f, dim=dim, spacing=spacing) (edge order 1) by slicing: central differences inside, one-sided
    at the two edges. torch.gradient makes torch.export specialize the batch dimension."""
    n = f.shape[dim]
    first = (f.narrow(dim, 1, 1) - f.narrow(dim, 0, 1)) / spacing
    mid = (f.narrow(dim, 2, n - 2) - f.narrow(dim, 0, n - 2)) / (2 * spacing)
    last = (f.narrow(dim, n - 1, 1) - f.narrow(dim, n - 2, 1)) / spacing
    return torch.cat([first, mid, last], dim)


# columns of the local weights (LOCAL_COEFFS order): the lips' opening, and the spread the smile lift follows
_OPENING_W = tuple(LOCAL_COEFFS.index(c) for c in OPENING_COEFFS)
_SPREAD_W = LOCAL_COEFFS.index(Coeff.LIP_SPREAD)


def smile_weight(w: torch.Tensor) -> torch.Tensor:
    """B weights of the rig's smile lift from B x len(LOCAL_COEFFS) clamped local weights: the spread while the
    mouth is closed, fading out (smoothstep) as the jaw, the lips' parting and rounding open it (over
    SMILE_OPEN_RANGE), so that the spread of speech keeps its own shape."""
    jaw, part, round_ = _OPENING_W
    closed = (1 - (w[:, jaw] + w[:, part] + w[:, round_]) / SMILE_OPEN_RANGE).clamp(0, 1)
    return w[:, _SPREAD_W].clamp(0, 1) * closed * closed * (3 - 2 * closed)


def _pix_to_norm(p: torch.Tensor, size: int) -> torch.Tensor:
    """Pixel-centre coordinates -> grid_sample's [-1, 1] (align_corners=False)."""
    return (2.0 * p + 1.0) / size - 1.0


class WarpRenderer(nn.Module):
    """Plain module: B x N_COEFFS coefficients -> B x 3 x S x S frames in 0..255 (see ``forward``)."""

    def __init__(self, anchor: AnchorPack, size_px: int, field_px: int, newton_steps: int) -> None:
        super().__init__()
        from scipy.spatial import Delaunay

        self.size = size_px
        self.field = field_px
        self.newton_steps = newton_steps
        scale = size_px / anchor.size_px
        rig = build_rig(anchor)
        self.face_w = rig.face_width_px * scale
        self.face_h = rig.face_height_px * scale

        img = _resize_float(anchor.render_image, size_px)  # 3 x S x S
        bg = _resize_float(anchor.background, size_px)
        mask = _resize_float((anchor.mask * 255).astype(np.uint8)[..., None], size_px)
        # Portrait and background in 0..255 with +0.5, so that truncation to uint8 rounds.
        self.register_buffer("image", img[None] * 255.0 + 0.5)  # 1 x 3 x S x S
        self.register_buffer("background", bg[None] * 255.0 + 0.5)  # 1 x 3 x S x S
        self.register_buffer("mask", mask[None])  # 1 x 1 x S x S, person
        lid = _resize_float(anchor.lid_image, size_px)
        eyes = torch.stack([_resize_float((m * 255).astype(np.uint8)[..., None], size_px)[0] for m in anchor.eye_masks])
        self.register_buffer("lid_src", torch.cat([lid * 255.0 + 0.5, eyes], 0)[None])  # 1 x 5 x S x S

        lms = anchor.landmarks.astype(np.float64) * scale  # x, y and z all scale with the image
        frame = anchor.frame_points.astype(np.float64) * scale
        verts = np.concatenate([lms[:, :2], frame])
        self.n_lm = len(lms)
        self.register_buffer("lm_src", torch.tensor(lms, dtype=torch.float32))  # 478 x 3
        self.register_buffer("frame_src", torch.tensor(frame, dtype=torch.float32))  # K x 2
        self.register_buffer("frame_w", torch.tensor(anchor.frame_head_weight, dtype=torch.float32))  # K
        self.register_buffer("bases", torch.tensor(rig.bases * scale, dtype=torch.float32))  # L x 478 x 2
        self.register_buffer("jaw_basis", torch.tensor(rig.jaw_only * scale, dtype=torch.float32))  # 478 x 2
        self.register_buffer("pivot", torch.tensor(rig.pivot * scale, dtype=torch.float32))  # 3

        # Barycentric coordinates of every field-grid point in the source mesh (fixed per anchor and size).
        g = field_px
        centres = (np.arange(g) + 0.5) * (size_px / g) - 0.5
        gy, gx = np.meshgrid(centres, centres, indexing="ij")
        grid = np.stack([gx.ravel(), gy.ravel()], 1)
        tri = Delaunay(verts)
        simplex = tri.find_simplex(grid)
        if (simplex < 0).any():  # numerical edge cases at the border: snap to the nearest triangle
            bad = simplex < 0
            simplex[bad] = tri.find_simplex(np.clip(grid[bad], 0.5, size_px - 1.5))
            simplex[simplex < 0] = 0
        trans = tri.transform[simplex]
        b01 = np.einsum("nij,nj->ni", trans[:, :2], grid - trans[:, 2])
        bary = np.concatenate([b01, 1 - b01.sum(1, keepdims=True)], 1)
        self.register_buffer("tri_idx", torch.tensor(tri.simplices[simplex], dtype=torch.long))  # G*G x 3
        self.register_buffer("tri_w", torch.tensor(bary, dtype=torch.float32))  # G*G x 3
        self.register_buffer("grid_px", torch.tensor(grid, dtype=torch.float32).view(g, g, 2))  # G x G x 2

        # Mouth region of interest (fixed box, so that frames batch), generous for jaw drop and head motion.
        mouth = lms[list(lm.OUTER_UPPER_LIP + lm.OUTER_LOWER_LIP), :2]
        mw = mouth[:, 0].max() - mouth[:, 0].min()
        x0 = int(max(0, math.floor(mouth[:, 0].min() - 0.3 * mw)))
        x1 = int(min(size_px, math.ceil(mouth[:, 0].max() + 0.3 * mw)))
        y0 = int(max(0, math.floor(mouth[:, 1].min() - 0.35 * mw)))
        y1 = int(min(size_px, math.ceil(mouth[:, 1].max() + 0.14 * self.face_h + 0.35 * mw)))
        self.roi = (x0, x1, y0, y1)
        # Eye region of interest: both eyes with room for the head to move.
        eye_pts = lms[list(lm.LEFT_EYE_UPPER + lm.LEFT_EYE_LOWER + lm.RIGHT_EYE_UPPER + lm.RIGHT_EYE_LOWER), :2]
        ew = 0.25 * (eye_pts[:, 0].max() - eye_pts[:, 0].min())
        self.eye_roi = (int(max(0, eye_pts[:, 0].min() - ew)), int(min(size_px, eye_pts[:, 0].max() + ew)),
                        int(max(0, eye_pts[:, 1].min() - ew)), int(min(size_px, eye_pts[:, 1].max() + ew)))
        self.mouth_width = float(mw)
        self._init_mouth(anchor, lms, scale)
        # True: no host synchronisation and fixed shapes in forward (every frame goes through the blink and mouth
        # paths, where a zero weight leaves it unchanged), so that a CUDA graph can capture it. Same pixels either way.
        self.static_shapes = False
        self._index_cache: dict[tuple, torch.Tensor] = {}

    def _idx(self, items: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """A device index tensor for a fixed index list, made once (no host-to-device copy inside a graph)."""
        key = (items, str(device))
        t = self._index_cache.get(key)
        if t is None:
            t = self._index_cache[key] = torch.tensor(items, dtype=torch.long, device=device)
        return t

    def _init_mouth(self, anchor: AnchorPack, lms: np.ndarray, scale: float) -> None:
        """Buffers of the mouth interior: the face's colours, the synthesized teeth rows and the photo's own teeth."""
        mat = anchor.mouth
        for name in ("teeth_rgb", "cavity_rgb", "tongue_rgb", "gum_rgb"):
            self.register_buffer(name, torch.tensor(getattr(mat, name), dtype=torch.float32).view(1, 3, 1, 1))
        self.px_per_mm = float(anchor.face_width_px * scale / FACE_WIDTH_MM)
        self.seam_px = float(lip_seam_px(anchor.size_px) * scale)  # the closed lips' parting kept by the pack
        corners = lms[[lm.INNER_UPPER_LIP[0], lm.INNER_UPPER_LIP[-1]], :2]
        self.mouth_cx = float(corners[:, 0].mean())  # the teeth's midline, in the photo
        for name, rows in (("upper_teeth", UPPER_TEETH_MM), ("lower_teeth", LOWER_TEETH_MM)):
            t = torch.tensor(rows, dtype=torch.float32)  # 6 x (width, length, edge rise, cusp, brightness)
            self.register_buffer(name, t)
            self.register_buffer(name + "_ends", torch.cumsum(t[:, 0], 0).contiguous())  # arc (mm) where each ends
        # Skull-fixed points near the mouth (under the nose): their pose gives the upper teeth's motion.
        self._skull_pts = (2, 164, 167, 393, 98, 327)
        # The photo's own teeth, sampled in anchor pixels: 1 x 5 x h x w (RGB 0..1, upper, lower).
        layer = teeth_layer(anchor)
        self.photo_upper = self.photo_lower = False
        if layer is not None:
            tex = np.concatenate([layer.rgb.astype(np.float32) / 255.0, layer.upper[..., None], layer.lower[..., None]],
                                 -1)
            self.register_buffer("teeth_tex", torch.tensor(tex).permute(2, 0, 1)[None].contiguous())
            self.tex_box = layer.box
            self.anchor_scale = scale
            self.photo_upper = bool(layer.upper.max() > 0.5)
            self.photo_lower = bool(layer.lower.max() > 0.5)

    def _sample_teeth(self, xs: torch.Tensor, ys: torch.Tensor, off_x: torch.Tensor,
                      off_y: torch.Tensor) -> torch.Tensor:
        """B x 5 x H x W: the photo's teeth layer moved by (off_x, off_y) render pixels (B x 1 x 1 or B x 1 x W)."""
        bx0, by0, bx1, by1 = self.tex_box
        s = self.anchor_scale
        b = off_x.shape[0]
        gx = ((xs.view(1, 1, -1) - off_x) / s - bx0 + 0.5) * (2.0 / (bx1 - bx0)) - 1.0  # B x 1 x W
        gy = ((ys - off_y) / s - by0 + 0.5) * (2.0 / (by1 - by0)) - 1.0  # B x H x W (or B x H x 1)
        h, w = ys.shape[1], xs.shape[0]
        grid = torch.stack([gx.expand(b, h, w), gy.expand(b, h, w)], -1)
        return F.grid_sample(self.teeth_tex.expand(b, -1, -1, -1), grid, mode="bilinear", padding_mode="zeros",
                             align_corners=False)

    def _tooth_row(self, x_mm: torch.Tensor, upper: bool) -> tuple[torch.Tensor, ...]:
        """Per column (B x 1 x W, mm from the teeth's midline): the tooth under it seen on the arch. Returns its
        brightness (convex crown, darker back along the arch, a faint line between teeth), the rise of its incisal
        edge (mm, rounded corners, canine cusps) and its visible crown length (mm, gum line scalloped)."""
        table = self.upper_teeth if upper else self.lower_teeth
        ends = self.upper_teeth_ends if upper else self.lower_teeth_ends
        half = ARCH_HALF_WIDTH_MM[0 if upper else 1]
        a = (x_mm.abs() / half).clamp(max=0.995)
        arc = half * torch.atanh(a)  # mm along the arch from the midline
        k = _count_below(ends, arc).clamp(max=len(ends) - 1)
        row = table[k]  # B x 1 x W x 5
        width, length, rise, cusp, bright = row.unbind(-1)
        start = ends[k] - width
        v = ((arc - start) / width).clamp(0, 1)  # 0..1 across the tooth
        bulge = torch.sin(math.pi * v).clamp(min=0)
        foreshort = 1 - a * a  # dx / ds: a tooth at the side is seen edge-on
        gap_px = torch.minimum(v, 1 - v) * width * foreshort * self.px_per_mm
        line = torch.exp(-((gap_px / max(0.55, 0.35 * self.px_per_mm)) ** 2))
        # Where a tooth is only a few pixels wide, a dark line between teeth would read as a comb: fainter lines.
        # The lower row, smaller and in the upper lip's shadow, shows its separations barely at all (else a comb).
        line_depth = (0.22 if upper else 0.03) * min(1.0, max(0.3, self.px_per_mm / 2.5))
        back = (arc / 46.0).clamp(0, 1) ** 1.5
        roundness = 0.2 if upper else 0.06  # how much a crown darkens towards its sides
        shade = bright * (1 - roundness + roundness * bulge.sqrt()) * (1 - 0.55 * back) * (1 - line_depth * line)
        if not upper:
            # The lower row is seen past the lower lip and under the upper teeth: one smooth incisal line rising
            # along the arch and a smooth gum line, so that it never reads as a row of blocks.
            return shade, 2.0 * (arc / 45.0).clamp(0, 1.5) ** 1.3, torch.full_like(arc, 8.5)
        edge_rise = rise + 0.5 * (1 - bulge ** 0.3) - cusp * (1 - (2 * v - 1).abs()) ** 1.5
        crown = length * (0.86 + 0.14 * bulge)
        return shade, edge_rise, crown

    # -- geometry -------------------------------------------------------------------------------------------------

    def _rotation(self, c: torch.Tensor) -> torch.Tensor:
        """B x 3 x 3 head rotation from yaw, pitch, roll in degrees."""
        yaw = torch.deg2rad(c[:, Coeff.HEAD_YAW_DEG])
        pitch = torch.deg2rad(c[:, Coeff.HEAD_PITCH_DEG])
        roll = torch.deg2rad(c[:, Coeff.HEAD_ROLL_DEG])
        one, zero = torch.ones_like(yaw), torch.zeros_like(yaw)
        cy, sy, cp, sp, cr, sr = yaw.cos(), yaw.sin(), pitch.cos(), pitch.sin(), roll.cos(), roll.sin()
        r_yaw = torch.stack([cy, zero, -sy, zero, one, zero, sy, zero, cy], 1).view(-1, 3, 3)
        r_pitch = torch.stack([one, zero, zero, zero, cp, -sp, zero, sp, cp], 1).view(-1, 3, 3)
        r_roll = torch.stack([cr, -sr, zero, sr, cr, zero, zero, zero, one], 1).view(-1, 3, 3)
        return r_roll @ r_pitch @ r_yaw

    def _mouth_weights(self, c: torch.Tensor, mouth_scale: float = 1.0, jaw_only: bool = False) -> torch.Tensor:
        """B x L weights of the local bases (close, LOCAL_COEFFS, the smile lift); pressing the lips cancels the
        opening. ``jaw_only``: the jaw's opening alone; ``mouth_scale``: the mouth's bases scaled."""
        if jaw_only:
            w = torch.zeros((c.shape[0], len(LOCAL_COEFFS) + 2), dtype=c.dtype, device=c.device)
            w[:, 0] = 1
            w[:, 1] = c[:, Coeff.JAW_OPEN].clamp(min=0) * (1 - c[:, Coeff.LIP_PRESS].clamp(0, 1))
            return w
        press = c[:, Coeff.LIP_PRESS].clamp(0, 1)
        w = c[:, self._idx(tuple(LOCAL_COEFFS), c.device)].clone()
        opening = 1 - press
        w[:, 0] = w[:, 0].clamp(min=0) * opening  # jaw
        w[:, 1] = w[:, 1].clamp(min=0) * opening  # part
        w[:, 2] = w[:, 2].clamp(0, 1) * (1 - 0.5 * press)  # round
        ones = torch.ones_like(w[:, :1])
        w = torch.cat([ones, w, smile_weight(w).unsqueeze(1)], 1)
        if mouth_scale != 1.0:
            w[:, 1:6] = w[:, 1:6] * mouth_scale
            w[:, -1] = w[:, -1] * mouth_scale
        return w

    def landmarks(self, c: torch.Tensor, mouth_scale: float = 1.0, jaw_only: bool = False) -> torch.Tensor:
        """B x 478 x 2 target landmarks (pixels) for coefficients ``c`` (B x N_COEFFS)."""
        w = self._mouth_weights(c, mouth_scale, jaw_only)
        local = torch.einsum("bl,lnd->bnd", w, self.bases)
        p = self.lm_src.unsqueeze(0).repeat(c.shape[0], 1, 1)
        p[:, :, :2] = p[:, :, :2] + local
        return self._pose(p, c)

    def _pose(self, p3: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        rot = self._rotation(c)
        shift = torch.stack([c[:, Coeff.SHIFT_X], c[:, Coeff.SHIFT_Y]], 1) * self.face_w
        q = torch.einsum("bij,bnj->bni", rot, p3 - self.pivot) + self.pivot
        return q[:, :, :2] + shift[:, None, :]

    def _frame_targets(self, c: torch.Tensor) -> torch.Tensor:
        """B x K x 2: outer frame vertices follow the head rigidly, scaled by their weight."""
        b = c.shape[0]
        f3 = torch.cat([self.frame_src, self.pivot[2].expand(len(self.frame_src), 1)], 1)
        moved = self._pose(f3.unsqueeze(0).expand(b, -1, -1), c)
        return self.frame_src + (moved - self.frame_src) * self.frame_w[None, :, None]

    # -- warp ---------------------------------------------------------------------------------------------------

    def backward_map(self, targets: torch.Tensor, with_mask: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """For B x V x 2 vertex targets: B x S x S x 2 normalized source coordinates of every output pixel, and the
        B x 1 x S x S person mask carried along (sampled at field resolution, upsampled with the map; None without
        ``with_mask``: a caller that cuts the person out by its own matte does not use it)."""
        b, g = targets.shape[0], self.field
        src = torch.cat([self.lm_src[:, :2], self.frame_src], 0)
        disp = targets - src  # B x V x 2
        gathered = disp[:, self.tri_idx]  # B x G*G x 3 x 2
        field = (gathered * self.tri_w[None, :, :, None]).sum(2).view(b, g, g, 2).permute(0, 3, 1, 2)  # B x 2 x G x G
        step = self.size / g
        dy, dx = _gradient(field, 2, step), _gradient(field, 3, step)
        table = torch.cat([field, dx, dy], 1)  # B x 6 x G x G: D, dD/dx, dD/dy
        x = self.grid_px.unsqueeze(0).expand(b, -1, -1, -1)  # B x G x G x 2 target positions
        p = x - field.permute(0, 2, 3, 1)
        for _ in range(self.newton_steps):
            s = F.grid_sample(table, _pix_to_norm(p, self.size), mode="bilinear", padding_mode="border",
                              align_corners=False)  # B x 6 x G x G
            r = p + s[:, 0:2].permute(0, 2, 3, 1) - x
            j00, j10 = 1 + s[:, 2], s[:, 3]  # d(Dx)/dx, d(Dy)/dx
            j01, j11 = s[:, 4], 1 + s[:, 5]  # d(Dx)/dy, d(Dy)/dy
            det = j00 * j11 - j01 * j10
            det = torch.where(det.abs() < 0.05, torch.full_like(det, 0.05), det)
            rx, ry = r[..., 0], r[..., 1]
            ux = (j11 * rx - j01 * ry) / det
            uy = (-j10 * rx + j00 * ry) / det
            p = p - torch.stack([ux, uy], -1).clamp(-4 * step, 4 * step)
        # Normalize at field resolution: bilinear upsampling commutes with this affine map.
        norm = _pix_to_norm(p, self.size)  # B x G x G x 2
        # Contiguous 2- and 1-channel inputs take the fast upsampling path (measured: a permuted input or a
        # 3-channel stack is 4x slower on the CPU).
        size = (self.size, self.size)
        grid = F.interpolate(norm.permute(0, 3, 1, 2).contiguous(), size=size, mode="bilinear", align_corners=False)
        if not with_mask:
            return grid.permute(0, 2, 3, 1), None
        mask = F.grid_sample(self.mask.expand(b, -1, -1, -1), norm, mode="bilinear", padding_mode="border",
                             align_corners=False)  # B x 1 x G x G
        mask = F.interpolate(mask, size=size, mode="bilinear", align_corners=False)
        return grid.permute(0, 2, 3, 1), mask

    # -- mouth interior -----------------------------------------------------------------------------------------

    def _chain_y(self, pts: torch.Tensor, chain: tuple[int, ...], xs: torch.Tensor) -> torch.Tensor:
        """B x W: y of a lip chain (left-to-right) at columns xs, linear between landmarks."""
        idx = self._idx(tuple(chain), pts.device)
        px = pts[:, idx, 0]  # B x C
        # Running maximum along the chain as a masked max (torch.cummax has no ONNX translation): B x C, ascending.
        upto = torch.ones(len(chain), len(chain), dtype=torch.bool, device=px.device).tril()  # [j, k]: k <= j
        cx = torch.where(upto, px.unsqueeze(1), torch.finfo(px.dtype).min).amax(-1)
        cy = pts[:, idx, 1]
        q = xs.unsqueeze(0).expand(pts.shape[0], -1)
        i = _count_below(cx.unsqueeze(1), q.unsqueeze(2)).clamp(1, len(chain) - 1)  # B x W
        x0, x1 = cx.gather(1, i - 1), cx.gather(1, i)
        y0, y1 = cy.gather(1, i - 1), cy.gather(1, i)
        t = ((q - x0) / (x1 - x0).clamp(min=1e-4)).clamp(0, 1)
        return y0 + t * (y1 - y0)

    def mouth_interior(self, frames: torch.Tensor, full: torch.Tensor, rest: torch.Tensor, jaw: torch.Tensor,
                       c: torch.Tensor) -> torch.Tensor:
        """Composite the mouth inside the target inner-lip polygon (in place on the ROI), back to front: a cavity
        that darkens with depth, the tongue when wide open, the lower teeth (with the jaw) and the upper teeth (with
        the skull) - the photo's own where it shows them, else synthesized tooth by tooth with a gum line in this
        face's colours - then the lips' soft shadows. Every step is a fixed-shape tensor op (no host sync when
        ``static_shapes``)."""
        x0, x1, y0, y1 = self.roi
        dev, dt = frames.device, frames.dtype
        mm = self.px_per_mm
        xs = torch.arange(x0, x1, device=dev, dtype=dt)
        ys = torch.arange(y0, y1, device=dev, dtype=dt).view(1, -1, 1)  # 1 x H x 1
        feather = max(0.8, self.size / 512)
        y_up = self._smooth_cols(self._chain_y(full, lm.INNER_UPPER_LIP, xs)).unsqueeze(1)  # B x 1 x W
        y_lo = self._smooth_cols(self._chain_y(full, lm.INNER_LOWER_LIP, xs)).unsqueeze(1)
        left = full[:, lm.INNER_UPPER_LIP[0], 0].view(-1, 1, 1)
        right = full[:, lm.INNER_UPPER_LIP[-1], 0].view(-1, 1, 1)
        xg = xs.view(1, 1, -1)
        # The corners close softly: the opening fades in over about two millimetres from each corner.
        taper = max(feather, 2.0 * mm)
        inside_x = ((xg - left) / taper).clamp(0, 1) * ((right - xg) / taper).clamp(0, 1)
        inside_x = inside_x * inside_x * (3 - 2 * inside_x)
        gap_px = (y_lo - y_up).clamp(min=0)
        opened = ((gap_px - self.seam_px - 0.4) / 1.2).clamp(0, 1)  # no interior until the lips are apart
        alpha = ((ys - y_up) / feather + 0.5).clamp(0, 1) * ((y_lo - ys) / feather + 0.5).clamp(0, 1) * inside_x * opened
        # Where the lips meet, a soft dark line (the shadow between them), fading as they part.
        meet = (y_up + y_lo) / 2
        line = torch.exp(-(((ys - meet) / (0.9 * feather)) ** 2)) * (1 - opened) * inside_x
        roi = frames[:, :, y0:y1, x0:x1]
        roi.mul_(1 - 0.38 * line.unsqueeze(1))
        if not self.static_shapes and float(alpha.max()) <= 0:
            return frames

        # Motion of the two rows: the upper teeth ride the skull (the pose of points under the nose), the lower ones
        # the jaw (how far the jaw alone moved the lower inner lip, per column).
        skull = self._idx(self._skull_pts, dev)
        src = self.lm_src[skull]
        moved = self._pose(src.unsqueeze(0).expand(c.shape[0], -1, -1), c) - src[:, :2]
        off_x, off_y = moved[:, :, 0].mean(1).view(-1, 1, 1), moved[:, :, 1].mean(1).view(-1, 1, 1)
        rest_line = self._chain_y(rest, lm.INNER_UPPER_LIP, xs).unsqueeze(1)
        jaw_drop = (self._chain_y(jaw, lm.INNER_LOWER_LIP, xs)
                    - self._chain_y(rest, lm.INNER_LOWER_LIP, xs)).clamp(min=0).unsqueeze(1)  # B x 1 x W
        x_mm = (xg - (self.mouth_cx + off_x)) / mm  # B x 1 x W, from the teeth's midline
        mid = (left + right) / 2
        u = ((xg - mid) / ((right - left) / 2).clamp(min=1.0)).clamp(-1, 1)  # -1..1 across the opening
        soft = max(0.6, self.size / 900)

        # Upper row: incisal edges a little below the closed-lip line, gums above the crowns.
        shade_u, rise_u, crown_u = self._tooth_row(x_mm, upper=True)
        edge_u = rest_line + (UPPER_EDGE_MM - rise_u) * mm
        gum_u = edge_u - crown_u * mm
        a_up = ((edge_u - ys) / soft + 0.5).clamp(0, 1)
        is_gum_u = ((gum_u - ys) / soft + 0.5).clamp(0, 1)
        depth_u = ((edge_u - ys) / (1.6 * mm)).clamp(0, 1)  # the incisal third is thinner, a little translucent
        teeth_u = self.teeth_rgb * (shade_u * (0.86 + 0.14 * depth_u)).unsqueeze(1)
        up_rgb = torch.lerp(teeth_u, self.gum_rgb * (0.75 + 0.25 * shade_u).unsqueeze(1), is_gum_u.unsqueeze(1))
        # Lower row: behind the upper edges at rest (overbite), dropping with the jaw; gums below the crowns.
        shade_l, rise_l, crown_l = self._tooth_row(x_mm, upper=False)
        edge_l = rest_line + (UPPER_EDGE_MM - OVERBITE_MM + rise_l) * mm + jaw_drop
        gum_l = edge_l + crown_l * mm
        a_lo = ((ys - edge_l) / soft + 0.5).clamp(0, 1)
        is_gum_l = ((ys - gum_l) / soft + 0.5).clamp(0, 1)
        # Lit at the incisal edge, darker down towards the gum, all of it in the shade of the upper lip and the
        # teeth above: the face's light, a step down.
        edge_lit = torch.exp(-(ys - edge_l).clamp(min=0) / (1.5 * mm))
        teeth_l = self.teeth_rgb * (shade_l * (0.6 + 0.22 * edge_lit)).unsqueeze(1)
        lo_rgb = torch.lerp(teeth_l, self.gum_rgb * (0.7 + 0.25 * shade_l).unsqueeze(1), is_gum_l.unsqueeze(1))
        if self.photo_upper:
            tex = self._sample_teeth(xs, ys, off_x, off_y)
            up_rgb, a_up = tex[:, :3], tex[:, 3]
        if self.photo_lower:
            tex = self._sample_teeth(xs, ys, off_x, off_y + jaw_drop)
            lo_rgb, a_lo = tex[:, :3], tex[:, 4]

        # Cavity: the mouth's own red in shadow, darkest deep in the middle of the opening and towards the corners,
        # lit a little more the wider it opens.
        open_mm = gap_px / mm
        wide = ((open_mm - 4.0) / 10.0).clamp(0, 1)  # B x 1 x W
        t = ((ys - y_up) / gap_px.clamp(min=1.0)).clamp(0, 1)
        rim = torch.exp(-(ys - y_up).clamp(min=0) / (1.8 * mm)) + torch.exp(-(y_lo - ys).clamp(min=0) / (1.8 * mm))
        depth = (0.5 + 0.4 * rim.clamp(max=1) + 0.2 * (2 * t - 1) ** 2) * (1 - 0.45 * u.abs() ** 2.5)
        cavity = self.cavity_rgb * (depth * (0.8 + 0.3 * wide)).unsqueeze(1)
        # Tongue: a hump rising behind the lower teeth when the mouth is wide open, lit on top, a groove down the
        # middle.
        profile = (1 - (x_mm / 20.0) ** 2).clamp(min=0).sqrt()  # B x 1 x W: a rounded hump, 40 mm wide
        lower_line = rest_line + (UPPER_EDGE_MM - OVERBITE_MM + 3.0) * mm + jaw_drop  # smooth: no tooth steps
        tongue_top = lower_line - 0.5 * gap_px * wide * profile
        is_tongue = ((ys - tongue_top) / (3 * soft) + 0.5).clamp(0, 1) * wide * profile.sqrt()
        top_light = torch.exp(-(ys - tongue_top).clamp(min=0) / (3.0 * mm))
        groove = 1 - 0.18 * torch.exp(-((x_mm / 1.5) ** 2))
        tongue = self.tongue_rgb * ((0.55 + 0.4 * top_light) * groove * (1 - 0.5 * u.abs() ** 2)).unsqueeze(1)

        interior = torch.lerp(cavity, tongue, is_tongue.unsqueeze(1))
        interior = torch.lerp(interior, lo_rgb, a_lo.unsqueeze(1))
        interior = torch.lerp(interior, up_rgb, a_up.unsqueeze(1))
        # Soft shadows: the upper lip over what is just below it, the lower lip less, the cheeks at the corners.
        shadow = (1 - 0.30 * torch.exp(-(ys - y_up).clamp(min=0) / (1.1 * mm))) \
            * (1 - 0.15 * torch.exp(-(y_lo - ys).clamp(min=0) / (0.8 * mm))) \
            * (1 - 0.6 * ((u.abs() - 0.55) / 0.45).clamp(0, 1) ** 1.5)
        interior = interior * shadow.unsqueeze(1) * 255.0 + 0.5
        frames[:, :, y0:y1, x0:x1] = torch.lerp(roi, interior, alpha.unsqueeze(1))
        return frames

    def _smooth_cols(self, y: torch.Tensor) -> torch.Tensor:
        """B x W lip line, smoothed over about two millimetres so that the polygon between landmarks reads as a curve."""
        k = self._smooth_kernel(y.device, y.dtype)
        r = (k.shape[-1] - 1) // 2
        return F.conv1d(F.pad(y.unsqueeze(1), (r, r), mode="replicate"), k)[:, 0]

    def _smooth_kernel(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        key = ("smooth", str(device), str(dtype))
        k = self._index_cache.get(key)
        if k is None:
            sigma = max(0.8, 1.8 * self.px_per_mm)
            r = int(math.ceil(2.5 * sigma))
            x = torch.arange(-r, r + 1, dtype=torch.float32)
            k = torch.exp(-0.5 * (x / sigma) ** 2)
            k = self._index_cache[key] = (k / k.sum()).view(1, 1, -1).to(device=device, dtype=dtype)
        return k

    # -- blinks ---------------------------------------------------------------------------------------------------

    def eyelids(self, frames: torch.Tensor, grid: torch.Tensor, full: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """Near full closure, the eye opening becomes lid skin (warped like the face) with the lash line on the lower
        lid; partial blinks are the rig's geometry alone."""
        closing = torch.stack([c[:, Coeff.BLINK_L], c[:, Coeff.BLINK_R]], 1)
        cover = ((closing - 0.7) / 0.25).clamp(0, 1)
        cover = cover * cover * (3 - 2 * cover)  # smoothstep: B x 2
        if self.static_shapes:
            rows, n_rows = slice(None), cover.shape[0]
        else:
            rows = torch.nonzero(cover.max(1).values > 0).flatten()
            n_rows = rows.numel()
            if n_rows == 0:
                return frames
        x0, x1, y0, y1 = self.eye_roi
        sub = F.grid_sample(self.lid_src.expand(n_rows, -1, -1, -1), grid[rows, y0:y1, x0:x1],
                            mode="bilinear", padding_mode="border", align_corners=False)  # R x 5 x h x w
        a = (sub[:, 3] * cover[rows, 0, None, None] + sub[:, 4] * cover[rows, 1, None, None]).clamp(0, 1)
        # The lashes of the closed lid: a soft dark line where the upper lid margin came to rest.
        xs = torch.arange(x0, x1, device=frames.device, dtype=frames.dtype)
        ys = torch.arange(y0, y1, device=frames.device, dtype=frames.dtype).view(1, -1, 1)
        lash = torch.zeros_like(a)
        width = max(0.9, self.size / 450)
        # Chains ordered left to right in the image (the image-right eye's chains run right to left).
        for k, margin in enumerate((lm.LEFT_EYE_UPPER, lm.RIGHT_EYE_UPPER[::-1])):
            pts = full[rows]
            y_low = self._chain_y(pts, margin, xs).unsqueeze(1)  # R x 1 x w
            left = pts[:, margin[0], 0].view(-1, 1, 1)
            right = pts[:, margin[-1], 0].view(-1, 1, 1)
            inside = ((xs.view(1, 1, -1) - left) / 2).clamp(0, 1) * ((right - xs.view(1, 1, -1)) / 2).clamp(0, 1)
            line = torch.exp(-(((ys - y_low + 0.5 * width) / width) ** 2)) * inside
            lash = torch.maximum(lash, line * cover[rows, k, None, None])
        roi = frames[rows, :, y0:y1, x0:x1]
        mixed = roi * (1 - a.unsqueeze(1)) + sub[:, :3] * a.unsqueeze(1)
        frames[rows, :, y0:y1, x0:x1] = mixed * (1 - 0.5 * lash.unsqueeze(1))
        return frames

    # -- forward --------------------------------------------------------------------------------------------------

    def forward(self, coeffs: torch.Tensor) -> torch.Tensor:
        """B x N_COEFFS -> B x 3 x S x S in 0..255 (+0.5: truncate to round), not clamped."""
        grid, mask = self.warp_field(coeffs)
        return self.compose(coeffs, grid, mask)

    def warp_field(self, coeffs: torch.Tensor, with_mask: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The geometry half of ``forward``: B x S x S x 2 sampling grid and B x 1 x S x S person mask (the part a
        frame interpolator may interpolate between keyframes instead of recomputing; None without ``with_mask``)."""
        full = self.landmarks(coeffs)
        targets = torch.cat([full, self._frame_targets(coeffs)], 1)
        return self.backward_map(targets, with_mask)

    def compose(self, coeffs: torch.Tensor, grid: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The pixel half of ``forward``: sample the portrait through ``grid``, composite, blinks, mouth interior.
        ``mask`` None: the person alone, nothing composited behind (a set goes there: ``matte.MatteWarp``)."""
        b = coeffs.shape[0]
        warped = F.grid_sample(self.image.expand(b, -1, -1, -1), grid, mode="bilinear", padding_mode="border",
                               align_corners=False)  # 3 channels: the fast sampling path
        # the person over the untouched background
        frames = warped if mask is None else torch.lerp(self.background, warped, mask)
        return self.finish(coeffs, grid, frames)

    def finish(self, coeffs: torch.Tensor, grid: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """Blinks and the mouth interior drawn into the sampled ``frames`` (B x 3 x S x S; a view is drawn into)."""
        full = self.landmarks(coeffs)
        frames = self.eyelids(frames, grid, full, coeffs)
        rest = self.landmarks(coeffs, mouth_scale=0.0)
        jaw = self.landmarks(coeffs, jaw_only=True)
        return self.mouth_interior(frames, full, rest, jaw, coeffs)


def _resize_float(image: np.ndarray, size: int) -> torch.Tensor:
    """H x W x C uint8 -> C x size x size float32 0..1 (antialiased)."""
    t = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float().div(255.0)[None]
    if t.shape[-1] != size or t.shape[-2] != size:
        t = F.interpolate(t, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return t[0]


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA when present; ``cuda`` without a GPU is a clear error."""
    from studio.errors import InputError

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("No CUDA GPU is available on this machine: use --device cpu (or auto).")
    if name not in ("cpu",) and not name.startswith("cuda"):
        raise InputError(f"Unknown device {name!r}: use auto, cpu or cuda.")
    return torch.device(name)


class Presenter:
    """Owns the renderer module, its device and dtype; the only object the pipeline talks to for pixels."""

    def __init__(self, anchor: AnchorPack, settings: RenderSettings | None = None) -> None:
        self.settings = settings or RenderSettings()
        s = self.settings
        self.device = resolve_device(s.device)
        field = s.field_px or max(64, s.size_px // 4)
        try:
            self.module = WarpRenderer(anchor, s.size_px, field, s.newton_steps).to(self.device).eval()
        except torch.cuda.OutOfMemoryError as exc:
            raise RenderError("The GPU ran out of memory preparing the presenter: try a smaller --size.") from exc
        self.anchor = anchor

    @torch.inference_mode()
    def render(self, coeffs: np.ndarray) -> np.ndarray:
        """T x N_COEFFS -> T x S x S x 3 uint8 RGB frames (rendered in batches)."""
        if coeffs.ndim != 2 or coeffs.shape[1] != N_COEFFS:
            raise RenderError(f"motion must be T x {N_COEFFS}, got {coeffs.shape}")
        out = []
        bs = self.settings.batch_frames
        for i in range(0, len(coeffs), bs):
            out.append(self.render_batch(coeffs[i:i + bs]))
        if not out:
            return np.zeros((0, self.settings.size_px, self.settings.size_px, 3), np.uint8)
        return np.concatenate(out)

    @torch.inference_mode()
    def render_batch(self, coeffs: np.ndarray) -> np.ndarray:
        c = torch.as_tensor(np.ascontiguousarray(coeffs), dtype=torch.float32, device=self.device)
        try:
            frames = self.module(c)
        except torch.cuda.OutOfMemoryError as exc:
            raise RenderError("The GPU ran out of memory while rendering: lower the batch size or --size.") from exc
        u8 = frames.clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1)
        return u8.contiguous().cpu().numpy()
