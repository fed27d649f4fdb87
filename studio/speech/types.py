"""Speech data passed between TTS engines, the motion stage and the UI (plain, frozen)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class PhonemeTiming:
    """One phone in the synthesized audio. ``phoneme`` is IPA (one symbol, diacritics allowed)."""

    phoneme: str
    start_s: float
    end_s: float
    stress: int = 0  # 0 none, 1 primary, 2 secondary (of the syllable this phone belongs to)


@dataclass(frozen=True)
class WordTiming:
    text: str
    start_s: float
    end_s: float
    char_start: int = -1  # offset of the word in the source text, -1 if unknown
    char_end: int = -1


@dataclass(frozen=True)
class Utterance:
    """Synthesized speech: mono float32 audio in -1..1 plus its phone and word timings."""

    audio: np.ndarray  # N, float32
    sample_rate_hz: int
    phonemes: tuple[PhonemeTiming, ...]
    words: tuple[WordTiming, ...] = field(default=())
    voice: str = ""
    text: str = ""
    warnings: tuple[str, ...] = field(default=())  # what the listener should know (left-out letters, markup)

    @property
    def duration_s(self) -> float:
        return len(self.audio) / float(self.sample_rate_hz)


@dataclass(frozen=True)
class VoiceInfo:
    """An installed voice. ``name`` is what users type: ``engine:voice`` (e.g. ``piper:joe``)."""

    name: str
    engine: str
    language: str
    description: str = ""
