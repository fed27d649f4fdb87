"""The pipeline core on the CPU: every frame of an offline program, plain and with every combination of a small flag
matrix; what needs CUDA refused in one line; the YUV layouts the encoders take; the 16:9 canvas; flags switched while
it runs; an output that fails taken out of the program."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from collect_output import Collect
from studio.audio.settings import AudioEngine
from studio.errors import EncoderError, InputError
from studio.contracts import Layout, OnAir, Output, ProgramBatch, ProgramFormat
from studio.pipeline.settings import CoreSettings, Optimization
from studio.speech.types import PhonemeTiming

O = Optimization
RATE = 16000
FPS = 30.0
CPU_FLAGS = (O.PYRAMIDAL, O.AUDIO_CACHE, O.FRAME_INTERPOLATION, O.KV_CACHE, O.ASYNC_PIPELINE, O.SILENCE_SIEVE)
N_FRAMES = 45 + 10  # 1.5 s of speech and pause, then a third of a second of a recording, at 30 fps



def _items():
    """Speech with phone timings and a pause (text-to-speech), then a recording without them (the audio engine)."""
    from studio.pipeline.sources import ProgramItem, resample

    rng = np.random.default_rng(0)
    speech = (0.2 * rng.standard_normal(RATE)).astype(np.float32)
    audio = np.concatenate([speech, np.zeros(RATE // 2, np.float32)])
    phones = tuple(PhonemeTiming(p, 0.1 * i, 0.1 * i + 0.1) for i, p in enumerate("hɛloʊwɜld"))
    rec = audio[:RATE // 3]
    return [ProgramItem(resample(audio, RATE, 48000), audio, phonemes=phones, on_air=OnAir("one")),
            ProgramItem(resample(rec, RATE, 48000), rec, on_air=OnAir("two"))]


def _run(anchor, opts, size: int = 96, engine: AudioEngine = AudioEngine.POCKETSPHINX, **changes):
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    out = Collect()
    s = CoreSettings(size_px=size, fps=FPS, optimizations=frozenset(opts), **changes)
    motion = ProgramMotion(audio_engine=engine)
    core = make_core(ProgramSource(_items()), motion, s, anchor, [out])
    try:
        rep = core.run()
        forms = set(core.pool.forms())  # the generator forms the run asked for: (pyramidal, CUDA graphs)
    finally:
        core.close()
    return rep, out, forms, motion


def test_plain_and_optimized_produce_every_frame(default_anchor) -> None:
    plain, p_out, _, _ = _run(default_anchor, ())
    opt, o_out, forms, _ = _run(default_anchor, {O.PYRAMIDAL, O.FRAME_INTERPOLATION, O.ASYNC_PIPELINE,
                                                O.SILENCE_SIEVE})
    for rep, out in ((plain, p_out), (opt, o_out)):
        assert rep.n_frames == rep.frames_produced == N_FRAMES and rep.frames_dropped == 0
        assert out.slots() == list(range(N_FRAMES)) and rep.stop_reason == "end of program"
        assert out.frames().shape == (N_FRAMES, 96, 96, 3)
        assert set(rep.stages) == {"motion", "generate", "post"}
    assert plain.frames_full == N_FRAMES and plain.frames_interpolated == 0 and not plain.queue_depth_max
    assert opt.frames_full + opt.frames_interpolated == N_FRAMES and opt.frames_interpolated > 0
    assert set(opt.queue_depth_max) == {"motion->generate", "generate->post"}
    assert opt.silent_frames > 0  # the pause after the speech
    assert forms == {(True, False)}  # pyramidal, eager: only the form the flags run is built
    audio = np.concatenate([b.audio for b in o_out.batches])
    np.testing.assert_array_equal(audio, np.concatenate([b.audio for b in p_out.batches]))  # same program sound
    # keyframes + interpolation and the coarser field change the picture a little, never the presenter
    diff = np.abs(o_out.frames().astype(np.int16) - p_out.frames().astype(np.int16))
    assert diff.mean() < 4.0, diff.mean()


_MATRIX = [frozenset()] + [frozenset({o}) for o in CPU_FLAGS] + \
          [frozenset(CPU_FLAGS) - {o} for o in CPU_FLAGS] + [frozenset(CPU_FLAGS)]


@pytest.mark.parametrize("opts", _MATRIX, ids=lambda s: "+".join(sorted(o.value for o in s)) or "plain")
def test_every_flag_combination_of_the_matrix_runs_on_the_cpu(default_anchor, opts) -> None:
    rep, out, forms, motion = _run(default_anchor, opts, size=64, engine=AudioEngine.NEURAL)
    assert rep.frames_produced == N_FRAMES and rep.frames_dropped == 0 and rep.stop_reason == "end of program"
    assert out.slots() == list(range(N_FRAMES))
    assert rep.optimizations == tuple(sorted(o.value for o in opts))
    # in-between frames come from keyframes + interpolation, and from the sieve's sparser keyframes in silence
    assert (rep.frames_interpolated > 0) == bool({O.FRAME_INTERPOLATION, O.SILENCE_SIEVE} & opts)
    assert rep.frames_full + rep.frames_interpolated == N_FRAMES
    assert forms == {(O.PYRAMIDAL in opts, False)}
    assert (rep.silent_frames > 0) == (O.SILENCE_SIEVE in opts)
    stats = motion.stats()  # the recording went through the neural engine with the flags it was given
    assert (stats["audio_cache_hits"] + stats["audio_cache_misses"] > 0) == (O.AUDIO_CACHE in opts)
    assert (stats["model_frames_skipped"] > 0) == (O.SILENCE_SIEVE in opts)  # the sieve rests the audio model too
    if O.KV_CACHE in opts:
        assert stats["kv_cache_bytes"] > 0
    frames = out.frames()
    assert frames.shape == (N_FRAMES, 64, 64, 3) and frames.std() > 10  # a picture, not a blank


def test_gpu_flags_need_cuda_and_are_refused_on_the_cpu_in_one_line(default_anchor) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from studio.errors import RenderError
    from studio.generators.builtin import BuiltinGenerator
    from studio.pipeline.factory import make_core, parse_optimizations
    from studio.pipeline.motion import ProgramMotion
    from studio.contracts import GeneratorSettings
    from studio.pipeline.sources import ProgramSource

    # on the CPU, graphs mean the cached compiled engine, and the tests' engine cache (conftest) is empty
    for flag, why in ((O.CUDA_GRAPHS, "no compiled engine of builtin"), (O.GPU_ENCODE, "needs a CUDA GPU")):
        with pytest.raises(InputError) as info:
            parse_optimizations(f"pyramidal,{flag.value}", "cpu")
        assert "\n" not in str(info.value) and why in str(info.value)
        with pytest.raises(InputError) as info:
            make_core(ProgramSource(_items()), ProgramMotion(), CoreSettings(size_px=64, optimizations=frozenset(
                {flag})), default_anchor, [Collect()])
        assert "\n" not in str(info.value) and flag.value in str(info.value) and why in str(info.value)
    assert parse_optimizations("all", "cpu") == frozenset(CPU_FLAGS)  # "all" on the CPU: what applies here
    # the default for the built-in engine leaves out what measured slower for it (factory.default_optimizations)
    assert parse_optimizations(None, "cpu") == frozenset(CPU_FLAGS) - {O.FRAME_INTERPOLATION}
    # RIFE in-betweens cost more than a neural engine's frame on the CPU; on a GPU they are on by default
    assert O.FRAME_INTERPOLATION not in parse_optimizations(None, "cpu", "wav2lip")
    assert O.FRAME_INTERPOLATION in parse_optimizations(None, "cuda", "wav2lip")
    with pytest.raises(RenderError):
        BuiltinGenerator().open(default_anchor, GeneratorSettings(device="cpu", size_px=64, cuda_graphs=True))


def test_yuv_layouts_for_the_encoders() -> None:
    from studio.encode.colour import rgb_to_i420, rgb_to_nv12

    frames = torch.zeros(1, 3, 4, 4)
    frames[:, 0] = 255  # red
    nv12 = rgb_to_nv12(frames)
    assert nv12.shape == (1, 6, 4) and nv12.dtype == torch.uint8
    assert int(nv12[0, 0, 0]) == 63  # Y of pure red, BT.709 limited range
    assert nv12[0, 4].tolist() == [102, 240, 102, 240]  # U, V interleaved
    i420 = rgb_to_i420(frames)
    assert i420.shape == (1, 6, 4)
    assert (i420[0, :4] == 63).all()  # the Y plane
    assert i420[0, 4].tolist() == [102] * 4 and i420[0, 5].tolist() == [240] * 4  # then U's plane, then V's
    white = rgb_to_i420(torch.full((2, 3, 64, 64), 255.0))
    assert white.shape == (2, 96, 64) and int(white[:, :64].float().mean().round()) == 235


def test_canvas_is_16_9_with_the_presenter_box_and_the_lower_third() -> None:
    from studio.graphics.look import CanvasStyle
    from studio.pipeline.post import Canvas
    from studio.contracts import Chunk

    assert CoreSettings(layout=Layout.CANVAS, canvas_height_px=720).output_size == (1280, 720)
    assert CoreSettings(layout=Layout.CANVAS, canvas_height_px=1080).output_size == (1920, 1080)
    w, h, p = 256, 144, 96
    fmt = ProgramFormat(width=w, height=h, fps=25.0, layout=Layout.CANVAS, presenter_px=p)
    canvas = Canvas(CanvasStyle(background_rgb=(16, 28, 48)), framed=True)
    canvas.open(fmt, "cpu")
    red = torch.zeros(2, 3, p, p)
    red[:, 0] = 255

    def chunk(title: str) -> Chunk:
        return Chunk(index=0, slots=np.arange(2), audio=np.zeros(0, np.float32), audio_start=0,
                     analysis=np.zeros(0, np.float32), analysis_start=0, on_air=OnAir(title=title))

    titled = canvas.process(red, chunk("Weather")).permute(0, 2, 3, 1).numpy()
    plain = canvas.process(red, chunk("")).permute(0, 2, 3, 1).numpy()
    assert titled.shape == (2, h, w, 3) and titled.dtype == np.uint8
    x0, y0 = canvas.x0, canvas.y0
    assert (x0, y0) == ((w - p) // 2, h - p)  # centred, standing on the bottom edge
    assert titled[0, y0 + 10, x0 + p // 2].tolist() == [255, 0, 0]  # the presenter inside its box
    assert plain[0, y0 + p // 2, x0 + p // 2].tolist() == [255, 0, 0]
    assert plain[0, 10, 10].tolist() == [16, 28, 48]  # the set elsewhere
    changed = np.flatnonzero((titled[0] != plain[0]).any(axis=(1, 2)))
    assert len(changed) and changed.min() > h // 2  # the title bar, in the lower part only
    row = int(np.median(changed))
    assert titled[0, row, x0 + p // 2].tolist() != [255, 0, 0]  # over the presenter's box too
    assert (titled[0] == titled[1]).all()


def test_the_core_makes_a_720p_canvas_with_the_segment_title(default_anchor) -> None:
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramItem, ProgramSource

    n = RATE * 4 // 25  # 4 frames
    item = ProgramItem(np.zeros(3 * n, np.float32), np.zeros(n, np.float32), on_air=OnAir("Weather"))
    out = Collect()
    s = CoreSettings(layout=Layout.CANVAS, canvas_height_px=720, fps=25.0, chunk_frames=4)
    core = make_core(ProgramSource([item]), ProgramMotion(), s, default_anchor, [out])
    try:
        rep = core.run()
    finally:
        core.close()
    frames = out.frames()
    assert rep.frames_produced == 4 and frames.shape == (4, 720, 1280, 3)
    assert core.fmt.presenter_px == 720 and core.fmt.layout is Layout.CANVAS
    lower = frames[0, 600:690].astype(float)
    assert np.abs(lower - frames[0, 50:140].astype(float)).mean() > 5  # the lower third is drawn


def test_set_optimizations_takes_effect_on_the_next_chunk(default_anchor) -> None:
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    class Switching(ProgramSource):
        """Switches keyframes + interpolation on while handing out chunk 2 (as the HUD's pill would)."""

        def next_chunk(self, pace):
            chunk = super().next_chunk(pace)
            if chunk is not None and chunk.index == 2:
                self.core.set_optimizations(frozenset({O.FRAME_INTERPOLATION}))
            return chunk

    class Watching(ProgramMotion):
        def __init__(self) -> None:
            super().__init__(audio_engine=AudioEngine.POCKETSPHINX)
            self.seen: list[frozenset] = []

        def motion(self, chunk):
            self.seen.append(chunk.optimizations)
            return super().motion(chunk)

    source, motion = Switching(_items()), Watching()
    core = make_core(source, motion, CoreSettings(size_px=64, fps=FPS, chunk_frames=8), default_anchor, [Collect()])
    source.core = core
    try:
        rep = core.run()
    finally:
        core.close()
    assert motion.seen[:2] == [frozenset()] * 2
    assert motion.seen[2:] == [frozenset({O.FRAME_INTERPOLATION})] * (len(motion.seen) - 2)
    assert rep.frames_interpolated > 0 and rep.frames_produced == N_FRAMES


def test_a_failing_output_is_taken_out_of_the_program_and_reported(default_anchor) -> None:
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    class DiskFull(Output):
        name = "disk"

        def __init__(self) -> None:
            self.writes = 0

        def write(self, batch: ProgramBatch) -> None:
            self.writes += 1
            if self.writes == 3:
                raise EncoderError("The disk is full: free some space.")

    bad, good = DiskFull(), Collect()
    core = make_core(ProgramSource(_items()), ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX),
                     CoreSettings(size_px=64, fps=FPS, chunk_frames=8), default_anchor, [bad, good])
    try:
        rep = core.run()
    finally:
        core.close()
    assert rep.stop_reason == "end of program" and good.slots() == list(range(N_FRAMES))  # the program went on
    assert bad.writes == 3 and core.outputs() == [good]
    assert core.failed_outputs == [(bad, "The disk is full: free some space.")]


@pytest.mark.parametrize("opts", [(), (O.ASYNC_PIPELINE,)], ids=["one-thread", "async"])
def test_a_failed_core_is_freed_without_the_cycle_collector(default_anchor, tmp_path, opts) -> None:
    """The canvas's logo went missing: the first chunk fails in the post stage. Closed and dropped, the failed core is
    freed at once by reference counting. A core in a reference cycle waits for the cycle collector, which in a
    process of millions of objects runs rarely: a core failing on each restart piled up its engines and buffers."""
    import gc
    import weakref

    from studio.graphics.look import CanvasStyle, Graphics
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    s = CoreSettings(size_px=96, fps=FPS, layout=Layout.CANVAS, canvas_height_px=144, optimizations=frozenset(opts))
    style = CanvasStyle(graphics=Graphics(name="Eileen Collins", logo=str(tmp_path / "gone.png")))
    core = make_core(ProgramSource(_items()), ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX), s,
                     default_anchor, [Collect()], canvas_style=style)
    gc.collect()
    gc.disable()
    try:
        said = ""
        try:
            core.run()
        except InputError as exc:
            said = str(exc)
        core.close()
        freed = weakref.ref(core)
        del core
        assert freed() is None
    finally:
        gc.enable()
    assert "channel logo" in said


def test_the_core_publishes_each_chunk_on_the_bus(default_anchor) -> None:
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramItem, ProgramSource
    from studio.pipeline.telemetry import TelemetryBus

    audio = (0.1 * np.sin(np.linspace(0, 600, RATE))).astype(np.float32)  # 1 s
    bus = TelemetryBus()
    s = CoreSettings(size_px=64, fps=16.0, chunk_frames=4, batch_frames=4,
                     optimizations=frozenset({O.ASYNC_PIPELINE}))
    core = make_core(ProgramSource([ProgramItem(np.repeat(audio, 3), audio)]),
                     ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX), s, default_anchor, [Collect()], bus=bus,
                     bus_source="test")
    try:
        rep = core.run()
    finally:
        core.close()
    last = bus.latest("test")
    assert bus.published == 4  # 4 chunks of 4 frames
    assert last.frames_produced == rep.frames_produced == 16 and last.fps_target == 16.0
    assert set(last.stages) == set(rep.stages) == {"motion", "generate", "post"}
    assert last.stages["generate"].median_ms == pytest.approx(rep.stages["generate"].median_ms)
    assert set(last.queue_depths) == {"motion->generate", "generate->post"}
    assert last.drops == {"source": 0} and last.extra["chunk_frames"] == 4.0
    assert math.isnan(last.gpu_mem_mb)


def test_a_just_in_time_source_is_asked_only_when_the_next_stage_is_free(default_anchor) -> None:
    """The microphone's rule: no stale chunk waits in the core's queues; a slow output makes them fill otherwise."""
    import time

    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramItem, ProgramSource

    class SlowOutput(Collect):
        def write(self, batch: ProgramBatch) -> None:
            time.sleep(0.02)
            super().write(batch)

    depths: dict[str, list[int]] = {"motion->generate": [], "generate->post": []}

    class JustInTime(ProgramSource):
        just_in_time = True

        def next_chunk(self, pace):
            if core._queues:
                depths["motion->generate"].append(core._queues["motion->generate"].depth)
            return super().next_chunk(pace)

    audio = (0.1 * np.sin(np.linspace(0, 600, RATE))).astype(np.float32)  # 1 s
    s = CoreSettings(size_px=64, fps=16.0, chunk_frames=1, batch_frames=1, queue_depth=2,
                     optimizations=frozenset({O.ASYNC_PIPELINE}))
    out = SlowOutput()
    core = make_core(JustInTime([ProgramItem(np.repeat(audio, 3), audio)]),
                     ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX), s, default_anchor, [out])
    stage_b = core._stage_b

    def watched_b(chunk):
        depths["generate->post"].append(core._queues["generate->post"].depth)
        return stage_b(chunk)

    core._stage_b = watched_b
    try:
        rep = core.run()
    finally:
        core.close()
    assert rep.frames_produced == 16 and out.slots() == list(range(16))
    assert len(depths["motion->generate"]) >= 15 and len(depths["generate->post"]) == 16
    assert set(depths["motion->generate"]) == {0} and set(depths["generate->post"]) == {0}


def test_the_kv_cache_share_comes_from_the_motion_stages_live_probe(default_anchor, monkeypatch) -> None:
    """With the audio model's KV cache on, the HUD's share for it is what the motion source measured live (the model's
    step without its cache, ``kv_saved_ms_per_frame``) over the baseline; before a probe it says it is measuring."""
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource
    from studio.pipeline.telemetry import OptimizationStatus

    opts = frozenset({O.KV_CACHE, O.PYRAMIDAL})
    s = CoreSettings(size_px=64, fps=FPS, optimizations=opts, measure_baseline=True, baseline_every=2,
                     baseline_pairs_min=1)
    motion = ProgramMotion(audio_engine=AudioEngine.NEURAL)
    core = make_core(ProgramSource(_items()), motion, s, default_anchor, [Collect()])
    try:
        core.run()
        probed = {"kv_cache_bytes": 1000.0}
        monkeypatch.setattr(motion, "stats", lambda: dict(probed))
        kv = {sh.name: sh for sh in core.compute_saved().shares}["kv_cache"]
        assert kv.status is OptimizationStatus.ACTIVE and kv.reason.startswith("measuring")
        probed.update(kv_saved_ms_per_frame=1.5, kv_probe_tokens=100)
        c = core.compute_saved()
        kv = {sh.name: sh for sh in c.shares}["kv_cache"]
        assert kv.reason.startswith("measured live") and "last 100 tokens" in kv.reason
        assert kv.saved_fraction == pytest.approx(1.5 / c.baseline_ms_per_frame)
    finally:
        core.close()


def test_each_output_is_opened_once_by_the_cores_that_run_it(default_anchor) -> None:
    """An output added while a core exists, and one handed to the next core (a restart), is not opened again."""
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    class Counted(Collect):
        def open(self, fmt: ProgramFormat) -> None:
            super().open(fmt)
            self.opens = getattr(self, "opens", 0) + 1

    first, added = Counted(), Counted()
    s = CoreSettings(size_px=64, fps=FPS, optimizations=frozenset())
    core = make_core(ProgramSource(_items()[1:]), ProgramMotion(), s, default_anchor, [first])
    try:
        core.add_output(added)
        core.run()
    finally:
        core.close()
    again = make_core(ProgramSource(_items()[1:]), ProgramMotion(), s, default_anchor, [first, added])
    try:
        again.run()
    finally:
        again.close()
    assert first.opens == added.opens == 1
    assert len(first.slots()) == len(added.slots()) == 2 * 10  # both wrote every frame of both runs
