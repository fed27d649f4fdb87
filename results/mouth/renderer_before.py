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
from studio.presenter.anchor import AnchorPack
from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.presenter.rig import LOCAL_COEFFS, build_rig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenderSettings:
    size_px: int = 512  # output frames are size_px x size_px
    field_px: int = 0  # resolution of the warp field; 0 = size_px / 4 (46 dB PSNR against a full-resolution field)
    newton_steps: int = 3
    batch_frames: int = 8
    device: str = "cpu"  # resolved device ("cpu", "cuda", "cuda:0")


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
        mat = anchor.mouth
        self.register_buffer("teeth_rgb", torch.tensor(mat.teeth_rgb, dtype=torch.float32).view(1, 3, 1, 1))
        self.register_buffer("cavity_rgb", torch.tensor(mat.cavity_rgb, dtype=torch.float32).view(1, 3, 1, 1))
        self.register_buffer("tongue_rgb", torch.tensor(mat.tongue_rgb, dtype=torch.float32).view(1, 3, 1, 1))
        self.mouth_width = float(mw)
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

    def _mouth_weights(self, c: torch.Tensor) -> torch.Tensor:
        """B x L weights of the local bases; pressing the lips cancels the opening."""
        press = c[:, Coeff.LIP_PRESS].clamp(0, 1)
        w = c[:, self._idx(tuple(LOCAL_COEFFS), c.device)].clone()
        opening = 1 - press
        w[:, 0] = w[:, 0].clamp(min=0) * opening  # jaw
        w[:, 1] = w[:, 1].clamp(min=0) * opening  # part
        w[:, 2] = w[:, 2].clamp(0, 1) * (1 - 0.5 * press)  # round
        ones = torch.ones_like(w[:, :1])
        return torch.cat([ones, w], 1)

    def landmarks(self, c: torch.Tensor, mouth_scale: float = 1.0, jaw_only: bool = False) -> torch.Tensor:
        """B x 478 x 2 target landmarks (pixels) for coefficients ``c`` (B x N_COEFFS)."""
        w = self._mouth_weights(c)
        if jaw_only:
            w = w * 0
            w[:, 0] = 1
            w[:, 1] = c[:, Coeff.JAW_OPEN].clamp(min=0) * (1 - c[:, Coeff.LIP_PRESS].clamp(0, 1))
        elif mouth_scale != 1.0:
            w = w.clone()
            w[:, 1:6] = w[:, 1:6] * mouth_scale
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

    def backward_map(self, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For B x V x 2 vertex targets: B x S x S x 2 normalized source coordinates of every output pixel, and the
        B x 1 x S x S person mask carried along (sampled at field resolution, upsampled with the map)."""
        b, g = targets.shape[0], self.field
        src = torch.cat([self.lm_src[:, :2], self.frame_src], 0)
        disp = targets - src  # B x V x 2
        gathered = disp[:, self.tri_idx]  # B x G*G x 3 x 2
        field = (gathered * self.tri_w[None, :, :, None]).sum(2).view(b, g, g, 2).permute(0, 3, 1, 2)  # B x 2 x G x G
        step = self.size / g
        dy, dx = torch.gradient(field, dim=(2, 3), spacing=(step, step))
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
        mask = F.grid_sample(self.mask.expand(b, -1, -1, -1), norm, mode="bilinear", padding_mode="border",
                             align_corners=False)  # B x 1 x G x G
        # Contiguous 2- and 1-channel inputs take the fast upsampling path (measured: a permuted input or a
        # 3-channel stack is 4x slower on the CPU).
        size = (self.size, self.size)
        grid = F.interpolate(norm.permute(0, 3, 1, 2).contiguous(), size=size, mode="bilinear", align_corners=False)
        mask = F.interpolate(mask, size=size, mode="bilinear", align_corners=False)
        return grid.permute(0, 2, 3, 1), mask

    # -- mouth interior -----------------------------------------------------------------------------------------

    def _chain_y(self, pts: torch.Tensor, chain: tuple[int, ...], xs: torch.Tensor) -> torch.Tensor:
        """B x W: y of a lip chain (left-to-right) at columns xs, linear between landmarks."""
        idx = self._idx(tuple(chain), pts.device)
        cx = torch.cummax(pts[:, idx, 0], dim=1).values.contiguous()
        cy = pts[:, idx, 1]
        q = xs.unsqueeze(0).expand(pts.shape[0], -1).contiguous()
        i = torch.searchsorted(cx, q).clamp(1, len(chain) - 1)
        x0, x1 = cx.gather(1, i - 1), cx.gather(1, i)
        y0, y1 = cy.gather(1, i - 1), cy.gather(1, i)
        t = ((q - x0) / (x1 - x0).clamp(min=1e-4)).clamp(0, 1)
        return y0 + t * (y1 - y0)

    def mouth_interior(self, frames: torch.Tensor, full: torch.Tensor, rest: torch.Tensor, jaw: torch.Tensor,
                       c: torch.Tensor) -> torch.Tensor:
        """Composite teeth, cavity and tongue inside the target inner-lip polygon (in place on the ROI)."""
        x0, x1, y0, y1 = self.roi
        dev, dt = frames.device, frames.dtype
        xs = torch.arange(x0, x1, device=dev, dtype=dt)
        ys = torch.arange(y0, y1, device=dev, dtype=dt).view(1, -1, 1)  # 1 x H x 1
        feather = max(0.8, self.size / 512)
        y_up = self._chain_y(full, lm.INNER_UPPER_LIP, xs).unsqueeze(1)  # B x 1 x W
        y_lo = self._chain_y(full, lm.INNER_LOWER_LIP, xs).unsqueeze(1)
        left = full[:, lm.INNER_UPPER_LIP[0], 0].view(-1, 1, 1)
        right = full[:, lm.INNER_UPPER_LIP[-1], 0].view(-1, 1, 1)
        xg = xs.view(1, 1, -1)
        inside_x = ((xg - left) / feather).clamp(0, 1) * ((right - xg) / feather).clamp(0, 1)
        gap_px = (y_lo - y_up).clamp(min=0)
        opened = ((gap_px - 0.4) / 1.2).clamp(0, 1)  # no interior until the lips are apart
        alpha = ((ys - y_up) / feather + 0.5).clamp(0, 1) * ((y_lo - ys) / feather + 0.5).clamp(0, 1) * inside_x * opened
        # Where the lips meet, a soft dark line (the shadow between them), fading as they part.
        meet = (y_up + y_lo) / 2
        line = torch.exp(-(((ys - meet) / (0.9 * feather)) ** 2)) * (1 - opened) * inside_x
        roi = frames[:, :, y0:y1, x0:x1]
        roi.mul_(1 - 0.38 * line.unsqueeze(1))
        if not self.static_shapes and float(alpha.max()) <= 0:
            return frames
        # Teeth edges: upper incisors hang from the skull just below the closed-lip line; lower ones ride the jaw.
        rest_line = self._chain_y(rest, lm.INNER_UPPER_LIP, xs).unsqueeze(1)
        jaw_drop = (self._chain_y(jaw, lm.INNER_LOWER_LIP, xs) - self._chain_y(rest, lm.INNER_LOWER_LIP, xs)).unsqueeze(1)
        fh = self.face_h
        upper_edge = rest_line + 0.022 * fh
        lower_edge = rest_line + jaw_drop.clamp(min=0) - 0.010 * fh  # lower incisors peek over the lower lip
        lower_bottom = lower_edge + 0.07 * fh
        mid = (left + right) / 2
        half = ((right - left) / 2).clamp(min=1.0)
        u = ((xg - mid) / half).clamp(-1, 1)  # -1..1 across the mouth
        soft = max(0.7, self.size / 700)
        is_upper = ((upper_edge - ys) / soft + 0.5).clamp(0, 1)
        is_lower = ((ys - lower_edge) / soft + 0.5).clamp(0, 1) * ((lower_bottom - ys) / (3 * soft) + 0.5).clamp(0, 1)
        # Teeth shading: darker towards the corners (the buccal corridor) and faint gaps between teeth.
        # Only the front teeth show their gaps, and faintly (a grid of lines reads as a drawing, not as teeth).
        side_shade = 1 - 0.75 * u.abs() ** 2.2
        gaps = torch.zeros_like(u)
        for k, bnd in enumerate((0.0, 0.19, 0.36)):
            width = 0.016 * (1 - 0.3 * k / 2)
            for s in ((1.0,) if bnd == 0 else (1.0, -1.0)):
                gaps = gaps + torch.exp(-(((u - s * bnd) / width) ** 2))
        tooth_shade = side_shade * (1 - 0.05 * gaps.clamp(0, 1))
        edge_up = 1 - 0.15 * torch.exp(-((upper_edge - ys).clamp(min=0) / (0.01 * fh)))  # incisal edges a bit darker
        edge_lo = 1 - 0.15 * torch.exp(-((ys - lower_edge).clamp(min=0) / (0.01 * fh)))
        # Shaded teeth take the warm colour of the mouth around them, not grey.
        teeth_up = torch.lerp(self.cavity_rgb, self.teeth_rgb, (tooth_shade * edge_up).unsqueeze(1))
        teeth_lo = torch.lerp(self.cavity_rgb, self.teeth_rgb, (0.9 * tooth_shade * edge_lo).unsqueeze(1))
        # Cavity: dark, darkest in the middle of the gap; tongue hump rising from behind the lower teeth.
        gap = (lower_edge - upper_edge).clamp(min=1.0)
        depth = 1 - 0.45 * torch.exp(-(((ys - (upper_edge + lower_edge) / 2) / (0.45 * gap)) ** 2))
        cavity = self.cavity_rgb * (depth * (1 - 0.4 * u.abs())).unsqueeze(1)
        tongue_top = lower_edge - 0.35 * gap * (1 - u * u).clamp(min=0)
        is_tongue = ((ys - tongue_top) / (2 * soft) + 0.5).clamp(0, 1) * (gap > 0.05 * fh).to(dt)
        tongue = self.tongue_rgb * (0.55 + 0.3 * (1 - u.abs())).unsqueeze(1) * 0.8
        interior = cavity * (1 - is_tongue.unsqueeze(1)) + tongue * is_tongue.unsqueeze(1)
        interior = interior * (1 - is_lower.unsqueeze(1)) + teeth_lo * is_lower.unsqueeze(1)
        interior = interior * (1 - is_upper.unsqueeze(1)) + teeth_up * is_upper.unsqueeze(1)
        # The lips shade what is just inside them.
        lip_shadow = 1 - 0.22 * torch.exp(-((ys - y_up).clamp(min=0) / (0.010 * fh))) \
                       - 0.15 * torch.exp(-((y_lo - ys).clamp(min=0) / (0.01 * fh)))
        interior = interior * lip_shadow.clamp(0.3, 1).unsqueeze(1) * 255.0 + 0.5
        a = alpha.unsqueeze(1)
        frames[:, :, y0:y1, x0:x1] = roi * (1 - a) + interior * a
        return frames

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

    def warp_field(self, coeffs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The geometry half of ``forward``: B x S x S x 2 sampling grid and B x 1 x S x S person mask (the part a
        frame interpolator may interpolate between keyframes instead of recomputing)."""
        full = self.landmarks(coeffs)
        targets = torch.cat([full, self._frame_targets(coeffs)], 1)
        return self.backward_map(targets)

    def compose(self, coeffs: torch.Tensor, grid: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The pixel half of ``forward``: sample the portrait through ``grid``, composite, blinks, mouth interior."""
        b = coeffs.shape[0]
        full = self.landmarks(coeffs)
        warped = F.grid_sample(self.image.expand(b, -1, -1, -1), grid, mode="bilinear", padding_mode="border",
                               align_corners=False)  # 3 channels: the fast sampling path
        frames = torch.lerp(self.background, warped, mask)  # the person over the untouched background
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
