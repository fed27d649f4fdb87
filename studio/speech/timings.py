"""Phone and word timings of speech as JSON (``render --timings``, the lip-sync bench reads them back)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from studio.errors import InputError
from studio.speech.types import PhonemeTiming, Utterance, WordTiming


def utterance_timings_to_json(utt: Utterance) -> dict[str, Any]:
    """The timings of ``utt`` (no audio) as a JSON-ready dict: {"phonemes": [...], "words": [...], ...}."""
    return {
        "voice": utt.voice,
        "text": utt.text,
        "sample_rate_hz": utt.sample_rate_hz,
        "duration_s": utt.duration_s,
        "phonemes": [asdict(p) for p in utt.phonemes],
        "words": [asdict(w) for w in utt.words],
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
