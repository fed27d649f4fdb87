"""A listener's occasional small smile: in its own row only, with the mouth closed (LIP_SPREAD alone, which the rig
draws as a smile: tests/unit/test_renderer.py), eased, seeded, drawn to the speaker's phrase ends."""

from __future__ import annotations

import numpy as np
import pytest

from studio.contracts import ANALYSIS_RATE_HZ, Chunk, OnAir, ProgramFormat
from studio.contracts.coeffs import MOUTH_COEFFS, Coeff
from studio.pipeline.cast_motion import CastMotion, ListenerSmiles, ListeningSettings
from studio.pipeline.motion import ProgramMotion
from studio.pipeline.sources import ProgramItem
from studio.speech.types import PhonemeTiming

FPS = 25.0
OPENING = [int(Coeff.JAW_OPEN), int(Coeff.LIP_PART), int(Coeff.LIP_ROUND)]


def _speech(seconds: float, speaker: int, start_slot: int) -> ProgramItem:
    """``seconds`` of phrases (1.6 s of loud noise, 0.5 s of silence, in turn) with phones that open and close the
    mouth through each phrase, spoken by ``speaker`` from ``start_slot``."""
    n = int(seconds * ANALYSIS_RATE_HZ)
    t = np.arange(n) / ANALYSIS_RATE_HZ
    voiced = (t % 2.1) < 1.6
    audio = (np.random.default_rng(1).standard_normal(n) * 0.1 * voiced).astype(np.float32)
    phones, s = [], 0.0
    while s < seconds - 0.2:
        in_phrase = (s % 2.1) < 1.6
        phones.append(PhonemeTiming(("a" if int(s / 0.2) % 2 else "m") if in_phrase else "SIL", s, s + 0.2))
        s += 0.2
    item = ProgramItem(program_audio=np.zeros(1, np.float32), analysis_audio=audio, phonemes=tuple(phones),
                       on_air=OnAir("news", speaker=speaker))
    item.start_slot, item.n_slots = start_slot, int(seconds * FPS)
    return item


def _run(items: list[ProgramItem], seed: int, chunk: int = 10) -> np.ndarray:
    """T x 2 x N_COEFFS of a cast of two over ``items`` (back to back from slot 0), chunk by chunk."""
    motion = CastMotion(2, seed=seed)
    motion.open(ProgramFormat(128, 64, FPS, rows=2))
    end = max(x.end_slot for x in items)
    out = []
    for first in range(0, end, chunk):
        slots = np.arange(first, min(end, first + chunk), dtype=np.int64)
        on = tuple(x for x in items if x.start_slot < slots[-1] + 1 and x.end_slot > slots[0])
        out.append(motion.motion(Chunk(first // chunk, slots, np.zeros(0, np.float32), 0, np.zeros(0, np.float32), 0,
                                       items=on)))
    return np.concatenate(out)


@pytest.fixture(scope="module")
def programme():
    """Anna (row 0) speaks 14 s, then Ben (row 1) 4 s."""
    anna = _speech(14.0, 0, 0)
    ben = _speech(4.0, 1, anna.end_slot)
    return [anna, ben]


def test_a_listener_smiles_with_a_closed_mouth_and_the_speaker_never(programme) -> None:
    anna, ben = programme
    c = _run(programme, seed=5)
    s = ListeningSettings()
    listening = slice(anna.start_slot, anna.end_slot)
    spread = c[listening, 1, Coeff.LIP_SPREAD]
    # Ben, listening to Anna: a smile starts within the first smile's latest start (5 s) and lasts 1.5-2.5 s
    on = spread > 0
    starts = np.flatnonzero(on[1:] & ~on[:-1]) + 1
    ends = np.flatnonzero(on[:-1] & ~on[1:]) + 1
    assert len(starts) >= 1 and starts[0] <= s.smile_first_s[1] * FPS
    lasted = ends - starts[:len(ends)]
    assert np.all(lasted >= s.smile_duration_s[0] * FPS - 2) and np.all(lasted <= s.smile_duration_s[1] * FPS + 1)
    assert s.smile_spread[0] - 0.01 <= spread.max() <= s.smile_spread[1]
    assert np.abs(np.diff(spread)).max() < 0.15  # eased in and out: no jump
    # occasional: 14 s of listening holds one or two smiles (6-12 s apart), not a fixed grin
    assert 1 <= len(starts) <= 2 and on.mean() < 0.4
    # closed: nothing that opens the lips moves off rest, and the mouth never mouths Anna's words
    assert np.all(c[listening, 1][:, OPENING] == 0) and np.all(c[listening, 1, Coeff.LIP_PRESS] == 0)
    # the speaker's row has no smile: Anna's mouth is her speech's own, exactly
    alone = ProgramMotion(seed=5)
    alone.open(ProgramFormat(64, 64, FPS))
    own = Chunk(0, np.arange(anna.n_slots, dtype=np.int64), np.zeros(0, np.float32), 0, np.zeros(0, np.float32), 0,
                items=(anna,))
    mouth = [int(x) for x in MOUTH_COEFFS]
    np.testing.assert_array_equal(c[listening, 0][:, mouth], alone.motion(own)[:, mouth])
    # and back: Anna listens to Ben without opening her mouth either
    assert np.all(c[ben.start_slot:ben.end_slot, 0][:, OPENING] == 0)


def test_smiles_are_seeded(programme) -> None:
    a, b, other = _run(programme, seed=5), _run(programme, seed=5, chunk=7), _run(programme, seed=6)
    np.testing.assert_array_equal(a[..., Coeff.LIP_SPREAD], b[..., Coeff.LIP_SPREAD])  # any chunking
    assert not np.array_equal(a[:, 1, Coeff.LIP_SPREAD], other[:, 1, Coeff.LIP_SPREAD])


def test_smiles_keep_their_interval_and_come_after_phrase_ends() -> None:
    s = ListeningSettings()
    smiles = ListenerSmiles(s, seed=2)
    ends = np.arange(1.6, 120.0, 2.1)  # a phrase end every 2.1 s
    smiles.listen(0.0, 120.0, ends)
    starts = np.array([m.start_s for m in smiles.smiles])
    gaps = np.diff(starts)
    assert len(starts) >= 9 and gaps.min() >= s.smile_interval_s[0] and gaps.max() <= s.smile_interval_s[1]
    after_end = [np.min(np.abs(ends + s.smile_phrase_delay_s - t)) < 1e-9 for t in starts]
    assert np.mean(after_end) >= 0.5
    assert all(m.end_s <= 120.0 for m in smiles.smiles)
    # a span too short for a smile gets none, and the next span carries on
    short = ListenerSmiles(s, seed=2)
    short.listen(0.0, 1.4)
    assert short.count == 0
