"""The core with a streaming window engine (the Wan DiT's twin at a tiny size, with the wav2vec2-base twin as its audio
encoder, on the CPU): every frame of the program comes out once; a run's first chunk asks for no more frames than the
short first window makes, and its frames are written after that window alone; each run starts a stream of its own
on the generator forms kept between runs (as the leaderboard keeps them), so two runs of one program match."""

from __future__ import annotations

import numpy as np
import pytest

from _engine_fixtures import small_anchor
from studio.audio.settings import AudioEngine
from studio.contracts import GENERATORS, OnAir, Output, ProgramBatch
from studio.pipeline.settings import CoreSettings
from studio.speech.types import PhonemeTiming

pytest.importorskip("diffusers", reason="needs the 'engines' extra (NEWSSTUDIO_EXTRAS=engines ./installers/setup.sh)")
from studio.generators import wan_dit as wd  # noqa: E402

ENGINE = "test-wan-stream"
RATE = 16000
FPS = 25.0
SECONDS = 1.2
N_FRAMES = int(SECONDS * FPS)  # 30
# the DiT small, its audio as wav2vec2-base gives it (12 layers x 768); windows of 4 latent frames (13 frames)
TINY = wd.WanConfig(dim=64, ffn_dim=128, num_heads=4, num_layers=2, text_dim=32, clip_dim=32, audio_hidden=16,
                    vae_base_dim=8)


class Collect(Output):
    """Keeps what the core hands out, and the DiT calls made before each batch (``calls`` is the engine's log)."""

    name = "collect"

    def __init__(self, calls: list) -> None:
        self.batches: list[ProgramBatch] = []
        self.calls = calls
        self.calls_before: list[list] = []

    def write(self, batch: ProgramBatch) -> None:
        self.batches.append(batch)
        self.calls_before.append(list(self.calls))


@pytest.fixture(scope="module")
def engine_calls():
    """Registers ``ENGINE``; its forms log each DiT call's latent frame count and each decode's."""
    calls: list[tuple[str, int]] = []

    class Logged(wd.WanDiTGenerator):
        def _to_device(self) -> None:
            super()._to_device()
            for name, fn in list(self.fns.items()):
                kind = "decode" if name == "vae_decoder" else "dit"
                self.fns[name] = lambda *a, _f=fn, _k=kind: calls.append((_k, a[0].shape[2])) or _f(*a)

    GENERATORS.register(ENGINE)(lambda **kw: Logged(TINY, steps=1, latent_frames=4, decoder=wd.VideoDecoder.TAEHV,
                                                    **kw))
    yield calls
    GENERATORS._factories.pop(ENGINE, None)


def _program():
    from studio.pipeline.sources import ProgramItem, resample

    rng = np.random.default_rng(0)
    audio = (0.2 * rng.standard_normal(int(SECONDS * RATE))).astype(np.float32)
    phones = tuple(PhonemeTiming(p, 0.1 * i, 0.1 * i + 0.1) for i, p in enumerate("hɛloʊwɜld"))
    return [ProgramItem(resample(audio, RATE, 48000), audio, phonemes=phones, on_air=OnAir("one"))]


def _run(calls: list, forms: dict, **changes):
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    calls.clear()
    out = Collect(calls)
    s = CoreSettings(size_px=64, fps=FPS, engine=ENGINE, native_px=64, chunk_frames=8, **changes)
    core = make_core(ProgramSource(_program()), ProgramMotion(audio_engine=AudioEngine.POCKETSPHINX), s,
                     small_anchor(), [out], on_air=False, forms=forms)
    rep = core.run()
    return rep, out, core


def test_the_first_frame_waits_for_the_short_window_and_each_run_streams_afresh(engine_calls):
    from studio.pipeline.pool import close_forms

    forms: dict = {}
    try:
        runs = [_run(engine_calls, forms, stream_first_latents=2) for _ in range(2)]
        gens = {id(g) for g, _ in forms.values()}
        assert len(gens) == 1  # the second run used the first run's form
        for rep, out, core in runs:
            assert core.pool.info.first_window_frames == 5
            assert rep.frames_produced == N_FRAMES and rep.stop_reason == "end of program"
            slots = [int(s) for b in out.batches for s in b.slots]
            assert slots == list(range(N_FRAMES))  # every frame once, in order, as many as the audio lasts
            assert len(out.batches[0].slots) == 5 and len(out.batches[1].slots) == 8  # the first chunk: 5 frames
            # written after the short window alone: one step over its 2 latent frames and their decode
            assert out.calls_before[0] == [("dit", 2), ("decode", 2)]
            assert rep.first_frame_s is not None
        # the second run started its own stream: the same program gives the same frames (nothing left over from the
        # first run was handed out)
        a, b = (np.concatenate([x.frames for x in out.batches]) for _, out, _ in runs)
        assert a.shape == (N_FRAMES, 64, 64, 3) and a.std() > 0
        np.testing.assert_array_equal(a, b)
    finally:
        close_forms(forms)


def test_whole_windows_keep_the_chunks_the_settings_ask_for(engine_calls):
    from studio.pipeline.pool import close_forms

    forms: dict = {}
    try:
        rep, out, core = _run(engine_calls, forms, stream_first_latents=0)
        assert core.pool.info.first_window_frames == 0
        assert [len(b.slots) for b in out.batches] == [8, 8, 8, 6] and rep.frames_produced == N_FRAMES
        assert out.calls_before[0] == [("dit", 4), ("decode", 4)]  # the first frame waited for a whole window
    finally:
        close_forms(forms)
