"""A script spoken section by section while the render runs (``render --text`` / ``--script``).

``SpeechFeed`` synthesizes on its own thread (``studio.speech.registry.synthesize_sections``: whole sentences, the
first section one sentence long) and places each section on a ``ProgramSource`` that is being fed (it waits for the
next section rather than end, and forgets what it has handed out). The first frame comes after the first sentence is
spoken, whatever the script's length; synthesis stays at most ``AHEAD_S`` of speech ahead of the render, so memory
holds about a minute of speech: a script of any length streams. The word and phone timings of every section are kept
(small) for ``--timings``, on the program timeline.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from studio.contracts import OnAir
from studio.errors import EncoderError, StudioError
from studio.speech.settings import SpeechSettings
from studio.speech.types import PhonemeTiming, WordTiming

log = logging.getLogger(__name__)

AHEAD_S = 60.0  # speech placed ahead of the render at most (then synthesis waits for the render)
# One thread of ONNX Runtime: synthesis runs beside the render's own stages (and, before the first frame, beside the
# imports and the set-up), and a second thread of its own cost more CPU than it saved (the 10-s script: 1.07 s of CPU
# on one thread, 1.64 on two, on the 2-core machine; the same samples).
SPEECH_SETTINGS = SpeechSettings(onnx_threads=1)


class SpeechFeed:
    """See the module docstring. ``start()``, then ``wait_first()`` gives the first section's program item."""

    def __init__(self, text: str, voice: str | None, on_air: OnAir, rate_hz: int = 48000) -> None:
        self.text = text
        self.voice = voice
        self.on_air = on_air
        self.rate_hz = rate_hz
        self.source = None  # the ProgramSource, handed over with ``attach``
        self.fraction = 0.0  # of the script spoken so far
        self.sections = 0
        self.speech_s = 0.0
        self.warnings: tuple[str, ...] = ()
        self.error: BaseException | None = None
        self.voice_name = ""
        self._phones: list[PhonemeTiming] = []
        self._words: list[WordTiming] = []
        self._first = None
        self._ready = threading.Event()  # the first item is there, or synthesis ended
        self._attached = threading.Event()
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._finished = False
        self._thread = threading.Thread(target=self._run, name="speech-feed", daemon=True)

    def start(self) -> None:
        """Start speaking (once: a feed started by the command is not started again by the render)."""
        if self._thread.ident is None:
            self._thread.start()

    def wait_first(self, timeout_s: float):
        """The first section's item once it is spoken (None while it is not); raises what synthesis raised."""
        self._ready.wait(timeout_s)
        if self.error is not None:
            raise self.error
        return self._first

    def attach(self, source) -> None:
        """The fed ``ProgramSource`` (made with the first item); sections after the first go onto it once the loop
        has opened it."""
        with self._lock:
            self.source = source
            if not self._finished:  # a one-sentence script may be spoken already
                source.feed()
        self._attached.set()

    def cancel(self) -> None:
        self._cancel.set()
        self._attached.set()

    def join(self, timeout_s: float = 30.0) -> None:
        self._thread.join(timeout_s)

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def _run(self) -> None:
        from studio.pipeline.sources import item_from_utterance
        from studio.speech.registry import synthesize_sections

        try:
            for utt, fraction in synthesize_sections(self.text, self.voice, SPEECH_SETTINGS,
                                                     sample_rate_hz=self.rate_hz):
                if self._cancel.is_set():
                    return
                item = item_from_utterance(utt, self.on_air)
                if self._first is None:
                    self.warnings = tuple(utt.warnings)
                    self.voice_name = utt.voice
                    self._first = item
                    self._keep(utt, 0.0)
                    self._ready.set()
                else:
                    placed = self._place(item)
                    if placed is None:
                        return
                    self._keep(utt, placed.start_slot / self.source.fmt.fps)
                self.sections += 1
                self.speech_s += utt.duration_s
                self.fraction = fraction
        except StudioError as exc:
            self.error = exc
        except Exception as exc:  # handed to the render, which says it in one line and logs the traceback
            log.exception("speech synthesis failed")
            self.error = exc
        finally:
            self._ready.set()
            with self._lock:
                self._finished = True
                if self.source is not None:
                    self.source.fed()

    def _place(self, item):
        self._attached.wait()
        while not self._cancel.is_set() and self.source.fmt is None:  # the loop opens the source (and places item 1)
            self._cancel.wait(0.01)
        fps = self.source.fmt.fps if self.source.fmt is not None else 25.0
        while not self._cancel.is_set() and self.source.total_slots - self.source.next_slot > AHEAD_S * fps:
            self._cancel.wait(0.05)  # far enough ahead of the render: memory holds about AHEAD_S of speech
        if self._cancel.is_set():
            return None
        return self.source.schedule(item, gap=False, now_slot=0)

    def _keep_silence_to(self, t_s: float) -> None:
        """Phones tile the timeline: a section ends inside a frame, and the next starts at a frame."""
        last = self._phones[-1].end_s if self._phones else 0.0
        if t_s > last + 1e-9:
            self._phones.append(PhonemeTiming("_", last, t_s))

    def _keep(self, utt, offset_s: float) -> None:
        self._keep_silence_to(offset_s)
        self._phones.extend(PhonemeTiming(p.phoneme, p.start_s + offset_s, p.end_s + offset_s, p.stress)
                            for p in utt.phonemes)
        self._words.extend(WordTiming(w.text, w.start_s + offset_s, w.end_s + offset_s, w.char_start, w.char_end)
                           for w in utt.words)

    def write_timings(self, path: Path, duration_s: float) -> None:
        """The phone and word timings of the whole script on the program timeline (``render --timings``)."""
        from studio.speech.timings import timings_to_json

        self._keep_silence_to(duration_s)
        data = timings_to_json(self.voice_name, self.text, self.rate_hz, duration_s, self._phones, self._words)
        try:
            path.write_text(json.dumps(data, indent=1))
        except OSError as exc:
            raise EncoderError(f"Cannot write the timings file {path}: {exc.strerror}. Choose another "
                               "path.") from exc
