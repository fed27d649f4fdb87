"""`main.py render` end to end: real TTS, real renderer, real encoder, measured from the outside."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from studio.bench.lipsync import measure_lipsync, phonemes_from_json
from studio.encode import probe_mp4

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = ("Good evening, and welcome back. Tonight, the city council approved a new budget for public parks. "
          "Maria Lopez has more from the harbour.")


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "main.py"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.fixture(scope="module")
def piper_render(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("render")
    out, timings = out_dir / "segment.mp4", out_dir / "segment.json"
    proc = _run("render", "--text", SCRIPT, "--out", str(out), "--timings", str(timings))
    assert proc.returncode == 0, proc.stderr
    return out, timings, proc


def test_render_writes_h264_aac_exactly_as_long_as_the_speech(piper_render):
    out, timings, proc = piper_render
    info = probe_mp4(out)
    assert info.video_codec == "h264" and info.audio_codec == "aac"
    assert (info.width, info.height) == (512, 512)
    assert info.fps == pytest.approx(25.0)
    assert info.n_video_frames == round(info.video_duration_s * 25)
    assert info.audio_duration_s == pytest.approx(info.video_duration_s, abs=0.001)
    speech = json.loads(timings.read_text())
    last_phone_end = max(p["end_s"] for p in speech["phonemes"])
    assert info.video_duration_s == pytest.approx(last_phone_end, abs=1 / 25 + 1e-6)
    assert "render:" in proc.stderr and "real-time factor" in proc.stderr
    assert not list(out.parent.glob(".*.part"))


def test_render_is_lip_synced(piper_render):
    """Measured with MediaPipe on the decoded frames, independently of the renderer's numbers."""
    out, timings, _ = piper_render
    report = measure_lipsync(out, phonemes_from_json(json.loads(timings.read_text())))
    assert report.n_frames_no_face == 0
    assert report.best_corr >= 0.5, report
    assert abs(report.best_lag_frames) <= 2, report
    assert report.phones.pbm_over_open is not None and report.phones.pbm_over_open < 0.25, report
    assert report.phones.pause_over_open is not None and report.phones.pause_over_open < 0.25, report


def test_the_face_lives_in_silence(tmp_path):
    """Blinks and small head motion go on while the presenter says nothing (a long pause in the script)."""
    from studio.presenter import landmarks as lm
    from studio.encode.probe import read_video_frames

    out = tmp_path / "pause.mp4"
    proc = _run("render", "--text", "Hello. ... ... ... ... ... ... ... ... ... ... ... Goodbye.", "--voice", "espeak:en-us",
                "--out", str(out), "--fps", "25", "--size", "384")
    assert proc.returncode == 0, proc.stderr
    frames = read_video_frames(out)
    eyes, noses = [], []
    for f in frames:
        pts = lm.detect_landmarks(f)
        assert pts is not None
        eyes.append((pts[145, 1] - pts[159, 1]) / (pts[152, 1] - pts[10, 1]))
        noses.append(pts[1, :2])
    eyes = np.array(eyes)
    assert eyes.min() < 0.6 * np.median(eyes), "no blink"
    assert np.ptp(np.array(noses), axis=0).max() > 0.5, "the head never moves"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--text", "   "], "script is empty"),
        (["--text", "Hello", "--voice", "nobody"], "Unknown voice"),
        (["--script", "/nonexistent/script.txt"], "Script file not found"),
        (["--text", "Hello", "--anchor", "/nonexistent/face.jpg"], "Portrait not found"),
        (["--text", "Hello", "--anchor", "{notimage}"], "as an image"),
        (["--text", "Hello", "--anchor", "{noface}"], "No face found"),
        (["--text", "Hello", "--out", "/nonexistent-folder/x.mp4"], "does not exist"),
        (["--text", "Hello", "--out", "{readonly}/x.mp4"], "Cannot write"),
        (["--text", "Hello", "--device", "cuda"], "No CUDA GPU"),
        (["--text", "Hello", "--size", "10"], "even number of pixels from 64 to 2160"),
        (["--text", "Hello", "--size", "513"], "even number of pixels from 64 to 2160"),
        (["--text", "Hello", "--size", "2162"], "even number of pixels from 64 to 2160"),
        (["--text", "Hello", "--size", "512", "--canvas", "720p"], "not allowed with"),
        (["--text", "Hello", "--canvas", "4k"], "invalid choice"),
        (["--text", "Hello", "--fps", "24"], "not offered"),
        (["--text", "Hello", "--key-fps", "10"], "must divide"),
        (["--text", "Hello", "--optimizations", "warp_speed"], "Unknown optimization"),
        (["--text", "Hello", "--optimizations", "cuda_graphs", "--device", "cpu"], "no compiled engine of builtin"),
        (["--text", "Hello", "--optimizations", "gpu_encode", "--device", "cpu"], "needs a CUDA GPU"),
        (["--text", "Hello", "--engine", "nobody"], "Unknown engine"),
        (["--text", "Hello", "--audio-engine", "nobody"], "invalid choice"),
        (["--text", "Hello", "--background", "#12345"], "not a colour"),
        (["--text", "Hello", "--background", "/nonexistent/wall.png"], "no such file"),
        (["--audio", "{notimage}"], "audio"),
        (["--text", "Good evening. [pause -3s] Here is the news."], "Cannot read the pause [pause -3s]"),
        (["--text", "Good evening. [pause abc] Here is the news."], "Cannot read the pause [pause abc]"),
        (["--text", "Good evening. [pause 99999s] Here is the news."], "longer than 10 s"),
        (["--text", "Good evening. <break time='x'/> Here is the news."], "Cannot read the pause"),
    ],
)
def test_bad_input_gets_one_clear_line(tmp_path, args, message):
    from PIL import Image
    from skimage import data

    notimage = tmp_path / "notes.jpg"
    notimage.write_text("not a picture")
    noface = tmp_path / "coffee.png"
    Image.fromarray(data.coffee()).save(noface)
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o500)
    if "{readonly}" in " ".join(args) and os.access(readonly, os.W_OK):
        pytest.skip("running as root: permission bits do not stop writes")
    args = [a.format(notimage=notimage, noface=noface, readonly=readonly) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "out.mp4")]
    proc = _run("render", *args, timeout=120)
    assert proc.returncode == 2
    import re

    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not re.match(r"^\w+: \d+% ", ln)]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr  # progress lines aside
    assert message in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out.mp4").exists()


def test_render_on_a_720p_canvas_with_a_lower_third(tmp_path):
    """The 16:9 program: 1280 x 720, the presenter over the background with the title in the lower third."""
    from studio.encode.probe import read_video_frames

    out = tmp_path / "canvas.mp4"
    proc = _run("render", "--text", "Good evening.", "--voice", "espeak:en-us", "--canvas", "720p", "--title",
                "Evening news", "--background", "#203040", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    info = probe_mp4(out)
    assert (info.width, info.height) == (1280, 720) and info.fps == pytest.approx(25.0)
    assert info.audio_duration_s == pytest.approx(info.video_duration_s, abs=0.001)
    frame = read_video_frames(out)[0].astype(float)
    top, low = frame[20:60, 20:200], frame[int(720 * 0.78):int(720 * 0.95), 80:400]
    assert np.abs(top.mean(axis=(0, 1)) - [32, 48, 64]).max() <= 4  # the plain colour asked for
    assert (low.mean(axis=(1, 2)) < top.mean() - 12).any()  # the title's dark bar is drawn over it
    assert "optimizations" in proc.stderr and "engine builtin" in proc.stderr


def test_a_killed_render_leaves_no_finished_looking_file(tmp_path):
    out = tmp_path / "long.mp4"
    proc = subprocess.Popen([sys.executable, str(REPO / "main.py"), "render", "--text", SCRIPT * 3, "--voice",
                             "espeak:en-us", "--out", str(out)], cwd=REPO, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 120
    for line in proc.stderr:
        if line.startswith("render:") or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not out.exists()


def test_a_script_warning_is_said_once(tmp_path):
    """Letters the voice cannot read are left out with one warning line (it was printed twice: by the log's console
    handler and again by the command)."""
    out = tmp_path / "o.mp4"
    proc = _run("render", "--text", "Our correspondent 李明 reports.", "--voice", "espeak:en-us", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if "Left out" in ln]
    assert len(said) == 1 and said[0].startswith("WARNING:"), proc.stderr


def test_the_timings_hold_exactly_the_spoken_words_around_markup(tmp_path):
    """Markup is never a word of the timings, and every spoken word is there, in order."""
    out, timings = tmp_path / "o.mp4", tmp_path / "o.json"
    script = ("Good evening. [pause 1s] This is *big* news <emphasis>tonight</emphasis> from the harbour, "
              "<break time='300ms'/> a lone * star and an <emphasis>unclosed tag. [2s] Goodnight.")
    proc = _run("render", "--text", script, "--voice", "espeak:en-us", "--size", "128", "--out", str(out),
                "--timings", str(timings))
    assert proc.returncode == 0, proc.stderr
    words = [w["text"] for w in json.loads(timings.read_text())["words"]]
    assert words == ["Good", "evening", "This", "is", "big", "news", "tonight", "from", "the", "harbour", "a", "lone",
                     "star", "and", "an", "unclosed", "tag", "Goodnight"]
    said = [ln for ln in proc.stderr.splitlines() if "not read aloud" in ln]
    assert len(said) == 1 and "*" in said[0] and "<emphasis> never closed" in said[0], proc.stderr


def test_a_long_script_is_spoken_while_it_renders(tmp_path):
    """Sections of the script are spoken as the render runs: the render starts after the first sentence, says how
    much of the script is spoken, and the timings cover every word on the video's timeline."""
    out, timings = tmp_path / "long.mp4", tmp_path / "long.json"
    script = " ".join([SCRIPT] * 8)
    proc = _run("render", "--text", script, "--voice", "espeak:en-us", "--size", "128", "--out", str(out),
                "--timings", str(timings))
    assert proc.returncode == 0, proc.stderr
    assert "of the script spoken" in proc.stderr
    data = json.loads(timings.read_text())
    words = [w["text"] for w in data["words"]]
    assert words == [w.strip(".,") for w in script.split()]
    phones = data["phonemes"]
    assert phones[0]["start_s"] == 0.0 and all(a["end_s"] == pytest.approx(b["start_s"], abs=1e-9)
                                               for a, b in zip(phones, phones[1:]))
    info = probe_mp4(out)
    assert phones[-1]["end_s"] == pytest.approx(data["duration_s"]) == pytest.approx(info.video_duration_s,
                                                                                     abs=0.001)
    assert info.audio_duration_s == pytest.approx(info.video_duration_s, abs=0.05)
