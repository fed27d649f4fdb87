"""There is one frame loop: the studio runtime, ``render``, ``live`` and ``bench`` all make their frames in the core's
stage B (``studio.pipeline.core.Core._stage_b``), and nothing else in studio/ calls a generator.

A generator registered by the test (the built-in engine, watched) notes every call with the driver running and whether
``Core._stage_b`` is on the call stack; each driver runs in this process on it, and the frames the driver reports equal
the frames the generator made. A syntax-tree check then finds every call of ``.generate(`` / ``.render_span(`` and
every use of the renderer's classes in studio/.
"""

from __future__ import annotations

import ast
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile

from studio.audio.capture import CaptureStatus, InputDevice
from studio.audio.ringbuffer import AudioRing

pytestmark = pytest.mark.integration

ENGINE = "test-one-loop"
ROOT = Path(__file__).resolve().parents[2]
RATE = 16000


@dataclass
class Call:
    driver: str
    method: str  # generate / render_span
    frames: int
    thread: str
    through_core: bool  # Core._stage_b of studio.pipeline.core is on the call stack


class Watch:
    """Every call of the test's generator, labelled with the driver that runs now."""

    def __init__(self) -> None:
        self.driver = ""
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def note(self, method: str, frames: int) -> None:
        f = sys._getframe(2)
        through = False
        while f is not None:
            if f.f_code.co_name == "_stage_b" and f.f_globals.get("__name__") == "studio.pipeline.core" \
                    and type(f.f_locals.get("self")).__name__ == "Core":
                through = True
                break
            f = f.f_back
        with self._lock:
            self.calls.append(Call(self.driver, method, frames, threading.current_thread().name, through))

    def of(self, driver: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.driver == driver]


@pytest.fixture(scope="module")
def watch():
    """Registers ``ENGINE``: the built-in engine, with every call noted."""
    from studio.generators.builtin import BuiltinGenerator
    from studio.contracts import GENERATORS

    w = Watch()

    class Watched(BuiltinGenerator):
        def generate(self, coeffs, features=None):
            out = super().generate(coeffs, features)
            w.note("generate", int(out.shape[0]))
            return out

        def render_span(self, coeffs, strides, carry):
            frames, carry = super().render_span(coeffs, strides, carry)
            w.note("render_span", int(frames.shape[0]))
            return frames, carry

    GENERATORS.names()  # the registry loads its modules first, so that the test's entry stays
    GENERATORS.register(ENGINE)(lambda **kw: Watched(**kw))
    yield w
    GENERATORS._factories.pop(ENGINE, None)


def _assert_through_core(calls: list[Call]) -> None:
    assert calls, "the driver made no frames with the test's generator"
    assert all(c.through_core for c in calls), [c for c in calls if not c.through_core][:3]


def test_the_studio_runtime_makes_its_frames_in_the_core(watch: Watch) -> None:
    from studio.pipeline import commands as cmd
    from studio.pipeline.settings import CoreSettings
    from studio.runtime import AudioOutputMode, StudioRuntime, StudioSettings

    watch.driver = "studio"
    settings = StudioSettings(core=CoreSettings(size_px=64, fps=25.0, chunk_frames=4, batch_frames=4, engine=ENGINE,
                                                measure_baseline=True, baseline_every=2),
                              audio_output=AudioOutputMode.NONE, warm_up_voice=False)
    events: list = []
    runtime = StudioRuntime(settings, on_event=events.append)
    thread = threading.Thread(target=runtime.run)
    thread.start()
    try:
        runtime.submit(cmd.LoadAnchor(None))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (len(watch.of("studio")) >= 8 and runtime.latest_frame()):
            time.sleep(0.05)
        produced = runtime.telemetry().frames_produced
    finally:
        runtime.submit(cmd.Shutdown())
        thread.join(timeout=60)
    assert not thread.is_alive() and not [e for e in events if isinstance(e, cmd.Error)]
    calls = watch.of("studio")
    _assert_through_core(calls)
    assert {c.thread for c in calls} == {"core"}  # the studio's core thread, nowhere else
    assert 0 < produced <= sum(c.frames for c in calls)
    assert runtime.latest_frame().image.shape == (64, 64, 3)


def _speech_wav(folder: Path, seconds: float = 1.2) -> Path:
    t = np.arange(int(seconds * RATE)) / RATE
    voiced = 0.3 * np.sin(2 * np.pi * 140 * t) * (np.sin(2 * np.pi * 2.5 * t) > 0)
    path = folder / "speech.wav"
    wavfile.write(path, RATE, (voiced * 32767).astype(np.int16))
    return path


def test_render_makes_its_frames_in_the_core(watch: Watch, tmp_path: Path) -> None:
    from studio.cli import main
    from studio.encode import probe_mp4

    watch.driver = "render"
    out = tmp_path / "render.mp4"
    rc = main(["render", "--audio", str(_speech_wav(tmp_path)), "--audio-engine", "pocketsphinx", "--engine", ENGINE,
               "--size", "64", "--device", "cpu", "--out", str(out)])
    assert rc == 0
    calls = watch.of("render")
    _assert_through_core(calls)
    assert {c.method for c in calls} == {"render_span"}  # the default flags: keyframes + motion-space in-betweens
    info = probe_mp4(out)
    assert info.n_video_frames == sum(c.frames for c in calls) == 30  # every frame of the file, made once


def test_render_rundown_makes_a_casts_frames_in_the_core(watch: Watch, tmp_path: Path) -> None:
    """A rundown with a cast of two: both anchors are rows of the core's calls, one call per chunk."""
    import json

    from PIL import Image

    from studio.cli import main
    from studio.encode import probe_mp4
    from studio.presenter.anchor import default_portrait

    Image.fromarray(np.ascontiguousarray(default_portrait()[:, ::-1])).save(tmp_path / "b.png")
    rundown = tmp_path / "r.json"
    rundown.write_text(json.dumps({"cast": {"A": {"voice": "espeak:en-us"}, "B": {"portrait": "b.png"}},
                                   "segments": [{"text": "Good evening.", "anchor": "A", "voice": "espeak:en-us"},
                                                {"text": "Thank you.", "anchor": "B", "voice": "espeak:en-us"}]}))
    watch.driver = "rundown"
    out = tmp_path / "rundown.mp4"
    rc = main(["render", "--rundown", str(rundown), "--engine", ENGINE, "--size", "64", "--device", "cpu",
               "--out", str(out)])
    assert rc == 0
    calls = watch.of("rundown")
    _assert_through_core(calls)
    info = probe_mp4(out)
    assert info.n_video_frames == sum(c.frames for c in calls) > 0
    assert (info.width, info.height) == (128, 64)  # the two anchors side by side


class FakeMic:
    """Stands in for MicCapture: a voice-like tone into the ring in 10 ms blocks at the pace of a sound card."""

    def __init__(self, settings=None) -> None:
        self.ring = AudioRing(RATE * 10, RATE)
        self.status = CaptureStatus.STOPPED
        self.last_error = ""
        self.device = InputDevice(0, "fake microphone", 1, RATE)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.status = CaptureStatus.RUNNING
        self._thread = threading.Thread(target=self._feed, name="fake-mic", daemon=True)
        self._thread.start()

    def _feed(self) -> None:
        block, n = RATE // 100, 0
        t0 = time.monotonic()
        while not self._stop.is_set():
            t = (n + np.arange(block)) / RATE
            self.ring.write((0.3 * np.sin(2 * np.pi * 140 * t) * (np.sin(2 * np.pi * 2.5 * t) > 0))
                            .astype(np.float32))
            n += block
            time.sleep(max(0.0, t0 + n / RATE - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.status = CaptureStatus.STOPPED


def test_live_makes_its_frames_in_the_core(watch: Watch, monkeypatch, capsys) -> None:
    from studio.cli import main

    monkeypatch.setattr("studio.pipeline.live.MicCapture", FakeMic)
    watch.driver = "live"
    rc = main(["live", "--seconds", "2", "--audio-engine", "pocketsphinx", "--engine", ENGINE, "--size", "64",
               "--device", "cpu"])
    assert rc == 0
    line = capsys.readouterr().out
    shown = re.search(r"(\d+) frames shown", line)
    assert shown, line
    calls = watch.of("live")
    _assert_through_core(calls)
    assert int(shown.group(1)) == sum(c.frames for c in calls) > 0  # the summary counts the generator's frames


def test_bench_makes_its_frames_in_the_core(watch: Watch, tmp_path: Path, default_anchor) -> None:
    from studio.bench.harness import BenchItem, BenchSettings, configurations, load_program, run_config, save_program

    rng = np.random.default_rng(3)
    speech = np.concatenate([(0.2 * rng.standard_normal(RATE // 2)), np.zeros(RATE // 4)]).astype(np.float32)
    save_program([BenchItem(speech, "tiny")], tmp_path / "tiny.npz")
    program = load_program(tmp_path / "tiny.npz")  # a tiny saved program: no text-to-speech needed
    b = BenchSettings(device="cpu", size_px=64, fps=25.0, engine=ENGINE, repeats=1)
    watch.driver = "bench"
    for name in ("plain", "optimized"):
        before = len(watch.of("bench"))
        rep, _ = run_config(default_anchor, program, b, configurations(False)[name], tmp_path)
        calls = watch.of("bench")[before:]
        _assert_through_core(calls)
        assert rep.frames_produced == sum(c.frames for c in calls) == round(0.75 * 25), name


def test_the_stack_check_can_fail(watch: Watch, default_anchor) -> None:
    """A call from outside the core is seen as such."""
    import torch

    from studio.contracts import GENERATORS, GeneratorSettings
    from studio.contracts.coeffs import N_COEFFS

    gen = GENERATORS.create(ENGINE)
    gen.open(default_anchor, GeneratorSettings(device="cpu", size_px=64, batch_frames=2))
    watch.driver = "direct"
    gen.generate(torch.zeros(2, N_COEFFS))
    assert [(c.method, c.frames, c.through_core) for c in watch.of("direct")] == [("generate", 2, False)]


# -- no other frame loop -------------------------------------------------------------------------------------------------

FRAME_CALLS = {"generate", "render_span"}  # a generator's frame-making methods (studio.contracts.Generator)
RENDERERS = {"Presenter", "WarpRenderer", "MotionSpaceInterpolator", "render_causal", "render_batch"}
# Where frames may be made other than through the core, and why:
ALLOWED = {
    "studio/pipeline/core.py": "the one frame loop",
    "studio/generators/": "the generators themselves (an engine may wrap another's calls)",
    "studio/presenter/": "the built-in renderer itself",
    "studio/enhance/": "motion-space interpolation, used by the built-in generator",
    "studio/bench/harness.py": "quality of single kernels against each other (PSNR / SSIM), not a frame loop",
    "studio/bench/renderer_speed.py": "a bench of the renderer's kernel alone",
    "studio/bench/compile_renderer.py": "the renderer's compiled kernels timed against eager, alone",
    "studio/bench/engine_speed.py": "each engine's forward pass alone (the leaderboard's latency per call)",
    "studio/ui/soak.py": "the soak tool's fault-injecting generator, a built-in one that raises once when armed",
}


def _allowed(rel: str) -> bool:
    return any(rel == k or (k.endswith("/") and rel.startswith(k)) for k in ALLOWED)


def _offences(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FRAME_CALLS:
            out.append((node.lineno, f".{node.func.attr}("))
        elif isinstance(node, ast.Name) and node.id in RENDERERS:
            out.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and node.attr in RENDERERS:
            out.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and any(a.name in RENDERERS for a in node.names):
            out.append((node.lineno, f"import of {[a.name for a in node.names if a.name in RENDERERS]}"))
    return out


def test_only_the_core_calls_generators_and_nothing_else_renders_frames() -> None:
    found: dict[str, list] = {}
    for path in sorted((ROOT / "studio").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if _allowed(rel):
            continue
        offences = _offences(ast.parse(path.read_text(encoding="utf-8"), filename=rel))
        if offences:
            found[rel] = offences
    assert not found, f"frames made outside the core's loop: {found}"
    core = ast.parse((ROOT / "studio/pipeline/core.py").read_text(encoding="utf-8"))
    assert {name for _, name in _offences(core)} == {".generate(", ".render_span("}  # the loop does call them


def test_the_syntax_check_can_fail() -> None:
    """The check above finds a second frame loop written in any of the usual ways."""
    sample = ast.parse("def loop(gen, c):\n    return gen.generate(c)\n"
                       "from studio.presenter.renderer import Presenter\n"
                       "def other(m, c, s):\n    return m.interp.render_causal(c, s, None)\n")
    assert {name for _, name in _offences(sample)} == {".generate(", "import of ['Presenter']", ".render_causal"}
