"""One factory for the core: every driver (the studio, ``render``, ``live``, ``bench``) builds its core here.

A driver picks a source, a motion source, settings and outputs; ``make_core`` adds the generator (in the forms the
flags ask for) and the audio-feature stage an engine needs, and refuses what must not go on air (a timing twin).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from studio.errors import InputError
from studio.pipeline.core import Core
from studio.pipeline.pool import GeneratorPool, compiled_engine_note
from studio.contracts import Layout, MotionSource, Output, ProgramBatch, Source
from studio.pipeline.settings import ALL_OPTIMIZATIONS, CoreSettings, Optimization
from studio.pipeline.telemetry import TelemetryBus

log = logging.getLogger(__name__)

CANVAS_HEIGHTS = {"720p": 720, "1080p": 1080}
FRAME_RATES = (25.0, 30.0, 50.0, 60.0)


def presenter_px(settings: CoreSettings) -> int:
    """The square presenter's size: its own size, or the canvas height on a 16:9 canvas (a two-shot: the canvas
    width shared by the cast, each anchor sized alike)."""
    if settings.layout is not Layout.CANVAS:
        return settings.size_px
    h = settings.canvas_height_px
    if settings.two_shot:
        w = settings.output_size[0]
        return min(h, w // settings.cast_size) // 2 * 2
    return h


def default_optimizations(device: str, engine: str = "builtin") -> frozenset[Optimization]:
    """What the drivers switch on unless told otherwise: everything that applies on this device, except keyframes +
    interpolation for the built-in engine, which measured slower with it on both devices: its in-between frames are
    composed in full and only the warp field is interpolated, which the pyramidal field has already made cheap
    (bench and the studio's live shares, benchmarks/README.md); and on the CPU for every engine: the neural
    engines' in-between frames come from RIFE, which on the CPU costs more than generating the frame (Wav2Lip at
    the 1080p canvas at 25 fps: 124 ms a frame, 165 with keyframes at stride 2). The HUD's pill
    turns it on.
    ``engine`` "" means every flag this device can run."""
    opts = set(ALL_OPTIMIZATIONS)
    if not device.startswith("cuda"):
        opts -= {Optimization.GPU_ENCODE}
        if not engine or compiled_engine_note(engine, device):
            opts -= {Optimization.CUDA_GRAPHS}
        if engine:
            opts -= {Optimization.FRAME_INTERPOLATION}
    if engine == "builtin":
        opts -= {Optimization.FRAME_INTERPOLATION}
    return frozenset(opts)


def optimization_labels(names, device: str) -> list[str]:
    """Flag names as a summary prints them: on a CPU the CUDA_GRAPHS flag runs the compiled engine (ONNX Runtime),
    named so; no CUDA graph is made there."""
    cpu = not str(device).startswith("cuda")
    return [("compiled_engine" if cpu and n == Optimization.CUDA_GRAPHS.value else n) for n in names]


def usable_here(opts: frozenset[Optimization], engine: str, device: str) -> frozenset[Optimization]:
    """``opts`` less the flags this device cannot run for ``engine`` (the studio keeps a choice made for another
    engine or device, and drops what does not apply instead of failing on air; the HUD says why)."""
    if device.startswith("cuda"):
        return opts
    opts = opts - {Optimization.GPU_ENCODE}
    if Optimization.CUDA_GRAPHS in opts and compiled_engine_note(engine, device):
        opts = opts - {Optimization.CUDA_GRAPHS}
    return opts


def parse_optimizations(text: str | None, device: str, engine: str = "builtin") -> frozenset[Optimization]:
    """``--optimizations``: "default" (what helps this engine here), "all", "none", or a comma list of flag names
    (``pyramidal,async_pipeline``)."""
    if text is None or text.strip().lower() == "default":
        return default_optimizations(device, engine)
    if text.strip().lower() == "all":
        return default_optimizations(device, "")
    if text.strip().lower() in ("none", "plain", ""):
        return frozenset()
    out = set()
    for name in (x.strip().lower() for x in text.split(",")):
        try:
            out.add(Optimization(name))
        except ValueError:
            names = ", ".join(o.value for o in Optimization)
            raise InputError(f"Unknown optimization '{name}': use all, none, or a comma list of {names}.") from None
    if not device.startswith("cuda"):
        if Optimization.GPU_ENCODE in out:
            raise InputError("gpu_encode needs a CUDA GPU: leave it out on the CPU.")
        why = compiled_engine_note(engine, device) if Optimization.CUDA_GRAPHS in out else ""
        if why:
            raise InputError(f"cuda_graphs on the CPU means a compiled engine, and there is {why}.")
    return frozenset(out)


def make_core(source: Source, motion: MotionSource, settings: CoreSettings, anchor, outputs: list[Output],
              bus: TelemetryBus | None = None, weights_dir: Path | None = None, on_air: bool = True,
              canvas_style=None, bus_source: str = "core", forms: dict | None = None) -> Core:
    """The core for ``source`` -> ``motion`` -> the engine ``settings.engine`` -> ``outputs``.

    ``on_air`` False (the bench) lets a timing twin run; on air a twin is refused with the reason. ``forms``: the
    generator forms shared between cores (``GeneratorPool``'s ``shared``)."""
    cpu = not settings.device.startswith("cuda")
    if cpu and Optimization.GPU_ENCODE in settings.optimizations:
        raise InputError(f"gpu_encode needs a CUDA GPU: leave it out on the {settings.device}.")
    if cpu and Optimization.CUDA_GRAPHS in settings.optimizations:
        why = compiled_engine_note(settings.engine, settings.device)
        if why:
            raise InputError(f"cuda_graphs needs a CUDA GPU, or on the {settings.device} a compiled engine, and there "
                             f"is {why}.")
    if not cpu and Optimization.CUDA_GRAPHS in settings.optimizations:
        from studio.generators.inductor_cache import use_compile_cache

        use_compile_cache()  # before the engine's first compile: an earlier run's kernels are loaded, not rebuilt
    pool = GeneratorPool(settings.engine, anchor, settings, presenter_px(settings), weights_dir, shared=forms)
    pool.matte = getattr(canvas_style, "use_matte", True)
    # the form these flags run (a 14 B DiT's plain form beside it would not fit the GPU)
    gen = pool.get(Optimization.PYRAMIDAL in settings.optimizations, Optimization.CUDA_GRAPHS in settings.optimizations)
    if on_air and gen.twin:
        pool.close()
        raise InputError(f"{gen.info.label} is only a timing twin here (its weights are not installed), and a twin is "
                         f"never put on air: give its release folder with --weights DIR, or use the built-in engine.")
    features = None
    if gen.info.audio is not None:
        from studio.pipeline.features import FeatureStage

        features = FeatureStage(gen, settings)
    return Core(source, motion, pool, outputs, settings, bus=bus, canvas_style=canvas_style, features=features,
                bus_source=bus_source)


class DiscardOutput(Output):
    """Takes the program and keeps nothing: the output of a run that is only measured."""

    name = "discard"
    needs_rgb = False
    retains_frames = False

    def write(self, batch: ProgramBatch) -> None:
        pass


def measure_format(settings: CoreSettings, anchor, seconds: float = 1.6) -> float:
    """Wall ms per output frame of the core at ``settings`` on this machine, now: a short silent program through a
    core that drops its output (after a warm-up chunk). What the studio refuses a picture format with. A cast
    (``settings.cast_size`` > 1): ``anchor`` is its packs, each with its own motion row."""
    import numpy as np

    from studio.audio.settings import DEFAULT_AUDIO_ENGINE
    from studio.contracts import OnAir
    from studio.pipeline.cast_motion import programme_motion
    from studio.pipeline.sources import ProgramItem, ProgramSource

    n = int(seconds * 16000)
    item = ProgramItem(program_audio=np.zeros(3 * n, np.float32), analysis_audio=np.zeros(n, np.float32),
                       on_air=OnAir(title="Measuring"))
    s = replace(settings, measure_baseline=False)
    warm = make_core(ProgramSource([ProgramItem(np.zeros(3 * 3200, np.float32), np.zeros(3200, np.float32))]),
                     programme_motion(s.cast_size, DEFAULT_AUDIO_ENGINE, s.seed), s, anchor, [DiscardOutput()],
                     on_air=False)
    warm.run()
    warm.close()
    core = make_core(ProgramSource([item]), programme_motion(s.cast_size, DEFAULT_AUDIO_ENGINE, s.seed), s, anchor,
                     [DiscardOutput()], on_air=False)
    try:
        rep = core.run()
    finally:
        core.close()
    return rep.ms_per_frame
