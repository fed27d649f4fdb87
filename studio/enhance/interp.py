"""Sparse keyframes + motion-space interpolation for the built-in warp engine, with an adaptive fallback.

Keyframes (every ``stride`` output frames) are generated in full: warp field (landmarks, mesh field, Newton inversion)
and pixels. In-between frames interpolate the keyframes' warp fields (grid and person mask) linearly and re-render the
pixels with their own coefficients (blinks and the mouth interior stay exact). Where the motion between two keyframes
is not close to linear - the landmarks of the true coefficients are more than ``max_error_px`` away from the linear
interpolation of the keyframes' landmarks - the gap falls back to full generation.

Causal: a span's last frame is always a keyframe and its field is carried into the next span (``Carry``), so a span
never needs the motion of frames after it; the live microphone can interpolate as well as an offline render.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyPlan:
    """Which output frames of a span are generated in full (``full``), and for the others the keyframes around them
    and the interpolation weight: frame i = lerp(field[prev[i]], field[next[i]], weight[i])."""

    full: np.ndarray  # T bool
    prev: np.ndarray  # T int (span index of the keyframe before)
    next: np.ndarray  # T int
    weight: np.ndarray  # T float32 in (0, 1)
    fallback_frames: int  # in-between frames generated in full by the adaptive rule


def plan_keys(landmarks_px: torch.Tensor, strides: np.ndarray, max_error_px: float) -> KeyPlan:
    """Plan one span of T frames whose last frame is a keyframe.

    landmarks_px: T x 478 x 2 landmarks of the true coefficients (cheap: no pixels). strides: T int, the stride wanted
    at each frame (e.g. larger in silence). Keyframes: frame 0, then every stride frames, and the last frame.
    """
    t = landmarks_px.shape[0]
    full = np.zeros(t, bool)
    i = 0
    keys = [0]
    while i < t - 1:
        i = min(t - 1, i + max(1, int(strides[i])))
        keys.append(i)
    full[keys] = True
    prev = np.arange(t)
    nxt = np.arange(t)
    weight = np.zeros(t, np.float32)
    fallback = 0
    lm = landmarks_px
    for k0, k1 in zip(keys[:-1], keys[1:]):
        if k1 - k0 < 2:
            continue
        idx = np.arange(k0 + 1, k1)
        w = torch.tensor((idx - k0) / (k1 - k0), dtype=lm.dtype, device=lm.device).view(-1, 1, 1)
        lerp = lm[k0:k0 + 1] + (lm[k1:k1 + 1] - lm[k0:k0 + 1]) * w
        err = float((lerp - lm[k0 + 1:k1]).norm(dim=-1).max())
        if err > max_error_px:
            full[idx] = True
            fallback += len(idx)
            continue
        prev[idx], nxt[idx], weight[idx] = k0, k1, (idx - k0) / (k1 - k0)
    return KeyPlan(full, prev, nxt, weight, fallback)


def key_positions(strides: np.ndarray, have_carry: bool) -> np.ndarray:
    """T bool: keyframes of a span counted back from its last frame (always a key) by each frame's stride; frame 0
    is a key too when nothing is carried in from the span before."""
    t = len(strides)
    key = np.zeros(t, bool)
    p = t - 1
    while p >= 0:
        key[p] = True
        p -= max(1, int(strides[p]))
    if not have_carry and t:
        key[0] = True
    return key


def plan_causal(landmarks_px: torch.Tensor, carry_landmarks: torch.Tensor | None, strides: np.ndarray,
                max_error_px: float) -> KeyPlan:
    """Plan a span of T frames whose last frame is a keyframe; index -1 stands for the carried keyframe before it.

    landmarks_px: T x 478 x 2 landmarks of the true coefficients; carry_landmarks: 478 x 2 of the carried keyframe
    (None at the start of a program item). ``prev`` / ``next`` hold span indices (-1 = the carried keyframe)."""
    t = landmarks_px.shape[0]
    full = key_positions(strides, carry_landmarks is not None)
    keys = list(np.flatnonzero(full))
    anchors = ([-1] if carry_landmarks is not None else []) + keys
    prev = np.arange(t)
    nxt = np.arange(t)
    weight = np.zeros(t, np.float32)
    fallback = 0
    lm = landmarks_px
    for k0, k1 in zip(anchors[:-1], anchors[1:]):
        if k1 - k0 < 2:
            continue
        idx = np.arange(k0 + 1, k1)
        a = carry_landmarks[None] if k0 < 0 else lm[k0:k0 + 1]
        w = torch.tensor((idx - k0) / (k1 - k0), dtype=lm.dtype, device=lm.device).view(-1, 1, 1)
        lerp = a + (lm[k1:k1 + 1] - a) * w
        err = float((lerp - lm[k0 + 1:k1]).norm(dim=-1).max())
        if err > max_error_px:
            full[idx] = True
            fallback += len(idx)
            continue
        prev[idx], nxt[idx], weight[idx] = k0, k1, (idx - k0) / (k1 - k0)
    return KeyPlan(full, prev, nxt, weight, fallback)


@dataclass
class Carry:
    """The last keyframe of a span, handed to the next: its warp field and its landmarks."""

    grid: torch.Tensor  # 1 x S x S x 2
    mask: torch.Tensor  # 1 x 1 x S x S
    landmarks: torch.Tensor  # 478 x 2


class MotionSpaceInterpolator:
    """Renders a span of coefficients with keyframes + interpolated warp fields (see module docstring).

    ``module`` is a ``WarpRenderer``; ``warp_field`` / ``compose`` may be given CUDA-graph versions of the same
    calls (they take and return tensors of fixed shapes).
    """

    def __init__(self, module, max_error_px: float, planner=None) -> None:
        self.module = module
        self.max_error_px = max_error_px
        self.planner = planner  # a module with ``landmarks`` on the CPU: plans without a GPU -> host sync
        self.frames_full = 0
        self.frames_interpolated = 0
        self.frames_fallback = 0

    @torch.inference_mode()
    def render_span(self, coeffs: torch.Tensor, strides: np.ndarray,
                    first_field: tuple[torch.Tensor, torch.Tensor] | None = None,
                    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Render frames 0..T-2 of a span of T coefficients (T x N_COEFFS; the last is the next span's first frame,
        a keyframe whose field is returned for reuse as ``first_field``). Returns (T-1) x 3 x S x S frames in 0..255
        (not clamped) and the last keyframe's (grid, mask)."""
        m = self.module
        plan = plan_keys(m.landmarks(coeffs), strides, self.max_error_px)
        full_idx = np.flatnonzero(plan.full)  # includes 0 and T-1
        need = full_idx[1:] if first_field is not None else full_idx
        grid, mask = self.warp_field(coeffs[need])
        if first_field is not None:
            grid = torch.cat([first_field[0], grid])
            mask = torch.cat([first_field[1], mask])
        slot = {int(f): j for j, f in enumerate(full_idx)}
        n_out = coeffs.shape[0] - 1
        keys = full_idx[full_idx < n_out]
        mid = np.flatnonzero(~plan.full)
        if not len(mid):  # every frame is a keyframe (speech under the sieve alone): no scatter into a new buffer
            out = self.compose(coeffs[:n_out], grid[:n_out], mask[:n_out])
        else:
            out = torch.empty((n_out, getattr(m, "out_channels", 3), m.size, m.size), device=coeffs.device, dtype=grid.dtype)
            out[keys] = self.compose(coeffs[keys], grid[:len(keys)], mask[:len(keys)])
            a = torch.tensor([slot[int(i)] for i in plan.prev[mid]], device=coeffs.device)
            b = torch.tensor([slot[int(i)] for i in plan.next[mid]], device=coeffs.device)
            w = torch.tensor(plan.weight[mid], device=coeffs.device, dtype=grid.dtype).view(-1, 1, 1, 1)
            out[mid] = self.compose(coeffs[mid], torch.lerp(grid[a], grid[b], w), torch.lerp(mask[a], mask[b], w))
        self.frames_full += len(keys)
        self.frames_interpolated += len(mid)
        self.frames_fallback += plan.fallback_frames
        return out, (grid[-1:].clone(), mask[-1:].clone())

    @torch.inference_mode()
    def render_causal(self, coeffs: torch.Tensor, strides: np.ndarray, carry: Carry | None
                      ) -> tuple[torch.Tensor, Carry]:
        """Render every frame of a span of T coefficients (T x N_COEFFS) from its keyframes (see ``plan_causal``);
        returns T x 3 x S x S frames in 0..255 (not clamped) and the carry for the next span."""
        m = self.module
        if self.planner is not None and coeffs.device.type != "cpu":
            lms = self.planner.landmarks(coeffs.detach().to("cpu", non_blocking=False))
        else:
            lms = m.landmarks(coeffs)
        plan = plan_causal(lms, None if carry is None else carry.landmarks, strides, self.max_error_px)
        full_idx = np.flatnonzero(plan.full)
        dev = coeffs.device
        full_t = torch.from_numpy(full_idx).to(dev, non_blocking=True)
        grid, mask = self.warp_field(coeffs[full_t])
        t = coeffs.shape[0]
        mid = np.flatnonzero(~plan.full)
        if not len(mid):
            out = self.compose(coeffs, grid, mask)
        else:
            mid_t = torch.from_numpy(mid).to(dev, non_blocking=True)
            slot = {int(f): j for j, f in enumerate(full_idx)}
            if carry is not None:  # the carried keyframe joins the fields as index -1
                slot[-1] = len(full_idx)
                grid = torch.cat([grid, carry.grid])
                mask = torch.cat([mask, carry.mask])
            out = torch.empty((t, getattr(m, "out_channels", 3), m.size, m.size), device=dev, dtype=grid.dtype)
            out[full_t] = self.compose(coeffs[full_t], grid[:len(full_idx)], mask[:len(full_idx)])
            a = torch.tensor([slot[int(i)] for i in plan.prev[mid]]).to(dev, non_blocking=True)
            b = torch.tensor([slot[int(i)] for i in plan.next[mid]]).to(dev, non_blocking=True)
            w = torch.from_numpy(plan.weight[mid]).to(dev, grid.dtype, non_blocking=True).view(-1, 1, 1, 1)
            out[mid_t] = self.compose(coeffs[mid_t], torch.lerp(grid[a], grid[b], w), torch.lerp(mask[a], mask[b], w))
        last = len(full_idx) - 1  # the span's last frame is always a keyframe
        self.frames_full += len(full_idx)
        self.frames_interpolated += len(mid)
        self.frames_fallback += plan.fallback_frames
        return out, Carry(grid[last:last + 1].clone(), mask[last:last + 1].clone(), lms[-1].clone())

    def warp_field(self, coeffs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.module.warp_field(coeffs)

    def compose(self, coeffs: torch.Tensor, grid: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.module.compose(coeffs, grid, mask)


def max_error_px(settings_error_at_512: float, size_px: int) -> float:
    """The adaptive threshold scaled to the output size."""
    return settings_error_at_512 * size_px / 512.0
