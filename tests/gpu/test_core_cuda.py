"""The pipeline core on CUDA (run on the device machine: `pytest -m gpu tests/gpu`): every flag at once makes every
frame with the GPU's timings and YUV; CUDA graphs give eager's pixels; `render --device cuda --canvas 1080p --fps 60`
and `bench` at CUDA go through the same core."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.io import wavfile

from collect_output import Collect
from studio.audio.settings import AudioEngine
from studio.contracts import Layout, OnAir
from studio.pipeline.settings import ALL_OPTIMIZATIONS, CoreSettings, Optimization

pytestmark = pytest.mark.gpu

O = Optimization
RATE = 16000



class CollectYuv(Collect):
    """An encoder's view: the I420 planes only."""

    name = "collect-yuv"
    needs_rgb = False
    wants_yuv = True


def _items():
    from studio.pipeline.sources import ProgramItem, resample
    from studio.speech.types import PhonemeTiming

    rng = np.random.default_rng(0)
    speech = (0.2 * rng.standard_normal(RATE)).astype(np.float32)
    audio = np.concatenate([speech, np.zeros(RATE // 2, np.float32)])
    phones = tuple(PhonemeTiming(p, 0.1 * i, 0.1 * i + 0.1) for i, p in enumerate("hɛloʊwɜld"))
    return [ProgramItem(resample(audio, RATE, 48000), audio, phonemes=phones, on_air=OnAir("one")),
            ProgramItem(resample(audio[:RATE // 3], RATE, 48000), audio[:RATE // 3], on_air=OnAir("two"))]


def _run(anchor, opts, outputs, **changes):
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    s = CoreSettings(device="cuda", fps=60.0, chunk_frames=16, batch_frames=16, optimizations=frozenset(opts),
                     **changes)
    core = make_core(ProgramSource(_items()), ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX), s, anchor,
                     outputs)
    try:
        return core.run()
    finally:
        core.close()


def test_every_flag_on_cuda_makes_every_frame_with_gpu_timings_and_yuv(default_anchor):
    rgb, yuv = Collect(), CollectYuv()
    rep = _run(default_anchor, ALL_OPTIMIZATIONS, [rgb, yuv], layout=Layout.CANVAS, canvas_height_px=1080)
    n = int(np.ceil(1.5 * 60)) + int(np.ceil(RATE // 3 / RATE * 60))
    assert rep.frames_produced == rep.n_frames == n and rep.frames_dropped == 0
    assert [int(s) for b in rgb.batches for s in b.slots] == list(range(n))
    frames = np.concatenate([b.frames for b in rgb.batches])
    planes = np.concatenate([b.yuv for b in yuv.batches])
    assert frames.shape == (n, 1080, 1920, 3) and planes.shape == (n, 1620, 1920)
    assert all(b.device_frames is not None and b.device_frames.is_cuda for b in rgb.batches)
    assert rep.frames_interpolated > 0 and rep.gpu_mem_peak_mb > 0
    assert rep.stages["generate"].median_ms > 0 and rep.stages["post"].median_ms > 0  # CUDA events
    from studio.encode.colour import rgb_to_i420

    cpu = rgb_to_i420(torch.from_numpy(frames[:4]).permute(0, 3, 1, 2).float()).numpy().astype(int)
    assert np.abs(cpu - planes[:4].astype(int)).max() <= 1  # made on the GPU, as the CPU would


def test_cuda_graphs_through_the_core_give_the_eager_pixels(default_anchor):
    eager, graphed = Collect(), Collect()
    _run(default_anchor, {O.FRAME_INTERPOLATION}, [eager], size_px=512)
    _run(default_anchor, {O.FRAME_INTERPOLATION, O.CUDA_GRAPHS}, [graphed], size_px=512)
    a = np.concatenate([b.frames for b in eager.batches]).astype(int)
    b = np.concatenate([b.frames for b in graphed.batches]).astype(int)
    assert a.shape == b.shape
    diff = np.abs(a - b)
    assert diff.mean() < 0.1 and np.percentile(diff, 99.9) <= 2, (diff.mean(), diff.max())


def test_render_cli_on_cuda_at_1080p60(tmp_path: Path):
    from studio.cli import main
    from studio.encode import probe_mp4

    t = np.arange(int(2.0 * RATE)) / RATE
    voice = 0.3 * np.sin(2 * np.pi * 140 * t) * (np.sin(2 * np.pi * 2.5 * t) > 0)
    wav = tmp_path / "voice.wav"
    wavfile.write(wav, RATE, (voice * 32767).astype(np.int16))
    out = tmp_path / "cuda.mp4"
    rc = main(["render", "--audio", str(wav), "--audio-engine", "pocketsphinx", "--device", "cuda", "--canvas",
               "1080p", "--fps", "60", "--out", str(out)])
    assert rc == 0
    info = probe_mp4(out)
    assert (info.width, info.height) == (1920, 1080) and info.fps == pytest.approx(60.0)
    assert info.n_video_frames == 120
    assert info.audio_duration_s == pytest.approx(info.video_duration_s, abs=0.001)


def test_bench_on_cuda_reports_gpu_time_for_every_configuration(tmp_path: Path):
    from studio.bench.harness import BenchItem, BenchSettings, run_bench, save_program

    rng = np.random.default_rng(1)
    speech = np.concatenate([0.2 * rng.standard_normal(RATE), np.zeros(RATE // 2)]).astype(np.float32)
    save_program([BenchItem(speech, "one"), BenchItem(speech[:RATE // 2], "two")], tmp_path / "p.npz")
    b = BenchSettings(device="cuda", size_px=256, fps=60.0, repeats=1, program=tmp_path / "p.npz", quality_frames=4)
    r = run_bench(b, tmp_path / "bench.json", progress=lambda m: None)
    assert json.loads((tmp_path / "bench.json").read_text())["frames"] == r["frames"] == 120
    rows = {row["optimization"] for row in r["ablation"]}
    assert {"cuda_graphs", "gpu_encode"} <= rows
    assert set(r["gpu_ms_per_frame"]) == set(r["repeats"])
    assert all(math.isfinite(v) and v > 0 for v in r["gpu_ms_per_frame"].values())
    assert r["floor"]["total"]["measured_ms_per_frame"] > 0


def _assert_planes_match(got: torch.Tensor, want: torch.Tensor, compiled: bool, where) -> None:
    """The I420 planes of the graphed post stage against the eager ones: the same bytes when the conversion is
    replayed eagerly; compiled by TorchInductor, a sample may land one level away (Inductor contracts the
    conversion's multiply-adds into FMAs, one rounding instead of two, and sums the 2 x 2 chroma means in another
    order, so a value within a float32 ulp of a level boundary truncates to its neighbour), and only a few do."""
    if not compiled:
        assert torch.equal(got, want), where
        return
    diff = (got.to(torch.int16) - want.to(torch.int16)).abs()
    assert int(diff.max()) <= 1, (where, int(diff.max()))
    assert float((diff > 0).float().mean()) < 1e-3, (where, float((diff > 0).float().mean()))


@pytest.mark.parametrize("layout", [Layout.CANVAS, Layout.SQUARE])
def test_the_graphed_post_stage_gives_the_eager_pictures_and_planes(default_anchor, layout):
    """The canvas and the colour conversion replayed as one CUDA graph (CUDA_GRAPHS) across titles, chunks smaller and
    larger than the graph's batch, with and without the I420 planes: the eager stage's pictures, and its planes
    (``_assert_planes_match``)."""
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    s = CoreSettings(device="cuda", fps=60.0, chunk_frames=16, batch_frames=8, layout=layout, canvas_height_px=720,
                     size_px=512, optimizations=frozenset({O.CUDA_GRAPHS, O.GPU_ENCODE}))
    core = make_core(ProgramSource(_items()), ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX), s,
                     default_anchor, [])
    try:
        core.warm()
        p = core.fmt.presenter_px
        g = torch.Generator(device="cuda").manual_seed(0)
        for title, n in (("one", 8), ("", 3), ("two", 13), ("one", 1)):
            frames = torch.rand((n, 3, p, p), device="cuda", generator=g) * 270 - 5
            if layout is Layout.CANVAS:
                core.post.open_canvas().select(title)
            for want_yuv in (False, True):
                eager_pic, eager_yuv = core.post.finish(frames, want_yuv)
                got = core.post.post_graph(frames, want_yuv)(frames)
                pic, yuv = got if want_yuv else (got, None)
                assert torch.equal(pic, eager_pic), (title, n, want_yuv)
                if want_yuv:
                    _assert_planes_match(yuv, eager_yuv, core.post.post_graph(frames, True).compiled, (title, n))
    finally:
        core.close()


def test_warm_captures_the_post_stages_graphs_so_the_run_makes_none(default_anchor):
    """A flow-interpolating engine (Wav2Lip's twin, pasted at the presenter's size) with keyframes and CUDA graphs:
    ``warm`` captures SPAN's (none here: no upscale) and RIFE's graphs for every batch size, and the run, whose
    chunks bring several in-between counts, captures none inside its timed frames."""
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    opts = frozenset({O.FRAME_INTERPOLATION, O.CUDA_GRAPHS, O.PYRAMIDAL})
    s = CoreSettings(device="cuda", fps=60.0, chunk_frames=16, batch_frames=16, optimizations=opts, engine="wav2lip",
                     size_px=512, key_stride=3)
    core = make_core(ProgramSource(_items()), ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX), s, default_anchor,
                     [Collect()], on_air=False)
    try:
        core.warm()
        sets = list(core.post.flow._graphs.values())
        assert len(sets) == 1 and sorted(sets[0].graphs) == [1, 2, 4, 8]
        rep = core.run()
        assert rep.frames_interpolated > 0
        assert list(core.post.flow._graphs.values()) == sets and sorted(sets[0].graphs) == [1, 2, 4, 8]
    finally:
        core.close()


def test_a_graph_set_replays_each_batch_size_without_padding():
    from studio.generators.graphs import GraphSet

    calls = []

    def fn(x):
        calls.append(x.shape[0])  # at capture (and its warm-up) only: a replay runs no Python
        return x * 2 + 1

    gs = GraphSet(fn, lambda n: (torch.zeros((n, 3), device="cuda"),), torch.device("cuda"), 8)
    x = torch.arange(13 * 3, dtype=torch.float32, device="cuda").view(13, 3)
    assert torch.equal(gs(x), x * 2 + 1)
    assert sorted(gs.graphs) == [1, 4, 8]  # 13 = 8 + 4 + 1
    calls.clear()
    assert torch.equal(gs(x[:5]), x[:5] * 2 + 1) and calls == []  # 4 + 1: replays only
