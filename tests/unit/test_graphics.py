"""The presenter's matte, the canvas's set and graphics, and the rundown's graphics fields."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch


def test_the_matte_moves_with_the_warp_of_the_face(default_anchor) -> None:
    """A frame's matte is the pack's matte warped by the frame's own field: where the head turns and shifts, the
    matte's edge goes with it (and away from where it was at rest)."""
    import torch.nn.functional as F

    from studio.contracts.coeffs import N_COEFFS, Coeff
    from studio.presenter.matte import MatteWarp
    from studio.presenter.renderer import WarpRenderer

    assert default_anchor.matte is not None and not default_anchor.matte.poor
    size = 128
    r = WarpRenderer(default_anchor, size, 64, newton_steps=3).eval()
    plain = WarpRenderer(default_anchor, size, 64, newton_steps=3).eval()
    warp = MatteWarp(r, default_anchor.matte)
    c = torch.zeros((2, N_COEFFS))
    c[1, Coeff.HEAD_ROLL_DEG] = 4.0
    c[1, Coeff.SHIFT_X] = 6.0
    with torch.inference_mode():
        frames = warp(c)
        grid, _ = plain.warp_field(c)
    assert frames.shape == (2, 4, size, size)
    rest_alpha = F.interpolate(torch.from_numpy(default_anchor.matte.alpha)[None, None], size=(size, size),
                               mode="bilinear", align_corners=False, antialias=True)
    expected = F.grid_sample(rest_alpha.expand(2, -1, -1, -1), grid, mode="bilinear", padding_mode="border",
                             align_corners=False)
    got = frames[:, 3:4] / 255.0
    assert (got - expected).abs().max() < 1e-3  # the pack's matte through the face's own field
    moved = (got[1] - got[0]).abs()
    assert float((moved > 0.5).float().mean()) > 0.003  # the head moved, and its matte with it
    # inside the person the picture is the renderer's own: the warp of the face is the same
    with torch.inference_mode():
        own = plain(c)
    inside = (got > 0.99).expand(-1, 3, -1, -1)
    assert (frames[:, :3][inside] - own[inside]).abs().median() < 3.0


def test_a_cut_out_frame_made_in_one_pass_equals_its_two_halves(default_anchor) -> None:
    """A frame made in full samples the person and the matte together; the keyframe interpolator composes from a
    warp field it keeps (``warp_field`` then ``compose``): both give the same values, blinks and mouth included."""
    from studio.contracts.coeffs import example_motion
    from studio.presenter.matte import MatteWarp
    from studio.presenter.renderer import WarpRenderer

    warp = MatteWarp(WarpRenderer(default_anchor, 160, 40, newton_steps=3).eval(), default_anchor.matte)
    c = torch.from_numpy(example_motion(6))
    with torch.inference_mode():
        whole = warp(c)
        halves = warp.compose(c, *warp.warp_field(c))
    assert whole.shape == (6, 4, 160, 160)
    assert torch.equal(whole, halves)


def test_the_pack_says_when_its_matte_is_poor() -> None:
    from studio.presenter.matte import POOR_SOFT_FRAC, build_matte

    side = 128
    rng = np.random.default_rng(3)
    busy = rng.integers(0, 255, (side, side, 3), dtype=np.uint8)
    pts = np.zeros((478, 3), np.float32)
    pts[:, :2] = side / 2 + rng.normal(0, 8, (478, 2))
    person = np.clip(rng.random((side, side)) * 1.4 - 0.2, 0, 1).astype(np.float32)  # a matte in pieces
    m = build_matte(busy, busy, pts, person, busy)
    assert m.poor and m.note and "plain wall" in m.note
    assert m.soft_frac > POOR_SOFT_FRAC or m.island_frac > 0


def _soft_disc(side: int = 160):
    """A synthetic portrait: a dark brown disc (the person, a little texture) on a bright wall (a little grain), its
    edge a 6-px ramp; returns the image, the true alpha, the person's and the wall's colours and their pixels."""
    rng = np.random.default_rng(5)
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32)
    r = np.hypot(xx - side / 2, yy - side / 2)
    person_rgb, wall_rgb = np.array([70, 45, 30], np.float32), np.array([225, 220, 210], np.float32)
    person = person_rgb + rng.normal(0, 4, (side, side, 3))
    wall = wall_rgb + rng.normal(0, 3, (side, side, 3))
    alpha = np.clip((side * 0.31 - r) / 6 + 0.5, 0, 1).astype(np.float32)
    image = (alpha[..., None] * person + (1 - alpha[..., None]) * wall).clip(0, 255).astype(np.uint8)
    return image, alpha, person_rgb, r, person


def test_the_edge_takes_the_persons_colour_not_the_backdrops() -> None:
    """Over a bright wall, the soft edge's colours are the person's own once the wall is taken out (over a dark set
    no light rim); where the matte is certain the photo is untouched, and a matte that fits the photo keeps its
    alpha."""
    from studio.presenter.matte import _decontaminate

    image, alpha, person_rgb, _, _ = _soft_disc()
    got_alpha, fg = _decontaminate(image, alpha)
    edge = (alpha > 0.1) & (alpha < 0.9)
    raw = np.linalg.norm(image[edge].astype(np.float32) - person_rgb, axis=-1).mean()
    cleaned = np.linalg.norm(fg[edge].astype(np.float32) - person_rgb, axis=-1).mean()
    assert raw > 100  # the photo's edge pixels are mostly wall
    assert cleaned < 10, cleaned  # ... the foreground's are the person's
    certain = alpha == 1.0
    np.testing.assert_array_equal(fg[certain], image[certain])
    assert np.abs(got_alpha - alpha).max() < 0.1  # the alpha already fits: it stays


def test_a_segmentation_ramp_wider_than_the_edge_leaves_no_halo() -> None:
    """The segmentation's ramp reaches past the person into plain wall: there the alpha comes down (never up), so
    that over a dark set the ring outside the edge looks like the true cut, not a glow of the person's colour."""
    from studio.presenter.matte import EDGE_KEEP_ALPHA, _decontaminate

    image, alpha, person_rgb, r, person = _soft_disc()
    seg = np.clip((alpha.shape[0] * 0.31 + 6 - r) / 24 + 0.5, 0, 1).astype(np.float32)  # wider, further out
    got_alpha, fg = _decontaminate(image, seg)
    assert (got_alpha <= seg).all()
    kept = seg >= EDGE_KEEP_ALPHA
    np.testing.assert_array_equal(got_alpha[kept], seg[kept])
    dark = np.array([20, 30, 60], np.float32)
    luma = np.array([0.2126, 0.7152, 0.0722], np.float32)
    truth = alpha[..., None] * person + (1 - alpha[..., None]) * dark
    ours = got_alpha[..., None] * fg + (1 - got_alpha[..., None]) * dark
    glow = seg[..., None] * person_rgb + (1 - seg[..., None]) * dark  # the person's colour under the wide ramp
    ring = (seg > 0.05) & (seg < 0.6)
    err = lambda pic: float(np.abs((pic - truth) @ luma)[ring].mean())  # noqa: E731
    assert err(glow) > 4  # keeping the segmentation's alpha leaves a glow, even with the right colour
    assert err(ours) < 1.5, err(ours)


def test_the_pack_keeps_the_photo_where_its_matte_is_certain(default_anchor) -> None:
    """The face is the photo itself: the pack's foreground differs from its render image only on the soft edge."""
    m = default_anchor.matte
    certain = m.alpha == 1.0
    assert certain.mean() > 0.3
    np.testing.assert_array_equal(m.foreground[certain], default_anchor.render_image[certain])


def test_text_is_fitted_to_two_lines_with_an_ellipsis_and_drawn_literally() -> None:
    from studio.graphics.text import ELLIPSIS, fit_lines, font_for

    f = font_for("x", 20)
    long = "The <b>markets</b> closed *higher* today after a long week of talks " * 4
    lines = fit_lines(long, f, 300, 2)
    assert len(lines) == 2 and lines[-1].endswith(ELLIPSIS)
    assert all(f.getlength(line) <= 300 for line in lines)
    assert "<b>markets</b>" in lines[0] and "*higher*" in " ".join(lines)  # markup stays text
    assert fit_lines("Short", f, 300) == ["Short"]
    cjk = fit_lines("東京の株価は今日大きく上昇しました" * 3, f, 120, 2)  # no spaces: wrapped at characters
    assert len(cjk) == 2 and all(f.getlength(x) <= 120 for x in cjk)


def test_the_graphics_draw_markup_as_typed() -> None:
    from studio.graphics.layers import Geometry, front_layer
    from studio.graphics.look import Graphics

    geo = Geometry(640, 360)
    plain, _ = front_layer(geo, Graphics(name="Ada"), "", "", (200, 30, 45), True)
    marked, rects = front_layer(geo, Graphics(name="<b>Ada</b>"), "", "", (200, 30, 45), True)
    x0, y0, x1, y1 = rects[0]
    light = lambda a: int((a[y0:y1, x0:x1, :3].min(-1) > 200).sum())  # noqa: E731 white text pixels
    assert light(marked) > light(plain) * 1.5  # the tags are drawn, not obeyed


def _canvas(style, p=96, w=256, h=144):
    from studio.contracts import Layout, ProgramFormat
    from studio.pipeline.post import Canvas

    c = Canvas(style)
    c.open(ProgramFormat(width=w, height=h, fps=25.0, layout=Layout.CANVAS, presenter_px=p), "cpu")
    return c


def test_the_canvas_sets_a_cut_out_presenter_over_the_set() -> None:
    from studio.graphics.look import CanvasStyle

    p = 96
    frames = torch.zeros(2, 4, p, p)
    frames[:, 0] = 255  # a red presenter...
    frames[:, 3, 30:, 30:66] = 255  # ...whose matte covers a column of the box
    out = {}
    for rgb in ((0, 0, 255), (0, 255, 0)):
        c = _canvas(CanvasStyle(background_rgb=rgb))
        c.select("", -1, np.arange(2))
        out[rgb] = c.compose(frames).permute(0, 2, 3, 1).numpy()
    a, b = out[(0, 0, 255)], out[(0, 255, 0)]
    y0, x0 = 144 - p, (256 - p) // 2
    assert a[0, y0 + 60, x0 + 48].tolist() == [255, 0, 0] == b[0, y0 + 60, x0 + 48].tolist()  # the person
    assert a[0, y0 + 10, x0 + 10].tolist() == [0, 0, 255] and b[0, y0 + 10, x0 + 10].tolist() == [0, 255, 0]
    assert a[0, 5, 5].tolist() == [0, 0, 255]  # the plain colour, exactly


def test_the_next_minutes_clock_is_drawn_ahead_and_only_uploaded_when_it_shows(monkeypatch) -> None:
    import time as _time

    from studio.graphics import compositor
    from studio.graphics.look import CanvasStyle, Graphics

    c = _canvas(CanvasStyle(background_rgb=(10, 10, 10), graphics=Graphics(clock=True, ticker=("One line",))),
                p=96, w=256, h=144)
    drawn = []
    real_draw = c._draw
    monkeypatch.setattr(c, "_draw", lambda *a: drawn.append(a[3]) or real_draw(*a))
    minute = (_time.time() // 3600 + 1) * 3600  # a coming hour's first second: HH:00:00
    clock = {"now": minute - 40.0}  # 40 s before: too early to draw ahead
    monkeypatch.setattr(compositor.time, "time", lambda: clock["now"])
    text = lambda t: _time.strftime("%H:%M", _time.localtime(t))  # noqa: E731
    c.select("", -1, np.arange(1))
    assert drawn == [text(minute - 40.0)] and c._drawing is None
    clock["now"] = minute - 5.0  # inside the window: the next minute is drawn on the drawing thread
    c.select("", -1, np.arange(1))
    c._drawing.join(10)
    assert drawn == [text(minute - 40.0), text(minute)] and c._drawing.name == "graphics-ahead"
    clock["now"] = minute + 0.2  # it shows: uploaded, not drawn again
    c.select("", -1, np.arange(1))
    assert drawn == [text(minute - 40.0), text(minute)] and c._key[2] == text(minute)
    c.restyle(CanvasStyle(background_rgb=(10, 10, 10), graphics=Graphics(clock=True)))
    clock["now"] = minute + 55.0  # drawn ahead for the old look, then a new look: the new one is drawn
    c.select("", -1, np.arange(1))
    c._drawing.join(10)
    c.restyle(CanvasStyle(background_rgb=(20, 20, 20), graphics=Graphics(clock=True)))
    clock["now"] = minute + 60.5
    c.select("", -1, np.arange(1))
    assert drawn[-1] == text(minute + 60.5) and drawn.count(text(minute + 60.5)) == 2


def test_the_canvas_crawls_the_ticker_and_shows_the_segment_graphics() -> None:
    from studio.graphics.look import CanvasStyle, Graphics

    style = CanvasStyle(background_rgb=(10, 10, 10), graphics=Graphics(ticker=("One line", "Another line")),
                        segments=(None, Graphics(name="Grace Hopper", role="Rear admiral")))
    c = _canvas(style, p=180, w=640, h=360)
    frames = torch.zeros(3, 3, 180, 180)
    c.select("Title", 0, np.array([0, 1, 50]))
    first = c.compose(frames).permute(0, 2, 3, 1).numpy()
    tx0, ty0, tx1, ty1 = c.geo.ticker_box
    band = first[:, ty0:ty1]
    assert (band[0] != band[1]).any() and (band[0] != band[2]).any()  # it moves from frame to frame
    c.select("Title", 1, np.array([51]))
    strap = c.compose(frames[:1]).permute(0, 2, 3, 1).numpy()
    assert (strap[0, :ty0] != first[2, :ty0]).mean() > 0.01  # segment 2's name strap


def test_the_rundown_keeps_the_graphics_and_old_files_load(tmp_path) -> None:
    from studio.graphics.look import Graphics
    from studio.pipeline.rundown import Segment, load_programme_graphics, load_rundown, save_rundown

    prog = Graphics(name="Eileen Collins", role="Anchor", ticker=("A", "B <i>c</i>"), clock=True, logo="logo.png")
    segs = [Segment("One", "Hello."),
            Segment("Two", "Bye.", graphics=Graphics(headline="Storm", transition="dissolve"))]
    path = save_rundown(segs, tmp_path / "r.json", graphics=prog)
    assert load_rundown(path) == segs
    assert load_programme_graphics(path) == prog
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": 1, "segments": [{"title": "T", "text": "x", "voice": "piper:joe"}]}))
    assert load_rundown(old)[0].graphics is None and load_programme_graphics(old) == Graphics()


def test_bad_graphics_in_a_rundown_say_what_to_fix() -> None:
    from studio.errors import InputError
    from studio.pipeline.rundown import parse_rundown

    with pytest.raises(InputError, match="ticker"):
        parse_rundown({"segments": [{"text": "x", "graphics": {"ticker": "not a list"}}]})


def test_a_video_set_plays_in_a_loop(tmp_path) -> None:
    import av

    from studio.graphics.sets import VideoSet

    path = tmp_path / "set.mp4"
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt = 64, 36, "yuv420p"
        for i in range(5):
            img = np.zeros((36, 64, 3), np.uint8)
            img[..., 0] = 40 * i
            for pkt in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(pkt)
        for pkt in s.encode():
            c.mux(pkt)
    v = VideoSet(path, 128, 72)
    got = v.frames(12)
    v.close()
    assert got.shape == (12, 72, 128, 3)
    reds = [int(np.median(f[..., 0])) for f in got]
    assert abs(reds[5] - reds[0]) <= 6 and abs(reds[4] - 160) <= 8  # frame 5 is frame 0 again: a loop


def test_a_dissolve_blends_from_the_last_picture_of_the_segment_before() -> None:
    from studio.graphics.look import CanvasStyle, Graphics

    style = CanvasStyle(background_rgb=(0, 0, 0), dissolve_s=0.2,
                        segments=(Graphics(), Graphics(transition="dissolve")))
    c = _canvas(style)
    black = torch.zeros(2, 3, 96, 96)
    c.select("", 0, np.arange(2))
    c.compose(black)
    c.select("", 1, np.arange(2, 8))
    out = c.compose(torch.full((6, 3, 96, 96), 250.0)).permute(0, 2, 3, 1).numpy()
    level = out[:, 100, 128, 0].astype(int)  # inside the presenter's box: black before, white after
    assert level[0] < level[2] < level[4] and level[-1] >= 249  # 5 frames at 25 fps: black to white


def test_the_graphics_of_the_rows_on_air() -> None:
    from studio.graphics.look import CanvasStyle, Graphics, rows_graphics
    from studio.pipeline.rundown import Segment

    segs = [Segment("A", "a"), Segment("B", "b", graphics=Graphics(name="Guest", transition="dissolve"))]
    table = rows_graphics((2, 5), segs)
    assert table == (None, None, None, None, None, Graphics(name="Guest", transition="dissolve"))
    style = CanvasStyle(graphics=Graphics(name="Host", role="Anchor"), segments=table)
    assert style.graphics_for(2) == Graphics(name="Host", role="Anchor")
    assert style.graphics_for(5) == Graphics(name="Guest", role="Anchor", transition="dissolve")
    assert style.graphics_for(-1) == style.graphics_for(99) == style.graphics


def test_a_backdrop_object_taken_for_the_person_makes_the_matte_poor() -> None:
    """The astronaut pasted before a coffee cup: the cup's rim behind her head joins the cut, beside the head, and
    the pack says the matte is poor; before a cat's fur (busy, but apart from the head) it stays good."""
    from PIL import Image
    from skimage import data

    from studio.presenter import landmarks as lm
    from studio.presenter.anchor import AnchorSettings, build_anchor

    a = data.astronaut()
    m = lm.person_mask(a)[..., None]
    got = {}
    for name, scene in (("coffee", data.coffee()), ("chelsea", data.chelsea())):
        s = np.asarray(Image.fromarray(scene).resize((512, 512)))
        got[name] = build_anchor((a * m + s * (1 - m)).astype(np.uint8), AnchorSettings(use_cache=False)).matte
    assert got["coffee"].poor and "beside the head" in got["coffee"].note
    assert not got["chelsea"].poor


def test_the_fixed_form_of_the_canvas_gives_the_eager_pictures() -> None:
    """The canvas's fixed form (what CUDA runs and captures in a graph: every step, no host decision, per-frame
    buffers read from a cursor batch after batch) makes the pictures of the eager form, here on the CPU."""
    from studio.graphics.look import CanvasStyle, Graphics

    style = CanvasStyle(graphics=Graphics(name="Eileen Collins", ticker=("One", "Two")), place="left",
                        segments=(None, Graphics(headline="Storm", transition="dissolve")), dissolve_s=0.3)
    eager, fixed = _canvas(style, p=120, w=320, h=180), _canvas(style, p=120, w=320, h=180)
    fixed.fixed = True
    g = torch.Generator().manual_seed(0)
    start = 0
    for row, n in ((0, 5), (1, 7), (1, 4)):
        frames = torch.rand((n, 4, 120, 120), generator=g) * 255
        slots = np.arange(start, start + n)
        eager.select("Title", row, slots)
        fixed.select("Title", row, slots)
        a = eager.compose(frames)
        parts = []
        for i in range(0, n, 3):  # in batches of 3, a short one padded with its last row, as a CUDA graph runs
            part = frames[i:i + 3]
            k = part.shape[0]
            part = torch.cat([part, part[-1:].expand(3 - k, -1, -1, -1)])
            parts.append(fixed.compose(part)[:k])
        b = torch.cat(parts)
        assert (a.int() - b.int()).abs().max() <= 1, (row, n)
        start += n


def test_graphics_set_before_the_canvas_opens_are_on_it() -> None:
    """The studio restarts its core (a new anchor, a cast) and goes live at once: the look sent before the new core's
    canvas opened is the one it opens with, and one sent after reaches the open canvas."""
    from studio.contracts import Layout, ProgramFormat
    from studio.graphics.look import CanvasStyle, Graphics
    from studio.pipeline.post_stage import PostStage
    from studio.pipeline.settings import CoreSettings

    fmt = ProgramFormat(width=256, height=144, fps=25.0, layout=Layout.CANVAS, presenter_px=144)
    post = PostStage(fmt, torch.device("cpu"), CoreSettings(), True, CanvasStyle())
    post.set_graphics(Graphics(role="Evening news", ticker=("A",)), (Graphics(name="Anna"),))
    canvas = post.open_canvas()
    assert canvas.style.graphics == Graphics(role="Evening news", ticker=("A",))
    assert canvas.style.graphics_for(0) == Graphics(name="Anna", role="Evening news", ticker=("A",))
    post.set_graphics(Graphics(clock=True), ())
    canvas.select("")  # a restyle is taken between chunks
    assert canvas.style.graphics == Graphics(clock=True)
    square = PostStage(ProgramFormat(width=64, height=64, fps=25.0), torch.device("cpu"), CoreSettings(), True)
    square.set_graphics(Graphics(clock=True), ())  # no canvas in this layout: nothing to do
