"""Settings of the enhancement stage: keyframes + interpolation, pyramidal rendering, learned upscaling."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Interpolator(enum.Enum):
    NONE = "none"  # every output frame generated
    MOTION_SPACE = "motion"  # built-in engine: interpolate the warp field between keyframes, re-render the pixels
    RIFE = "rife"  # optical flow between generated keyframes (engines that cannot re-render cheaply)


class PyramidRoute(enum.Enum):
    NATIVE = "native"  # full-resolution generation (field at size / 4)
    WARP_FIELD = "warp_field"  # built-in engine: a low-resolution warp field sampling the full-resolution portrait
    LEARNED = "learned"  # generate small, upscale with SPAN x4


@dataclass(frozen=True)
class EnhanceSettings:
    interpolator: Interpolator = Interpolator.MOTION_SPACE
    key_stride: int = 2  # one keyframe every N output frames (30 fps output -> 15 fps keyframes)
    silent_key_stride: int = 4  # stride while the silence sieve says nobody speaks
    max_interp_error_px_at_512: float = 2.0  # adaptive fallback: landmark error of interpolation, px at 512 px
    pyramid: PyramidRoute = PyramidRoute.WARP_FIELD
    field_divisor: int = 8  # warp-field route: field = size / 8 (native: size / 4); 40 dB face PSNR at 384 px
    learned_scale: int = 4  # learned route: generate at size / learned_scale
