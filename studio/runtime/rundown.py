"""The rundown room: speech scheduling and the teleprompter's place.

The rundown's segments are spoken by a speech worker one ahead of the one on air and scheduled on the program's
timeline (the script source's) as they are ready; the room says when a segment starts (with its word timings, for
the teleprompter), which word is being spoken, and when the rundown is over. Stop cuts what is already scheduled.
With a cast, each segment is spoken by its speaker's voice and names its speaker's row (``OnAir.speaker``), as
``render --rundown`` does; while ``hold()`` is true (the cast's faces are being built) nothing is scheduled yet.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
from bisect import bisect_right
from collections.abc import Callable

from studio.contracts import OnAir
from studio.errors import StudioError
from studio.pipeline import commands as cmd
from studio.pipeline.commands import PreviewMode
from studio.runtime.events import Outbox
from studio.runtime.settings import StudioSettings
from studio.runtime.supervisor import CoreSupervisor
from studio.runtime.workers import lower_thread_priority

log = logging.getLogger(__name__)


class RundownRoom:
    """See the module docstring. ``live`` is true from Go live until the last segment has played (or Stop)."""

    def __init__(self, settings: StudioSettings, supervisor: CoreSupervisor, outbox: Outbox) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self.outbox = outbox
        self.default_voice = settings.default_voice
        self.live = False
        self.items: list = []  # ProgramItems scheduled by this show (rundown order)
        self._speech: list[tuple[int, cf.Future]] = []  # (rundown row, speech future) not yet scheduled
        self._waiting: list[tuple] = []  # (row, title, text, voice, speaker) not yet handed to the worker
        self.hold: Callable[[], bool] = lambda: False  # while true, prepared speech waits to be scheduled
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="speech",
                                           initializer=lower_thread_priority)

    @property
    def _fps(self) -> float:
        return self.supervisor.core_settings.fps

    def open(self) -> None:
        """List the installed voices (and warm the default one up) on the speech worker."""
        self._pool.submit(self._list_voices)

    def close(self) -> None:
        for _, fut in self._speech:
            fut.cancel()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _list_voices(self) -> None:
        from studio.speech import list_voices

        try:
            voices = tuple(list_voices())
        except Exception as exc:  # a broken engine must not hide the others; listed as none
            log.exception("listing voices failed")
            self.outbox.emit(cmd.Error(f"No voices could be listed ({exc}); check the speech packages."))
            return
        self.outbox.emit(cmd.VoicesListed(voices))
        if self.settings.warm_up_voice and any(v.name == self.default_voice for v in voices):
            try:
                self._prepare("Ready.", self.default_voice, "", -1)
            except StudioError as exc:
                log.warning("warming up %s failed: %s", self.default_voice, exc)

    # -- the show -----------------------------------------------------------------------------------------------------

    def go_live(self, c: cmd.GoLive, cast: tuple = ()) -> None:
        """Speak ``c``'s segments in order; ``cast`` (``studio.pipeline.cast.Member``s): who speaks each, in whose
        voice."""
        from studio.pipeline.cast import segment_voice, speaker_index

        self.stop(quiet=True)
        rows = c.rundown_rows or tuple(range(len(c.segments)))
        self._waiting = [(row, seg.title, seg.text, segment_voice(seg, cast) or self.default_voice,
                          speaker_index(cast, seg.anchor)) for row, seg in zip(rows, c.segments)]
        self._submit_speech()
        self.live = bool(self._speech)

    def stop(self, quiet: bool = False) -> None:
        """Stop speaking: what is being prepared is dropped, and a segment already scheduled never starts."""
        for _, fut in self._speech:
            fut.cancel()
        self._speech.clear()
        self._waiting.clear()
        src = self.supervisor.program_source
        if src is not None:
            slot = src.cut(int(self.supervisor.clock_s() * self._fps) + 1)
            self.items = [x for x in self.items if x.start_slot < slot]  # a cut segment never starts on air
        if self.supervisor.interview_source is not None:
            self.supervisor.interview_source.cut()
            self.items = [x for x in self.items if x.n_slots > 0]
        self.live = False

    def _submit_speech(self) -> None:
        """Keep the speech worker one segment ahead: the next is prepared while the current one plays (all of them
        at once would take the CPU from the renderer on a small machine)."""
        while self._waiting and len(self._speech) < 2:
            row, title, text, voice, speaker = self._waiting.pop(0)
            self._speech.append((row, self._pool.submit(self._prepare, text, voice, title, row, speaker)))

    def _prepare(self, text: str, voice: str, title: str, row: int, speaker: int = 0):
        """Speech worker: synthesize and make the program item (both audio rates)."""
        from studio.pipeline.sources import item_from_utterance
        from studio.speech import SpeechSettings, synthesize

        # one thread: the other core renders; 48 kHz: the program's rate
        utt = synthesize(text, voice, SpeechSettings(onnx_threads=1), sample_rate_hz=48000)
        for w in getattr(utt, "warnings", ()):
            self.outbox.emit(cmd.Error(f"Segment {row + 1}: {w}"))
        return item_from_utterance(utt, OnAir(title=title, row=row, speaker=speaker))

    def poll(self) -> None:
        """Place prepared speech on the timeline, in rundown order, as soon as it is ready."""
        while self._speech and self._speech[0][1].done() and not self.hold():
            row, fut = self._speech.pop(0)
            try:
                item = fut.result()
            except cf.CancelledError:
                continue
            except StudioError as exc:
                self.outbox.emit(cmd.SegmentFailed(row, str(exc)))
                continue
            except Exception as exc:  # the speech engine failed in a way it did not translate
                self.outbox.emit(cmd.SegmentFailed(row, f"Speech failed ({exc}); try another voice."))
                continue
            if self.supervisor.mode is PreviewMode.MICROPHONE:
                continue
            if self.supervisor.mode is PreviewMode.INTERVIEW:  # a host turn: on air when the guest gives the floor
                self.supervisor.interview_source.add_turn(item)
                self.items.append(item)
                continue
            self.supervisor.program_source.schedule(item)
            self.items.append(item)
            log.info("segment %d scheduled at slot %d (%.2f s long)", row, item.start_slot, item.duration_s)
        self._submit_speech()

    def tick(self, now_s: float) -> None:
        """At program time ``now_s``: announce a segment that starts, let go of what has played, and say when the
        rundown is over."""
        fps = self._fps
        it = self._item_at(now_s)
        if it is not None and not it.started:
            it.started = True
            self.outbox.emit(cmd.SegmentStarted(it.on_air.row, it.text, tuple(it.words)))
        now_slot = int(now_s * fps)
        done = now_slot - 2 * round(fps)
        # what has played goes; an interview's turn that waits for the floor stays
        self.items = [x for x in self.items if x.end_slot > done or not x.n_slots]
        src = self.supervisor.program_source
        if src is not None and done > 0:
            src.prune(max(0, done - 10 * round(fps)))
        turns = self.supervisor.interview_source
        waiting = turns is not None and turns.waiting() > 0  # an interview's turns wait for the floor
        if self.live and not self._speech and not self._waiting and not waiting and not any(x.end_slot > now_slot
                                                                                            for x in self.items):
            self.live = False
            self.outbox.emit(cmd.RundownFinished())

    def speaking(self, now_s: float) -> bool:
        """A segment is on air at ``now_s``, or one is scheduled after it (else the next is still being prepared)."""
        now_slot = int(now_s * self._fps)
        return self._item_at(now_s) is not None or any(x.start_slot > now_slot for x in self.items)

    def current_word(self, now_s: float) -> tuple[int, int]:
        """(rundown row, word index) spoken at ``now_s``; (-1, -1) between segments."""
        it = self._item_at(now_s)
        if it is None:
            return -1, -1
        starts = [w.start_s for w in it.words]
        return it.on_air.row, bisect_right(starts, now_s - it.start_slot / self._fps) - 1

    def _item_at(self, t_s: float):
        slot = int(t_s * self._fps)
        for it in self.items:
            if it.start_slot <= slot < it.end_slot:
                return it
        return None
