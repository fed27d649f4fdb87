"""``render --rundown``: a cast of two through the core's one generator call, taking turns; old rundowns still render.

A generator registered by the test (the built-in engine) keeps the coefficients of every call the core makes, so the
mouths, blinks and nods are counted on exactly what was rendered, and the rows each call was asked to show (cut to
the speaker: one a frame); the file is read back for the pictures.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from studio.contracts.coeffs import OPENING_COEFFS, Coeff

pytestmark = pytest.mark.integration

ENGINE = "test-cast-record"
SIZE = 64
SHOWN: list = []  # per generator call: the anchor row each frame shows (None: every row)
SEGMENTS = [("Anna", "Good evening. The river rose over its banks tonight, and the town prepared for a long night."),
            ("Ben", "Thank you, Anna. By noon the water had reached the old bridge, and the roads were closed."),
            ("Anna", "Thank you, Ben. We will be back after the break.")]


@pytest.fixture(scope="module")
def recorded():
    """Registers ``ENGINE``: the built-in engine, every call's coefficients kept (K x rows x N in call order)."""
    from studio.contracts import GENERATORS
    from studio.generators.builtin import BuiltinGenerator

    calls: list[np.ndarray] = []

    class Recorded(BuiltinGenerator):
        def generate(self, coeffs, features=None, shown=None):
            calls.append(coeffs.cpu().numpy().copy())
            SHOWN.append(shown)
            return super().generate(coeffs, features, shown=shown)

        def render_span(self, coeffs, strides, carry, shown=None):
            calls.append(coeffs.cpu().numpy().copy())
            SHOWN.append(shown)
            return super().render_span(coeffs, strides, carry, shown=shown)

    GENERATORS.names()
    GENERATORS.register(ENGINE)(lambda **kw: Recorded(**kw))
    yield calls
    GENERATORS._factories.pop(ENGINE, None)


def _rundown(folder: Path, cast: bool = True) -> Path:
    from PIL import Image

    from studio.presenter.anchor import default_portrait

    Image.fromarray(np.ascontiguousarray(default_portrait()[:, ::-1])).save(folder / "ben.png")
    data: dict = {"version": 2, "segments": [{"title": f"Part {i + 1}", "text": text, "voice": "espeak:en-us"}
                                             | ({"anchor": who} if cast else {})
                                             for i, (who, text) in enumerate(SEGMENTS)]}
    if cast:
        data["cast"] = {"Anna": {"voice": "espeak:en-us"}, "Ben": {"portrait": "ben.png", "voice": "espeak:en-gb"}}
    path = folder / "rundown.json"
    path.write_text(json.dumps(data))
    return path


def _frames(path: Path) -> np.ndarray:
    import av

    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def _render(tmp_path: Path, rundown: Path, *extra: str) -> Path:
    from studio.cli import main

    out = tmp_path / "programme.mp4"
    rc = main(["render", "--rundown", str(rundown), "--engine", ENGINE, "--size", str(SIZE), "--device", "cpu",
               "--out", str(out), *extra])
    assert rc == 0
    return out


def _mouth(c: np.ndarray) -> np.ndarray:
    """How far the mouth is open (a listener's small smile spreads closed lips: not counted)."""
    return np.abs(c[..., list(OPENING_COEFFS)]).sum(-1)


def _nods(pitch: np.ndarray, fps: float) -> int:
    """Nods in a pitch track (degrees): bumps of 0.6 degrees or more over the slow sway (a 1 s moving median)."""
    k = int(fps)
    pad = np.pad(pitch, (k // 2, k // 2), mode="edge")
    slow = np.array([np.median(pad[i:i + k]) for i in range(len(pitch))])
    up = (pitch - slow) > 0.6
    return int(np.sum(up[1:] & ~up[:-1]) + up[0])


def test_two_anchors_render_in_one_call_and_take_turns(recorded, tmp_path: Path) -> None:
    recorded.clear()
    out = _render(tmp_path, _rundown(tmp_path))
    frames = _frames(out)
    coeffs = np.concatenate(recorded)  # T x 2 x N: what the generator rendered, frame by frame
    assert coeffs.ndim == 3 and coeffs.shape[1] == 2  # both anchors are rows of every call
    assert len(frames) == len(coeffs) and frames.shape[1:] == (SIZE, 2 * SIZE, 3)

    # both faces on every frame: each half stays near its own median picture, and the halves are different faces
    halves = [frames[:, :, :SIZE].astype(np.float32), frames[:, :, SIZE:].astype(np.float32)]
    for h in halves:
        ref = np.median(h, 0)
        assert np.abs(h - ref).mean(axis=(1, 2, 3)).max() < 12
    assert np.abs(np.median(halves[0], 0) - np.median(halves[1], 0)).mean() > 5

    # never both mouths at once; the speaking turns alternate Anna, Ben, Anna
    mouth = _mouth(coeffs)
    assert not np.any((mouth[:, 0] > 0) & (mouth[:, 1] > 0))
    who = np.where(mouth[:, 0] > 0, 0, np.where(mouth[:, 1] > 0, 1, -1))
    turns = [w for i, w in enumerate(who[who >= 0]) if i == 0 or w != who[who >= 0][i - 1]]
    assert turns == [0, 1, 0]
    ben = np.flatnonzero(who == 1)
    first, second = slice(0, ben[0]), slice(ben[0], ben[-1] + 1)
    assert mouth[first, 0].mean() > 0.05 and mouth[first, 1].max() == 0  # Anna speaks, Ben's mouth rests
    assert mouth[second, 1].mean() > 0.05 and mouth[second, 0].max() == 0  # and back

    # listeners are alive: every anchor blinks; each nods while the other speaks, turned toward the speaker
    fps = 25.0
    for row in range(2):
        blink = coeffs[:, row, Coeff.BLINK_L] > 0.5
        assert int(np.sum(blink[1:] & ~blink[:-1])) >= 1
    assert _nods(coeffs[second, 0, Coeff.HEAD_PITCH_DEG], fps) >= 1  # Anna listening to Ben
    assert _nods(coeffs[first, 1, Coeff.HEAD_PITCH_DEG], fps) >= 1  # Ben listening to Anna
    late = slice(ben[0] + 25, ben[-1])  # after the turn has eased in
    assert coeffs[late, 0, Coeff.HEAD_YAW_DEG].mean() > coeffs[first, 0, Coeff.HEAD_YAW_DEG].mean() + 1.0
    # and smile now and then, with closed lips: the spread of a listener's row is its smile's alone
    from studio.pipeline.cast_motion import ListeningSettings

    low, high = ListeningSettings().smile_spread
    smile = np.concatenate([coeffs[first, 1, Coeff.LIP_SPREAD], coeffs[second, 0, Coeff.LIP_SPREAD]])
    assert low - 0.01 <= smile.max() <= high
    assert (smile > 0).mean() < 0.5


def test_cut_layout_shows_one_anchor_at_a_time(recorded, tmp_path: Path) -> None:
    recorded.clear()
    SHOWN.clear()
    frames = _frames(_render(tmp_path, _rundown(tmp_path), "--layout", "cut"))
    coeffs = np.concatenate(recorded)
    assert coeffs.shape[1] == 2 and frames.shape[1:] == (SIZE, SIZE, 3) and len(frames) == len(coeffs)
    # every anchor's motion goes to the generator, which is asked for the speaker's row alone, one a frame
    shown = np.concatenate(SHOWN)
    assert len(shown) == len(frames) and [int(x) for i, x in enumerate(shown) if i == 0 or x != shown[i - 1]] == \
        [0, 1, 0]
    # the picture changes face at the turns: Ben's portrait is Anna's mirrored
    early, late = frames[10].astype(np.float32), frames[len(frames) // 2].astype(np.float32)
    assert np.abs(late - early[:, ::-1]).mean() < np.abs(late - early).mean()


def test_a_rundown_without_a_cast_is_one_anchor(recorded, tmp_path: Path) -> None:
    recorded.clear()
    frames = _frames(_render(tmp_path, _rundown(tmp_path, cast=False)))
    coeffs = np.concatenate(recorded)
    assert coeffs.ndim == 2 and frames.shape[1:] == (SIZE, SIZE, 3) and len(frames) == len(coeffs)
    assert _mouth(coeffs).max() > 0.1
