"""What one run of the core measured (``studio.pipeline.core.Core.run``): the bench, the drivers and the HUD read the
same fields."""

from __future__ import annotations

from dataclasses import dataclass, field

from studio.pipeline.telemetry import StageTiming


@dataclass(frozen=True)
class CoreReport:
    """What one run measured; the bench, the drivers and the HUD read the same fields."""

    optimizations: tuple[str, ...]
    n_frames: int  # program frame slots covered (produced + dropped)
    frames_produced: int
    frames_dropped: int  # slots skipped by the source because the loop fell behind
    wall_s: float
    ms_per_frame: float  # wall time per produced frame
    stages: dict[str, StageTiming]  # per chunk (CUDA: GPU time by events for generate / post)
    cost_ms_per_frame: float  # median sum of the stage costs per output frame
    queue_depth_max: dict[str, int]
    frames_full: int
    frames_interpolated: int
    frames_fallback: int
    silent_frames: int
    gpu_mem_peak_mb: float
    stop_reason: str  # "end of program", "stopped", or the error
    outputs: dict[str, object] = field(default_factory=dict)  # each output's close() result
    off: dict[str, str] = field(default_factory=dict)  # flags asked for that the core turned off here, and why
    # the first program frame handed to the outputs, in seconds from: this run's start, the core's creation (its
    # models opened and warmed), the command's start (studio/startup.py); None: no frame was written
    first_frame_s: float | None = None
    first_frame_from_core_s: float | None = None
    first_frame_from_command_s: float | None = None
