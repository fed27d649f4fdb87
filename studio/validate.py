"""Argument checks the command line runs before any work: each raises ``InputError`` with one line saying what to do.

The memory check compares what a render at the asked size will hold with what this machine has free, read at run
time (``/proc/meminfo`` and the cgroup limit on the CPU; ``torch.cuda.mem_get_info`` on CUDA). What a render holds
is estimated from the built-in renderer's buffers (``studio/presenter/renderer.py``), in float32 channels per pixel:
- kept per anchor: portrait 3, background 3, person mask 1, lid image + eye masks 5 = 12; building them passes
  through as many temporaries again (resize, scale), and the mouth interior's layers and the allocator's slack
  come on top: 40 channels at the peak (1024 px, 4 frames a batch measured 340 MB on one machine, 411 MB on CI's);
- per frame of a batch: warp grid 2, warped mask 1, warped portrait 3, composite 3, blend temporaries 3 = 12,
  plus the uint8 result twice (tensor and numpy copy);
- per output frame in flight between the stages: one uint8 RGB picture, plus the H.264 encoder's look-ahead.
Checked against measured peaks (tests/integration/test_validate_memory.py; the commit that added this module gives
the figures: 512 px 184 MB, 1024 px 542 MB, 2048 px 1911 MB at 8 frames a batch).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from studio.errors import InputError

SIZE_MIN_PX = 64
SIZE_MAX_PX = 2160
SEED_MAX = 2**32 - 1  # numpy's seed range
FRAME_RATES = (25.0, 30.0, 50.0, 60.0)

_F32 = 4
ANCHOR_CHANNELS_PEAK = 40  # float32 channels per presenter pixel while the renderer builds its buffers
FRAME_CHANNELS = 12  # float32 channels per presenter pixel per frame of a batch
FRAME_U8_COPIES = 2  # the uint8 result as a tensor and as a numpy array
ENCODER_LOOKAHEAD_FRAMES = 40  # libx264's look-ahead and threads hold this many YUV 4:2:0 pictures (1.5 B/px)
MEMORY_HEADROOM = 0.85  # share of the free memory a render may plan to use (the rest: the models, the TTS, Python)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a render plans to hold, and what this machine has free for it."""

    renderer_bytes: int  # the presenter's buffers and one batch of frames
    frames_bytes: int  # output pictures in flight and the encoder's look-ahead
    available_bytes: int  # measured free memory of the device that renders
    where: str  # "RAM" or "GPU memory"

    @property
    def total_bytes(self) -> int:
        return self.renderer_bytes + self.frames_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= MEMORY_HEADROOM * self.available_bytes


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def check_size(size_px: int) -> int:
    """The square presenter's size: an even number of pixels in 64..2160."""
    if isinstance(size_px, bool) or not isinstance(size_px, int):
        raise InputError(f"--size {size_px!r} is not a whole number: use an even number of pixels from "
                         f"{SIZE_MIN_PX} to {SIZE_MAX_PX}.")
    if not SIZE_MIN_PX <= size_px <= SIZE_MAX_PX or size_px % 2:
        near = min(max(size_px - size_px % 2, SIZE_MIN_PX), SIZE_MAX_PX)
        raise InputError(f"--size {size_px} is not offered: use an even number of pixels from {SIZE_MIN_PX} to "
                         f"{SIZE_MAX_PX} (e.g. {near}), or --canvas 720p / 1080p.")
    return size_px


def check_seed(seed: int) -> int:
    """The idle-motion seed: a whole number in 0..2**32 - 1."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise InputError(f"--seed {seed} is out of range: use a whole number from 0 to {SEED_MAX}.")
    return seed


def check_fps(fps: float, offered: Sequence[float] = FRAME_RATES) -> float:
    """The output frame rate: one of the offered rates (25, 30, 50, 60)."""
    listed = ", ".join(f"{r:g}" for r in offered[:-1]) + f" or {offered[-1]:g}"
    try:
        value = float(fps)
    except (TypeError, ValueError):
        raise InputError(f"--fps {fps!r} is not a number: use {listed}.") from None
    if not math.isfinite(value) or not any(abs(value - r) < 1e-9 for r in offered):
        raise InputError(f"--fps {fps:g} is not offered: use {listed}.")
    return value


def check_seconds(seconds: float, max_seconds: float = 24 * 3600, flag: str = "--seconds") -> float:
    """A duration in seconds: finite, more than 0 and at most ``max_seconds``."""
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        raise InputError(f"{flag} {seconds!r} is not a number: give seconds, e.g. {flag} 30.") from None
    if not math.isfinite(value) or not 0 < value <= max_seconds:
        raise InputError(f"{flag} {seconds:g} is out of range: use more than 0 and at most {max_seconds:g}.")
    return value


def _folder_of(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_output_path(path: Path, suffix: str = ".mp4", flag: str = "--out",
                      inputs: Sequence[Path | None] = ()) -> Path:
    """An output file: the right suffix, an existing writable folder, not a folder, not one of the inputs."""
    path = Path(path)
    if path.suffix.lower() != suffix:
        raise InputError(f"{flag} {path.name} must end in {suffix}: use {flag} NAME{suffix}.")
    if path.is_dir():
        raise InputError(f"{flag} {path} is a folder: give a file name ending in {suffix}.")
    folder = _folder_of(path)
    if not folder.is_dir():
        raise InputError(f"The folder of {flag} {path} does not exist: create {folder} or choose another path.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"Cannot write to {folder} ({flag}): choose a folder you may write to.")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{flag} {path} exists and is read-only: choose another name or make it writable.")
    for other in inputs:
        if other is not None and _same_file(path, Path(other)):
            raise InputError(f"{flag} {path} is also an input file: write the output to another name.")
    return path


def check_timings_path(timings: Path | None, out: Path, inputs: Sequence[Path | None] = ()) -> Path | None:
    """``--timings``: a .json file of its own (not ``--out``, not an input) in an existing writable folder."""
    if timings is None:
        return None
    timings = Path(timings)
    if _same_file(timings, Path(out)):
        raise InputError(f"--timings and --out both name {out}: give the timings their own .json name.")
    return check_output_path(timings, ".json", "--timings", inputs)


def available_memory_bytes(device: str = "cpu") -> tuple[int, str]:
    """Free memory (bytes) of ``device`` measured now, and its name for messages ("RAM" or "GPU memory")."""
    if device.startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free), "GPU memory"
    return _available_ram_bytes(), "RAM"


def _available_ram_bytes() -> int:
    """MemAvailable from /proc/meminfo, lowered to the cgroup's limit minus its usage where one is set."""
    free = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if free is None:  # not Linux: total physical memory as an upper bound
        try:
            free = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            free = 1 << 62
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            limit_text = Path(limit_file).read_text(encoding="ascii").strip()
            usage = int(Path(usage_file).read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            continue
        if limit_text.isdigit() and int(limit_text) < 1 << 60:
            free = min(free, max(0, int(limit_text) - usage))
        break
    return int(free)


def estimate_render_memory(presenter_px: int, output_size: tuple[int, int], batch_frames: int,
                           frames_in_flight: int = 32, available_bytes: int | None = None,
                           device: str = "cpu") -> MemoryEstimate:
    """What a render holds at this size (see the module docstring), and the free memory measured now."""
    px = presenter_px * presenter_px
    out_w, out_h = output_size
    renderer = px * (ANCHOR_CHANNELS_PEAK * _F32 + batch_frames * (FRAME_CHANNELS * _F32 + 3 * FRAME_U8_COPIES))
    frames = out_w * out_h * (3 * frames_in_flight + 1.5 * ENCODER_LOOKAHEAD_FRAMES)
    if available_bytes is None:
        available_bytes, where = available_memory_bytes(device)
    else:
        where = "GPU memory" if device.startswith("cuda") else "RAM"
    return MemoryEstimate(int(renderer), int(frames), int(available_bytes), where)


def check_render_memory(presenter_px: int, output_size: tuple[int, int], batch_frames: int,
                        frames_in_flight: int = 32, device: str = "cpu",
                        available_bytes: int | None = None) -> MemoryEstimate:
    """Refuse up front a picture size this machine cannot hold (InputError with the estimate and the free memory)."""
    est = estimate_render_memory(presenter_px, output_size, batch_frames, frames_in_flight, available_bytes, device)
    if not est.fits:
        # Memory grows with the pixel count: the side that fits scales with the square root of the ratio.
        fit_px = int(presenter_px * math.sqrt(MEMORY_HEADROOM * est.available_bytes / est.total_bytes))
        fit_px -= fit_px % 2
        hint = f"use --size {max(SIZE_MIN_PX, fit_px)} or less" if fit_px >= SIZE_MIN_PX else "free some memory"
        raise InputError(
            f"A {presenter_px}x{presenter_px} presenter needs about {_gb(est.total_bytes)} of {est.where} and this "
            f"machine has {_gb(est.available_bytes)} free: {hint}, or close other programs."
        )
    return est
