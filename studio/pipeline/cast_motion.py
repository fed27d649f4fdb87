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
    smile_interval_s: tuple[float, float] = (6.0, 12.0)  # from one smile's start to the next's (seeded)
    smile_first_s: tuple[float, float] = (1.5, 5.0)  # the first smile after listening starts; none before the low end
    smile_duration_s: tuple[float, float] = (1.5, 2.5)
    smile_spread: tuple[float, float] = (0.65, 0.95)  # LIP_SPREAD at the smile's height (the mouth stays closed)
    smile_ease_s: float = 0.45  # in and out (smoothstep)
    smile_phrase_share: float = 0.7  # of the phrase ends in a smile's window, this share draws it to them (seeded)
    smile_phrase_delay_s: float = 0.2  # a smile drawn to a phrase end starts this long after it


class PhraseTracker:
    """Phrase ends in a run of voiced / unvoiced loudness frames (``window_s`` each): speech of at least
    ``min_phrase_s`` that falls silent for ``pause_s``."""

    def __init__(self, s: ListeningSettings) -> None:
        self.s = s
        self.run = 0  # voiced frames of the phrase so far
        self.quiet = 0  # unvoiced frames since the last voiced one

    def step(self, voiced: bool) -> int | None:
        """The next frame; returns, when it completes a phrase end, how many frames before this one's start the
        speech fell silent, else None."""
        s = self.s
        if voiced:
            if self.quiet * s.window_s >= s.pause_s:
                self.run = 0
            self.run += 1
            self.quiet = 0
            return None
        self.quiet += 1
        if self.run * s.window_s >= s.min_phrase_s and self.quiet * s.window_s >= s.pause_s:
            self.run = 0
            return self.quiet - 1
        return None


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
    phrases = PhraseTracker(s)
    ends = [(i - q) * s.window_s for i, v in enumerate(voiced) if (q := phrases.step(bool(v))) is not None]
    if phrases.run * s.window_s >= s.min_phrase_s:  # the speech ends with the item
        ends.append(n * s.window_s)
    med = float(np.median(db[voiced])) if voiced.any() else 0.0
    peaks = [i for i in range(1, n - 1) if voiced[i] and db[i] >= db[i - 1] and db[i] > db[i + 1]
             and db[i] > med + 6.0]
    rng = np.random.default_rng(seed)
    accents = tuple(i * s.window_s for i in peaks if rng.random() < s.accent_share)
    return tuple(ends), accents


class LiveCues:
    """``listening_cues`` for audio that arrives as it is spoken (a guest at the microphone): the same phrase ends,
    found as each ``feed`` completes them, and accents against the median of the last few seconds of speech (the
    phrase's whole loudness is not known yet). Voiced: louder than -45 dBFS and within 35 dB of the loudest frame so
    far. Times in seconds on the fed audio's timeline (sample 0 at 0 s)."""

    HISTORY_FRAMES = 150  # 6 s of 40-ms frames for the accents' median

    def __init__(self, s: ListeningSettings = ListeningSettings(), seed: int = 0) -> None:
        self.s = s
        self.hop = max(1, int(s.window_s * ANALYSIS_RATE_HZ))
        self.phrases = PhraseTracker(s)
        self._rng = np.random.default_rng(seed)
        self._buf = np.zeros(0, np.float32)
        self._frames = 0  # loudness frames analysed so far
        self._peak_db = -120.0
        self._recent: list[float] = []  # voiced frames' dB, newest last
        self._last = (-120.0, -120.0)  # the two frames before (dB), for a peak one frame late

    def feed(self, audio: np.ndarray) -> list[float]:
        """The next samples; returns the cue times (phrase ends and drawn accents) they completed."""
        buf = np.concatenate([self._buf, np.asarray(audio, np.float32)]) if len(self._buf) else \
            np.asarray(audio, np.float32)
        n = len(buf) // self.hop
        self._buf = buf[n * self.hop:].copy()
        if n == 0:
            return []
        frames = buf[:n * self.hop].astype(np.float64).reshape(n, self.hop)
        out: list[float] = []
        for db in 10 * np.log10(np.mean(frames ** 2, 1) + 1e-10):
            db = float(db)
            self._peak_db = max(self._peak_db, db)
            voiced = db > max(-45.0, self._peak_db - 35.0)
            q = self.phrases.step(voiced)
            if q is not None:
                out.append((self._frames - q) * self.s.window_s)
            before, prev = self._last
            if self._recent and prev >= before and prev > db and prev > float(np.median(self._recent)) + 6.0 \
                    and self._rng.random() < self.s.accent_share:
                out.append((self._frames - 1) * self.s.window_s)
            if voiced:
                self._recent = (self._recent + [db])[-self.HISTORY_FRAMES:]
            self._last = (prev, db if voiced else -120.0)
            self._frames += 1
        return out


@dataclass(frozen=True)
class Smile:
    """One small smile: LIP_SPREAD rises to ``spread`` and falls back over ``duration_s`` from ``start_s``."""

    start_s: float
    duration_s: float
    spread: float

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    def at(self, t_s: float, ease_s: float) -> float:
        """LIP_SPREAD at ``t_s``: eased in and out (smoothstep over ``ease_s``, at most half the smile each)."""
        x = t_s - self.start_s
        if x <= 0.0 or x >= self.duration_s:
            return 0.0
        ease = max(1e-6, min(ease_s, self.duration_s / 2))
        k = min(1.0, x / ease, (self.duration_s - x) / ease)
        return self.spread * k * k * (3.0 - 2.0 * k)


class ListenerSmiles:
    """One listener's occasional small smiles, placed span by span of another's speech (``listen``), each wholly
    inside its span (so never over the listener's own speech): one every ``smile_interval_s``, the first
    ``smile_first_s`` after listening starts (each start drawn in those ranges); a share of the phrase ends
    (``smile_phrase_share``) draw a smile to just after them: the last such phrase end between the earliest start
    the interval allows and the drawn one. Seeded."""

    def __init__(self, s: ListeningSettings = ListeningSettings(), seed: int = 0) -> None:
        self.s = s
        self._rng = np.random.default_rng(seed)
        self._due_s: float | None = None  # the latest start of the next smile (None: before any listening)
        self._earliest_s = -math.inf  # the earliest start of the next smile
        self.smiles: list[Smile] = []  # placed, oldest first (pruned behind ``at``)
        self.count = 0  # smiles placed so far

    def listen(self, t0_s: float, t1_s: float, phrase_ends_s=()) -> None:
        """Place the smiles of [t0_s, t1_s), a span in which another anchor speaks (its phrase ends, in seconds on
        the same timeline, draw them)."""
        s, rng = self.s, self._rng
        if self._due_s is None:
            self._due_s = t0_s + float(rng.uniform(*s.smile_first_s))
        ends = [t + s.smile_phrase_delay_s for t in sorted(phrase_ends_s) if rng.random() < s.smile_phrase_share]
        while True:
            earliest = max(self._earliest_s, t0_s + s.smile_first_s[0])
            due = max(self._due_s, earliest)
            start = max((t for t in ends if earliest <= t <= due), default=due)
            duration = float(rng.uniform(*s.smile_duration_s))
            if start + duration > t1_s:
                return
            self.smiles.append(Smile(start, duration, float(rng.uniform(*s.smile_spread))))
            self.count += 1
            self._earliest_s = start + s.smile_interval_s[0]
            self._due_s = start + float(rng.uniform(*s.smile_interval_s))

    def cue(self, t_s: float) -> bool:
        """A cue (a phrase end or an accent) at ``t_s`` of speech heard as it is spoken, whose span's end is not known
        yet (a guest at the microphone): the first cue starts the listening; a later one starts a smile at ``t_s``
        once ``smile_first_s`` (then ``smile_interval_s``) has passed since, always after the drawn time, before it
        for a share of the cues (``smile_phrase_share``). Returns whether a smile started."""
        s, rng = self.s, self._rng
        if self._due_s is None:
            self._due_s = t_s + float(rng.uniform(*s.smile_first_s))
            self._earliest_s = t_s + s.smile_first_s[0]
            return False
        if t_s < self._earliest_s or (t_s < self._due_s and rng.random() >= s.smile_phrase_share):
            return False
        self.smiles.append(Smile(t_s, float(rng.uniform(*s.smile_duration_s)), float(rng.uniform(*s.smile_spread))))
        self.count += 1
        self._earliest_s = t_s + s.smile_interval_s[0]
        self._due_s = t_s + float(rng.uniform(*s.smile_interval_s))
        return True

    def at(self, t_s: float) -> float:
        """LIP_SPREAD of the smiles at ``t_s`` (0 between them); ``t_s`` ascends from call to call."""
        while self.smiles and self.smiles[0].end_s < t_s - 1.0:
            self.smiles.pop(0)
        return max((m.at(t_s, self.s.smile_ease_s) for m in self.smiles), default=0.0)


class HeadTurns:
    """Each listener's head turned toward the speaker's seat (seats in cast order, left to right), eased."""

    def __init__(self, rows: int, s: ListeningSettings = ListeningSettings()) -> None:
        self.rows = rows
        self.s = s
        self._turn = np.zeros(rows)
        self._turn_t: float | None = None

    def step(self, t_s: float, speaker: int | None) -> np.ndarray:
        """The rows' yaw (degrees) at ``t_s`` with ``speaker`` speaking (None: nobody: heads ease back)."""
        target = np.zeros(self.rows)
        if speaker is not None:
            target = np.sign(speaker - np.arange(self.rows)) * self.s.turn_deg
        dt = 0.0 if self._turn_t is None else max(0.0, t_s - self._turn_t)
        self._turn += (target - self._turn) * (1.0 - math.exp(-dt / self.s.turn_time_constant_s))
        self._turn_t = t_s
        return self._turn.copy()


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
        self.turns = HeadTurns(rows, settings)
        self.nods_cued = [0] * rows
        self.smiles = [ListenerSmiles(settings, seed + 104729 * (i + 1)) for i in range(rows)]

    def open(self, fmt: ProgramFormat) -> None:
        super().open(fmt)
        for m in self.members:
            m.open(fmt)

    def _cue(self, listener: int, chunk: Chunk) -> None:
        """Nods and smiles of ``listener`` at the cues of the items others speak in this chunk (placed once per
        item; the smiles inside the item's span)."""
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
            t0 = item.start_slot / fps
            self.smiles[listener].listen(t0, item.end_slot / fps, [t0 + t for t in ends])

    def motion(self, chunk: Chunk) -> np.ndarray:
        fps = self.fmt.fps
        out = np.zeros((chunk.n, self.rows, N_COEFFS), np.float32)
        for a, m in enumerate(self.members):
            self._cue(a, chunk)
            own = replace(chunk, items=tuple(x for x in chunk.items if x.on_air.speaker == a))
            out[:, a] = m.motion(own)
        # the listeners' heads turned toward the speaker's seat, eased; their smiles (closed mouth: spread alone)
        for j, slot in enumerate(chunk.slots):
            t = (int(slot) + 0.5) / fps
            item = next((x for x in chunk.items if x.start_slot <= slot < x.end_slot), None)
            speaker = item.on_air.speaker if item is not None else None
            out[j, :, Coeff.HEAD_YAW_DEG] += self.turns.step(t, speaker)
            for a, smiles in enumerate(self.smiles):
                if a != speaker:
                    out[j, a, Coeff.LIP_SPREAD] = max(float(out[j, a, Coeff.LIP_SPREAD]), smiles.at(t))
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
