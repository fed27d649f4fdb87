"""CUDA graphs and a cast: the built-in engine's warp of several anchors runs eager, and the flag says so where it is
listed (the HUD's pill, a run's optimizations) instead of staying on in silence. No GPU needed: on the CPU the same
flag means a compiled engine, which a cast cannot use either."""

from __future__ import annotations

import math

import numpy as np
import pytest

from studio.contracts import CastLayout, GeneratorSettings, OnAir, Output
from studio.errors import RenderError
from studio.pipeline.settings import CoreSettings, Optimization
from studio.pipeline.telemetry import OptimizationStatus

O = Optimization
SIZE = 64


@pytest.fixture(scope="module")
def two_packs(default_anchor):
    from studio.presenter.anchor import build_anchor, default_portrait

    mirrored = np.ascontiguousarray(default_portrait()[:, ::-1])
    return build_anchor(output_px=SIZE), build_anchor(mirrored, name="Mirrored", output_px=SIZE)


class _Discard(Output):
    name = "discard"

    def write(self, batch) -> None:
        pass


def test_the_builtin_engine_says_why_a_cast_runs_eager(two_packs) -> None:
    from studio.generators.builtin import BuiltinGenerator
    from studio.pipeline.pool import graphs_off_line

    settings = GeneratorSettings(device="cpu", size_px=SIZE, batch_frames=4)
    cast, one = BuiltinGenerator(), BuiltinGenerator()
    cast.open(two_packs, settings)
    one.open(two_packs[0], settings)
    what, why = cast.graphs_off()
    assert what == "off for a cast of 2" and "eager" in why
    assert one.graphs_off() == ("", "")
    assert graphs_off_line(what, why, "cuda:0") == ("CUDA graphs: off for a cast of 2",
                                                    f"CUDA graphs: off for a cast of 2 ({why})")
    assert graphs_off_line(what, why, "cpu")[0] == "compiled engine: off for a cast of 2"
    with pytest.raises(RenderError, match="CUDA device"):  # asked on a CPU device: refused, as for one anchor
        BuiltinGenerator().open(two_packs, GeneratorSettings(device="cpu", size_px=SIZE, cuda_graphs=True))


def test_the_core_turns_the_flag_off_for_a_cast_and_says_so(two_packs) -> None:
    from studio.pipeline.cast_motion import CastMotion
    from studio.pipeline.core import Core
    from studio.pipeline.factory import presenter_px
    from studio.pipeline.pool import GeneratorPool
    from studio.pipeline.programme import programme_settings
    from studio.pipeline.sources import ProgramItem, ProgramSource

    s = programme_settings(CoreSettings(size_px=SIZE, fps=25.0, chunk_frames=4, batch_frames=4, device="cpu",
                                        optimizations=frozenset({O.CUDA_GRAPHS, O.SILENCE_SIEVE}),
                                        measure_baseline=False), 2, CastLayout.TWO_SHOT)
    pool = GeneratorPool("builtin", two_packs, s, presenter_px(s))
    pool.get(False, True)  # the form these flags ask for, as make_core opens it
    silence = ProgramItem(np.zeros(3 * 3200, np.float32), np.zeros(3200, np.float32), on_air=OnAir("quiet"))
    core = Core(ProgramSource([silence]), CastMotion(2), pool, [_Discard()], s)
    try:
        headline, line = pool.graphs_off
        assert headline == "compiled engine: off for a cast of 2" and line.startswith(headline + " (")
        assert O.CUDA_GRAPHS not in core.optimizations and O.SILENCE_SIEVE in core.optimizations
        assert core.unavailable()[O.CUDA_GRAPHS] == line
        assert line in pool.engine_notes  # the studio shows the engine notes when a core starts
        rep = core.run()
        assert "cuda_graphs" not in rep.optimizations and rep.off == {"cuda_graphs": line}
        share = next(x for x in core.compute_saved().shares if x.name == "cuda_graphs")
        assert share.status is OptimizationStatus.UNAVAILABLE and share.headline == headline
        assert share.reason == line and math.isnan(share.saved_fraction)
        forms = pool.forms()  # the cast runs eager in either form: one opened, not two
        assert set(forms) == {(False, True), (False, False)} and forms[(False, True)] is forms[(False, False)]
    finally:
        pool.close()
