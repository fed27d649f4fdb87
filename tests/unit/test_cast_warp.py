"""A cast's anchors as rows of one warp: each row is the frame its anchor's own renderer makes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from studio.contracts.coeffs import MOUTH_COEFFS, example_motion

SIZE = 96


@pytest.fixture(scope="module")
def two_packs(default_anchor):
    from studio.presenter.anchor import build_anchor, default_portrait

    mirrored = np.ascontiguousarray(default_portrait()[:, ::-1])
    return build_anchor(output_px=SIZE), build_anchor(mirrored, name="Mirrored", output_px=SIZE)


@pytest.mark.parametrize("matte", [False, True])
def test_each_row_is_its_anchors_own_frame(two_packs, matte: bool) -> None:
    from studio.presenter.cast_warp import CastWarp
    from studio.presenter.matte import MatteWarp
    from studio.presenter.renderer import WarpRenderer

    mattes = [p.matte for p in two_packs] if matte else None
    cast = CastWarp(two_packs, SIZE, SIZE // 4, 3, mattes).eval()
    c = torch.from_numpy(example_motion(6, seed=3).reshape(3, 2, -1))
    with torch.inference_mode():
        rows = cast(c)
        alone = []
        for i, pack in enumerate(two_packs):
            r = WarpRenderer(pack, SIZE, SIZE // 4, 3).eval()
            alone.append(MatteWarp(r, pack.matte)(c[:, i]) if matte else r(c[:, i]))
    ch = 4 if matte else 3
    assert rows.shape == (3, 2 * ch, SIZE, SIZE)
    for i in range(2):
        assert float((rows[:, i * ch:(i + 1) * ch] - alone[i]).abs().max()) < 1e-3


def test_a_closed_mouth_skips_the_mouth_interior(two_packs) -> None:
    from studio.presenter.cast_warp import CastWarp

    cast = CastWarp(two_packs, SIZE, SIZE // 4).eval()
    c = torch.from_numpy(example_motion(8, seed=5).reshape(4, 2, -1))
    c[:, 1, [int(x) for x in MOUTH_COEFFS]] = 0  # the second anchor listens
    with torch.inference_mode():
        cast(c)
    assert cast.mouth_skipped == 1


def test_a_picture_format_is_measured_with_the_cast_on_the_programme(two_packs) -> None:
    """What the studio refuses a format with: the cast's core (both anchors, one motion row each), not one face."""
    import math

    from studio.contracts import CastLayout
    from studio.pipeline.factory import measure_format
    from studio.pipeline.programme import programme_settings
    from studio.pipeline.settings import CoreSettings

    s = programme_settings(CoreSettings(size_px=64, fps=25.0, chunk_frames=4, batch_frames=4), 2, CastLayout.TWO_SHOT)
    ms = measure_format(s, two_packs, seconds=0.4)
    assert math.isfinite(ms) and ms > 0


def test_a_smiling_listener_is_drawn_and_its_closed_mouth_still_skips_the_interior(two_packs) -> None:
    """A listener's small smile is LIP_SPREAD on a closed mouth: the warp draws it (the row is the smile its anchor's
    own renderer makes, not the rest pose), and the mouth interior is skipped as for any closed mouth."""
    from studio.contracts.coeffs import Coeff
    from studio.presenter.cast_warp import CastWarp
    from studio.presenter.renderer import WarpRenderer

    cast = CastWarp(two_packs, SIZE, SIZE // 4).eval()
    c = torch.from_numpy(example_motion(8, seed=5).reshape(4, 2, -1))
    c[:, 1, [int(x) for x in MOUTH_COEFFS]] = 0
    c[:, 1, Coeff.LIP_SPREAD] = torch.tensor([0.0, 0.4, 0.9, 0.4])  # the second anchor listens, smiling
    with torch.inference_mode():
        rows = cast(c)[:, 3:6]
        own = WarpRenderer(two_packs[1], SIZE, SIZE // 4, 3).eval()
        alone = own(c[:, 1])
        c[:, 1, Coeff.LIP_SPREAD] = 0
        unsmiling = own(c[:, 1])
    assert cast.mouth_skipped == 1
    assert float((rows - alone).abs().max()) < 1e-3
    assert float((rows[2] - unsmiling[2]).abs().mean()) > 0.1  # the smile is on the frame
    assert float((rows[0] - unsmiling[0]).abs().max()) < 1e-3
