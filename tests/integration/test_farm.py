"""The farm on a real local Ray cluster: real TTS, real renderer, real encoder; tiny pictures, short segments."""

from __future__ import annotations

import hashlib
import json
import shutil
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest

from studio.encode import probe_mp4
from studio.farm import store
from studio.farm.driver import run_farm
from studio.farm.plan import segment_seed
from studio.farm.settings import FarmSettings
from studio.pipeline.render import RenderRequest, render_encode_settings, render_segment
from studio.pipeline.settings import CoreSettings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CORE = CoreSettings(size_px=64, fps=25.0)
LONG = ("The council met for three hours tonight and agreed on a new budget for the parks, the libraries and the "
        "buses, after a long debate about the harbour and the schools of the old town.")


def _rundown(folder: Path, name: str, segments: list[dict]) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"version": 1, "segments": segments}))
    return path


def _farm(settings: FarmSettings, rundowns: list[Path]):
    gen = run_farm(settings, rundowns)
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def _cast_rundown(folder: Path, name: str, segments: list[dict], ben: str = "ben.png") -> Path:
    """A rundown of two anchors: Anna (the built-in portrait) and Ben (its mirror image, ``ben``)."""
    from PIL import Image

    from studio.presenter.anchor import default_portrait

    if not (folder / "ben.png").exists():
        Image.fromarray(np.ascontiguousarray(default_portrait()[:, ::-1])).save(folder / "ben.png")
    cast = {"Anna": {"voice": "espeak:en-us"}, "Ben": {"portrait": ben, "voice": "espeak:en-gb"}}
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"version": 2, "cast": cast, "segments": segments}))
    return path


def _rgb(path: Path) -> np.ndarray:
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def _video_md5s(path: Path) -> list[str]:
    with av.open(str(path)) as c:
        return [hashlib.md5(f.to_ndarray(format="yuv420p").tobytes()).hexdigest() for f in c.decode(video=0)]


def _audio(path: Path) -> np.ndarray:
    with av.open(str(path)) as c:
        return np.concatenate([f.to_ndarray()[0] for f in c.decode(audio=0)])


def _report(out: Path, name: str) -> dict:
    return json.loads((out / f"{name}.json").read_text())


def test_two_workers_make_the_frames_of_one_and_name_the_bad_segment(tmp_path):
    rd = _rundown(tmp_path, "evening", [
        {"title": "Opening", "text": "Good evening."},
        {"title": "Weather", "text": "Rain at first, then sun.", "voice": "espeak:en-us"},
        {"title": "Broken", "text": "This voice does not exist.", "voice": "piper:nobody"},
        {"title": "Close", "text": "Good night."},
    ])
    one = _farm(FarmSettings(out_dir=tmp_path / "one", core=CORE, workers=1), [rd])
    two = _farm(FarmSettings(out_dir=tmp_path / "two", core=CORE, workers=2), [rd])
    for result in (one, two):
        assert [seg for seg, _ in result.failed] == ["evening#3"]
        assert "nobody" in result.failed[0][1]
        assert result.made == 3
    a, b = one.bulletins["evening"], two.bulletins["evening"]
    assert _video_md5s(a) == _video_md5s(b)
    report = _report(tmp_path / "two", "evening")
    assert [s["status"] for s in report["segments"]] == ["done", "done", "failed", "done"]
    assert all(s["device"] == "cpu" and s["seconds"] > 0 and "node" in s for s in report["segments"]
               if s["status"] == "done")
    assert report["stitch"]["remuxed"] is True

    # sound: 48 kHz AAC as long as the video, each segment's audio where its frames are (no drift at the joins)
    info = probe_mp4(b)
    assert info.audio_codec == "aac" and info.audio_sample_rate_hz == 48000
    frames = [s["n_frames"] for s in report["segments"] if s["status"] == "done"]
    assert info.n_video_frames == sum(frames)
    pcm = _audio(b)
    assert pcm.size == sum(frames) * 48000 // 25
    start = 0
    for i, n in zip((0, 1, 3), frames):
        seg = _audio(store.final_path(tmp_path / "two", "evening", i))[: n * 1920]
        part = pcm[start: start + seg.size]
        lags = range(-480, 481, 8)
        best = max(lags, key=lambda lag: float(np.dot(np.roll(part, lag), seg)))
        assert best == 0
        assert np.sqrt(np.mean((part - seg) ** 2)) < 0.1 * np.sqrt(np.mean(seg ** 2)) + 1e-3
        start += n * 1920


def test_a_worker_killed_mid_segment_is_retried_and_nothing_is_lost(tmp_path):
    rd = _rundown(tmp_path, "late", [
        {"title": "One", "text": "First story."},
        {"title": "Two", "text": LONG},
        {"title": "Three", "text": "Last story."},
    ])
    out = tmp_path / "out"
    killed: list[int] = []
    stop = threading.Event()

    def assassin() -> None:  # kills the first process seen writing segment 2 (index 001)
        folder = store.segment_dir(out, "late")
        while not stop.is_set() and not killed:
            for p in folder.glob(".001.*.mp4.part") if folder.is_dir() else ():
                pid = int(p.name.split("-")[-1].split(".")[0])
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break
            time.sleep(0.005)

    thread = threading.Thread(target=assassin, daemon=True)
    thread.start()
    try:
        result = _farm(FarmSettings(out_dir=out, core=CORE, workers=2), [rd])
    finally:
        stop.set()
        thread.join()
    assert killed, "segment 2 was never seen being written"
    assert result.failed == () and result.retries == 1
    report = _report(out, "late")
    assert [s["retries"] for s in report["segments"]] == [0, 1, 0]
    assert [s["status"] for s in report["segments"]] == ["done"] * 3
    assert report["segments"][1]["n_frames"] > 100
    names = sorted(p.name for p in store.segment_dir(out, "late").iterdir())
    assert names == ["000.json", "000.mp4", "001.json", "001.mp4", "002.json", "002.mp4"]  # one each, no leftovers
    assert probe_mp4(result.bulletins["late"]).n_video_frames == sum(s["n_frames"] for s in report["segments"])


def test_a_killed_driver_is_resumed_without_redoing_finished_segments(tmp_path):
    rd = _rundown(tmp_path, "hourly", [
        {"title": "One", "text": "First story."},
        {"title": "Two", "text": LONG},
        {"title": "Three", "text": LONG},
    ])
    out = tmp_path / "out"
    cmd = [sys.executable, str(REPO / "main.py"), "farm", str(rd), "--out", str(out), "--workers", "1",
           "--size", "64"]
    driver = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    first = store.record_path(out, "hourly", 0)
    deadline = time.monotonic() + 240
    while not first.exists() and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert first.exists(), driver.stderr.read().decode() if driver.poll() is not None else "no segment made"
    os.kill(driver.pid, signal.SIGKILL)  # the driver only: Ray's processes must notice on their own
    driver.wait(timeout=30)
    made_before = first.stat().st_mtime_ns
    assert not (out / "hourly.mp4").exists()

    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = _report(out, "hourly")
    statuses = [s["status"] for s in report["segments"]]
    assert statuses[0] == "resumed" and statuses[2] == "done"
    assert first.stat().st_mtime_ns == made_before
    assert probe_mp4(out / "hourly.mp4").n_video_frames == sum(s["n_frames"] for s in report["segments"])
    assert "1 reused" in proc.stderr or "2 reused" in proc.stderr


def test_a_truncated_or_unrecorded_segment_is_never_trusted(tmp_path, default_anchor):
    seg = tmp_path / "seg.mp4"
    gen = render_segment(RenderRequest(out_path=seg, text="Hello there.", core=CoreSettings(size_px=64)),
                         anchor=default_anchor)
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        n = stop.value.n_frames
    out = tmp_path / "out"
    store.segment_dir(out, "b").mkdir(parents=True)
    record = store.SegmentRecord(fingerprint="f", n_frames=n, fps=25.0, node="n", device="cpu", seconds=1.0,
                                 stage_s={})
    attempt = store.attempt_path(out, "b", 0, "node", 1)
    shutil.copy(seg, attempt)
    assert store.commit(attempt, out, "b", 0, record)
    assert store.load_done(out, "b", 0, "f").n_frames == n
    shutil.copy(seg, attempt)
    assert not store.commit(attempt, out, "b", 0, record)  # committed once: the second attempt is discarded
    assert not attempt.exists()
    assert store.load_done(out, "b", 0, "other settings") is None  # redone, and the stale files removed
    assert not store.final_path(out, "b", 0).exists()

    shutil.copy(seg, attempt)
    store.commit(attempt, out, "b", 0, record)
    final = store.final_path(out, "b", 0)
    final.write_bytes(final.read_bytes()[: final.stat().st_size // 2])  # a half-written file under the final name
    assert store.load_done(out, "b", 0, "f") is None
    assert not final.exists() and not store.record_path(out, "b", 0).exists()


PANEL = [{"title": "Open", "text": "Good evening, here is the news.", "anchor": "Anna"},
         {"title": "Rain", "text": "Thank you, Anna. Rain tomorrow.", "anchor": "Ben"}]


def test_a_cast_renders_on_the_farm_as_render_rundown_renders_it(tmp_path):
    import torch

    from studio.cli import main
    from studio.pipeline.programme import render_rundown

    from PIL import Image

    panel = _cast_rundown(tmp_path, "panel", PANEL)
    # bad cast entries: a portrait that is not there (named before any work), one without a face (named when its
    # anchor is built on a worker); no segment of theirs can be made, the others are
    guest = _cast_rundown(tmp_path, "guest", PANEL, ben="missing.png")
    Image.new("RGB", (256, 256), (90, 90, 90)).save(tmp_path / "wall.png")
    wall = _cast_rundown(tmp_path, "wall", PANEL, ben="wall.png")
    one = _farm(FarmSettings(out_dir=tmp_path / "one", core=CORE, workers=1), [panel, guest, wall])
    two = _farm(FarmSettings(out_dir=tmp_path / "two", core=CORE, workers=2), [panel, guest, wall])
    for result in (one, two):
        assert result.made == 2 and list(result.bulletins) == ["panel"]
        failed = dict(result.failed)
        assert sorted(failed) == ["guest#1", "guest#2", "wall#1", "wall#2"]
        assert all("Ben" in failed[f"guest#{i}"] and "missing.png" in failed[f"guest#{i}"] for i in (1, 2))
        assert all(failed[f"wall#{i}"].startswith("Ben: ") and "face" in failed[f"wall#{i}"] for i in (1, 2))
    for name, why in (("guest", "missing.png"), ("wall", "Ben: ")):
        report = _report(tmp_path / "two", name)
        assert report["path"] == "" and [s["status"] for s in report["segments"]] == ["failed", "failed"]
        assert why in report["segments"][0]["error"]
    assert _video_md5s(one.bulletins["panel"]) == _video_md5s(two.bulletins["panel"])

    # a segment of the farm is render --rundown's programme of that segment alone, frame for frame, with the
    # farm's seed and encoder (Ben speaks, Anna listens)
    alone = _cast_rundown(tmp_path, "alone", PANEL[1:])
    out = tmp_path / "alone.mp4"
    core = replace(CORE, seed=segment_seed("panel", 1, CORE.seed))
    encode = replace(render_encode_settings(core), encoder_threads=FarmSettings(out_dir=tmp_path).cpus_per_segment)
    threads = torch.get_num_threads()
    torch.set_num_threads(FarmSettings(out_dir=tmp_path).cpus_per_segment)
    try:
        gen = render_rundown(RenderRequest(out_path=out, core=core, encode=encode), alone)
        for _ in gen:
            pass
    finally:
        torch.set_num_threads(threads)
    assert _video_md5s(out) == _video_md5s(store.final_path(tmp_path / "one", "panel", 1))

    # the whole bulletin: the frames of `render --rundown` of the same file, both presenters on every one
    ref = tmp_path / "ref.mp4"
    assert main(["render", "--rundown", str(panel), "--size", "64", "--device", "cpu", "--out", str(ref)]) == 0
    farm, studio = _rgb(one.bulletins["panel"]).astype(np.float32), _rgb(ref).astype(np.float32)
    assert farm.shape == studio.shape and farm.shape[1:] == (64, 128, 3)
    for frames in (farm, studio):
        left, right = frames[:, :, :64], frames[:, :, 64:]
        assert np.abs(left - np.median(left, 0)).mean(axis=(1, 2, 3)).max() < 12
        assert np.abs(right - np.median(right, 0)).mean(axis=(1, 2, 3)).max() < 12
        assert np.abs(np.median(left, 0) - np.median(right, 0)).mean() > 5  # two faces, not one
    # the same two presenters in the same places: Anna left, Ben (her mirror image) right
    assert np.abs(np.median(farm, 0) - np.median(studio, 0)).mean() < 3


def test_the_command_lines_look_is_on_every_segment_over_the_rundowns_graphics(tmp_path):
    """render's look flags on the farm (as FarmSettings carries them): the set colour, the name strap and the ticker
    on the frames, under the rundown's and the segment's own graphics as render --rundown puts them; each segment
    is the one a single process renders with that look, frame for frame, whichever worker made it."""
    import torch

    from studio.contracts import Layout
    from studio.graphics.look import CanvasStyle, Graphics

    green = (16, 192, 64)
    rd = tmp_path / "look.json"
    rd.write_text(json.dumps({"version": 2, "graphics": {"role": "Chief editor", "name": "Desk"}, "segments": [
        {"title": "Open", "text": "Good evening."},
        {"title": "Guest", "text": "Good night.", "graphics": {"name": "Guest"}}]}))
    core = CoreSettings(size_px=64, layout=Layout.CANVAS, canvas_height_px=144, fps=25.0)
    cli = CanvasStyle(background_rgb=green, graphics=Graphics(name="Ada Lovelace", ticker=("Rain at noon",)))
    result = _farm(FarmSettings(out_dir=tmp_path / "out", core=core, workers=2, canvas_style=cli), [rd])
    assert result.made == 2 and result.failed == ()
    frames = _rgb(result.bulletins["look"]).astype(int)
    assert frames.shape[1:] == (144, 256, 3)
    assert np.abs(frames[:, 2:10, 2:10] - green).max() <= 8  # the set is the colour given, in every frame

    threads = torch.get_num_threads()
    torch.set_num_threads(FarmSettings(out_dir=tmp_path).cpus_per_segment)
    try:
        for i, (text, name) in enumerate((("Good evening.", "Ada Lovelace"), ("Good night.", "Guest"))):
            seg_core = replace(core, seed=segment_seed("look", i, core.seed))
            encode = replace(render_encode_settings(seg_core),
                             encoder_threads=FarmSettings(out_dir=tmp_path).cpus_per_segment)
            title = ("Open", "Guest")[i]
            looks = {"with": replace(cli, graphics=Graphics(name=name, role="Chief editor", ticker=("Rain at noon",))),
                     "without": None}
            made = {}
            for key, style in looks.items():
                out = tmp_path / f"{key}{i}.mp4"
                for _ in render_segment(RenderRequest(out_path=out, text=text, title=title, core=seg_core,
                                                      encode=encode, canvas_style=style)):
                    pass
                made[key] = out
            farm_seg = store.final_path(tmp_path / "out", "look", i)
            assert _video_md5s(farm_seg) == _video_md5s(made["with"])
            plain, look = _rgb(made["without"]).astype(int), _rgb(farm_seg).astype(int)
            # the graphics' places differ from the plain look's: the name strap (lower left), the ticker (bottom)
            strap = np.abs(look[:, 110:125, 10:130] - plain[:, 110:125, 10:130]).max(-1) > 40
            ticker = np.abs(look[:, 134:142] - plain[:, 134:142]).max(-1) > 40
            assert strap.mean() > 0.3 and ticker.mean() > 0.3
    finally:
        torch.set_num_threads(threads)
