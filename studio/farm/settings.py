"""Settings of the farm (one frozen dataclass; units in names)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from studio.contracts import CastLayout
from studio.graphics.look import CanvasStyle
from studio.pipeline.settings import CoreSettings


@dataclass(frozen=True)
class FarmSettings:
    """How a set of rundowns is rendered on Ray.

    ``address=None`` starts an embedded cluster on this machine with ``workers`` processes; an address joins an
    existing cluster (``ray start --head`` prints it) and uses every worker it offers.
    """

    out_dir: Path
    core: CoreSettings = field(default_factory=CoreSettings)  # picture settings of every segment on CPU workers
    gpu_core: CoreSettings | None = None  # the same for CUDA workers, used when the cluster has GPUs (None: never)
    device: str = "auto"  # auto: GPUs where the cluster has them; cuda: refuse a cluster without; cpu: never GPUs
    workers: int = 2  # embedded cluster only: worker processes (one segment each at a time)
    address: str | None = None  # host:port of a running cluster's head
    anchor_path: Path | None = None  # default portrait for rundowns that name none (None = the built-in one)
    cast_layout: CastLayout = CastLayout.TWO_SHOT  # rundowns with a cast: all on the set, or cut to the speaker
    gpu_share: float = 0.25  # CUDA workers: the fraction of a GPU one segment asks for (0.25: four share one GPU)
    cpus_per_segment: int = 1  # CPU threads of one segment (torch and the encoder); fixed so frames never depend on it
    max_retries: int = 2  # a segment whose worker died is submitted again up to this many times
    connect_timeout_s: float = 5.0  # how long an --address may take to answer
    # the canvas's look from the command line (render's --set, --name, --ticker, ...), over each rundown's own
    # graphics as render --rundown puts it; its files as absolute paths every node can open (None: the plain look)
    canvas_style: CanvasStyle | None = None


def studio_farm_settings(core, out_dir: Path, workers: int = 2, address: str | None = None,
                         cast_layout: CastLayout = CastLayout.TWO_SHOT, canvas_style: CanvasStyle | None = None):
    """Farm settings from the studio's program settings: its picture (size or canvas, fps, engine), rendered with the
    offline defaults (whole chunks, the optimizations that help offline) on CPU workers and, where the cluster has
    GPUs, on CUDA workers; a cast shown as ``cast_layout`` (the rundown panel's choice); the canvas as the studio
    shows it (``canvas_style``: its set; the graphics travel in the rundown file), its files as absolute paths."""
    from studio.graphics.options import with_absolute_paths

    from studio.pipeline.factory import default_optimizations

    base = replace(core, chunk_frames=8, batch_frames=8, measure_baseline=False)
    cpu = replace(base, device="cpu", optimizations=default_optimizations("cpu", core.engine))
    gpu = replace(base, device="cuda", optimizations=default_optimizations("cuda", core.engine))
    return FarmSettings(out_dir=out_dir, core=cpu, gpu_core=gpu, workers=workers, address=address,
                        cast_layout=cast_layout,
                        canvas_style=with_absolute_paths(canvas_style) if canvas_style is not None else None)
