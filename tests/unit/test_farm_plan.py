"""The farm's plan and segment files, without Ray: seeds, bad segments, verification on resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from studio.errors import InputError
from studio.farm.plan import plan_rundowns, segment_seed
from studio.pipeline.settings import CoreSettings


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_seeds_depend_on_the_bulletin_and_the_place_only():
    assert segment_seed("news", 2, 0) == segment_seed("news", 2, 0)
    assert len({segment_seed("news", i, 0) for i in range(50)}) == 50
    assert segment_seed("news", 2, 0) != segment_seed("news", 2, 1) != segment_seed("other", 2, 1)


def test_bad_segments_are_named_and_the_rest_planned(tmp_path, hopper_path):
    shutil.copy(hopper_path, tmp_path / "hopper.jpg")
    rd = _write(tmp_path / "Evening News.json", {"anchor": "hopper.jpg", "segments": [
        {"title": "A", "text": "Hello."},
        {"title": "B", "text": "Hi.", "voice": "piper:nobody"},
        {"title": "C", "text": "Bye.", "anchor": "missing.png"},
    ]})
    plan = plan_rundowns([rd], CoreSettings())
    assert list(plan.bulletins) == ["Evening_News"]
    [job] = plan.jobs
    assert job.index == 0 and job.anchor_path == str((tmp_path / "hopper.jpg").resolve())
    reasons = {r.name: r.reason for r in plan.rejected}
    assert set(reasons) == {"Evening_News#2", "Evening_News#3"}
    assert "nobody" in reasons["Evening_News#2"] and "missing.png" in reasons["Evening_News#3"]


def test_nothing_to_make_is_one_clear_error(tmp_path):
    rd = _write(tmp_path / "x.json", {"segments": [{"text": "Hi.", "voice": "piper:nobody"}]})
    with pytest.raises(InputError, match="No segment"):
        plan_rundowns([rd], CoreSettings())
    with pytest.raises(InputError, match="not found"):
        plan_rundowns([tmp_path / "nope.json"], CoreSettings())


def test_a_folder_gives_its_rundowns_in_order(tmp_path):
    for name in ("b", "a"):
        _write(tmp_path / f"{name}.json", {"segments": [{"text": "Hello."}]})
    assert list(plan_rundowns([tmp_path], CoreSettings()).bulletins) == ["a", "b"]


def test_progress_shows_done_total_eta_and_nodes_once_per_change():
    import io

    from studio.farm.console import ConsoleProgress, progress_line
    from studio.farm.driver import FarmProgress

    p = FarmProgress(done=3, total=8, failed=1, running=2, elapsed_s=65, eta_s=125, per_node={"a/1": 2, "b/2": 1},
                     message="news#3 made on b/2 in 1.0 s")
    line = progress_line(p)
    assert "3/8 segments" in line and "1 not made" in line and "ETA 02:05" in line and "a/1:2 b/2:1" in line
    out = io.StringIO()
    console = ConsoleProgress(out)
    console.show(p)
    console.show(FarmProgress(3, 8, 1, 2, 66, 124, {"a/1": 2, "b/2": 1}, p.message))  # only the clock moved
    assert out.getvalue().count("3/8 segments") == 1 and out.getvalue().count("news#3 made") == 1


def _cast_rundown(folder: Path, name: str, cast: dict, segments: list[dict], **top) -> Path:
    return _write(folder / f"{name}.json", {"version": 2, "cast": cast, "segments": segments, **top})


def test_a_cast_rundown_gives_jobs_that_carry_the_cast(tmp_path, hopper_path):
    from dataclasses import replace

    from studio.contracts import CastLayout, Layout
    from studio.farm.plan import job_fingerprint

    shutil.copy(hopper_path, tmp_path / "ben.jpg")
    rd = _cast_rundown(tmp_path, "panel", {"Anna": {"voice": "espeak:en-us"},
                                           "Ben": {"portrait": "ben.jpg", "voice": "espeak:en-gb"}}, [
        {"title": "Open", "text": "Good evening.", "anchor": "Anna"},
        {"title": "Rain", "text": "Rain at first.", "anchor": "Ben", "graphics": {"headline": "Rain"}},
        {"title": "Close", "text": "Good night."},  # no speaker: the first member
    ], graphics={"ticker": ["Markets up"]})
    core = CoreSettings(layout=Layout.CANVAS, canvas_height_px=720)
    for layout, px in ((CastLayout.TWO_SHOT, 640), (CastLayout.CUT, 720)):
        plan = plan_rundowns([rd], core, layout=layout)
        assert plan.rejected == () and [j.index for j in plan.jobs] == [0, 1, 2]
        a, b, c = plan.jobs
        assert [m.name for m in a.cast] == ["Anna", "Ben"] and a.cast[0].portrait is None
        assert a.cast[1].portrait == (tmp_path / "ben.jpg").resolve()
        assert (a.speaker, b.speaker, c.speaker) == ("Anna", "Ben", None)
        assert (a.voice, b.voice, c.voice) == ("espeak:en-us", "espeak:en-gb", "espeak:en-us")
        assert b.graphics.headline == "Rain" and a.programme_graphics.ticker == ("Markets up",)
        assert a.layout is layout and a.settings(core).cast_size == 2 and a.settings(core).seed == a.seed
        # one pack per member, at the programme's presenter size (a two-shot shares the canvas's width)
        assert a.packs(core) == ((None, px, "Anna"), (str((tmp_path / "ben.jpg").resolve()), px, "Ben"))
    # a finished segment is reused only for the same speaker and layout
    fp = job_fingerprint(a, core, {})
    assert fp != job_fingerprint(replace(a, layout=CastLayout.TWO_SHOT), core, {})
    assert fp != job_fingerprint(replace(a, speaker="Ben"), core, {})


def test_an_old_rundown_is_planned_as_before(tmp_path):
    import hashlib
    from dataclasses import asdict

    from studio.farm.plan import job_fingerprint

    rd = _write(tmp_path / "old.json", {"version": 1, "segments": [{"title": "A", "text": "Hello."}]})
    [job] = plan_rundowns([rd], CoreSettings()).jobs
    assert job.cast == () and job.anchor_path is None
    assert job.packs(CoreSettings(size_px=96)) == ((None, 96, None),)
    assert job.settings(CoreSettings()).cast_size == 1
    # a one-anchor segment's fingerprint is the one it had before casts (its fields only): a run made then resumes
    core = CoreSettings()
    core_d = asdict(core)
    core_d["optimizations"] = sorted(o.value for o in core.optimizations)
    core_d["layout"] = core.layout.value
    core_d.pop("seed")
    before = {k: getattr(job, k) for k in ("bulletin", "index", "title", "text", "voice", "anchor_path", "seed")}
    blob = json.dumps({"job": before, "pack": "k", "core": core_d, "encode": {}}, sort_keys=True, default=str)
    assert job_fingerprint(job, core, {}, "k") == hashlib.sha256(blob.encode()).hexdigest()[:16]


def test_bad_cast_entries_are_named_up_front(tmp_path, hopper_path):
    shutil.copy(hopper_path, tmp_path / "ben.jpg")
    good_ben = {"portrait": "ben.jpg", "voice": "espeak:en-gb"}
    rd = _cast_rundown(tmp_path, "bad", {"Anna": {"voice": "piper:nobody"}, "Ben": good_ben}, [
        {"text": "Hello.", "anchor": "Anna"},
        {"text": "Hi.", "anchor": "Ben"},
        {"text": "Who am I?", "anchor": "Zed"},
    ])
    lost = _cast_rundown(tmp_path, "lost", {"Anna": {}, "Ben": {"portrait": "missing.png"}},
                         [{"text": "Hello."}, {"text": "Hi.", "anchor": "Ben"}])
    crowd = _cast_rundown(tmp_path, "crowd", {n: {} for n in "ABCDE"}, [{"text": "Hello."}])
    plan = plan_rundowns([rd, lost, crowd], CoreSettings())
    assert [j.name for j in plan.jobs] == ["bad#2"]
    reasons = {r.name: r.reason for r in plan.rejected}
    assert set(reasons) == {"bad#1", "bad#3", "lost#1", "lost#2", "crowd"}
    assert reasons["bad#1"].startswith("Anna's voice:") and "nobody" in reasons["bad#1"]
    assert "'Zed'" in reasons["bad#3"] and "not in the cast" in reasons["bad#3"]
    # a missing portrait is on every picture of its rundown: each segment names it
    assert all("Ben" in reasons[n] and "missing.png" in reasons[n] for n in ("lost#1", "lost#2"))
    assert "up to 4" in reasons["crowd"]
    assert plan.totals == {"bad": 3, "lost": 2, "crowd": 0}


def test_the_command_lines_look_goes_under_the_rundowns_graphics_as_render_rundown_puts_it(tmp_path):
    from dataclasses import replace

    from studio.contracts import Layout
    from studio.farm.plan import job_fingerprint
    from studio.graphics.look import CanvasStyle, Graphics

    rd = _write(tmp_path / "news.json", {"version": 2, "graphics": {"role": "Chief editor", "name": "Desk"},
                                         "segments": [{"title": "A", "text": "Hello."},
                                                      {"title": "B", "text": "Bye.", "graphics": {"name": "Guest"}}]})
    a, b = plan_rundowns([rd], CoreSettings()).jobs
    cli = CanvasStyle(background_rgb=(16, 192, 64), place="left", graphics=Graphics(name="Ada", ticker=("Rain",)))
    # the command line over the rundown's, the segment's own over both (``render_segments``'s rule)
    assert a.canvas_style(cli) == replace(cli, graphics=Graphics(name="Ada", role="Chief editor", ticker=("Rain",)))
    assert b.canvas_style(cli).graphics == Graphics(name="Guest", role="Chief editor", ticker=("Rain",))
    assert a.canvas_style(None) == CanvasStyle(graphics=Graphics(name="Desk", role="Chief editor"))

    # a finished segment is reused only under the same look; a plain look, or a square picture (where the look is
    # not drawn), keeps the fingerprint a run without one had
    canvas = CoreSettings(layout=Layout.CANVAS)
    plain = job_fingerprint(a, canvas, {})
    assert job_fingerprint(a, canvas, {}, style=cli) != plain
    assert job_fingerprint(a, canvas, {}, style=CanvasStyle()) == plain
    assert job_fingerprint(a, CoreSettings(), {}, style=cli) == job_fingerprint(a, CoreSettings(), {})
    old = plan_rundowns([_write(tmp_path / "old.json", {"segments": [{"title": "A", "text": "Hello."}]})],
                        CoreSettings()).jobs[0]
    assert old.graphics is None and old.programme_graphics == Graphics()


def test_farm_checks_the_look_flags_before_any_cluster_and_gives_workers_absolute_paths(tmp_path, monkeypatch,
                                                                                        capsys):
    from studio.cli import main

    rd = _write(tmp_path / "news.json", {"segments": [{"title": "A", "text": "Hello."}]})
    out = tmp_path / "out"
    assert main(["farm", str(rd), "--out", str(out), "--canvas", "720p", "--logo", str(tmp_path / "no.png")]) == 2
    assert capsys.readouterr().err == f"error: --logo {tmp_path / 'no.png'}: no such file. Check the path.\n"
    assert not out.exists()

    import argparse

    from studio.cli import _build_parser
    from studio.farm.command import farm_settings_from

    (tmp_path / "logo.png").write_bytes(b"")
    (tmp_path / "ticker.txt").write_text("Rain at noon\n\nSun later\n")
    monkeypatch.chdir(tmp_path)
    args = _build_parser().parse_args(["farm", "news.json", "--out", "out", "--canvas", "720p", "--logo", "logo.png",
                                       "--ticker", "ticker.txt", "--name", "Ada", "--set", "#10c040", "--framed"])
    assert isinstance(args, argparse.Namespace)
    style = farm_settings_from(args, CoreSettings()).canvas_style
    assert style.graphics.logo == str(tmp_path / "logo.png") and Path(style.graphics.logo).is_absolute()
    assert style.graphics.ticker == ("Rain at noon", "Sun later") and style.graphics.name == "Ada"
    assert style.background_rgb == (16, 192, 64) and style.use_matte is False
