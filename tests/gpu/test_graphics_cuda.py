"""The matte and the broadcast graphics composite on the GPU inside the core (run on the device machine:
`pytest -m gpu tests/gpu/test_graphics_cuda.py`): the CUDA canvas gives the CPU canvas's pictures; replayed as a CUDA
graph it gives the eager pictures across selections, dissolves and chunks larger than the graph's batch; a core run
with CUDA graphs cuts the presenter out over the set."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from studio.audio.settings import AudioEngine
from studio.contracts import Layout, OnAir, Output, ProgramBatch, ProgramFormat
from studio.graphics.look import CanvasStyle, Graphics
from studio.pipeline.settings import CoreSettings, Optimization

pytestmark = pytest.mark.gpu

O = Optimization


def _style() -> CanvasStyle:
    return CanvasStyle(graphics=Graphics(name="Eileen Collins", role="Anchor", ticker=("One", "Two <b>three</b>"),
                                         transition="dissolve"),  # no clock: a minute may turn mid-test
                       segments=(None, Graphics(headline="Storm warning")), place="right")


def _frames(n: int, p: int, device: str, seed: int) -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(seed)
    f = torch.rand((n, 4, p, p), generator=g) * 255
    f[:, 3] = (torch.linspace(0, 1, p).view(1, 1, p) * 255).expand(n, p, p)  # a ramp of matte
    return f.to(device)


def test_the_cuda_canvas_gives_the_cpu_pictures() -> None:
    from studio.pipeline.post import Canvas

    fmt = ProgramFormat(width=640, height=360, fps=25.0, layout=Layout.CANVAS, presenter_px=360)
    outs = {}
    for dev in ("cpu", "cuda"):
        c = Canvas(_style())
        c.open(fmt, dev)
        got = []
        for row, slots in ((0, np.arange(8)), (1, np.arange(8, 16)), (1, np.arange(16, 24))):
            c.select("Title", row, slots)
            got.append(c.compose(_frames(len(slots), 360, dev, int(slots[0]))).cpu())
        outs[dev] = torch.cat(got)
    assert (outs["cpu"].int() - outs["cuda"].int()).abs().max() <= 1


def test_the_graphed_canvas_gives_the_eager_pictures_across_batches(default_anchor) -> None:
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    s = CoreSettings(device="cuda", fps=60.0, chunk_frames=16, batch_frames=8, layout=Layout.CANVAS,
                     canvas_height_px=720, optimizations=frozenset({O.CUDA_GRAPHS}))
    core = make_core(ProgramSource([]), ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX), s, default_anchor, [],
                     canvas_style=_style())
    try:
        core.warm()
        canvas = core._open_canvas()
        p = core.fmt.presenter_px
        start = 0
        for row, n in ((0, 8), (1, 13), (1, 3)):
            frames = _frames(n, p, "cuda", start)
            slots = np.arange(start, start + n)
            canvas.select("Title", row, slots)
            last = canvas.last_out.clone()
            got = core._post_graph(frames, False)(frames)
            canvas.select("Title", row, slots)  # the same selection again, from the same last picture
            canvas.last_out.copy_(last)
            eager, _ = core._finish(frames, False)
            assert (got.int() - eager.int()).abs().max() <= 1, (row, n)
            start += n
    finally:
        core.close()


class _Collect(Output):
    name = "collect"

    def __init__(self) -> None:
        self.batches: list[ProgramBatch] = []

    def write(self, batch: ProgramBatch) -> None:
        self.batches.append(batch)


def test_a_graphed_core_run_cuts_the_presenter_out_over_the_set(default_anchor) -> None:
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramItem, ProgramSource, resample

    rng = np.random.default_rng(0)
    audio = (0.2 * rng.standard_normal(16000)).astype(np.float32)
    item = ProgramItem(resample(audio, 16000, 48000), audio, on_air=OnAir("one"))
    out = _Collect()
    s = CoreSettings(device="cuda", fps=60.0, chunk_frames=16, batch_frames=16, layout=Layout.CANVAS,
                     canvas_height_px=1080, optimizations=frozenset({O.CUDA_GRAPHS, O.PYRAMIDAL,
                                                                     O.FRAME_INTERPOLATION}))
    style = CanvasStyle(background_rgb=(20, 200, 40))
    core = make_core(ProgramSource([item]), ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX), s, default_anchor,
                     [out], canvas_style=style)
    try:
        gen = core.pool.get(True, True)
        assert gen.out_channels == 4  # frames carry the warped matte
        rep = core.run()
    finally:
        core.close()
    assert rep.frames_dropped == 0
    frames = np.concatenate([b.frames for b in out.batches])
    h, w = 1080, 1920
    x0 = (w - h) // 2
    beside = frames[:, int(h * 0.3), x0 + 60:x0 + 120]  # inside the presenter's box, beside the head
    assert np.abs(beside.astype(int) - [20, 200, 40]).max() <= 3  # the set, not the photo's backdrop
