"""LivePortrait draws a cast: each anchor is a row of the same warp and decoder calls, and that row is what the engine
opened on that anchor alone draws; a cut shows one row a frame. Through the core with keyframes: RIFE fills each
anchor of a two-shot on its own, and never across a cut. An engine that draws one anchor refuses a cast, naming the
engines that can."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from collect_output import Collect
from _engine_fixtures import motion, small_anchor
from studio.contracts import GENERATORS, CastLayout, Chunk, GeneratorSettings, OnAir
from studio.contracts.coeffs import Coeff
from studio.errors import RenderError
from studio.generators.liveportrait import (LivePortraitGenerator, bins_to_degrees, open_ratio, stitch,
                                            transform_keypoints)
from studio.generators.common import image_tensor, to_size
from test_generators_liveportrait import SMALL

SIZE = 32
ENGINE = "test-liveportrait-cast"
ROUNDING = 1e-2  # of a grey level (0..255), at most, between a row made beside other anchors' rows and made alone
PACKS = (small_anchor(seed=0), small_anchor(seed=1))


def _open(anchor, batch: int = 4) -> LivePortraitGenerator:
    gen = LivePortraitGenerator(SMALL, source_px=64)
    gen.open(anchor, GeneratorSettings(size_px=SIZE, batch_frames=batch, seed=3))
    return gen


def _cast_motion(frames: int, seed: int = 1) -> torch.Tensor:
    """frames x 2 x N_COEFFS: each anchor's own motion."""
    return torch.stack([motion(frames, seed), motion(frames, seed + 10)], 1)


# -- the engine -------------------------------------------------------------------------------------------------------

def _reference(gen: LivePortraitGenerator, anchor, coeffs: torch.Tensor) -> torch.Tensor:
    """One anchor's frames computed step by step from the engine's networks (the release's order: keypoints of the
    portrait, driving keypoints by pose, retargeting and stitching, then warp and decoder per batch)."""
    n, k, dt, bs = gen.nets, SMALL.num_kp, gen.dtype, gen.settings.batch_frames
    src_img = image_tensor(anchor.image, 64, gen.device)
    feature = n.appearance_feature_extractor(src_img)
    info = {key: v.float() for key, v in n.motion_extractor(src_img).items()}
    pitch0, yaw0, roll0 = (bins_to_degrees(info[a]) for a in ("pitch", "yaw", "roll"))
    kp_c, exp0, scale0, t0 = info["kp"].view(1, k, 3), info["exp"].view(1, k, 3), info["scale"][:, 0], info["t"]
    kp_source = transform_keypoints(kp_c, pitch0, yaw0, roll0, exp0, scale0, t0)
    lm = anchor.landmarks
    lip_ratio = open_ratio(lm, 13, 14, 61, 291)
    eyes = (open_ratio(lm, 159, 145, 33, 133), open_ratio(lm, 386, 374, 263, 362))
    width = float(np.ptp(np.asarray(lm)[:, 0])) / anchor.image.shape[1] * 2
    out = []
    for i in range(0, coeffs.shape[0], bs):
        c = coeffs[i:i + bs].float()
        b = c.shape[0]
        t = t0.expand(b, 3).clone()
        t[:, 0] += c[:, Coeff.SHIFT_X] * width
        t[:, 1] += c[:, Coeff.SHIFT_Y] * width
        kp = transform_keypoints(kp_c.expand(b, k, 3), pitch0 + c[:, Coeff.HEAD_PITCH_DEG],
                                 yaw0 + c[:, Coeff.HEAD_YAW_DEG], roll0 + c[:, Coeff.HEAD_ROLL_DEG],
                                 exp0.expand(b, k, 3), scale0.expand(b), t)
        src = kp_source.expand(b, k, 3).float()
        lip_open = (c[:, Coeff.JAW_OPEN] * 0.6 + c[:, Coeff.LIP_PART] * 0.2) * (1 - c[:, Coeff.LIP_PRESS])
        blink = (c[:, Coeff.BLINK_L] + c[:, Coeff.BLINK_R]) / 2
        eye_d = (1 - blink) * (sum(eyes) / 2)
        lip = torch.stack([torch.full_like(lip_open, lip_ratio), lip_open], 1)
        eye = torch.stack([torch.full_like(eye_d, eyes[0]), torch.full_like(eye_d, eyes[1]), eye_d], 1)
        flat = src.reshape(b, -1)
        kp = kp + n.lip(torch.cat([flat, lip], 1).to(dt)).float().view(b, k, 3)
        kp = kp + n.eye(torch.cat([flat, eye], 1).to(dt)).float().view(b, k, 3)
        kp_d = stitch(lambda x: n.stitching(x.to(dt)).float(), src, kp).to(dt)
        warped = n.warping_module(feature.expand(b, -1, -1, -1, -1), kp_source.expand(b, -1, -1).to(dt), kp_d)
        out.append(n.spade_generator(warped))
    return to_size(torch.cat(out).float() * 255.0, SIZE)


def test_one_anchor_draws_the_releases_frames_bit_for_bit() -> None:
    gen = _open(PACKS[0], batch=2)
    c = motion(5)
    with torch.inference_mode():
        assert torch.equal(gen.generate(c), _reference(gen, PACKS[0], c))
    assert gen.out_channels == 3 and gen.cast_size == 1
    with pytest.raises(RenderError, match="Only a cast of several anchors has rows to show"):
        gen.generate(c, shown=np.zeros(5, np.int64))


def test_each_row_of_a_cast_is_what_its_anchor_draws_alone() -> None:
    cast = _open(PACKS, batch=4)
    c = _cast_motion(5)
    frames = cast.generate(c)
    assert cast.out_channels == 6 and frames.shape == (5, 6, SIZE, SIZE)
    alone = [_open(p).generate(c[:, a]) for a, p in enumerate(PACKS)]
    for a in range(2):
        assert torch.allclose(frames[:, 3 * a:3 * a + 3], alone[a], atol=ROUNDING, rtol=0), a
    assert (alone[0] - alone[1]).abs().mean() > 1.0  # the anchors' pictures differ: each row is its own anchor's


def test_a_casts_anchors_are_rows_of_the_same_calls() -> None:
    """Two anchors of 6 frames at 4 rows a call: 3 warp calls and 3 decoder calls, not one run per anchor."""
    cast = _open(PACKS, batch=4)
    calls = {"warping_module": [], "spade_generator": []}
    for name, fn in list(cast.fns.items()):
        cast.fns[name] = lambda *x, fn=fn, name=name: calls[name].append(x[0].shape[0]) or fn(*x)
    cast.generate(_cast_motion(6))
    assert calls == {"warping_module": [4, 4, 4], "spade_generator": [4, 4, 4]}


def test_shown_draws_each_frames_shown_anchor_alone() -> None:
    cast = _open(PACKS, batch=2)
    c = _cast_motion(5, seed=4)
    both = cast.generate(c)
    shown = np.array([1, 1, 0, 1, 0])  # a batch of one anchor's rows, then batches of both
    one = cast.generate(c, shown=shown)
    assert one.shape == (5, 3, SIZE, SIZE)
    for j, a in enumerate(shown):
        assert torch.allclose(one[j], both[j, 3 * a:3 * a + 3], atol=ROUNDING, rtol=0), j
    with pytest.raises(RenderError, match="one anchor of 0..1 per frame"):
        cast.generate(c, shown=np.array([0, 1, 2, 0, 0]))
    with pytest.raises(RenderError, match="takes B x 2 x N_COEFFS motion"):
        cast.generate(c[:, 0])


def test_closing_a_cast_lets_go_of_every_anchor() -> None:
    cast = _open(PACKS)
    assert len(cast.anchors) == 2 and cast.volumes.shape[0] == 2
    cast.close()
    assert cast.anchors == [] and cast.volumes is None and cast.kp_sources is None and cast.nets is None


# -- engines that draw one anchor ----------------------------------------------------------------------------------

def test_which_engines_draw_a_cast() -> None:
    able = {n for n in ("builtin", "liveportrait", "wav2lip", "musetalk-1.5", "ditto", "wan2.1-1.3b")
            if GENERATORS.get(n)().info.cast_rows}
    assert able == {"builtin", "liveportrait"}


def test_an_engine_that_draws_one_anchor_refuses_a_cast_and_names_those_that_can() -> None:
    from studio.generators.wav2lip import Wav2LipGenerator
    from studio.pipeline.pool import GeneratorPool
    from studio.pipeline.settings import CoreSettings

    with pytest.raises(RenderError) as err:
        GeneratorPool("wav2lip", PACKS, CoreSettings(size_px=64, engine="wav2lip", cast_size=2), 64)
    msg = str(err.value)
    assert msg.startswith("Wav2Lip draws one anchor: a cast of 2 needs an engine that draws several (")
    assert "Built-in presenter" in msg and "LivePortrait" in msg and "Ditto" not in msg
    with pytest.raises(RenderError, match="Wav2Lip draws one anchor: a cast of 2"):
        Wav2LipGenerator().open(PACKS, GeneratorSettings(size_px=64))
    GeneratorPool("liveportrait", PACKS, CoreSettings(size_px=64, engine="liveportrait", cast_size=2), 64)


# -- through the core, with keyframes + RIFE ------------------------------------------------------------------------


@pytest.fixture
def asked():
    """Registers ``ENGINE``, a small LivePortrait twin drawing at SIZE; each call noted as (rows asked for, the
    rows shown or None)."""
    calls: list[tuple[int, np.ndarray | None]] = []

    class Noted(LivePortraitGenerator):
        def generate(self, coeffs, features=None, shown=None):
            calls.append((int(coeffs.shape[0]), None if shown is None else np.array(shown)))
            return super().generate(coeffs, features, shown=shown)

    GENERATORS.names()
    GENERATORS.register(ENGINE)(lambda **kw: Noted(SMALL, source_px=64))
    yield calls
    GENERATORS._factories.pop(ENGINE, None)


def _settings(layout: CastLayout):
    from studio.pipeline.programme import programme_settings
    from studio.pipeline.settings import CoreSettings, Optimization

    # generated at SIZE, shown at 2 x SIZE: the keyframes are upscaled, and the in-betweens made at the large size
    return programme_settings(CoreSettings(size_px=2 * SIZE, native_px=SIZE, fps=25.0, chunk_frames=8, batch_frames=4,
                                           engine=ENGINE, key_stride=2,
                                           optimizations=frozenset({Optimization.FRAME_INTERPOLATION})), 2, layout)


def _programme(layout: CastLayout) -> tuple[np.ndarray, object]:
    from studio.pipeline.cast_motion import CastMotion
    from studio.pipeline.factory import make_core
    from studio.pipeline.sources import ProgramItem, ProgramSource

    rate = 16000
    items = []
    for speaker, seconds in ((0, 1.0), (1, 0.8)):  # Anna speaks slots 0..24, Ben from 25 (inside slots 24..31)
        n = int(seconds * rate)
        audio = (0.2 * np.random.default_rng(speaker).standard_normal(n) * np.hanning(n)).astype(np.float32)
        items.append(ProgramItem(np.repeat(audio, 3), audio, on_air=OnAir(f"row {speaker}", speaker=speaker)))
    out = Collect()
    core = make_core(ProgramSource(items), CastMotion(2), _settings(layout), PACKS, [out], on_air=False)
    try:
        rep = core.run()
    finally:
        core.close()
    assert rep.stop_reason == "end of program" and rep.frames_produced == items[1].end_slot == 45
    return out.frames(), rep


def test_a_two_shot_with_keyframes_fills_each_anchor_on_its_own(asked) -> None:
    frames, rep = _programme(CastLayout.TWO_SHOT)
    assert frames.shape == (45, 2 * SIZE, 4 * SIZE, 3)
    assert all(shown is None for _, shown in asked)
    assert rep.frames_full == sum(n for n, _ in asked) < 45 and rep.frames_interpolated == 45 - rep.frames_full


def test_a_cut_with_keyframes_never_blends_across_a_turn(asked) -> None:
    """A programme cut to the speaker: the source ends a chunk where Ben's turn begins (slot 25), so every generator
    call shows one anchor, each chunk its keyframes alone; no frame is an in-between of the two faces."""
    shot, _ = _programme(CastLayout.TWO_SHOT)
    asked.clear()
    cut, rep = _programme(CastLayout.CUT)
    assert cut.shape == (45, 2 * SIZE, 2 * SIZE, 3)
    assert all(len(set(s)) == 1 for _, s in asked)
    assert [s[0] for _, s in asked] == sorted(s[0] for _, s in asked)  # Anna's calls, then Ben's
    assert all(n < 8 for n, _ in asked)  # every chunk: its keyframes alone
    assert rep.frames_full == sum(n for n, _ in asked) and rep.frames_interpolated == 45 - rep.frames_full
    for j in range(45):  # each frame is its speaker's, never the other anchor's nor a blend of both
        a = 0 if j < 25 else 1
        mine = np.abs(cut[j].astype(int) - shot[j, :, a * 2 * SIZE:(a + 1) * 2 * SIZE]).mean()
        other = np.abs(cut[j].astype(int) - shot[j, :, (1 - a) * 2 * SIZE:(2 - a) * 2 * SIZE]).mean()
        assert mine < 0.25 * other, j


def test_a_cut_carries_no_keyframe_across_a_turn_at_a_chunks_start(asked) -> None:
    """Stage B of a cut, chunk by chunk: a turn inside a chunk makes it in full; the next chunk, though it shows the
    same anchor, has no keyframe of it carried (the chunk before went without RIFE) and starts afresh; then RIFE
    carries on; a turn at a chunk's first slot starts afresh again."""
    from studio.pipeline.factory import make_core
    from studio.pipeline.cast_motion import CastMotion
    from studio.pipeline.settings import Optimization
    from studio.pipeline.sources import ProgramSource

    core = make_core(ProgramSource([]), CastMotion(2), _settings(CastLayout.CUT), PACKS, [], on_air=False)
    speakers = [[0] * 8, [0] * 4 + [1] * 4, [1] * 8, [1] * 8, [0] * 8]
    got = []
    try:
        for i, rows in enumerate(speakers):
            chunk = Chunk(index=i, slots=np.arange(8 * i, 8 * i + 8), audio=np.zeros(0, np.float32), audio_start=0,
                          analysis=np.zeros(0, np.float32), analysis_start=0, speakers=np.array(rows),
                          optimizations=frozenset({Optimization.FRAME_INTERPOLATION}),
                          coeffs=_cast_motion(8, seed=i).numpy(), strides=np.full(8, 2))
            core._stage_b(chunk)
            with torch.inference_mode():
                batch, _ = core.post.program(chunk, [])
            assert batch.frames.shape == (8, 2 * SIZE, 2 * SIZE, 3)
            got.append((None if chunk.key_mask is None else bool(chunk.key_mask[0]), chunk.restart))
    finally:
        core.close()
    # (slot 0 a keyframe, or None: every slot made; RIFE starts afresh)
    assert got == [(True, True), (None, False), (True, True), (False, False), (True, True)]


def test_rows_flow_fill_fills_each_anchor_as_its_own_flow_fill() -> None:
    """A two-shot's RIFE: each anchor's channels come out as a FlowFill of their own makes them (its own keyframe
    carried across chunks), at the large size too, and a chunk's in-betweens count once for all anchors."""
    from studio.pipeline.post import FlowFill, RowsFlowFill

    y, x = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")

    def frame(shift: float, row: int) -> torch.Tensor:  # each anchor's pattern moves its own way
        moved = x - shift * (1 - 2 * row)
        return (127 + 100 * torch.sin(moved / (5 + row)) * torch.cos(y / 9)).expand(1, 3, 32, 32)

    def keys(*shifts: float) -> torch.Tensor:
        return torch.cat([torch.cat([frame(s, 0), frame(s, 1)], 1) for s in shifts])

    def up(f: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(f, scale_factor=2, mode="bicubic", align_corners=False)

    chunks = [(keys(1, 4), np.array([False, True, False, False, True])),
              (keys(6, 8), np.array([False, True, False, True]))]
    rows, alone = RowsFlowFill("cpu", 2), [FlowFill("cpu"), FlowFill("cpu")]
    assert rows.fills[1].rife is rows.fills[0].rife
    for large in (False, True):
        for i, (k, mask) in enumerate(chunks):
            big = up(k) if large else None
            got = rows.fill(k, mask, restart=i == 0, large=big)
            assert got.shape == (len(mask), 6, *(k.shape[-2:] if not large else big.shape[-2:]))
            for a, ff in enumerate(alone):
                want = ff.fill(k[:, 3 * a:3 * a + 3], mask, restart=i == 0,
                               large=None if big is None else big[:, 3 * a:3 * a + 3])
                assert torch.equal(got[:, 3 * a:3 * a + 3], want), (large, i, a)
    assert rows.frames_interpolated == alone[0].frames_interpolated == 2 * (2 + 2)  # slots 2, 3; then 0, 2: twice
