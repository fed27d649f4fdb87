"""The three-stage pipeline: queues, clock, NV12, and a tiny plain vs optimized run that produces every frame."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from studio.pipeline.stages import (RATE_HZ, BoundedQueue, EncoderKind, FrameClock, Optimization, Pipeline,
                                    PipelineSettings, QueuePolicy, Segment, rgb_to_nv12)
from studio.speech.types import PhonemeTiming


def test_drop_oldest_queue_counts_drops():
    q = BoundedQueue(2, QueuePolicy.DROP_OLDEST)
    for i in range(5):
        q.put(i)
    assert q.drops == 3 and q.max_depth == 2
    assert [q.get(), q.get()] == [3, 4]


def test_blocking_queue_waits_for_the_consumer():
    q = BoundedQueue(1, QueuePolicy.BLOCK)
    got = []
    t = threading.Thread(target=lambda: [got.append(q.get()) for _ in range(3)])
    t.start()
    for i in range(3):
        q.put(i)
    t.join(timeout=10)
    assert got == [0, 1, 2] and q.drops == 0


def test_frame_clock():
    c = FrameClock(30.0)
    assert c.frames_for(RATE_HZ) == 30 and c.frames_for(RATE_HZ + 1) == 31
    assert c.sample_at(15) == RATE_HZ // 2 and c.pts_s(30) == 1.0


def test_nv12_layout():
    frames = torch.zeros(1, 3, 4, 4)
    frames[:, 0] = 255  # red
    nv12 = rgb_to_nv12(frames)
    assert nv12.shape == (1, 6, 4)
    assert int(nv12[0, 0, 0]) == 63  # Y of pure red, BT.709 limited range
    assert int(nv12[0, 4, 1]) == 240  # V (second of each chroma pair) of red


@pytest.fixture(scope="module")
def program():
    rng = np.random.default_rng(0)
    speech = (0.2 * rng.standard_normal(RATE_HZ)).astype(np.float32)
    audio = np.concatenate([speech, np.zeros(RATE_HZ // 2, np.float32)])
    phones = tuple(PhonemeTiming(p, 0.1 * i, 0.1 * i + 0.1) for i, p in enumerate("hɛloʊwɜld"))
    return [Segment(audio, phones), Segment(audio[: RATE_HZ // 3], ())]


@pytest.fixture(scope="module")
def anchor():
    from studio.presenter.anchor import build_anchor

    return build_anchor()


def _settings(opts) -> PipelineSettings:
    return PipelineSettings(size_px=96, fps=30.0, encoder=EncoderKind.NV12_HOST, optimizations=frozenset(opts))


def test_plain_and_optimized_produce_every_frame(anchor, program):
    plain = Pipeline(anchor, _settings(())).run(program)
    opt = Pipeline(anchor, _settings({Optimization.PYRAMIDAL, Optimization.FRAME_INTERPOLATION,
                                      Optimization.ASYNC_PIPELINE, Optimization.SILENCE_SIEVE})).run(program)
    assert plain.n_frames == opt.n_frames == 45 + 10
    assert plain.frames_full == plain.n_frames and plain.frames_interpolated == 0
    assert opt.frames_full + opt.frames_interpolated == opt.n_frames and opt.frames_interpolated > 0
    assert opt.drops == {"motion->generate": 0, "generate->post": 0}
    assert set(plain.stages) == {"motion", "generate", "post_encode"}
    assert opt.silent_frames > 0


def test_cuda_graphs_need_cuda(anchor):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from studio.errors import RenderError

    with pytest.raises(RenderError):
        Pipeline(anchor, _settings({Optimization.CUDA_GRAPHS}))
