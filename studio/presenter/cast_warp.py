"""Several anchors as rows of one warp: the built-in renderer for a cast (up to four portraits at one size).

Each anchor keeps its own ``WarpRenderer`` (its mesh, rig, eyes, mouth material); the costly part of a frame, the
warp, is made for all of them at once: target landmarks of every row from stacked rigs, one dense backward warp field
of all the rows (a per-row gather into each anchor's triangulation, one Newton solve), and one ``grid_sample`` that
reads every portrait through its rows' fields (the portraits stacked as the batch, the frames of a chunk laid along
the height of the grid, so no portrait is copied per frame). The blinks and the mouth interior are local composites
in each anchor's own boxes, made per anchor on its rows; where an anchor's mouth is closed on every row (a listener,
whose motion is silence, or a small smile: the spread of closed lips moves them in the warp and opens nothing) its
mouth interior is skipped but for the closed lips' line.

A picture that shows one anchor a frame (cut to the speaker) needs no pixels of the others: ``ShownRows`` makes each
frame's shown row alone through a cast of one that shares this one's buffers (``CastWarp.solo``), while the motion
of every anchor goes on (the core passes every row's coefficients; with keyframes, the plan is the whole cast's).

Shapes at the interface (what ``MotionSpaceInterpolator`` and the core see): coefficients K x A x N_COEFFS; the
warp field K x (A*S) x S x 2 (the anchors' fields stacked along the height) and the mask K x A x S x S; frames
K x (A*C) x S x S (each anchor's C channels in cast order: RGB, and the warped matte as a fourth with mattes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from studio.contracts.coeffs import OPENING_COEFFS, Coeff
from studio.errors import RenderError
from studio.presenter.renderer import WarpRenderer, _gradient, _pix_to_norm


def _stack(faces, name: str) -> torch.Tensor:
    return torch.stack([getattr(f, name) for f in faces])


class CastWarp(nn.Module):
    """See the module docstring. ``mattes``: each anchor's ``Matte`` (all good) to carry as a fourth channel, or
    None for RGB over each portrait's own backdrop."""

    def __init__(self, anchors, size_px: int, field_px: int, newton_steps: int = 3, mattes=None) -> None:
        super().__init__()
        faces = [WarpRenderer(a, size_px, field_px, newton_steps) for a in anchors]
        self.faces = nn.ModuleList(faces)
        self.rows = len(faces)
        self.size, self.field, self.newton_steps = size_px, field_px, newton_steps
        self.channels = 4 if mattes is not None else 3  # per anchor
        self.out_channels = self.channels * self.rows  # of a frame: every anchor's in turn
        if mattes is not None:  # each renderer samples its matte's foreground (the backdrop taken out of the edge)
            from studio.presenter.matte import MatteWarp

            alphas = [MatteWarp(f, m).alpha for f, m in zip(faces, mattes)]
            self.register_buffer("alpha", torch.cat(alphas))  # A x 1 x S x S
        self.register_buffer("image", torch.cat([f.image for f in faces]))  # A x 3 x S x S
        self.register_buffer("background", torch.cat([f.background for f in faces]))
        self.register_buffer("mask", torch.cat([f.mask for f in faces]))  # A x 1 x S x S
        for name in ("lm_src", "bases", "pivot", "tri_idx", "tri_w"):
            self.register_buffer(name, _stack(faces, name))
        # outer frames of different lengths: padded with unused vertices (no triangle names them) that do not move
        n = max(len(f.frame_src) for f in faces)
        self.register_buffer("frame_src", torch.stack([torch.cat([f.frame_src, f.frame_src[-1:].expand(
            n - len(f.frame_src), 2)]) for f in faces]))  # A x F x 2
        self.register_buffer("frame_w", torch.stack([F.pad(f.frame_w, (0, n - len(f.frame_w))) for f in faces]))
        self.register_buffer("face_w", torch.tensor([f.face_w for f in faces], dtype=torch.float32))  # A
        self.register_buffer("grid_px", faces[0].grid_px)  # G x G x 2 (the same field grid for every anchor)
        self._skipped = 0  # anchor-calls whose mouth interior was skipped (``mouth_skipped``)
        self._solos: dict[int, CastWarp] = {}  # anchor -> that anchor alone (``solo``)

    @property
    def mouth_skipped(self) -> int:
        """Anchor-calls whose mouth interior was skipped (closed on every row), this cast's and its solos'."""
        return self._skipped + sum(s._skipped for s in self._solos.values())

    def solo(self, i: int) -> "CastWarp":
        """Anchor ``i`` alone: a cast of one that shares this cast's renderer and buffers (views of its row, no
        copies), for a picture that shows one anchor (the cut layout): its rows are made, the others' are not. Made
        on first use, on the cast's device."""
        one = self._solos.get(i)
        if one is None:
            one = CastWarp.__new__(CastWarp)
            nn.Module.__init__(one)
            one.faces = nn.ModuleList([self.faces[i]])
            one.rows, one.size, one.field, one.newton_steps = 1, self.size, self.field, self.newton_steps
            one.channels = one.out_channels = self.channels
            for name, buf in self.named_buffers(recurse=False):
                one.register_buffer(name, buf if name == "grid_px" else buf[i:i + 1])
            one._skipped, one._solos, one.training = 0, {}, self.training
            self._solos[i] = one
        return one

    def _apply(self, fn, *args, **kwargs):
        self._solos = {}  # views of the buffers before a move or a cast of dtype: made again on next use
        return super()._apply(fn, *args, **kwargs)

    # -- rows ------------------------------------------------------------------------------------------------------

    def _rows(self, coeffs: torch.Tensor) -> torch.Tensor:
        """K x A x N -> (A*K) x N, anchor-major (anchor a's rows are a*K .. a*K + K - 1)."""
        if coeffs.dim() != 3 or coeffs.shape[1] != self.rows:
            raise RenderError(f"cast motion must be K x {self.rows} x N, got {tuple(coeffs.shape)}")
        return coeffs.transpose(0, 1).reshape(-1, coeffs.shape[-1])

    def _per_row(self, t: torch.Tensor, k: int) -> torch.Tensor:
        """A x ... -> (A*K) x ... (each anchor's value repeated over its rows)."""
        return t.repeat_interleave(k, 0)

    def _landmarks_rows(self, c: torch.Tensor, k: int, mouth_scale: float = 1.0,
                        jaw_only: bool = False) -> torch.Tensor:
        """(A*K) x 478 x 2 target landmarks (every anchor's rig on its rows)."""
        f0 = self.faces[0]
        w = f0._mouth_weights(c, mouth_scale, jaw_only)
        a = self.rows
        local = torch.einsum("akl,alnd->aknd", w.view(a, k, -1), self.bases).reshape(a * k, -1, 2)
        p = self._per_row(self.lm_src, k).clone()
        p[:, :, :2] = p[:, :, :2] + local
        return self._pose(p, c, k)

    def _pose(self, p3: torch.Tensor, c: torch.Tensor, k: int) -> torch.Tensor:
        rot = self.faces[0]._rotation(c)
        pivot = self._per_row(self.pivot, k)[:, None, :]  # R x 1 x 3
        shift = torch.stack([c[:, Coeff.SHIFT_X], c[:, Coeff.SHIFT_Y]], 1) * self._per_row(self.face_w, k)[:, None]
        q = torch.einsum("bij,bnj->bni", rot, p3 - pivot) + pivot
        return q[:, :, :2] + shift[:, None, :]

    def _frame_targets(self, c: torch.Tensor, k: int) -> torch.Tensor:
        src = self._per_row(self.frame_src, k)  # R x F x 2
        z = self._per_row(self.pivot[:, 2:3], k)[:, None, :].expand(-1, src.shape[1], 1)
        moved = self._pose(torch.cat([src, z], 2), c, k)
        return src + (moved - src) * self._per_row(self.frame_w, k)[:, :, None]

    # -- the warp of all rows ----------------------------------------------------------------------------------

    def _backward_map(self, targets: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """R x V x 2 vertex targets -> R x S x S x 2 sampling grid and R x 1 x S x S mask (``WarpRenderer``'s
        ``backward_map`` for every anchor's rows in one pass)."""
        r, g = targets.shape[0], self.field
        src = torch.cat([self.lm_src[:, :, :2], self.frame_src], 1)  # A x V x 2
        disp = targets - self._per_row(src, k)  # R x V x 2
        idx = self._per_row(self.tri_idx, k).view(r, -1, 1).expand(-1, -1, 2)  # R x G*G*3 x 2
        gathered = disp.gather(1, idx).view(r, g * g, 3, 2)
        w = self._per_row(self.tri_w, k)
        field = (gathered * w[..., None]).sum(2).view(r, g, g, 2).permute(0, 3, 1, 2)  # R x 2 x G x G
        step = self.size / g
        table = torch.cat([field, _gradient(field, 3, step), _gradient(field, 2, step)], 1)
        x = self.grid_px.unsqueeze(0).expand(r, -1, -1, -1)
        p = x - field.permute(0, 2, 3, 1)
        for _ in range(self.newton_steps):
            s = F.grid_sample(table, _pix_to_norm(p, self.size), mode="bilinear", padding_mode="border",
                              align_corners=False)
            res = p + s[:, 0:2].permute(0, 2, 3, 1) - x
            j00, j10, j01, j11 = 1 + s[:, 2], s[:, 3], s[:, 4], 1 + s[:, 5]
            det = j00 * j11 - j01 * j10
            det = torch.where(det.abs() < 0.05, torch.full_like(det, 0.05), det)
            rx, ry = res[..., 0], res[..., 1]
            u = torch.stack([(j11 * rx - j01 * ry) / det, (-j10 * rx + j00 * ry) / det], -1)
            p = p - u.clamp(-4 * step, 4 * step)
        norm = _pix_to_norm(p, self.size)  # R x G x G x 2
        mask = self._sample(self.mask, norm, k)  # R x 1 x G x G
        size = (self.size, self.size)
        grid = F.interpolate(norm.permute(0, 3, 1, 2).contiguous(), size=size, mode="bilinear", align_corners=False)
        mask = F.interpolate(mask, size=size, mode="bilinear", align_corners=False)
        return grid.permute(0, 2, 3, 1), mask

    def _sample(self, src: torch.Tensor, grid: torch.Tensor, k: int) -> torch.Tensor:
        """Each anchor's picture (A x C x S x S) through its rows' grids (R x h x w x 2) in one call: the K frames
        of an anchor laid along the grid's height -> R x C x h x w."""
        a, (_, h, w, _) = self.rows, grid.shape
        out = F.grid_sample(src, grid.reshape(a, k * h, w, 2), mode="bilinear", padding_mode="border",
                            align_corners=False)  # A x C x K*h x w
        return out.view(a, -1, k, h, w).transpose(1, 2).reshape(a * k, -1, h, w)

    # -- the interface -----------------------------------------------------------------------------------------

    def landmarks(self, coeffs: torch.Tensor) -> torch.Tensor:
        """K x A x N -> K x (A*478) x 2 (what the keyframe planner measures its error on)."""
        k = coeffs.shape[0]
        lms = self._landmarks_rows(self._rows(coeffs), k)
        return lms.view(self.rows, k, -1, 2).transpose(0, 1).reshape(k, -1, 2)

    def warp_field(self, coeffs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K x A x N -> the K x (A*S) x S x 2 grid and the K x A x S x S mask (the matte's alpha with mattes)."""
        k, s = coeffs.shape[0], self.size
        c = self._rows(coeffs)
        full = self._landmarks_rows(c, k)
        grid, mask = self._backward_map(torch.cat([full, self._frame_targets(c, k)], 1), k)
        if self.channels == 4:
            mask = self._sample(self.alpha, grid, k)
        a = self.rows
        grid = grid.view(a, k, s, s, 2).transpose(0, 1).reshape(k, a * s, s, 2)
        mask = mask.view(a, k, s, s).transpose(0, 1).contiguous()
        return grid, mask

    def compose(self, coeffs: torch.Tensor, grid: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The pixels of every row: the portraits through the grids, composited, then each anchor's blinks and
        mouth in its own boxes -> K x (A*C) x S x S."""
        k, a, s = coeffs.shape[0], self.rows, self.size
        c = self._rows(coeffs)
        g = grid.view(k, a, s, s, 2).transpose(0, 1).reshape(a * k, s, s, 2)
        m = mask.transpose(0, 1).reshape(a * k, 1, s, s)
        warped = self._sample(self.image, g, k)
        if self.channels == 4:  # the person alone: the set goes behind
            frames = warped
        else:
            frames = torch.lerp(self._per_row(self.background, k), warped, m)
        full = self._landmarks_rows(c, k)
        closed = (c[:, [int(x) for x in OPENING_COEFFS]].abs().amax(1) == 0).view(a, k).all(1).tolist()
        rest = jaw = full
        if not all(closed):
            rest = self._landmarks_rows(c, k, mouth_scale=0.0)
            jaw = self._landmarks_rows(c, k, jaw_only=True)
        for i, face in enumerate(self.faces):
            rows = slice(i * k, (i + 1) * k)
            face.eyelids(frames[rows], g[rows], full[rows], c[rows])
            if closed[i]:
                self._skipped += 1
            face.mouth_interior(frames[rows], full[rows], rest[rows], jaw[rows], c[rows])
        if self.channels == 4:
            frames = torch.cat([frames, m * 255.0], 1)
        ch = frames.shape[1]
        return frames.view(a, k, ch, s, s).transpose(0, 1).reshape(k, a * ch, s, s)

    def forward(self, coeffs: torch.Tensor) -> torch.Tensor:
        return self.compose(coeffs, *self.warp_field(coeffs))


# -- a picture that shows one anchor at a time --------------------------------------------------------------------------

@dataclass
class CutCarry:
    """A cut span's last keyframe, for the next span: every anchor's coefficients and landmarks there (the keyframe
    plan is the whole cast's), and the warp fields made there, by anchor. A cut to an anchor whose field was not
    made (it was off screen) makes it then, from the coefficients: the same field a two-shot carries."""

    coeffs: torch.Tensor  # 1 x A x N
    landmarks: torch.Tensor  # (A*478) x 2
    fields: dict[int, tuple[torch.Tensor, torch.Tensor]]  # anchor -> (1 x S x S x 2 grid, 1 x 1 x S x S mask)

    def field(self, cast: CastWarp, a: int) -> tuple[torch.Tensor, torch.Tensor]:
        got = self.fields.get(a)
        if got is None:
            got = self.fields[a] = cast.solo(a).warp_field(self.coeffs[:, a:a + 1])
        return got


class ShownRows:
    """A cast's frames where the picture shows one anchor a frame (cut to the speaker): each frame is its shown
    anchor's row alone (``CastWarp.solo``), the same pixels as that row of the whole cast; the others' pixels are
    not made. Every anchor's motion goes on regardless (the coefficients keep coming for all rows), and with
    keyframes the plan is the whole cast's (``CastWarp.landmarks``, as a two-shot plans it), so a cut back to an
    anchor picks it up where its motion is, its carried field made from the carried coefficients
    (``CutCarry``). Frames: K x C x S x S (the shown anchor's C channels)."""

    def __init__(self, cast: CastWarp, max_error_px: float) -> None:
        self.cast = cast
        self.max_error_px = max_error_px
        self.frames_full = self.frames_interpolated = self.frames_fallback = 0
        self.rows_made = 0  # anchor rows whose pixels were made (one a frame)

    def _out(self, coeffs: torch.Tensor) -> torch.Tensor:
        c = self.cast
        return torch.empty((coeffs.shape[0], c.channels, c.size, c.size), device=coeffs.device, dtype=coeffs.dtype)

    def frames(self, coeffs: torch.Tensor, shown: np.ndarray) -> torch.Tensor:
        """K x A x N coefficients, K shown anchors -> K x C x S x S: each frame its shown anchor's."""
        anchors = np.unique(shown)
        self.rows_made += len(shown)
        if len(anchors) == 1:
            a = int(anchors[0])
            return self.cast.solo(a)(coeffs[:, a:a + 1])
        out = self._out(coeffs)
        for a in anchors.tolist():
            rows = torch.from_numpy(np.flatnonzero(shown == a)).to(coeffs.device)
            out[rows] = self.cast.solo(a)(coeffs[rows, a:a + 1])
        return out

    def span(self, coeffs: torch.Tensor, strides: np.ndarray, carry: CutCarry | None, shown: np.ndarray
             ) -> tuple[torch.Tensor, CutCarry]:
        """``MotionSpaceInterpolator.render_causal`` for the shown rows: the whole cast's keyframe plan; per shown
        anchor, the fields of the keyframes its frames need (its own keyframes, and the two around each of its
        in-betweens), its keyframes composed from their fields, its in-betweens from the fields interpolated."""
        from studio.enhance.interp import plan_causal

        cast, dev, t = self.cast, coeffs.device, coeffs.shape[0]
        lms = cast.landmarks(coeffs)  # K x (A*478) x 2
        plan = plan_causal(lms, None if carry is None else carry.landmarks, strides, self.max_error_px)
        full = plan.full
        out = self._out(coeffs)
        fields: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for a in np.unique(shown).tolist():
            one = cast.solo(a)
            rows = np.flatnonzero(shown == a)
            keys, mid = rows[full[rows]], rows[~full[rows]]
            need = sorted(set(keys.tolist()) | set(plan.prev[mid].tolist()) | set(plan.next[mid].tolist()))
            made = [k for k in need if k >= 0]
            grid, mask = one.warp_field(coeffs[torch.from_numpy(np.array(made, np.int64)).to(dev), a:a + 1])
            slot = {k: j for j, k in enumerate(made)}
            if -1 in need:  # the keyframe carried in from the span before
                slot[-1] = len(made)
                g, m = carry.field(cast, a)
                grid, mask = torch.cat([grid, g]), torch.cat([mask, m])
            if len(keys):
                at = torch.tensor([slot[int(k)] for k in keys], device=dev)
                keys_t = torch.from_numpy(keys).to(dev)
                out[keys_t] = one.compose(coeffs[keys_t, a:a + 1], grid[at], mask[at])
            if len(mid):
                i0 = torch.tensor([slot[int(k)] for k in plan.prev[mid]], device=dev)
                i1 = torch.tensor([slot[int(k)] for k in plan.next[mid]], device=dev)
                w = torch.from_numpy(plan.weight[mid]).to(dev, grid.dtype).view(-1, 1, 1, 1)
                mid_t = torch.from_numpy(mid).to(dev)
                out[mid_t] = one.compose(coeffs[mid_t, a:a + 1], torch.lerp(grid[i0], grid[i1], w),
                                         torch.lerp(mask[i0], mask[i1], w))
            if t - 1 in slot:  # the span's last frame, always a keyframe: carried on
                j = slot[t - 1]
                fields[a] = (grid[j:j + 1].clone(), mask[j:j + 1].clone())
        n_keys = int(full.sum())
        self.frames_full += n_keys
        self.frames_interpolated += t - n_keys
        self.frames_fallback += plan.fallback_frames
        self.rows_made += t
        return out, CutCarry(coeffs[-1:].clone(), lms[-1].clone(), fields)
