"""Motion of a cast: one row of coefficients per anchor, each anchor with its own motion state.

Every anchor has its own ``ProgramMotion`` (its own idle seed: blinks, sway, breathing) and hears only the items it
speaks (``OnAir.speaker``): the speaker's row is driven by the speech, every other row by silence, so a listener's
mouth stays closed and never mouths the other's words. Listeners are attentive, from the speaker's audio: a small
nod shortly after each phrase end (speech falling into a pause) and on some accents (loudness peaks that stand out
of the phrase), and the head turned a few degrees toward the speaker's seat (seats in cast order, left to right),
eased in and out. There is no gaze coefficient in the rig: the head's turn carries the attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine
from studio.contracts import ANALYSIS_RATE_HZ, Chunk, MotionSource, ProgramFormat
from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.pipeline.motion import ProgramMotion


@dataclass(frozen=True)
class ListeningSettings:
    """How a listener reacts to the speaker (times in seconds, angles in degrees)."""

    turn_deg: float = 2.5  # head yaw toward the speaker's seat
    turn_time_constant_s: float = 0.4
    nod_delay_s: float = 0.15  # after a phrase end
    pause_s: float = 0.25  # silence after speech that ends a phrase
    min_phrase_s: float = 0.5  # speech before it that makes a phrase
    accent_share: float = 0.35  # of the accents, this share draws a nod (seeded)
    window_s: float = 0.04  # loudness frames of the cue analysis


def listening_cues(audio: np.ndarray, s: ListeningSettings = ListeningSettings(), seed: int = 0
                   ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(phrase ends, accents) of speech audio at ANALYSIS_RATE_HZ, in seconds from its start. Phrase ends: where
    speech of at least ``min_phrase_s`` falls silent for ``pause_s``; accents: loudness peaks 6 dB over the
    phrase's median, a share of them (``accent_share``, seeded)."""
    hop = max(1, int(s.window_s * ANALYSIS_RATE_HZ))
    n = len(audio) // hop
    if n == 0:
        return (), ()
    frames = np.asarray(audio[:n * hop], np.float64).reshape(n, hop)
    db = 10 * np.log10(np.mean(frames ** 2, 1) + 1e-10)
    voiced = db > max(-45.0, float(db.max()) - 35.0)
    ends: list[float] = []
    run = quiet = 0
    for i, v in enumerate(voiced):
        if v:
            if quiet * s.window_s >= s.pause_s:
                run = 0
            run += 1
            quiet = 0
        else:
            quiet += 1
            if run * s.window_s >= s.min_phrase_s and quiet * s.window_s >= s.pause_s:
                ends.append((i - quiet + 1) * s.window_s)
                run = 0
    if run * s.window_s >= s.min_phrase_s:  # the speech ends with the item
        ends.append(n * s.window_s)
    med = float(np.median(db[voiced])) if voiced.any() else 0.0
    peaks = [i for i in range(1, n - 1) if voiced[i] and db[i] >= db[i - 1] and db[i] > db[i + 1]
             and db[i] > med + 6.0]
    rng = np.random.default_rng(seed)
    accents = tuple(i * s.window_s for i in peaks if rng.random() < s.accent_share)
    return tuple(ends), accents


class CastMotion(MotionSource):
    """See the module docstring. Coefficients per chunk: K x rows x N_COEFFS."""

    name = "cast"

    def __init__(self, rows: int, audio_engine: AudioEngine = DEFAULT_AUDIO_ENGINE, seed: int = 0,
                 settings: ListeningSettings = ListeningSettings()) -> None:
        self.rows = rows
        self.s = settings
        self.seed = seed
        self.members = [ProgramMotion(audio_engine, seed=seed + 7919 * i) for i in range(rows)]
        self._cued: set[tuple[int, int]] = set()  # (listener, item id) whose cues are placed
        self._turn = np.zeros(rows)
        self._turn_t = None
        self.nods_cued = [0] * rows

    def open(self, fmt: ProgramFormat) -> None:
        super().open(fmt)
        for m in self.members:
            m.open(fmt)

    def _cue(self, listener: int, chunk: Chunk) -> None:
        """Nods of ``listener`` at the cues of the items others speak in this chunk (placed once per item)."""
        fps = self.fmt.fps
        for item in chunk.items:
            if item.on_air.speaker == listener or (listener, id(item)) in self._cued:
                continue
            self._cued.add((listener, id(item)))
            cues = item.motion_cache.get("listening")
            if cues is None:
                cues = item.motion_cache["listening"] = listening_cues(item.analysis_audio, self.s, self.seed)
            ends, accents = cues
            rng = np.random.default_rng(self.seed + 31 * listener + item.start_slot)
            times = [t + self.s.nod_delay_s for t in ends] + [t for t in accents if rng.random() < 0.5]
            idle = self.members[listener].idle
            for t in sorted(times):
                before = idle.nod_count
                idle.nod(item.start_slot / fps + t)
                self.nods_cued[listener] += idle.nod_count - before

    def motion(self, chunk: Chunk) -> np.ndarray:
        fps = self.fmt.fps
        out = np.zeros((chunk.n, self.rows, N_COEFFS), np.float32)
        for a, m in enumerate(self.members):
            self._cue(a, chunk)
            own = replace(chunk, items=tuple(x for x in chunk.items if x.on_air.speaker == a))
            out[:, a] = m.motion(own)
        # the listeners' heads turned toward the speaker's seat, eased
        for j, slot in enumerate(chunk.slots):
            t = (int(slot) + 0.5) / fps
            item = next((x for x in chunk.items if x.start_slot <= slot < x.end_slot), None)
            target = np.zeros(self.rows)
            if item is not None:
                who = item.on_air.speaker
                target = np.sign(who - np.arange(self.rows)) * self.s.turn_deg
            dt = 0.0 if self._turn_t is None else max(0.0, t - self._turn_t)
            self._turn += (target - self._turn) * (1.0 - math.exp(-dt / self.s.turn_time_constant_s))
            self._turn_t = t
            out[j, :, Coeff.HEAD_YAW_DEG] += self._turn
        return out

    def speaking(self, chunk: Chunk) -> np.ndarray | None:
        """Whether anyone speaks, per slot (the speaker's speech: the silence sieve's decision for the chunk)."""
        return self.members[0].speaking(chunk)

    def stats(self) -> dict[str, float]:
        return self.members[0].stats()


def programme_motion(rows: int, audio_engine: AudioEngine, seed: int) -> MotionSource:
    """The motion of a programme of ``rows`` anchors: one ``CastMotion`` row each (the speaker's driven by the speech,
    the others listening); one anchor: ``ProgramMotion``."""
    if rows > 1:
        return CastMotion(rows, audio_engine=audio_engine, seed=seed)
    return ProgramMotion(audio_engine=audio_engine, seed=seed)


def motion_fits(motion: MotionSource | None, rows: int) -> bool:
    """``motion`` is what ``programme_motion`` makes for ``rows`` anchors (kept across a core's restarts)."""
    if rows > 1:
        return isinstance(motion, CastMotion) and motion.rows == rows
    return isinstance(motion, ProgramMotion)
