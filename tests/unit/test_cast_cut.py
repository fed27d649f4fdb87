"""A cast cut to the speaker: only the row on screen is made, one a frame, and it is the row the whole cast makes
(to float rounding: a landmark's matrix product rounds a little differently with fewer rows in the call); every
anchor's motion goes on, so a cut back shows an anchor where its motion is; the picture cuts on the frame where the
turn changes, inside a chunk too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collect_output import Collect
from studio.contracts import CastLayout, OnAir
from studio.contracts.coeffs import Coeff, example_motion

SIZE = 64
ROUNDING = 1e-2  # of a grey level (0..255), at most, between a row made alone and the same row of the whole cast
FPS = 25.0
RATE = 16000
ENGINE = "test-cast-rows"


@pytest.fixture(scope="module")
def two_packs(default_anchor):
    from studio.presenter.anchor import build_anchor, default_portrait

    mirrored = np.ascontiguousarray(default_portrait()[:, ::-1])
    return build_anchor(output_px=SIZE), build_anchor(mirrored, name="Mirrored", output_px=SIZE)


def _cast(packs, mattes: bool = False):
    from studio.presenter.cast_warp import CastWarp

    return CastWarp(packs, SIZE, SIZE // 4, 3, [p.matte for p in packs] if mattes else None).eval()


@pytest.mark.parametrize("mattes", [False, True])
def test_each_shown_row_is_the_casts_own_row(two_packs, mattes: bool) -> None:
    from studio.presenter.cast_warp import ShownRows

    cast = _cast(two_packs, mattes)
    c = torch.from_numpy(example_motion(12, seed=4).reshape(6, 2, -1))
    shown = np.array([0, 0, 1, 1, 0, 1])
    with torch.inference_mode():
        rows = cast(c)
        one = ShownRows(cast, 1.0).frames(c, shown)
    ch = cast.channels
    assert one.shape == (6, ch, SIZE, SIZE)
    for j, a in enumerate(shown):
        assert float((one[j] - rows[j, a * ch:(a + 1) * ch]).abs().max()) < ROUNDING


def test_keyframes_of_the_shown_rows_are_the_two_shots_across_cuts(two_packs) -> None:
    """Three contiguous spans with keyframes every fourth frame (what the silence sieve asks): a cut inside the
    first, and a cut at the start of the third to the anchor the second did not show (its carried field is made from
    the carried motion). Every frame is its anchor's row of the whole cast's interpolated span."""
    from studio.enhance.interp import MotionSpaceInterpolator
    from studio.presenter.cast_warp import ShownRows

    cast = _cast(two_packs)
    whole = MotionSpaceInterpolator(cast, 1.0)
    cut = ShownRows(cast, 1.0)
    # slow motion (most in-betweens are interpolated), and a jerk of the head off screen: the whole cast's plan
    # makes those frames in full for the anchor on screen too, as the two-shot does
    pose = torch.from_numpy(example_motion(2, seed=9).reshape(1, 2, -1)) * 0.3
    motion = pose * (0.6 + 0.4 * torch.sin(torch.arange(24.0) / 5)).view(-1, 1, 1)
    motion[10:12, 0, Coeff.HEAD_YAW_DEG] += 6.0
    shown = np.array([0] * 5 + [1] * 11 + [0] * 8)
    carry_w = carry_c = None
    with torch.inference_mode():
        for span in (slice(0, 8), slice(8, 16), slice(16, 24)):
            c, k = motion[span], shown[span]
            strides = np.full(len(k), 4)
            rows, carry_w = whole.render_causal(c, strides, carry_w)
            frames, carry_c = cut.span(c, strides, carry_c, k)
            assert frames.shape == (len(k), 3, SIZE, SIZE)
            for j, a in enumerate(k):
                assert float((frames[j] - rows[j, 3 * a:3 * a + 3]).abs().max()) < ROUNDING, (span, j)
            if len(set(k)) == 1:  # the off-screen anchor's field is not made (a cut to it makes it then)
                assert set(carry_c.fields) == {int(k[-1])}
    assert cut.frames_interpolated == whole.frames_interpolated > 8
    assert cut.frames_fallback == whole.frames_fallback > 0
    assert cut.rows_made == len(shown)


# -- the core ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def rows_asked():
    """Registers ``ENGINE``: the built-in engine, each call noted as (frames asked for, the rows it shows or None,
    the channels of the frames it made)."""
    from studio.contracts import GENERATORS
    from studio.generators.builtin import BuiltinGenerator

    calls: list[tuple[int, np.ndarray | None, int]] = []

    class Counted(BuiltinGenerator):
        def generate(self, coeffs, features=None, shown=None):
            out = super().generate(coeffs, features, shown=shown)
            calls.append((int(coeffs.shape[0]), None if shown is None else np.array(shown), int(out.shape[1])))
            return out

        def render_span(self, coeffs, strides, carry, shown=None):
            out, carry = super().render_span(coeffs, strides, carry, shown=shown)
            calls.append((int(coeffs.shape[0]), None if shown is None else np.array(shown), int(out.shape[1])))
            return out, carry

    GENERATORS.names()
    GENERATORS.register(ENGINE)(lambda **kw: Counted(**kw))
    yield calls
    GENERATORS._factories.pop(ENGINE, None)


def _speech(seconds: float, speaker: int, title: str):
    """Speech-like noise with phone timings (the mouth moves) spoken by cast row ``speaker``."""
    from studio.pipeline.sources import ProgramItem, resample
    from studio.speech.types import PhonemeTiming

    n = int(seconds * RATE)
    audio = (0.2 * np.random.default_rng(speaker).standard_normal(n) * np.hanning(n)).astype(np.float32)
    phones = tuple(PhonemeTiming(p, 0.1 * i, 0.1 * i + 0.1) for i, p in enumerate("hɛloʊwɜld"[:int(seconds * 10)]))
    return ProgramItem(resample(audio, RATE, 48000), audio, phonemes=phones,
                       on_air=OnAir(title, speaker=speaker))


def _programme(layout: CastLayout, packs, opts) -> tuple[np.ndarray, int]:
    from studio.pipeline.cast_motion import CastMotion
    from studio.pipeline.factory import make_core
    from studio.pipeline.programme import programme_settings
    from studio.pipeline.settings import CoreSettings
    from studio.pipeline.sources import ProgramSource

    # Anna speaks slots 0..24, Ben from 25: the turn falls inside the chunk of slots 24..31
    items = [_speech(1.0, 0, "Anna"), _speech(0.8, 1, "Ben")]
    s = programme_settings(CoreSettings(size_px=SIZE, fps=FPS, chunk_frames=8, batch_frames=8, engine=ENGINE,
                                        optimizations=frozenset(opts)), 2, layout)
    out = Collect()
    core = make_core(ProgramSource(items), CastMotion(2), s, packs, [out])
    try:
        rep = core.run()
    finally:
        core.pool.close()
    assert rep.frames_produced == items[1].end_slot
    return out.frames(), items[0].end_slot


@pytest.mark.parametrize("opts", [(), ("silence_sieve", "frame_interpolation")])
def test_the_cut_asks_for_one_row_a_frame_and_shows_the_speaker_on_each_side_of_the_turn(
        two_packs, rows_asked, opts) -> None:
    from studio.pipeline.settings import Optimization

    flags = {Optimization(o) for o in opts}
    shot, turn = _programme(CastLayout.TWO_SHOT, two_packs, flags)
    assert all(shown is None and ch == 6 for _, shown, ch in rows_asked)  # the two-shot: both rows, as before
    rows_asked.clear()
    cut, _ = _programme(CastLayout.CUT, two_packs, flags)

    # one row a frame at every call: the shown anchor's channels alone
    assert rows_asked and all(shown is not None and len(shown) == n and ch == 3 for n, shown, ch in rows_asked)
    shown = np.concatenate([s for _, s, _ in rows_asked])
    assert turn % 8 and list(shown) == [0] * turn + [1] * (len(cut) - turn)  # the turn, mid-chunk, to the frame

    # each frame is the speaker's half of the two-shot: Anna's up to the turn, Ben's from it (his motion ran on
    # while he was off screen)
    assert cut.shape == (len(shot), SIZE, SIZE, 3) and shot.shape[2] == 2 * SIZE
    for j in range(len(cut)):
        a = 0 if j < turn else 1
        mine, other = shot[j, :, a * SIZE:(a + 1) * SIZE], shot[j, :, (1 - a) * SIZE:(2 - a) * SIZE]
        diff = np.abs(cut[j].astype(int) - mine)
        assert diff.max() <= 1 and diff.mean() < 0.01, j  # a float's rounding at most flips a level
        assert np.abs(cut[j].astype(int) - other).mean() > 5, j
