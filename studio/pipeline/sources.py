"""Sources of the core: what is said and when.

- ``ProgramSource``: program items (text-to-speech or audio files) placed on one timeline. Offline (``render``,
  ``bench``: no clock) it hands out consecutive chunks until the last item ends; while ``feeding`` (a long script
  spoken section by section as the render runs) it waits for the next item instead of ending, and forgets the items
  and audio it has handed out, so memory holds a few sections whatever the script's length. In the studio it runs
  against the program clock (the sound card's playback position, or the monotonic clock when there is none): it
  idles when nothing is scheduled, renders a little ahead of the clock, and skips slots (counted as dropped) when the
  loop falls behind rather than drift. Items are scheduled while it runs (``schedule``); ``cut`` stops speech.
- ``MicSource``: the microphone. Session time runs in samples of the capture ring's rate (``session = ring +
  offset``); slot ``k`` shows session time ``k / fps`` and falls due once the ring holds ``lead`` of audio after it
  (the motion source's look-ahead, ``Pacing.lead_s``). Every ring sample is read once: the program audio is the
  ring's own (the ring runs at the program's rate), the analysis audio one downsampling of it, and each chunk carries
  the analysis audio heard since the previous one (``Chunk.fresh``) for the motion source. A loop one slot
  behind (a chunk that took a little longer than a frame) catches up: the next chunk takes that slot too, once (the
  chunk after a catch-up does not catch up again, so a loop that is too slow cannot fall further and further
  behind); otherwise only the newest due slots are produced (older ones are dropped and counted). When no audio arrives for ``stall_ms`` (device
  lost, not started yet) session time runs on the wall clock as silence, so the presenter keeps idling and a
  recording keeps picture and sound aligned; the slots that silence covers at once are produced in order (a stalled
  device is not the loop falling behind, and drops nothing).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from studio.pipeline.clock import ProgramAudio
from studio.contracts import (ANALYSIS_RATE_HZ, PROGRAM_RATE_HZ, Chunk, OnAir, Pacing, ProgramFormat,
                                   Source)
from studio.speech.types import PhonemeTiming, Utterance, WordTiming

log = logging.getLogger(__name__)


# -- program items ------------------------------------------------------------------------------------------------------

@dataclass
class ProgramItem:
    """One piece of speech on the program timeline. Motion sources keep per-item results in ``motion_cache``."""

    program_audio: np.ndarray  # float32 mono at PROGRAM_RATE_HZ
    analysis_audio: np.ndarray  # float32 mono at ANALYSIS_RATE_HZ
    phonemes: tuple[PhonemeTiming, ...] = ()  # seconds from the item's start; empty for recordings
    words: tuple[WordTiming, ...] = ()
    on_air: OnAir = OnAir()
    text: str = ""
    voice: str = ""
    start_slot: int = 0  # set when scheduled
    n_slots: int = 0
    started: bool = False  # the studio has announced it
    motion_cache: dict = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return len(self.analysis_audio) / ANALYSIS_RATE_HZ

    @property
    def end_slot(self) -> int:
        return self.start_slot + self.n_slots


def resample(audio: np.ndarray, from_hz: int, to_hz: int) -> np.ndarray:
    """Mono float32 from ``from_hz`` to ``to_hz`` (polyphase, whole signal), exactly round(n * to / from) long."""
    if from_hz == to_hz:
        return np.asarray(audio, np.float32)
    from studio.resample import resample_poly

    out = resample_poly(audio, int(to_hz), int(from_hz))
    n = int(round(len(audio) * to_hz / from_hz))
    return np.pad(out, (0, max(0, n - len(out))))[:n].astype(np.float32)


def item_from_utterance(utt: Utterance, on_air: OnAir = OnAir(), pause_s: float = 0.0) -> ProgramItem:
    """A TTS utterance as a program item (both rates), with ``pause_s`` of silence after it."""
    pad = int(round(pause_s * utt.sample_rate_hz))
    audio = np.concatenate([utt.audio, np.zeros(pad, np.float32)]) if pad else utt.audio
    return ProgramItem(program_audio=resample(audio, utt.sample_rate_hz, PROGRAM_RATE_HZ),
                       analysis_audio=resample(audio, utt.sample_rate_hz, ANALYSIS_RATE_HZ),
                       phonemes=tuple(utt.phonemes), words=tuple(utt.words), on_air=on_air, text=utt.text,
                       voice=utt.voice)


def item_from_audio(program_audio: np.ndarray, program_rate_hz: int, analysis_audio: np.ndarray,
                    on_air: OnAir = OnAir()) -> ProgramItem:
    """A recording as a program item: its own quality kept for the program, 16 kHz for analysis."""
    return ProgramItem(program_audio=resample(program_audio, program_rate_hz, PROGRAM_RATE_HZ),
                       analysis_audio=np.asarray(analysis_audio, np.float32), on_air=on_air)


# -- the program ------------------------------------------------------------------------------------------------------------

class ProgramSource(Source):
    """Program items on one timeline (module docstring). ``clock``: an object with ``now_s()`` (the studio), or None
    (offline: every slot is produced, as fast as the loop goes)."""

    name = "program"

    def __init__(self, items: list[ProgramItem] | None = None, clock=None, endless: bool = False,
                 gap_ms: float = 500.0, lead_ms: float = 250.0) -> None:
        self.clock = clock
        self.live = clock is not None
        self.endless = endless
        self.gap_ms = gap_ms
        self.lead_ms = lead_ms
        self.program = ProgramAudio(PROGRAM_RATE_HZ)
        self.analysis = ProgramAudio(ANALYSIS_RATE_HZ)
        self._items: list[ProgramItem] = []
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self.next_slot = 0
        self._audio_cursor = 0  # next program sample to hand out
        self._analysis_cursor = 0
        self._chunks = 0
        self._resynced = False  # the next chunk is the first since resync()
        self.fmt: ProgramFormat | None = None
        self._pending = list(items or [])
        self.total_slots = 0
        self._feeding = False  # offline: more items are coming (``feed`` / ``fed``)
        self._streamed = False  # was fed: handed-out items are pruned
        self._speaker = 0  # the cast row speaking at the last slot handed out (``_speakers``)

    # scheduling (any thread)

    def queue(self, item: ProgramItem) -> None:
        """Add ``item`` before the source opens (placed with the others at ``open``: a render whose speech arrives
        after its core was made)."""
        with self._cv:
            if self.fmt is not None:
                raise RuntimeError("ProgramSource.queue: the source is open; schedule() the item instead")
            self._pending.append(item)

    def open(self, fmt: ProgramFormat) -> None:
        first_open = self.fmt is None
        super().open(fmt)
        if first_open:
            pending, self._pending = self._pending, []
            for it in pending:
                self.schedule(it, gap=False, now_slot=0)
        if self.live:
            self.resync()

    def resync(self) -> None:
        """Continue from the clock's present (after a pause in production: a core restart, the microphone mode, a new
        frame rate): the slots that passed meanwhile were never due, so they are not counted as dropped."""
        with self._cv:
            self._resynced = True
            now_slot = math.ceil(self.clock.now_s() * self.fmt.fps) + 1
            if now_slot > self.next_slot:
                self.next_slot = now_slot
                self._audio_cursor = max(self._audio_cursor, self._sample(now_slot, PROGRAM_RATE_HZ))
                self._analysis_cursor = max(self._analysis_cursor, self._sample(now_slot, ANALYSIS_RATE_HZ))

    def schedule(self, item: ProgramItem, gap: bool = True, now_slot: int | None = None) -> ProgramItem:
        """Place ``item`` after what is scheduled (a gap between two items), never in the past; returns it placed."""
        fps = self.fmt.fps if self.fmt else 25.0
        with self._cv:
            prev_end = max((x.end_slot for x in self._items), default=0)
            if now_slot is None:
                now_slot = math.ceil((self.clock.now_s() + self.lead_ms / 1000.0) * fps) if self.clock else 0
            start = max(self.next_slot, now_slot, prev_end + (round(self.gap_ms / 1000.0 * fps)
                                                              if gap and self._items else 0))
            item.start_slot = start
            item.n_slots = max(1, math.ceil(item.duration_s * fps - 1e-9))
            self.program.add(self._sample(start, PROGRAM_RATE_HZ), item.program_audio)
            self.analysis.add(self._sample(start, ANALYSIS_RATE_HZ), item.analysis_audio)
            self._items.append(item)
            self.total_slots = max(self.total_slots, item.end_slot)
            self._cv.notify_all()
        return item

    def feed(self) -> None:
        """Offline: items will be scheduled while the loop runs; wait for them rather than end (``fed`` ends)."""
        with self._cv:
            self._feeding = True
            self._streamed = True

    def fed(self) -> None:
        """No more items: the loop ends after the last one scheduled."""
        with self._cv:
            self._feeding = False
            self._cv.notify_all()

    @property
    def feeding(self) -> bool:
        return self._feeding

    def _sample(self, slot: int, rate: int) -> int:
        fps = self.fmt.fps if self.fmt else 25.0
        return int(round(slot * rate / fps))

    def cut(self, from_slot: int) -> int:
        """Silence everything from ``from_slot`` on (never before what was already handed out); returns the slot the
        cut took effect at."""
        with self._cv:
            slot = max(from_slot, self.next_slot)
            self.program.cut(self._sample(slot, PROGRAM_RATE_HZ))
            self.analysis.cut(self._sample(slot, ANALYSIS_RATE_HZ))
            kept = []
            for it in self._items:
                if it.start_slot >= slot:
                    continue
                it.n_slots = min(it.n_slots, slot - it.start_slot)
                kept.append(it)
            self._items = kept
            self.total_slots = max((x.end_slot for x in kept), default=0)
            return slot

    def items(self) -> list[ProgramItem]:
        with self._lock:
            return list(self._items)

    def item_at(self, slot: int) -> ProgramItem | None:
        with self._lock:
            for it in self._items:
                if it.start_slot <= slot < it.end_slot:
                    return it
        return None

    def busy_until_slot(self) -> int:
        """The slot after the last scheduled speech (0 when nothing is scheduled)."""
        with self._lock:
            return max((x.end_slot for x in self._items), default=0)

    def progress(self) -> float:
        if self.live or not self.total_slots:
            return math.nan
        return min(1.0, self.next_slot / self.total_slots)

    def prune(self, before_slot: int) -> None:
        """Forget items and audio that ended before ``before_slot`` (the studio's timeline is endless)."""
        with self._lock:
            self._items = [x for x in self._items if x.end_slot > before_slot]
        self.program.prune(self._sample(before_slot, PROGRAM_RATE_HZ))
        self.analysis.prune(self._sample(before_slot, ANALYSIS_RATE_HZ))

    # the loop's side

    def _speakers(self, first: int, n: int, items: tuple) -> np.ndarray:
        """The cast row speaking at each of the ``n`` slots from ``first``: the item's there; a slot no item covers
        (a gap between segments, nothing scheduled) keeps the speaker before it, so that a programme cut to the
        speaker stays on the last one rather than cutting away while nobody speaks."""
        rows = np.full(n, -1, np.int64)
        for x in items:
            rows[max(x.start_slot - first, 0):max(min(x.end_slot - first, n), 0)] = x.on_air.speaker
        for j in range(n):
            if rows[j] < 0:
                rows[j] = self._speaker
            self._speaker = int(rows[j])
        return rows

    def _to_next_item(self, first: int, n: int) -> int:
        """``n``, or fewer so that the chunk ends where the next item starts: a chunk is on air as one item (its
        title, row, speaker's strap), so a new segment's graphics come on its first frame, not at the next chunk."""
        with self._lock:
            starts = [x.start_slot for x in self._items if first < x.start_slot < first + n]
        return min(starts) - first if starts else n

    def next_chunk(self, pace: Pacing) -> Chunk | None:
        fps = self.fmt.fps
        k = max(1, pace.max_frames)
        skipped = 0
        if not self.live:
            with self._cv:
                while self._feeding and self.next_slot + k > self.total_slots and not pace.stop.is_set():
                    self._cv.wait(0.1)
                end = self.total_slots
            if self.next_slot >= end and not self.endless:
                return None
            first = self.next_slot
            n = min(k, end - first) if not self.endless else k
        else:
            while True:
                if pace.stop.is_set():
                    return None
                now = self.clock.now_s()
                # far enough ahead that the chunk is ready before its first slot is due
                earliest = math.ceil((now + 1.25 * pace.cost_s_per_frame * k + 0.005) * fps)
                latest = earliest + k  # never more than one chunk ahead of that
                if self.next_slot <= latest:
                    break
                wait = (self.next_slot - latest) / fps
                time.sleep(min(0.02, max(0.001, wait)))
            first = max(self.next_slot, earliest)
            # after a resync, the slots before the first one the loop can make in time were never due either
            skipped = 0 if self._resynced else first - self.next_slot
            self._resynced = False
            n = k
        n = self._to_next_item(first, n)
        slots = np.arange(first, first + n, dtype=np.int64)
        self.next_slot = first + n
        a0, a1 = self._audio_cursor, self._sample(first + n, PROGRAM_RATE_HZ)
        b0, b1 = self._analysis_cursor, self._sample(first + n, ANALYSIS_RATE_HZ)
        self._audio_cursor, self._analysis_cursor = a1, b1
        item = self.item_at(first)
        with self._lock:
            items = tuple(x for x in self._items if x.start_slot < first + n and x.end_slot > first)
        seg_start = item is not None and item.start_slot == first
        chunk = Chunk(index=self._chunks, slots=slots, audio=self.program.read(a0, a1 - a0), audio_start=a0,
                      analysis=self.analysis.read(b0, b1 - b0), analysis_start=b0,
                      on_air=item.on_air if item is not None else OnAir(), skipped=skipped,
                      seg_start=seg_start or self._chunks == 0, created_ns=time.monotonic_ns(), items=items,
                      speakers=self._speakers(first, n, items))
        self._chunks += 1
        if self._streamed:  # a fed render: what was handed out is not read again
            self.prune(max(0, first - round(2 * fps)))
        return chunk


# -- the microphone -----------------------------------------------------------------------------------------------------

class _Rate:
    """The ring's rate -> ``out_hz``, streaming and exact in length: an integer ratio, ``up`` samples out per sample in
    or one out per ``down`` in (``count``), through a causal linear-phase low-pass FIR whose state carries across
    calls (31 samples of delay at the higher rate: 0.65 ms at 48 kHz). Equal rates pass through untouched."""

    def __init__(self, in_hz: int, out_hz: int) -> None:
        self.up = out_hz // in_hz if out_hz % in_hz == 0 else 1
        self.down = in_hz // out_hz if in_hz % out_hz == 0 else 1
        if self.up * in_hz != out_hz * self.down:
            raise ValueError(f"the capture ring runs at {in_hz} Hz: the pipeline needs a whole ratio to {out_hz} Hz")
        if self.up == self.down == 1:
            return
        from scipy.signal import firwin

        high, low = max(in_hz, out_hz), min(in_hz, out_hz)
        self.taps = (self.up * firwin(63, 0.95 * low / 2, fs=high)).astype(np.float64)
        self.zi = np.zeros(len(self.taps) - 1)
        self.phase = 0  # input samples so far, modulo ``down``

    def count(self, n_in: int) -> int:
        """Output samples made from the first ``n_in`` input samples."""
        return n_in * self.up if self.down == 1 else -(-n_in // self.down)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.up == self.down == 1 or not len(x):
            return np.asarray(x, np.float32)
        from scipy.signal import lfilter

        if self.up > 1:
            stuffed = np.zeros(self.up * len(x))
            stuffed[::self.up] = x
            y, self.zi = lfilter(self.taps, 1.0, stuffed, zi=self.zi)
            return y.astype(np.float32)
        y, self.zi = lfilter(self.taps, 1.0, x, zi=self.zi)
        first = -self.phase % self.down  # the block's first sample whose index overall is a multiple of ``down``
        self.phase = (self.phase + len(x)) % self.down
        return y[first::self.down].astype(np.float32)


class _Pending:
    """Converted samples heard but not handed out yet, from ``start`` on their timeline. A chunk that needs samples
    not arrived yet gets zeros in their place, and those samples are dropped when they come (the timeline holds)."""

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []
        self.start = 0
        self.owed = 0

    def add(self, x: np.ndarray) -> None:
        if self.owed:
            cut = min(self.owed, len(x))
            x, self.owed = x[cut:], self.owed - cut
        if len(x):
            self.parts.append(x)

    def take(self, end: int) -> np.ndarray:
        """Samples [start, end)."""
        need = end - self.start
        if need <= 0:
            return np.zeros(0, np.float32)
        buf = np.concatenate(self.parts) if len(self.parts) != 1 else self.parts[0]
        got, rest = buf[:need], buf[need:]
        if len(got) < need:
            self.owed += need - len(got)
            got = np.concatenate([got, np.zeros(need - len(got), np.float32)])
        self.parts = [rest] if len(rest) else []
        self.start = end
        return got


class MicSource(Source):
    """The microphone (module docstring). ``capture``: a started ``studio.audio.capture.MicCapture``; its ring runs at
    the program's rate, or at any rate in a whole ratio to both the program's and the analysis rate."""

    name = "microphone"
    live = True
    just_in_time = True

    def __init__(self, capture, lead_s: float = 0.04, stall_ms: float = 250.0,
                 present_delay_s: float = 0.0, catch_up: bool = True) -> None:
        self.capture = capture
        self.catch_up = catch_up
        self._caught_up = False  # the last chunk took a slot more than asked for
        self.ring = capture.ring
        self.rate_hz = self.ring.sample_rate_hz
        self._to_program = _Rate(self.rate_hz, PROGRAM_RATE_HZ)
        self._to_analysis = _Rate(self.rate_hz, ANALYSIS_RATE_HZ)
        self.min_lead = int(round(lead_s * self.rate_hz))
        self.lead = self.min_lead  # the motion source's look-ahead raises it (``Pacing.lead_s``)
        self.stall_ns = int(stall_ms * 1e6)
        self.present_delay_s = present_delay_s  # the preview shows slots this much later (keyframe interpolation)
        self.silence_samples = 0
        self._started = False
        self.next_k = 0  # the next slot to hand out (readers such as the studio's telemetry may ask before open)
        self._fresh_run = True

    def open(self, fmt: ProgramFormat) -> None:
        super().open(fmt)
        # The slots that pass before this run's first chunk (the motion model and the generator getting ready, a core
        # restart) were never due to it: the first chunk skips them without counting them as dropped.
        self._fresh_run = True
        self._caught_up = False
        if self._started:
            return
        self._started = True
        now = time.monotonic_ns()
        total = self.ring.total_written
        self.offset = -total  # session sample = ring sample + offset
        self._rc = total  # next ring sample to read (each is read once)
        self._program, self._analysis = _Pending(), _Pending()
        self._fresh: list[np.ndarray] = []  # analysis audio heard since the last chunk
        self._fresh_start = 0
        self._last_audio_ns = now
        self._virtual_ns: int | None = None
        self._backfill_k = -1  # slots up to this one are inserted silence: produced, never skipped
        self.next_k = 0
        self._chunks = 0

    def ring_sample(self, slot: int) -> int:
        """The ring sample that slot ``slot`` shows."""
        return int(round(slot * self.rate_hz / self.fmt.fps)) - self.offset

    def _hear(self, x: np.ndarray) -> None:
        """Session samples, in order: to the program's and the analysis rate, once."""
        self._program.add(self._to_program(x))
        a = self._to_analysis(x)
        self._analysis.add(a)
        if len(a):
            self._fresh.append(a)

    def _advance(self, now_ns: int) -> tuple[int, int]:
        """Read what arrived in the ring or, while nothing comes, take wall time as silence; returns (session samples
        known, silence samples inserted now)."""
        total = self.ring.total_written
        if total != self._rc:
            lo = max(self._rc, self.ring.oldest_sample)
            x = self.ring.read(lo, total - lo)
            heard = np.zeros(total - self._rc, np.float32)  # zeros for anything overwritten before it was read
            if x is not None:
                heard[lo - self._rc:] = x
            self._hear(heard)
            self._rc = total
            self._last_audio_ns = now_ns
            self._virtual_ns = None
        gap = 0
        if now_ns - self._last_audio_ns > self.stall_ns:
            if self._virtual_ns is None:
                self._virtual_ns = self._last_audio_ns
            gap = int((now_ns - self._virtual_ns) * self.rate_hz // 1_000_000_000)
            if gap > 0:
                self.offset += gap
                self.silence_samples += gap
                self._hear(np.zeros(gap, np.float32))
                self._virtual_ns += gap * 1_000_000_000 // self.rate_hz
        return total + self.offset, gap

    def seconds_until_due(self, lead_s: float | None = None) -> float:
        """How long until the next slot is due (with the look-ahead ``lead_s``; default: the last chunk's)."""
        lead = self.lead if lead_s is None else max(self.min_lead, int(round(lead_s * self.rate_hz)))
        need = int(round(self.next_k * self.rate_hz / self.fmt.fps)) + lead - self.offset
        return max(0.0, (need - self.ring.total_written) / self.rate_hz)

    def next_chunk(self, pace: Pacing) -> Chunk | None:
        fps = self.fmt.fps
        self.lead = max(self.min_lead, int(round(pace.lead_s * self.rate_hz)))
        while True:
            if pace.stop.is_set():
                return None
            known, gap = self._advance(time.monotonic_ns())
            k = math.floor((known - self.lead) * fps / self.rate_hz)
            if gap:  # the slots this silence covers came late because no audio came, not because the loop fell behind
                self._backfill_k = max(self._backfill_k, k)
            if k >= self.next_k:
                break
            time.sleep(min(0.002, max(0.0005, self.seconds_until_due())))
        n = max(1, pace.max_frames)
        if self.next_k <= self._backfill_k and not self._fresh_run:
            first = self.next_k  # produced in order, up to n at a time, until the loop has caught up
            k = min(k, first + n - 1)
            self._caught_up = False
        else:
            first = max(self.next_k, k - n + 1)
            late = first - self.next_k
            self._caught_up = late == 1 and self.catch_up and not self._caught_up and not self._fresh_run
            if self._caught_up:
                first = self.next_k
        skipped = 0 if self._fresh_run else first - self.next_k
        if skipped:
            log.info("microphone: %d slot(s) skipped before slot %d (up to %d a chunk; %.0f ms of audio past it)",
                     skipped, first, n, (known - self.lead) * 1e3 / self.rate_hz - first * 1e3 / fps)
        self._fresh_run = False
        self.next_k = k + 1
        slots = np.arange(first, k + 1, dtype=np.int64)
        end = int(round((k + 1) * self.rate_hz / fps))  # session sample where the chunk's audio ends
        audio_start, analysis_start = self._program.start, self._analysis.start
        audio = self._program.take(self._to_program.count(end))
        analysis = self._analysis.take(self._to_analysis.count(end))
        fresh = np.concatenate(self._fresh) if self._fresh else np.zeros(0, np.float32)
        fresh_start, self._fresh = self._fresh_start, []
        self._fresh_start += len(fresh)
        heard = np.array([self.ring.arrival_ns(self.ring_sample(s)) or 0 for s in slots], np.int64)
        chunk = Chunk(index=self._chunks, slots=slots, audio=audio, audio_start=audio_start, analysis=analysis,
                      analysis_start=analysis_start, skipped=skipped, heard_ns=heard, fresh=fresh,
                      fresh_start=fresh_start, seg_start=self._chunks == 0, created_ns=time.monotonic_ns())
        self._chunks += 1
        return chunk
