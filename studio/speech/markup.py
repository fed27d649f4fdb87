"""The producers' script markup: pauses and emphasis, never read aloud.

Pauses (silence added to the voice's own phrasing; at most ``MAX_PAUSE_S`` each):
    [pause]            half a second
    [pause 1s]         one second; also [pause 1.5 s], [pause 300ms], [break 2s] and a bare [2s]
    <break time="1s"/> the SSML form (time in s or ms); <break/> is half a second; <break strength="weak"/> ... as in
                       SSML: none 0, x-weak 0.1, weak 0.2, medium 0.4, strong 0.7, x-strong 1.2 s
Emphasis (the words are spoken about 4 dB louder; the voices here cannot change pitch on request):
    *these words*      between asterisks (inside one line); also <emphasis>these words</emphasis>
Any other tag written like SSML (``<speak>``, ``<prosody rate="slow">``, ``</p>``) is dropped with a warning rather
than read out; a stray asterisk, an ``<emphasis>`` never closed and a ``</emphasis>`` never opened are dropped too
(no stress, one warning). A pause that cannot be read (``[pause -3s]``, ``[pause abc]``, ``[-3s]``, ``[pause 2s``
with no closing bracket, ``<break time="x"/>``) or is longer than ``MAX_PAUSE_S`` is refused with one line naming it,
and so is a tag left open (``<break time="1s"`` with no ``>``): markup is never read aloud. Everything else is read as
written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from studio.errors import SpeechError
from studio.speech.mapped import MappedText

DEFAULT_PAUSE_S = 0.5
MAX_PAUSE_S = 10.0
_STRENGTH_S = {"none": 0.0, "x-weak": 0.1, "weak": 0.2, "medium": 0.4, "strong": 0.7, "x-strong": 1.2}

_SSML_NAMES = ("break", "emphasis", "speak", "prosody", "say-as", "phoneme", "sub", "voice", "audio", "mark", "lang")
_TOKEN = re.compile(
    r"""
     (?P<pause>\[\s*(?:pause|break)(?:\s+(?P<pdur>\d+(?:\.\d+)?)\s*(?P<punit>ms|s|secs?|seconds?)?)?\s*\])
    |(?P<bare>\[\s*(?P<bdur>\d+(?:\.\d+)?)\s*(?P<bunit>ms|s|secs?|seconds?)\s*\])
    |(?P<ssml_break><break\b(?P<battrs>[^<>]*?)/?\s*>(?:\s*</break\s*>)?)
    |(?P<emph_open><emphasis\b[^<>]*>)
    |(?P<emph_close></emphasis\s*>)
    |(?P<tag></?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>)
    |(?P<bad_pause>\[\s*(?:pause|break)\b[^\[\]\n]*\]?|\[\s*[-+]\s*\d[^\[\]\n]*\])
    |(?P<open_tag></?(?:SSML_NAMES)\b[^<>\n]*)
    |(?P<star>\*)
    """.replace("SSML_NAMES", "|".join(_SSML_NAMES)),
    re.IGNORECASE | re.VERBOSE,
)
_STAR_PAIR = re.compile(r"(?<![\w*])\*(?=[^\s*])[^*\n]*?(?<=[^\s*])\*(?![\w*])")
_ATTR = re.compile(r"""(\w+)\s*=\s*(?:"([^"]*)"|'([^']*)'|(\S+))""")
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Speech:
    """Text to speak (markup removed), each character mapped to the script."""

    text: MappedText


@dataclass(frozen=True)
class Pause:
    seconds: float
    source: str  # the markup as written, for messages


@dataclass(frozen=True)
class ParsedScript:
    items: tuple[Speech | Pause, ...]
    emphasis: tuple[tuple[int, int], ...]  # script character spans to stress
    warnings: tuple[str, ...]

    @property
    def spoken_text(self) -> str:
        return " ".join(i.text.text for i in self.items if isinstance(i, Speech))


def _seconds(value: str, unit: str | None, source: str) -> float:
    seconds = float(value) / (1000.0 if unit and unit.lower() == "ms" else 1.0)
    if seconds > MAX_PAUSE_S:
        raise SpeechError(f"The pause {source} is longer than {MAX_PAUSE_S:g} s: split it, or leave the presenter "
                          "silent with a separate segment.")
    return seconds


def _ssml_break(attrs: str, source: str) -> float:
    values = {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None) for m in _ATTR.finditer(attrs)}
    if "time" in values:
        m = _TIME.match(values["time"])
        if m is None:
            raise SpeechError(f"Cannot read the pause {source}: write the time as e.g. time=\"1s\" or time=\"500ms\".")
        return _seconds(m.group(1), m.group(2), source)
    if "strength" in values:
        strength = values["strength"].lower()
        if strength not in _STRENGTH_S:
            raise SpeechError(f"Unknown pause strength in {source}: use one of {', '.join(_STRENGTH_S)}.")
        return _STRENGTH_S[strength]
    return DEFAULT_PAUSE_S


def _refuse(kind: str, source: str) -> None:
    source = source.strip() if len(source.strip()) <= 40 else source.strip()[:39] + "…"
    if kind == "bad_pause":
        raise SpeechError(f"Cannot read the pause {source}: write it as [pause], [pause 1s] or [pause 300ms] "
                          f"(from 0 to {MAX_PAUSE_S:g} s).")
    raise SpeechError(f"The markup {source} is not closed: end it with > (e.g. <break time=\"1s\"/>), or "
                      "remove it.")


def parse_script(script: str) -> ParsedScript:
    """Split ``script`` into text to speak and pauses; collect emphasis spans. Raises SpeechError for a pause that is
    too long or unreadable, or a tag left open."""
    stars = set()
    for m in _STAR_PAIR.finditer(script):
        stars.update((m.start(), m.end() - 1))
    items: list[Speech | Pause] = []
    emphasis: list[tuple[int, int]] = []
    warnings: list[str] = []
    dropped: list[str] = []
    current: list[MappedText] = []
    open_star: int | None = None
    open_tag: int | None = None

    def flush() -> None:
        if current:
            text = current[0]
            for part in current[1:]:
                text = text + part
            current.clear()
            if text.text.strip():
                items.append(Speech(text))

    last = 0
    for m in _TOKEN.finditer(script):
        if m.start() > last:
            current.append(MappedText.of(script[last:m.start()], last))
        last = m.end()
        kind = m.lastgroup
        source = m.group(0)
        if kind in ("bad_pause", "open_tag"):
            _refuse(kind, source)
        if kind == "pause":
            seconds = _seconds(m.group("pdur"), m.group("punit"), source) if m.group("pdur") else DEFAULT_PAUSE_S
        elif kind == "bare":
            seconds = _seconds(m.group("bdur"), m.group("bunit"), source)
        elif kind == "ssml_break":
            seconds = _ssml_break(m.group("battrs"), source)
        else:
            seconds = -1.0
        if seconds >= 0:
            flush()
            items.append(Pause(seconds, source))
            continue
        # emphasis markers and other tags: no pause, but a word boundary where they stood between letters
        current.append(MappedText(" ", (m.start(),), (m.start(),)))
        if kind == "emph_open":
            if open_tag is not None:
                dropped.append("<emphasis> inside <emphasis>")
            open_tag = m.end()
        elif kind == "emph_close":
            if open_tag is not None:
                emphasis.append((open_tag, m.start()))
            else:
                dropped.append("</emphasis> with no <emphasis> before it")
            open_tag = None
        elif kind == "star":
            if m.start() not in stars:
                dropped.append("*")
            elif open_star is None:
                open_star = m.end()
            else:
                emphasis.append((open_star, m.start()))
                open_star = None
        else:
            dropped.append(source)
    if last < len(script):
        current.append(MappedText.of(script[last:], last))
    flush()
    if open_tag is not None:
        dropped.append("<emphasis> never closed")
    if dropped:
        shown = ", ".join(dict.fromkeys(dropped))
        warnings.append(f"Markup not understood and not read aloud: {shown} (see the script markup in the README).")
    return ParsedScript(tuple(items), tuple(emphasis), tuple(warnings))
