"""Interview mode: the host speaks a script while a guest at the microphone drives a second anchor, live.

A cast of two on one core: row 0 the host, row 1 the guest.
- ``InterviewSource`` paces the core by the microphone (a ``MicSource`` inside: session time is the microphone's)
  and places the host's turns on that same timeline, so a chunk's programme audio is the microphone's samples plus
  the host's speech at the same sample positions: the recording and every output get both voices, each in sync with
  the face it drives. ``Chunk.fresh`` stays the microphone's alone (what the guest's row hears) and ``Chunk.items``
  carry the host's speech (what the host's row says): each row reads its own audio without a field of its own.
- Turn-taking (``Floor``): the script is cut into turns (at blank lines and after each question); the host opens,
  and each next turn waits until the guest has answered and paused, or has said nothing for ``wait_s``. The script
  waits rather than runs because an interview is questions and answers: a script that ran on would talk over the
  guest, and the programme would carry two voices at once where the viewer should hear one. A guest who speaks
  during a turn (a barge-in) does not stop it: the host finishes the turn, as a person would finish the sentence.
- Who speaks (``OnAir.speaker``): the host while a turn plays, the guest while the microphone's silence sieve hears
  speech, else whoever spoke last. ``OnAir.row`` is the speaker as well, so the canvas shows that anchor's strap.
- ``InterviewMotion``: the host's row from the script (``ProgramMotion``), the guest's through ``MicMotion`` on the
  fresh microphone audio; each listens to the other: the guest nods at the cues of the host's speech, the host at
  phrase ends found in the guest's audio as it arrives; both heads turn toward whoever has the floor; each smiles now
  and then with the mouth closed while the other speaks (``ListenerSmiles``: the guest inside the host's turns, the
  host at the cues of the guest's speech, since its end is not known while it is spoken).
"""

from __future__ import annotations

import logging
import math
import re
import threading
from dataclasses import dataclass, replace

import numpy as np

from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine, MicMotionSettings
from studio.contracts import ANALYSIS_RATE_HZ, PROGRAM_RATE_HZ, Chunk, MotionSource, OnAir, Pacing, ProgramFormat, \
    Source
from studio.contracts.coeffs import N_COEFFS, Coeff
from studio.pipeline.cast_motion import HeadTurns, ListenerSmiles, ListeningSettings, LiveCues, listening_cues
from studio.pipeline.clock import ProgramAudio
from studio.pipeline.motion import MicMotion, ProgramMotion
from studio.pipeline.sources import MicSource, ProgramItem

log = logging.getLogger(__name__)

HOST, GUEST = 0, 1


@dataclass(frozen=True)
class InterviewSettings:
    """Turn-taking and the mix (times in seconds)."""

    open_after_s: float = 0.5  # the host's first turn, this long after the programme starts
    min_answer_s: float = 0.3  # the guest's speech after a turn that counts as an answer
    answer_pause_s: float = 0.4  # silence after the answer (beyond the sieve's 0.3-s hangover) that gives the floor
    wait_s: float = 6.0  # a guest who says nothing this long after a turn: the host goes on
    host_gain: float = 1.0  # the script's speech in the programme mix
    guest_gain: float = 1.0  # the microphone's


def split_turns(script: str) -> list[str]:
    """The host's turns of ``script``: paragraphs (separated by a blank line), each cut after every question."""
    turns: list[str] = []
    for para in re.split(r"\n\s*\n", script):
        text = " ".join(para.split())
        turns += [t.strip() for t in re.split(r"(?<=\?)\s+", text) if t.strip()]
    return turns


@dataclass(frozen=True)
class TurnPlaced:
    """A host turn went on the timeline: its number (from 1), first slot and length."""

    number: int
    start_slot: int
    n_slots: int


class Floor:
    """Who has the floor, and when the host may take it for the next turn (module docstring). Fed the guest's
    speaking flags in order (one per sieve frame of ``frame_s``) and told about the host's turns."""

    def __init__(self, s: InterviewSettings, frame_s: float) -> None:
        self.s = s
        self.frame_s = frame_s
        self.heard_s = 0.0  # the end of the guest's audio judged so far (session time)
        self.guest_speaking = False
        self.guest_last_s = -math.inf  # the end of the guest's last speaking frame
        self.answer_s = 0.0  # the guest's speech since the host's last turn ended
        self.guest_spoken_s = 0.0  # all the guest's speech heard
        self.host_end_s: float | None = None  # None: the host has not spoken yet
        self.speaker = HOST

    def hear(self, flags: list[bool]) -> None:
        for f in flags:
            self.heard_s += self.frame_s
            self.guest_speaking = f
            if f:
                self.guest_last_s = self.heard_s
                self.guest_spoken_s += self.frame_s
                if self.host_end_s is not None and self.heard_s > self.host_end_s:
                    self.answer_s += self.frame_s

    def host_may_speak(self, t_s: float) -> bool:
        """Whether the host's next turn may start at ``t_s`` (after the last turn has ended)."""
        if self.guest_speaking or self.heard_s - self.guest_last_s < self.s.answer_pause_s:
            return False
        if self.host_end_s is None:
            return t_s >= self.s.open_after_s
        if t_s < self.host_end_s:
            return False
        return self.answer_s >= self.s.min_answer_s or t_s - self.host_end_s >= self.s.wait_s

    def host_turn(self, end_s: float) -> None:
        self.host_end_s = end_s
        self.answer_s = 0.0

    def who(self, host_speaking: bool) -> int:
        """The speaker now: the host during a turn, the guest while heard, else the last one."""
        if host_speaking:
            self.speaker = HOST
        elif self.guest_speaking:
            self.speaker = GUEST
        return self.speaker


class InterviewSource(Source):
    """See the module docstring. ``mic``: the guest's ``MicSource``; turns come through ``add_turn`` (any thread,
    in order), each a program item of the host's speech."""

    name = "interview"
    live = True
    just_in_time = True

    def __init__(self, mic: MicSource, settings: InterviewSettings = InterviewSettings(), title: str = "") -> None:
        self.mic = mic
        self.s = settings
        self.title = title
        self.program = ProgramAudio(PROGRAM_RATE_HZ)
        self.analysis = ProgramAudio(ANALYSIS_RATE_HZ)
        self._lock = threading.Lock()
        self._waiting: list[ProgramItem] = []  # turns ready, not placed yet
        self._items: list[ProgramItem] = []  # turns placed
        self.placed: list[TurnPlaced] = []  # every turn placed, in order (drivers announce them)
        self.sieve = None
        self.floor: Floor | None = None
        self.turns_added = 0
        self.first_slot: int | None = None  # the first slot of the run (a recording's first frame)
        self.on_place = None  # called with each turn as it goes on the timeline (the studio plays it to the guest)

    @property
    def next_k(self) -> int:
        return self.mic.next_k

    def add_turn(self, item: ProgramItem) -> None:
        with self._lock:
            self._waiting.append(item)
            self.turns_added += 1

    def cut(self) -> None:
        """The host stops: turns not started are dropped, and a turn on air is silenced from the next slot on."""
        with self._lock:
            self._waiting.clear()
            if self.floor is None:  # not open yet: nothing is on the timeline
                return
            slot = self.mic.next_k
            self.program.cut(self._sample(slot, PROGRAM_RATE_HZ))
            self.analysis.cut(self._sample(slot, ANALYSIS_RATE_HZ))
            for it in self._items:
                it.n_slots = max(0, min(it.n_slots, slot - it.start_slot))
            if self.floor.host_end_s is not None:
                self.floor.host_end_s = min(self.floor.host_end_s, slot / self.fmt.fps)

    def waiting(self) -> int:
        """Turns ready but not on air yet."""
        with self._lock:
            return len(self._waiting)

    def open(self, fmt: ProgramFormat) -> None:
        from studio.audio.sieve import SilenceSieve

        super().open(fmt)
        self.mic.open(fmt)
        if self.sieve is None:
            self.sieve = SilenceSieve()
            n = self.sieve.settings.frame_samples
            self.floor = Floor(self.s, n / self.sieve.settings.sample_rate_hz)

    def _sample(self, slot: int, rate: int) -> int:
        return int(round(slot * rate / self.fmt.fps))

    def on_air_states(self) -> tuple[OnAir, ...]:
        return tuple(OnAir(title=self.title, row=who, speaker=who) for who in (HOST, GUEST))

    def next_chunk(self, pace: Pacing) -> Chunk | None:
        chunk = self.mic.next_chunk(pace)
        if chunk is None:
            return None
        fps = self.fmt.fps
        first, last = int(chunk.slots[0]), int(chunk.slots[-1])
        if self.first_slot is None:
            self.first_slot = first
        floor = self.floor
        if chunk.fresh is not None and len(chunk.fresh):
            floor.hear(self.sieve.frames(chunk.fresh))
        with self._lock:
            if self._waiting and floor.host_may_speak(first / fps):
                self._place(self._waiting.pop(0), first)
            items = tuple(x for x in self._items if x.start_slot <= last and x.end_slot > first)
            self._items = [x for x in self._items if x.end_slot > first - round(2 * fps)]
        self.program.prune(self._sample(first - round(2 * fps), PROGRAM_RATE_HZ))
        self.analysis.prune(self._sample(first - round(2 * fps), ANALYSIS_RATE_HZ))
        host = self.program.read(chunk.audio_start, len(chunk.audio))
        chunk.audio = np.clip(self.s.guest_gain * chunk.audio + self.s.host_gain * host, -1.0, 1.0).astype(np.float32)
        chunk.analysis = np.clip(self.s.guest_gain * chunk.analysis + self.s.host_gain * self.analysis.read(
            chunk.analysis_start, len(chunk.analysis)), -1.0, 1.0).astype(np.float32)
        who = floor.who(any(x.start_slot <= last < x.end_slot for x in items))
        chunk.on_air = OnAir(title=self.title, row=who, speaker=who)
        chunk.items = items
        return chunk

    def _place(self, item: ProgramItem, slot: int) -> None:
        fps = self.fmt.fps
        item.start_slot = slot
        item.n_slots = max(1, math.ceil(item.duration_s * fps - 1e-9))
        item.on_air = replace(item.on_air, speaker=HOST)
        self.program.add(self._sample(slot, PROGRAM_RATE_HZ), item.program_audio)
        self.analysis.add(self._sample(slot, ANALYSIS_RATE_HZ), item.analysis_audio)
        self._items.append(item)
        self.floor.host_turn(item.end_slot / fps)
        self.placed.append(TurnPlaced(len(self.placed) + 1, slot, item.n_slots))
        log.info("host turn %d at slot %d (%.2f s)", len(self.placed), slot, item.duration_s)
        if self.on_place is not None:
            self.on_place(item)

    def close(self) -> None:
        self.mic.close()


class InterviewMotion(MotionSource):
    """See the module docstring. Coefficients per chunk: K x 2 x N_COEFFS (host, guest)."""

    name = "interview"

    def __init__(self, engine: AudioEngine = DEFAULT_AUDIO_ENGINE, seed: int = 0, motion_thread: bool = True,
                 settings: ListeningSettings = ListeningSettings()) -> None:
        self.s = settings
        self.seed = seed
        self.host = ProgramMotion(engine, seed=seed)
        self.guest = MicMotion(engine, settings=MicMotionSettings(seed=seed + 7919), motion_thread=motion_thread)
        self.turns = HeadTurns(2, settings)
        self.guest_cues = LiveCues(settings, seed)  # in the guest's audio, for the host
        self._cued: set[int] = set()  # host items whose cues the guest has
        self.nods_cued = [0, 0]  # (host, guest)
        # each listener's occasional small smile: the guest's inside the host's turns, the host's at the cues of the
        # guest's speech as it arrives
        self.smiles = [ListenerSmiles(settings, seed + 104729), ListenerSmiles(settings, seed + 2 * 104729)]

    @property
    def note(self) -> str:
        return self.guest.note

    @property
    def engine(self) -> AudioEngine:
        return self.guest.engine

    @property
    def lead_s(self) -> float:
        return self.guest.lead_s

    def open(self, fmt: ProgramFormat) -> None:
        super().open(fmt)
        self.host.open(fmt)
        self.guest.open(fmt)

    def _nod(self, row: int, idle, t_s: float) -> None:
        before = idle.nod_count
        idle.nod(t_s)
        self.nods_cued[row] += idle.nod_count - before

    def _cue(self, chunk: Chunk) -> None:
        fps = self.fmt.fps
        now = int(chunk.slots[0]) / fps
        for item in chunk.items:  # the guest listens to the host: the cues of each turn, placed once
            if id(item) in self._cued:
                continue
            self._cued.add(id(item))
            ends, accents = listening_cues(item.analysis_audio, self.s, self.seed)
            rng = np.random.default_rng(self.seed + item.start_slot)
            for t in sorted([t + self.s.nod_delay_s for t in ends] + [t for t in accents if rng.random() < 0.5]):
                self._nod(GUEST, self.guest.src.idle, item.start_slot / fps + t)
            t0 = item.start_slot / fps
            self.smiles[GUEST].listen(t0, item.end_slot / fps, [t0 + t for t in ends])
        if chunk.fresh is not None and len(chunk.fresh):  # the host listens to the guest, as the audio arrives
            for t in self.guest_cues.feed(chunk.fresh):
                self._nod(HOST, self.host.idle, max(now, t + self.s.nod_delay_s))
                self.smiles[HOST].cue(max(now, t + self.s.smile_phrase_delay_s))

    def motion(self, chunk: Chunk) -> np.ndarray:
        fps = self.fmt.fps
        out = np.zeros((chunk.n, 2, N_COEFFS), np.float32)
        self._cue(chunk)
        out[:, HOST] = self.host.motion(chunk)  # the chunk's items are the host's turns
        out[:, GUEST] = self.guest.motion(chunk)  # its fresh audio is the guest's microphone
        for j, slot in enumerate(chunk.slots):
            t = (int(slot) + 0.5) / fps
            out[j, :, Coeff.HEAD_YAW_DEG] += self.turns.step(t, chunk.on_air.speaker)
            # smiles with the mouth closed (spread alone), never over the host's own turn
            hosting = any(x.start_slot <= slot < x.end_slot for x in chunk.items)
            for row in (HOST, GUEST):
                if not (row == HOST and hosting):
                    out[j, row, Coeff.LIP_SPREAD] = max(float(out[j, row, Coeff.LIP_SPREAD]), self.smiles[row].at(t))
        return out

    def speaking(self, chunk: Chunk) -> np.ndarray | None:
        """Whether either speaks, per slot (the host's phone timings, the guest's silence sieve)."""
        host = self.host.speaking(chunk)
        if host is None:
            host = np.array([any(x.start_slot <= s < x.end_slot for x in chunk.items) for s in chunk.slots], bool)
        return host | self.guest.speaking(chunk)

    def close(self) -> None:
        self.guest.close()

    def stats(self) -> dict[str, float]:
        return {**self.guest.stats(), "nods_host": float(self.nods_cued[HOST]),
                "nods_guest": float(self.nods_cued[GUEST]), "smiles_host": float(self.smiles[HOST].count),
                "smiles_guest": float(self.smiles[GUEST].count)}


# -- the drivers' side ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InterviewRequest:
    """An interview as ``live`` runs it: the host's turns, voice and portrait, the guest's portrait, the layout."""

    turns: tuple[str, ...]
    voice: str | None = None  # the host's (None: the default voice)
    host_portrait: object = None  # a path (None: the built-in presenter)
    guest_portrait: object = None  # a path (None: the built-in guest)
    layout: object = None  # studio.contracts.CastLayout (None: two-shot)
    settings: InterviewSettings = InterviewSettings()


def interview_anchors(host_portrait, guest_portrait, output_px: int, progress=None) -> tuple:
    """(host pack, guest pack) at the cast's presenter size; the built-in guest when ``guest_portrait`` is None."""
    from studio.presenter.anchor import DEFAULT_GUEST_NAME, build_anchor, default_guest_portrait

    host = build_anchor(host_portrait, output_px=output_px, progress=progress,
                        name=None if host_portrait is not None else "Host")
    if guest_portrait is None:
        guest = build_anchor(default_guest_portrait(), output_px=output_px, progress=progress, name="Guest")
        log.info("the guest is the built-in %s", DEFAULT_GUEST_NAME)
    else:
        guest = build_anchor(guest_portrait, output_px=output_px, progress=progress)
    return host, guest


def interview_style(style, host_name: str, guest_name: str):
    """``style`` (a ``studio.graphics.look.CanvasStyle``) with each anchor's name strap on the row of their turns."""
    from studio.graphics.look import CanvasStyle, Graphics

    style = style or CanvasStyle()
    straps = (Graphics(name=host_name, transition="cut"), Graphics(name=guest_name, transition="cut"))
    return replace(style, segments=straps)


class TurnSpeaker:
    """Speaks the host's turns on a thread of its own, in order, and hands each to the source as it is ready (the
    first is on air while the next is being spoken). ``error`` holds why a turn could not be spoken."""

    def __init__(self, source: InterviewSource, turns: tuple[str, ...], voice: str | None) -> None:
        self.source = source
        self.turns = turns
        self.voice = voice
        self.error = ""
        self._next = 0  # the first turn not spoken yet
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="interview-speech", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def speak_ahead(self, count: int | None = None, progress=None) -> None:
        """Speak the next ``count`` turns (None: all) now, on the calling thread, before the programme starts: speech
        made beside a CPU's frames made them late (on two cores even at the lowest priority). ``start`` then speaks
        the others, one ahead of the one on air. ``progress(done, total)`` after each."""
        todo = self.turns[self._next:] if count is None else self.turns[self._next:self._next + count]
        for i, text in enumerate(todo):
            if self.error or not self._speak(text):
                return
            self._next += 1
            if progress is not None:
                progress(i + 1, len(todo))

    def _speak(self, text: str) -> bool:
        """Speak one turn and hand it to the source; False (and ``error``) when it cannot be spoken."""
        from studio.errors import StudioError
        from studio.pipeline.sources import item_from_utterance
        from studio.speech import SpeechSettings, synthesize

        try:
            utt = synthesize(text, self.voice, SpeechSettings(onnx_threads=1))
        except StudioError as exc:
            self.error = str(exc)
            log.warning("a host turn could not be spoken: %s", exc)
            return False
        self.source.add_turn(item_from_utterance(utt, OnAir(title=self.source.title, row=HOST, speaker=HOST)))
        return True

    def _run(self) -> None:
        from studio.pipeline.threads import lower_thread_priority

        lower_thread_priority()  # the frames first: a turn is spoken well before it is due
        if self.error:
            return
        for text in self.turns[self._next:]:
            if self._stop.is_set():
                return
            while self.source.waiting() >= 1 and not self._stop.wait(0.05):
                pass  # one turn ahead of the one on air
            if self._stop.is_set() or not self._speak(text):
                return
