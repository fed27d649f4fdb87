"""Phone and word timings of speech as JSON (``render --timings``, the lip-sync bench reads them back), and the text
words an engine's timings must cover: every word of the text that is spoken gets a timing, even where the engine
spoke two words as one ("from the" is one phoneme word to eSpeak)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from studio.errors import InputError
from studio.speech.types import PhonemeTiming, Utterance, WordTiming

_WORD_RE = re.compile(r"\S+")
_EDGE_PUNCT = "\"'“”‘’«»()[]{}.,;:!?…—–-*/\\"


def text_words(text: str) -> list[tuple[str, int, int]]:
    """Words of the text with character offsets, edge punctuation stripped."""
    words = []
    for m in _WORD_RE.finditer(text):
        s, e = m.start(), m.end()
        while s < e and text[s] in _EDGE_PUNCT:
            s += 1
        while e > s and text[e - 1] in _EDGE_PUNCT:
            e -= 1
        if s < e:
            words.append((text[s:e], s, e))
    return words


def share_span(start_s: float, end_s: float, words: Sequence[tuple[str, int, int]]) -> list[WordTiming]:
    """Words spoken as one (``start_s`` .. ``end_s``), each given a share of the time by its length in letters."""
    total = sum(max(1, len(w)) for w, _, _ in words)
    out, t, done = [], start_s, 0
    for word, cs, ce in words:
        done += max(1, len(word))
        e = start_s + (end_s - start_s) * done / total
        out.append(WordTiming(word, t, e, cs, ce))
        t = e
    return out


def utterance_timings_to_json(utt: Utterance) -> dict[str, Any]:
    """The timings of ``utt`` (no audio) as a JSON-ready dict: {"phonemes": [...], "words": [...], ...}."""
    return timings_to_json(utt.voice, utt.text, utt.sample_rate_hz, utt.duration_s, utt.phonemes, utt.words)


def timings_to_json(voice: str, text: str, sample_rate_hz: int, duration_s: float,
                    phonemes: Sequence[PhonemeTiming], words: Sequence[WordTiming]) -> dict[str, Any]:
    """Timings as a JSON-ready dict (see ``utterance_timings_to_json``)."""
    return {
        "voice": voice,
        "text": text,
        "sample_rate_hz": sample_rate_hz,
        "duration_s": duration_s,
        "phonemes": [asdict(p) for p in phonemes],
        "words": [asdict(w) for w in words],
    }


def phonemes_from_json(data: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> tuple[PhonemeTiming, ...]:
    """Phone timings from ``{"phonemes": [{"phoneme", "start_s", "end_s", "stress"}, ...]}`` or the bare list."""
    items = data["phonemes"] if isinstance(data, Mapping) else data
    try:
        return tuple(
            PhonemeTiming(str(p["phoneme"]), float(p["start_s"]), float(p["end_s"]), int(p.get("stress", 0)))
            for p in items
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"Bad phone timings ({exc!r}): each phone needs phoneme, start_s and end_s.") from exc


def words_from_json(data: Mapping[str, Any]) -> tuple[WordTiming, ...]:
    """Word timings from the same dict (empty when it has none)."""
    try:
        return tuple(
            WordTiming(
                str(w["text"]), float(w["start_s"]), float(w["end_s"]),
                int(w.get("char_start", -1)), int(w.get("char_end", -1)),
            )
            for w in data.get("words", ())
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"Bad word timings ({exc!r}): each word needs text, start_s and end_s.") from exc
