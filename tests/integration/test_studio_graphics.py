"""The studio on a canvas: going live with the rundown's graphics puts them on the program picture."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_studio_runtime import _Running, _settings  # noqa: E402

from studio.contracts import Layout  # noqa: E402
from studio.graphics.look import Graphics  # noqa: E402
from studio.pipeline import commands as cmd  # noqa: E402
from studio.pipeline.rundown import Segment  # noqa: E402

pytestmark = pytest.mark.integration


def test_going_live_puts_the_programme_and_segment_graphics_on_air() -> None:
    seg = Segment("Parks", "Good evening. The council approved the parks budget tonight, after a long debate.",
                  voice="espeak:en-us", graphics=Graphics(headline="Parks budget"))
    with _Running(_settings(layout=Layout.CANVAS, canvas_height_px=720)) as r:
        r.runtime.submit(cmd.LoadAnchor(None))
        r.wait(lambda: r.of(cmd.AnchorLoaded) and r.runtime.latest_frame() is not None, 180)
        before = r.runtime.latest_frame().image.copy()
        r.runtime.submit(cmd.GoLive((seg,), (0,), Graphics(name="Eileen Collins", role="Anchor")))
        strap = (slice(int(720 * 0.6), int(720 * 0.93)), slice(64, 560))

        def on_air():  # the name strap's accent bar (the title alone has a thin stripe of it)
            now = r.runtime.latest_frame().image[strap].astype(int)
            return (np.abs(now - [200, 30, 45]).max(-1) < 40).mean() > 0.12

        r.wait(on_air, 120)
    assert before.shape == (720, 1280, 3)
    assert (np.abs(before[strap].astype(int) - [200, 30, 45]).max(-1) < 40).mean() < 0.02  # not before going live
