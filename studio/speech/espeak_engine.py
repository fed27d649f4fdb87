"""eSpeak NG through ctypes (the fast fallback engine): audio with exact per-phoneme sample positions.

``espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, NULL, PHONEME_EVENTS | PHONEME_IPA | DONT_EXIT)`` makes the
library call our synth callback with the audio and a list of events; PHONEME events carry the IPA name of each
phone (pauses have an empty name) and WORD events the character position of each word, both with the sample
position at which they start. libespeak-ng keeps global state, so one engine per process and a lock around it.
eSpeak reports no stress in its phoneme events, so ``PhonemeTiming.stress`` is 0 for this engine.

That state also carries from one synthesis into the next (the wave generator's phase, its pitch flutter, its gain:
statics that no call resets), so the same text came out a little different after other speech, in length too. Before
each synthesis but the first, the library is therefore unloaded and loaded afresh (``espeak_Terminate``, ``dlclose``:
its statics start over; about 8 ms): a text and a voice always give the same audio, whatever the process spoke before.
The render farm's bulletins rely on it (a worker speaks the segments it is given, in any order).
"""

from __future__ import annotations

import _ctypes
import ctypes
import ctypes.util
import logging
import threading
from dataclasses import dataclass

import numpy as np

from studio.errors import ModelLoadError, SpeechError
from studio.speech.settings import SpeechSettings
from studio.speech.timings import share_span, text_words
from studio.speech.types import PhonemeTiming, Utterance, VoiceInfo, WordTiming

log = logging.getLogger(__name__)

SILENCE_PHONE = "_"

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INIT_PHONEME_EVENTS = 0x0001
_INIT_PHONEME_IPA = 0x0002
_INIT_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EV_LIST_TERMINATED = 0
_EV_WORD = 1
_EV_PHONEME = 7
_PARAM_RATE = 1
_PARAM_PITCH = 3

# Voices offered (those with a built-in eSpeak voice file; MBROLA voices need non-free data and are left out).
_VOICES: dict[str, tuple[str, str]] = {
    # voice id: (eSpeak voice file, description)
    "en-us": ("gmw/en-US", "American English"),
    "en-gb": ("gmw/en", "British English"),
    "en-gb-x-rp": ("gmw/en-GB-x-rp", "British English, Received Pronunciation"),
    "en-gb-scotland": ("gmw/en-GB-scotland", "Scottish English"),
    "en-gb-x-gbclan": ("gmw/en-GB-x-gbclan", "Lancaster English"),
    "en-gb-x-gbcwmd": ("gmw/en-GB-x-gbcwmd", "West Midlands English"),
    "en-us-nyc": ("gmw/en-US-nyc", "New York City English"),
    "en-029": ("gmw/en-029", "Caribbean English"),
}


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),  # 1-based character position in the text
        ("length", ctypes.c_int),  # characters (words)
        ("audio_position", ctypes.c_int),  # ms
        ("sample", ctypes.c_int),  # sample position from the start of the text
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


_SynthCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


@dataclass
class _Raw:
    kind: int
    sample: int
    text_position: int = 0
    length: int = 0
    phone: str = ""


class EspeakEngine:
    """The eSpeak NG engine (``espeak:en-us``, ``espeak:en-gb``, ...)."""

    name = "espeak"

    def __init__(self) -> None:
        self._path = ctypes.util.find_library("espeak-ng") or "libespeak-ng.so.1"
        self._lock = threading.Lock()
        self._chunks: list[np.ndarray] = []
        self._events: list[_Raw] = []
        self._callback = _SynthCallback(self._on_synth)  # keep a reference: the library holds a raw pointer
        self._lib: ctypes.CDLL | None = None
        self._available: list[str] | None = None
        self._start()
        self._spoken = False  # the library has synthesized since it was loaded (the next synthesis reloads it)

    def _start(self) -> None:
        """Load and initialize the library: the same state every time (module docstring)."""
        try:
            self._lib = lib = ctypes.CDLL(self._path)
        except OSError as exc:
            raise ModelLoadError("eSpeak NG is not installed: apt-get install libespeak-ng1 espeak-ng-data.") from exc
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
            ctypes.c_void_p, ctypes.c_void_p,
        ]  # fmt: skip
        options = _INIT_PHONEME_EVENTS | _INIT_PHONEME_IPA | _INIT_DONT_EXIT
        rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, None, options)
        if rate <= 0:
            raise ModelLoadError("eSpeak NG could not start (espeak-ng-data missing?): reinstall espeak-ng-data.")
        self.sample_rate_hz = int(rate)
        lib.espeak_SetSynthCallback(self._callback)
        found = [v for v, (file, _) in _VOICES.items() if lib.espeak_SetVoiceByName(file.encode()) == 0]
        if self._available is None:
            self._available = found
        self._current_voice = ""
        # The first synthesis after start-up differs slightly from the later ones: warm up once.
        if self._available:
            self._run("a", self._available[0], SpeechSettings())

    def _restart(self) -> None:
        """Unload the library (its statics go with it) and load it afresh."""
        lib, self._lib = self._lib, None
        lib.espeak_Terminate()
        _ctypes.dlclose(lib._handle)
        self._start()

    def _on_synth(self, wav: ctypes.POINTER(ctypes.c_short), n: int, events: ctypes.POINTER(_Event)) -> int:  # type: ignore[valid-type]
        if n > 0 and wav:
            self._chunks.append(np.ctypeslib.as_array(wav, (n,)).copy())
        i = 0
        while events[i].type != _EV_LIST_TERMINATED:
            ev = events[i]
            if ev.type == _EV_PHONEME:
                name = bytes(ev.id.string).split(b"\0", 1)[0].decode("utf-8", "ignore")
                self._events.append(_Raw(_EV_PHONEME, ev.sample, phone=name))
            elif ev.type == _EV_WORD:
                self._events.append(_Raw(_EV_WORD, ev.sample, ev.text_position, ev.length))
            i += 1
        return 0

    def voices(self) -> list[VoiceInfo]:
        return [VoiceInfo(f"espeak:{v}", "espeak", v, f"eSpeak NG, {_VOICES[v][1]}") for v in self._available]

    def _run(self, text: str, voice_id: str, settings: SpeechSettings) -> tuple[np.ndarray, list[_Raw]]:
        lib = self._lib
        if voice_id != self._current_voice:
            if lib.espeak_SetVoiceByName(_VOICES[voice_id][0].encode()) != 0:
                raise SpeechError(f"eSpeak NG could not load the voice '{voice_id}'.")
            self._current_voice = voice_id
        lib.espeak_SetParameter(_PARAM_RATE, int(settings.espeak_rate_wpm / settings.length_scale), 0)
        lib.espeak_SetParameter(_PARAM_PITCH, int(settings.espeak_pitch), 0)
        self._chunks, self._events = [], []
        data = text.encode("utf-8") + b"\0"
        buf = ctypes.create_string_buffer(data, len(data))
        err = lib.espeak_Synth(buf, len(data), 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
        if err != 0:
            raise SpeechError(f"eSpeak NG failed to synthesize the text (error {err}).")
        lib.espeak_Synchronize()
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        return audio, self._events

    def synthesize(self, text: str, voice_id: str, settings: SpeechSettings) -> Utterance:
        if voice_id not in self._available:
            raise SpeechError(f"The eSpeak NG voice '{voice_id}' is not available here.")
        with self._lock:
            if self._spoken:
                self._restart()
            self._spoken = True
            pcm, events = self._run(text, voice_id, settings)
        audio = pcm.astype(np.float32) / 32768.0
        peak = float(np.abs(audio).max()) if len(audio) else 0.0
        if peak > 1e-6:
            audio *= settings.peak_level / peak
        rate = self.sample_rate_hz
        n = len(audio)
        phones = _phone_timings(events, n, rate)
        words = _word_timings(text, events, phones, rate)
        return Utterance(audio, rate, phones, words, voice=f"espeak:{voice_id}", text=text)


def _phone_timings(events: list[_Raw], n_samples: int, rate: int) -> tuple[PhonemeTiming, ...]:
    """Phones tiling 0..n_samples: each phone lasts until the next one starts; pauses become silence."""
    marks: list[tuple[int, str]] = [(0, SILENCE_PHONE)]
    for ev in events:
        if ev.kind == _EV_PHONEME:
            marks.append((min(max(ev.sample, marks[-1][0]), n_samples), ev.phone or SILENCE_PHONE))
    out: list[PhonemeTiming] = []
    for i, (s, phone) in enumerate(marks):
        e = marks[i + 1][0] if i + 1 < len(marks) else n_samples
        if e <= s:
            continue
        if out and phone == SILENCE_PHONE and out[-1].phoneme == SILENCE_PHONE:
            out[-1] = PhonemeTiming(SILENCE_PHONE, out[-1].start_s, e / rate)
        else:
            out.append(PhonemeTiming(phone, s / rate, e / rate))
    return tuple(out)


def _word_timings(
    text: str, events: list[_Raw], phones: tuple[PhonemeTiming, ...], rate: int
) -> tuple[WordTiming, ...]:
    """A word event lasts from its sample to the end of the last (non-pause) phone before the next event; every text
    word takes the events that start inside it, and a word eSpeak spoke together with the one before ("from the")
    shares that word's time."""
    events = [ev for ev in events if ev.kind == _EV_WORD and ev.length > 0]
    timed: list[tuple[int, float, float]] = []  # (char position, start_s, end_s) of the events with phones
    for i, ev in enumerate(events):
        start_s = ev.sample / rate
        next_s = events[i + 1].sample / rate if i + 1 < len(events) else float("inf")
        spoken = [p for p in phones if start_s - 1e-9 <= p.start_s < next_s and p.phoneme != SILENCE_PHONE]
        if spoken:
            timed.append((ev.text_position - 1, spoken[0].start_s, spoken[-1].end_s))
    words = text_words(text)
    if not timed or not words:
        return ()
    # each text word's events: those whose position lies from its start to the next word's start
    spans: list[tuple[float, float] | None] = []
    for k, (_, cs, _) in enumerate(words):
        limit = words[k + 1][1] if k + 1 < len(words) else len(text) + 1
        mine = [(s, e) for pos, s, e in timed if cs <= pos < limit or (k == 0 and pos < cs)]
        spans.append((min(s for s, _ in mine), max(e for _, e in mine)) if mine else None)
    out: list[WordTiming] = []
    k = 0
    while k < len(words):
        j = k + 1
        while j < len(words) and spans[j] is None:  # spoken together with word k
            j += 1
        group, span = words[k:j], spans[k]
        if span is None:  # words before the first timed one: they share its time
            if j == len(words):
                break
            group, span, j = words[k:j + 1], spans[j], j + 1
        out.extend(share_span(span[0], span[1], group))
        k = j
    return tuple(out)
