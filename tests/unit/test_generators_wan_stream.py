"""The Wan DiT engines' streaming form on the CPU, at a tiny size: the window schedule, frames that follow on across the
short first window and the later ones (each frame once, in order, as many as the audio has), the previous window's
last latent frame given to the next, the first frame after the short window alone, a seeded stream that repeats."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from _engine_fixtures import EXTRA, motion, small_anchor
from studio.errors import InputError
from studio.generators.windows import WindowPlan, WindowSchedule, frames_of
from studio.contracts import GeneratorSettings

pytest.importorskip("diffusers", reason=EXTRA)
from studio.generators import wan_dit as wd  # noqa: E402

SMALL = wd.WanConfig(dim=64, ffn_dim=128, num_heads=4, num_layers=2, text_dim=32, clip_dim=32, audio_dim=16,
                     audio_layers=3, audio_hidden=16, vae_base_dim=8)
SIZE = 32


def test_the_schedule_counts_every_frame_once():
    whole = WindowSchedule(21)
    assert frames_of(21) == 81 and frames_of(3) == 9 and frames_of(1) == 1 and frames_of(0) == 0
    assert whole.plan(0) == whole.plan(5) == WindowPlan(21, 0, 81, 0) and whole.first_window_frames == 0
    stream = WindowSchedule(21, 3, 1)
    assert stream.plan(0) == WindowPlan(3, 0, 9, 0) and stream.first_window_frames == 9
    assert stream.plan(1) == stream.plan(7) == WindowPlan(21, 1, 80, 1)  # the context's frame was handed out before
    assert [p.new_frames for p in stream.windows_for(89)] == [9, 80]
    assert [p.new_frames for p in stream.windows_for(90)] == [9, 80, 80]
    two = WindowSchedule(21, 3, 2)
    assert two.plan(1) == WindowPlan(21, 2, 76, 5)  # 2 latent frames of context show 5 frames
    assert WindowSchedule(5, 5, 1).plan(0) == WindowPlan(5, 0, 17, 0)  # a whole first window, later ones overlapped


@pytest.mark.parametrize("args, words", [((21, 22), r"use 0 \(whole windows\) or 1 to 21"), ((21, -1), "use 0"),
                                         ((21, 2, 3), "use 1 to 2"), ((21, 3, 0), "use 1 to 3"),
                                         ((1, 1), "use 2 or more")])
def test_a_schedule_that_cannot_be_is_refused_in_one_line(args, words):
    with pytest.raises(InputError, match=words) as e:
        WindowSchedule(*args)
    assert "\n" not in str(e.value)


def test_the_engines_declare_their_streaming_form():
    from studio.contracts import GENERATORS

    for name in ("wan2.1-1.3b", "wan2.1-1.3b-taehv-fp8", "wan2.1-14b"):
        info = GENERATORS.create(name).info
        assert info.stream_windows and info.first_window_frames == 9  # by default, 3 latent frames
    assert GENERATORS.create("wan2.1-1.3b", stream_first_latents=0).info.first_window_frames == 0
    assert GENERATORS.create("wan2.1-1.3b-taehv", stream_first_latents=2).info.first_window_frames == 5
    assert not GENERATORS.create("builtin").info.stream_windows
    with pytest.raises(InputError, match="stream_first_latents 30 does not fit a window of 21 latent frames"):
        GENERATORS.create("wan2.1-1.3b", stream_first_latents=30)


class IdStream:
    """A stand-in DiT and decoder (installed as the engine's compiled targets) that make each frame show the number
    its audio carries: one Euler step lands on latents whose latent frame j holds, in channels 0..3, the numbers of
    the frames it decodes to (read from the audio windows the DiT is given: their centres), and the decoder turns
    latent frame 0 into one frame and every other into four, as the video VAE does. Audio number 0 is silence."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def dit(self, inp, t, ctx, first, latter):
        """inp: 2 x 36 x F x h x w; first: 2 x 1 x 5 x 3 x 16; latter: 2 x (F - 1) x 8 x 3 x 16."""
        x, f = inp[:1, :16], inp.shape[2]
        target = torch.zeros_like(x)
        target[0, 0, 0] = first[0, 0, 2, 0, 0]  # frame 0's own number (its window's centre)
        for j in range(1, f):
            target[0, :4, j] = latter[0, j - 1, 2:6, 0, 0][:, None, None]  # frames 4j - 3 .. 4j
        self.calls.append({"latents": f, "mask": inp[0, 16:20, :, 0, 0].clone(),
                           "given": inp[0, 20:24, :, 0, 0].clone()})
        return (x - target).expand(2, -1, -1, -1, -1)  # the same for both guidance passes: guided = this

    @staticmethod
    def decode(z):
        """1 x 16 x F x h x w -> 1 x 3 x (4 (F - 1) + 1) x 8h x 8w in -1..1 (0..255 after the engine's scaling)."""
        ids = [z[0, 0, 0, 0, 0]] + [z[0, r, j, 0, 0] for j in range(1, z.shape[2]) for r in range(4)]
        v = torch.stack(ids) / 127.5 - 1
        return v[None, None, :, None, None].expand(1, 3, -1, 8 * z.shape[3], 8 * z.shape[4])


def _id_engine(first_latents: int, latent_frames: int = 4) -> tuple[wd.WanDiTGenerator, IdStream]:
    g = wd.WanDiTGenerator(SMALL, steps=1, latent_frames=latent_frames, stream_first_latents=first_latents)
    g.open(small_anchor(), GeneratorSettings(size_px=SIZE))
    fake = IdStream()
    g.install_engine("dit", fake.dit)
    if "dit_first" in g.fns:
        g.install_engine("dit_first", fake.dit)
    g.install_engine("vae_decoder", fake.decode)
    return g, fake


def _numbered(n: int, start: int = 1) -> torch.Tensor:
    """n frames of audio features, frame k carrying the number start + k."""
    return torch.arange(start, start + n, dtype=torch.float32)[:, None, None].expand(n, 3, 16).clone()


def _shown(frames: torch.Tensor) -> list[int]:
    return [int(round(float(v))) for v in frames[:, 0, 0, 0]]


@pytest.mark.parametrize("first_latents", [2, 1, 4, 0])
def test_frames_follow_on_across_the_windows_each_once_and_in_order(first_latents):
    """Windows of 4 latent frames (13 frames; 12 new after the first, streaming): 41 frames whose audio is all there
    come out as frames 1..41, across the short first window and three later ones."""
    g, fake = _id_engine(first_latents)
    n = 41
    out = g.generate(motion(n), _numbered(n))
    assert out.shape == (n, 3, SIZE, SIZE)
    assert _shown(out) == list(range(1, n + 1))
    first = frames_of(first_latents) if first_latents else 13
    new = 12 if first_latents else 13
    assert g.made == first + new * -(-(n - first) // new) and g.ahead.shape[0] == g.made - n
    latents = [c["latents"] for c in fake.calls]
    assert latents == [first_latents or 4] + [4] * (len(latents) - 1)
    for i, call in enumerate(fake.calls):
        given = i > 0 and first_latents > 0
        # a later window is given the last one's last latent frame: mask 1, and its latent (the numbers of the 4
        # frames it showed, the last of them the frame before the window's first new one; a first window of one latent
        # frame showed one frame)
        assert bool((call["mask"][:, 0] == 1).all()) == given
        if given:
            last = first + new * (i - 1)
            shown = [last, 0, 0, 0] if i == 1 and first_latents == 1 else [last - 3, last - 2, last - 1, last]
            assert call["given"][:, 0].tolist() == shown


def test_in_chunks_each_frame_comes_once_in_order_with_the_audio_that_arrived_in_time():
    """The core's chunks (5, then 4s and odd ones): as many frames out as asked, 53 in all; a frame shows its own
    number where its audio had arrived when its window ran, silence (0) where it came too late - never another
    frame's number, never twice."""
    g, fake = _id_engine(2)
    sizes = [5, 4, 4, 1, 7, 4, 13, 2, 4, 9]
    shown, k = [], 0
    for b in sizes:
        out = g.generate(motion(b), _numbered(b, start=k + 1))
        assert out.shape[0] == b
        shown += _shown(out)
        k += b
    assert len(shown) == sum(sizes) == 53
    assert all(v in (0, i + 1) for i, v in enumerate(shown)), shown
    # the windows start at frames 1 (the short one), 6, 18, 30 and 42, each run when the frames asked for reach it,
    # on the audio fed by then: up to frames 5, 9, 21, 38 and 44
    heard = [v for v in shown if v]
    assert heard == [*range(1, 10), *range(18, 22), *range(30, 39), *range(42, 45)]


def test_the_first_frame_waits_for_the_short_window_only():
    """On a fresh stream the first frame costs the short window's DiT steps (at its latent count) and one decode of
    its latents; whole windows cost a whole window's."""
    counts = {}
    for first_latents in (2, 0):
        g = wd.WanDiTGenerator(SMALL, steps=2, latent_frames=5, stream_first_latents=first_latents)
        g.open(small_anchor(), GeneratorSettings(size_px=SIZE))
        calls = []
        for name in [k for k in g.fns if k != "vae_decoder"]:
            eager = g.fns[name]
            g.install_engine(name, lambda *a, _e=eager: calls.append(("dit", a[0].shape[2])) or _e(*a))
        decode = g.fns["vae_decoder"]
        g.install_engine("vae_decoder", lambda z: calls.append(("decode", z.shape[2])) or decode(z))
        out = g.generate(motion(1), torch.randn(1, 3, 16))
        assert out.shape == (1, 3, SIZE, SIZE) and torch.isfinite(out).all()
        counts[first_latents] = calls
    assert counts[2] == [("dit", 2), ("dit", 2), ("decode", 2)]  # 2 steps over 2 latent frames: 5 frames made
    assert counts[0] == [("dit", 5), ("dit", 5), ("decode", 5)]


def test_a_seeded_stream_repeats_and_a_new_stream_starts_afresh():
    def stream(seed: int, g=None):
        if g is None:
            g = wd.WanDiTGenerator(SMALL, steps=1, latent_frames=3, stream_first_latents=2,
                                   decoder=wd.VideoDecoder.TAEHV)
            g.open(small_anchor(), GeneratorSettings(size_px=SIZE, seed=seed))
        torch.manual_seed(123)  # the audio: the same for every stream
        outs = [g.generate(motion(b), torch.randn(b, 3, 16)) for b in (3, 4, 4, 6)]  # 17: windows of 5, 8, 8
        return g, torch.cat(outs)

    g, a = stream(0)
    _, b = stream(0)
    _, c = stream(1)
    assert a.shape == (17, 3, SIZE, SIZE) and torch.isfinite(a).all() and float(a.std()) > 0
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert g.windows == 3 and g.made == 5 + 8 + 8
    g.new_stream()  # what the core does at the start of a run: nothing of the old stream is handed out
    assert g.ahead.shape[0] == 0 and g.tail is None and g.windows == 0
    _, again = stream(0, g)
    assert torch.equal(again, a)


def test_one_opened_form_runs_either_schedule():
    g = wd.WanDiTGenerator(SMALL, steps=1, latent_frames=3, stream_first_latents=0)
    g.open(small_anchor(), GeneratorSettings(size_px=SIZE))
    assert "dit_first" not in g.fns and g.info.first_window_frames == 0
    g.set_first_window(2)
    g.new_stream()
    assert g.info.first_window_frames == 5 and "dit_first" in g.fns
    assert g.generate(motion(2), torch.randn(2, 3, 16)).shape[0] == 2 and g.made == 5
    g.set_first_window(0)
    g.new_stream()
    assert g.generate(motion(2), torch.randn(2, 3, 16)).shape[0] == 2 and g.made == 9
    with pytest.raises(InputError, match="does not fit"):
        g.set_first_window(4)
    # a form that runs CUDA graphs has the short window's graph it was opened with, and no other
    g = wd.WanDiTGenerator(SMALL, steps=1, latent_frames=3, stream_first_latents=2)
    g.open(small_anchor(), GeneratorSettings(size_px=SIZE))
    g.settings = replace(g.settings, cuda_graphs=True)
    for latents in (0, 2, 3, 0, 2):
        g.set_first_window(latents)
    with pytest.raises(InputError, match="no CUDA graph of a 1-latent first window"):
        g.set_first_window(1)
