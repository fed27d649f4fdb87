"""Numbers as the words a reader says: shared by the data recipe (TTS text) and the human-speech set (transcripts),
so that the TTS, the transcripts and the forced aligner all get the same words."""

from __future__ import annotations

import re

_YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_DECIMAL = re.compile(r"\b(\d+)\.(\d+)\b")
_INTEGER = re.compile(r"\b\d{1,3}(?:,\d{3})+\b|\b\d+\b")


def spoken_numbers(text: str) -> str:
    """The text with numbers, years, ordinals and decimals written as the words a reader says (num2words), and
    am / pm as words: what the TTS speaks is then exactly what the forced aligner is given."""
    from num2words import num2words

    def words(s: str) -> str:
        return s.replace("-", " ").replace(",", "")

    text = _YEAR.sub(lambda m: words(num2words(int(m.group(1)), to="year")), text)
    text = _ORDINAL.sub(lambda m: words(num2words(int(m.group(1)), to="ordinal")), text)
    text = _DECIMAL.sub(lambda m: words(num2words(int(m.group(1)))) + " point "
                        + " ".join(words(num2words(int(d))) for d in m.group(2)), text)
    text = _INTEGER.sub(lambda m: words(num2words(int(m.group(0).replace(",", "")))), text)
    text = re.sub(r"\b(\d+|[a-z ]+) (am|pm)\b", lambda m: m.group(1) + (" in the morning" if m.group(2) == "am"
                                                                      else " in the evening"), text)
    return text
