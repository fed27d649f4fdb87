"""The engines at their real shapes on the GPU (timing twins): every engine generates frames of the asked size, the Wan
DiT runs one forward at 288, 512 and 1024 px within the device's memory, and the memory peak is reported."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
pytest.importorskip("diffusers", reason="needs the 'engines' extra (NEWSSTUDIO_EXTRAS=engines ./installers/setup.sh)")

from studio.bench.engine_speed import bench_anchor  # noqa: E402
from studio.contracts import GENERATORS, GeneratorSettings  # noqa: E402
from studio.contracts.coeffs import N_COEFFS  # noqa: E402


def _open(name: str, size: int, batch: int = 4):
    gen = GENERATORS.create(name)
    gen.open(bench_anchor(), GeneratorSettings(device="cuda", size_px=size, precision="bf16", batch_frames=batch))
    return gen


def _inputs(gen, n: int):
    feats = None
    if gen.info.audio is not None:
        feats = torch.randn((n, *gen.info.audio.shape_per_frame), device="cuda")
    return torch.zeros((n, N_COEFFS), device="cuda"), feats


@pytest.mark.parametrize("name", ["wav2lip", "musetalk-1.5", "liveportrait", "ditto"])
def test_engine_frames_at_size(name):
    gen = _open(name, 512)
    out = gen.generate(*_inputs(gen, 5))
    assert out.shape == (5, 3, 512, 512) and out.device.type == "cuda"
    assert torch.isfinite(out).all() and float(out.std()) > 0
    assert gen.twin and "timing twin" in gen.label
    gen.close()


@pytest.mark.parametrize("size,tokens", [(288, 6804), (512, 21504), (1024, 86016)])
def test_wan_dit_one_forward_at_size(size, tokens, record_property):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    gen = _open("wan2.1-1.3b", size, batch=81)
    h = size // 8
    x = torch.randn((2, 36, 21, h, h), device="cuda", dtype=torch.bfloat16)
    first, latter = gen.audio_windows(torch.randn((81, 12, 768), device="cuda", dtype=torch.bfloat16))
    with torch.inference_mode():
        v = gen.fns["dit"](x, torch.full((2,), 500.0, device="cuda"), gen.context.expand(2, -1, -1),
                           first.expand(2, -1, -1, -1, -1), latter.expand(2, -1, -1, -1, -1))
    assert v.shape == (2, 16, 21, h, h) and torch.isfinite(v).all()
    assert 21 * (h // 2) ** 2 == tokens  # ENGINES.md's token counts
    peak = torch.cuda.max_memory_allocated() / 2 ** 30
    record_property("gpu_peak_gib", round(peak, 2))
    print(f"wan2.1-1.3b {size}px: one forward (2 guidance passes), GPU peak {peak:.1f} GiB")
    gen.close()


def test_wan_window_gives_81_frames():
    gen = _open("wan2.1-1.3b", 288, batch=81)
    out = gen.generate(*_inputs(gen, 81))
    assert out.shape == (81, 3, 288, 288) and torch.isfinite(out).all()
    gen.close()


def test_wan_with_taehv_and_fp8_gives_81_frames_and_says_its_precision():
    gen = _open("wan2.1-1.3b-taehv-fp8", 288, batch=81)
    out = gen.generate(*_inputs(gen, 81))
    assert out.shape == (81, 3, 288, 288) and torch.isfinite(out).all()
    if torch.cuda.get_device_capability() >= (8, 9) and importlib.util.find_spec("torchao") is not None:
        assert gen.fp8_count == 30 * 15 and gen.precision_label == "bf16, fp8 (rowwise) DiT linears"
    else:
        assert gen.fp8_count == 0 and gen.precision_label.startswith("bf16 (no fp8 DiT linears: ")
    print(f"{gen.info.name}: {gen.precision_label}")
    gen.close()


def test_wan_14b_twin_fits_or_says_so():
    free, _ = torch.cuda.mem_get_info()
    if free < 50 * 2 ** 30:
        pytest.skip(f"the 14 B twin needs about 50 GiB free (37 GB of bf16 weights); {free / 2 ** 30:.0f} GiB here")
    gen = _open("wan2.1-14b", 288, batch=81)
    h = 288 // 8
    x = torch.randn((2, 36, 21, h, h), device="cuda", dtype=torch.bfloat16)
    first, latter = gen.audio_windows(torch.randn((81, 12, 768), device="cuda", dtype=torch.bfloat16))
    with torch.inference_mode():
        v = gen.fns["dit"](x, torch.full((2,), 500.0, device="cuda"), gen.context.expand(2, -1, -1),
                           first.expand(2, -1, -1, -1, -1), latter.expand(2, -1, -1, -1, -1))
    assert v.shape == (2, 16, 21, h, h)
    gen.close()


@pytest.mark.parametrize("name", ["whisper-tiny", "wav2vec2-base", "hubert-large"])
def test_audio_encoders_on_the_gpu(name):
    import numpy as np

    from studio.generators.audio_encoders import ENCODERS

    enc = ENCODERS[name]("cuda", "bf16")
    f = enc.features_for_slots(np.random.default_rng(0).standard_normal(48000).astype(np.float32) * 0.1,
                               np.arange(0, 3, 0.04), 25.0)
    assert f.shape == (75, *enc.spec.shape_per_frame) and np.isfinite(f).all()


@pytest.mark.parametrize("name,size,batch,compiled", [
    ("wav2lip", 256, 4, False), ("musetalk-1.5", 256, 4, False), ("liveportrait", 512, 4, False),
    ("wan2.1-1.3b", 288, 81, False), ("wan2.1-1.3b", 288, 81, True)],
    ids=["wav2lip", "musetalk-1.5", "liveportrait", "wan2.1-1.3b", "wan2.1-1.3b-compiled"])
def test_cuda_graphs_match_eager(name, size, batch, compiled):
    """A CUDA graph replays what eager computes (within bf16 rounding: max 2 of 255). An engine that also compiles
    its target inside the graph (``compiled_targets``: the Wan DiT, by TorchInductor) runs other kernels, whose bf16
    rounding a 30-block random-weight DiT amplifies: that form is held to what the compile panel holds a bf16 engine
    to (``MIN_PSNR_DB``), and the graph itself is checked uncompiled."""
    from studio.compile.settings import MIN_PSNR_DB

    eager = GENERATORS.create(name)
    graphed = GENERATORS.create(name)
    if not compiled:
        graphed.compiled_targets = frozenset()
    elif not graphed.compiled_targets:
        pytest.skip(f"{name} compiles nothing inside its graphs")
    for gen, graphs in ((eager, False), (graphed, True)):
        gen.open(bench_anchor(), GeneratorSettings(device="cuda", size_px=size, precision="bf16", batch_frames=batch,
                                                   cuda_graphs=graphs))
    n = 3 if batch < 81 else 81  # a partial batch: the graph pads it with its last row
    coeffs, feats = _inputs(eager, n)

    def padded(x):
        return x if x is None or n == batch else torch.cat([x, x[-1:].expand(batch - n, *x.shape[1:])])

    # Eager at the graph's own batch, padded as the graph pads: the same shapes, so the same kernels. At another batch
    # size cuBLAS / cuDNN may choose other bf16 kernels, whose rounding a deep random-weight twin amplifies; that
    # would test the libraries' batch invariance, not the graph.
    a = eager.generate(padded(coeffs), padded(feats))[:n]
    b = graphed.generate(coeffs, feats)
    assert a.shape == b.shape
    diff = (a.float() - b.float()).abs()
    mse = float((diff ** 2).mean())
    psnr = float("inf") if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)
    print(f"{name} {size}px batch {batch}{' compiled' if compiled else ''}: graphed vs eager max "
          f"{float(diff.max()):.3f}, mean {float(diff.mean()):.4f} (0..255), PSNR {psnr:.1f} dB")
    if compiled:
        assert psnr >= MIN_PSNR_DB["bf16"] and torch.isfinite(b.float()).all()
    else:
        assert float(diff.max()) < 2.0


def test_liveportrait_cast_graphs_match_eager():
    """A LivePortrait cast of two anchors (the astronaut and her mirror image) replays as CUDA graphs what eager
    computes, at the graph's batch: batches that mix both anchors' rows (a two-shot) and a cut's shown rows, one
    anchor's alone too; within bf16 rounding (max 2 of 255)."""
    from types import SimpleNamespace

    import numpy as np

    one = bench_anchor()
    lm = one.landmarks.copy()
    lm[:, 0] = one.image.shape[1] - lm[:, 0]
    cast = (one, SimpleNamespace(image=np.ascontiguousarray(one.image[:, ::-1]), landmarks=lm, name="mirrored"))
    gens = []
    for graphs in (False, True):
        gen = GENERATORS.create("liveportrait")
        gen.open(cast, GeneratorSettings(device="cuda", size_px=512, precision="bf16", batch_frames=4,
                                         cuda_graphs=graphs))
        gens.append(gen)
    coeffs = torch.randn((8, 2, N_COEFFS), generator=torch.Generator().manual_seed(0)).clamp(-1, 1).cuda()
    shown = np.array([0, 1, 1, 0, 1, 1, 1, 1])  # a batch of both anchors' rows, then one of the second's alone
    for args, shape in (((coeffs[:4],), (4, 6, 512, 512)), ((coeffs, None, shown), (8, 3, 512, 512))):
        a, b = (g.generate(*args) for g in gens)
        diff = (a.float() - b.float()).abs()
        print(f"liveportrait cast {tuple(b.shape)}: graphed vs eager max {float(diff.max()):.3f}, "
              f"mean {float(diff.mean()):.4f} (0..255)")
        assert b.shape == shape and torch.isfinite(b).all() and float(diff.max()) < 2.0
    for gen in gens:
        gen.close()


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graphs"])
def test_wan_streaming_gives_the_frames_whole_windows_give(graphs):
    """The streaming form (a 9-frame first window, then windows that follow on from the last one's last latent frame)
    against whole windows, at 288 px with TAEHV, fed as the core feeds keyframes at key stride 4 (5, then 4 a call):
    as many frames, each finite. With CUDA graphs the short window is a graph of its own; the window's DiT is graphed
    uncompiled here (the compiled graph: test_cuda_graphs_match_eager)."""
    from studio.generators.graphs import Graphed

    sizes = [5] + [4] * 24  # 101 frames: the short window and two later ones; two whole windows
    got = {}
    for first in (3, 0):
        gen = GENERATORS.create("wan2.1-1.3b-taehv", stream_first_latents=first)
        gen.compiled_targets = frozenset()
        gen.open(bench_anchor(), GeneratorSettings(device="cuda", size_px=288, precision="bf16", batch_frames=81,
                                                   cuda_graphs=graphs))
        assert ("dit_first" in gen.fns) == bool(first) and gen.info.first_window_frames == (9 if first else 0)
        if first:
            assert isinstance(gen.fns["dit_first"], Graphed) == graphs
        coeffs, feats = _inputs(gen, sum(sizes))
        outs, at = [], 0
        for b in sizes:
            out = gen.generate(coeffs[at:at + b], feats[at:at + b])
            assert out.shape == (b, 3, 288, 288) and out.device.type == "cuda"
            outs.append(out)
            at += b
        frames = torch.cat(outs)
        assert torch.isfinite(frames).all() and float(frames.std()) > 0
        got[first] = (frames.shape[0], gen.windows, gen.made)
        gen.close()
    assert got[3] == (101, 3, 9 + 80 + 80) and got[0] == (101, 2, 162)
