"""Does the voice read the script's writing system? A check before any speech is made.

An English voice given Chinese text says "Chinese letter" for every character. The script's letters are sorted by
writing system (Unicode character names); the voice's language says which systems it reads. Mostly foreign text is
refused (SpeechError, with what to do); a few foreign letters in an otherwise readable script (a name in Chinese
characters inside an English story) are left out of the speech with a warning. Two languages in the same writing
system (French text, English voice) cannot be told apart this way and are not checked.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from studio.errors import SpeechError
from studio.speech.mapped import MappedText

REFUSE_SHARE = 0.3  # refuse when at least this share of the letters is in a writing system the voice cannot read

_SYSTEM_NAMES = {
    "LATIN": "Latin letters", "CJK": "Chinese characters", "HIRAGANA": "Japanese kana", "KATAKANA": "Japanese kana",
    "HANGUL": "Korean Hangul", "CYRILLIC": "Cyrillic letters", "GREEK": "Greek letters", "ARABIC": "Arabic script",
    "HEBREW": "Hebrew script", "DEVANAGARI": "Devanagari script", "THAI": "Thai script", "BENGALI": "Bengali script",
    "TAMIL": "Tamil script", "GEORGIAN": "Georgian script", "ARMENIAN": "Armenian script",
    "ETHIOPIC": "Ethiopic script",
}
_LATIN_LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "sv", "da", "no", "nb", "fi", "pl", "cs", "sk", "sl",
                    "hr", "ro", "hu", "tr", "vi", "id", "ms", "ca", "eu", "ga", "cy", "is", "et", "lv", "lt", "sw",
                    "af", "sq", "eo", "la")
_LANGUAGE_SYSTEMS: dict[str, frozenset[str]] = {lang: frozenset({"LATIN"}) for lang in _LATIN_LANGUAGES} | {
    "ru": frozenset({"CYRILLIC"}), "uk": frozenset({"CYRILLIC"}), "bg": frozenset({"CYRILLIC"}),
    "sr": frozenset({"CYRILLIC", "LATIN"}), "zh": frozenset({"CJK"}), "cmn": frozenset({"CJK"}),
    "yue": frozenset({"CJK"}), "ja": frozenset({"CJK", "HIRAGANA", "KATAKANA"}),
    "ko": frozenset({"HANGUL", "CJK"}), "el": frozenset({"GREEK"}), "ar": frozenset({"ARABIC"}),
    "fa": frozenset({"ARABIC"}), "he": frozenset({"HEBREW"}), "hi": frozenset({"DEVANAGARI"}),
    "th": frozenset({"THAI"}), "bn": frozenset({"BENGALI"}), "ta": frozenset({"TAMIL"}),
    "ka": frozenset({"GEORGIAN"}), "hy": frozenset({"ARMENIAN"}), "am": frozenset({"ETHIOPIC"}),
}
_LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "ru": "Russian", "zh": "Chinese",
                   "ja": "Japanese", "ko": "Korean"}
_NEUTRAL_PREFIXES = ("MODIFIER", "FULLWIDTH", "HALFWIDTH", "SUPERSCRIPT", "SUBSCRIPT", "MATHEMATICAL", "CIRCLED",
                     "PARENTHESIZED", "SQUARED", "NEGATIVE", "DOUBLE-STRUCK", "BLACK-LETTER", "SCRIPT")


def writing_system(ch: str) -> str | None:
    """The writing system of a letter (``LATIN``, ``CJK``, ``CYRILLIC`` ...); None for non-letters and symbols."""
    if not unicodedata.category(ch).startswith("L"):
        return None
    name = unicodedata.name(ch, "")
    if not name:
        return None
    words = name.split()
    if words[0] in _NEUTRAL_PREFIXES:
        words = words[1:] or ["?"]
        if words[0] == "LATIN" or words[0] in ("CAPITAL", "SMALL"):
            return "LATIN"
    first = words[0]
    if first in ("HANGUL", "CJK"):
        return first
    if first == "KANGXI" or first == "IDEOGRAPHIC":
        return "CJK"
    return first


@dataclass(frozen=True)
class LanguageCheck:
    unreadable: frozenset[str]  # the letters of the script the voice cannot read (to leave out)
    warnings: tuple[str, ...]


def _language_of(voice_language: str) -> str:
    return voice_language.lower().replace("_", "-").split("-")[0]


def check_language(text: str, voice: str, voice_language: str) -> LanguageCheck:
    """Refuse a script mostly in a writing system ``voice`` cannot read (SpeechError); otherwise name the few
    letters it cannot read (to leave out, with a warning)."""
    lang = _language_of(voice_language)
    readable = _LANGUAGE_SYSTEMS.get(lang)
    if readable is None:
        return LanguageCheck(frozenset(), ())
    counts: dict[str, int] = {}
    unreadable: set[str] = set()
    for ch in text:
        system = writing_system(ch)
        if system is not None:
            counts[system] = counts.get(system, 0) + 1
            if system not in readable:
                unreadable.add(ch)
    letters = sum(counts.values())
    foreign = {s: n for s, n in counts.items() if s not in readable}
    n_foreign = sum(foreign.values())
    if n_foreign == 0:
        return LanguageCheck(frozenset(), ())
    main = max(foreign, key=lambda s: foreign[s])
    system_name = _SYSTEM_NAMES.get(main, f"{main.title()} script")
    language_name = _LANGUAGE_NAMES.get(lang, voice_language)
    if n_foreign >= REFUSE_SHARE * letters:
        raise SpeechError(f"This script is written in {system_name}, which the voice '{voice}' ({language_name}) "
                          "cannot read: give it a translation, or choose a voice for its language (see `doctor`).")
    runs = [m.group(0) for m in _letters_pattern(frozenset(unreadable)).finditer(text)]
    shown = ", ".join(list(dict.fromkeys(runs))[:5])
    warning = (f"Left out {n_foreign} letter{'s' if n_foreign != 1 else ''} in {system_name} ({shown}) that the "
               f"voice '{voice}' ({language_name}) cannot read.")
    return LanguageCheck(frozenset(unreadable), (warning,))


def _letters_pattern(letters: frozenset[str]) -> re.Pattern[str]:
    return re.compile("[" + "".join(re.escape(ch) for ch in sorted(letters)) + "]+")


def drop_letters(text: MappedText, letters: frozenset[str]) -> MappedText:
    """``text`` with every run of ``letters`` replaced by a space."""
    if not letters:
        return text
    return text.sub(_letters_pattern(letters), lambda m: " ")
