"""From a producer's script to the pieces a voice speaks, and back to one utterance.

``plan_script`` reads the markup (``studio.speech.markup``), checks the voice's language (``studio.speech.language``),
rewrites numbers, dates and money (``studio.speech.normalize``) and cuts the text into pieces of bounded length:
sentences, and a sentence longer than ``MAX_PIECE_WORDS`` at its clause marks, else before a conjunction, else between
words. Piper's memory grows with the square of a sentence's length (measured on this machine, one sentence of
"word": 50 words +72 MB, 100 words +228 MB, 200 words +544 MB; 1,000 words took 10.6 GB), so the bound
keeps any script within a few hundred MB. A piece cut inside a sentence ends with a comma, so the voice phrases it as
a clause, and the silence at that join is kept to a clause pause.

``join_pieces`` puts the pieces' audio and timings end to end with the pauses between them, maps word timings back
onto the script's characters, and stresses the emphasized words; ``resample_utterance`` makes 48 kHz program audio.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from studio.errors import SpeechError
from studio.speech.language import check_language, drop_letters
from studio.speech.mapped import MappedText
from studio.speech.markup import Pause, parse_script
from studio.speech.normalize import normalize
from studio.speech.types import PhonemeTiming, Utterance, WordTiming

SILENCE_PHONE = "_"
MAX_PIECE_WORDS = 40  # a piece longer than this (in spoken words) is cut
TARGET_PIECE_WORDS = 28  # where cuts are aimed
MIN_PIECE_WORDS = 8  # no cut leaves a piece shorter than this (where it can be avoided)
FORCED_JOIN_SILENCE_S = 0.22  # the most silence at a join inside a sentence (a clause pause)
EMPHASIS_GAIN_DB = 4.0
EMPHASIS_RAMP_S = 0.03
EDGE_FADE_S = 0.005

_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_TOKEN = re.compile(r"\S+")
_CLAUSE_END = re.compile(r"[,;:]$|^[—–-]+$")
_CONJUNCTIONS = frozenset({"and", "but", "or", "nor", "so", "yet", "because", "while", "when", "where", "which",
                           "who", "whom", "whose", "that", "although", "though", "after", "before", "since",
                           "until", "unless", "whereas", "if", "then", "as"})
_SPEAKABLE = re.compile(r"[^\W_]")


@dataclass(frozen=True)
class Piece:
    """One call to the voice: a sentence or a part of one, and the silence after it."""

    text: MappedText
    gap_after_s: float
    cut_inside_sentence: bool  # ends inside a sentence: its join with the next piece is trimmed to a clause pause


@dataclass(frozen=True)
class ScriptPlan:
    pieces: tuple[Piece, ...]
    lead_in_s: float  # a pause before the first words
    emphasis: tuple[tuple[int, int], ...]  # script character spans
    warnings: tuple[str, ...]


def spoken_words(token: str) -> int:
    """About how many words a token is spoken as (a digit pair is about a word: "1,234,567" is long)."""
    digits = sum(ch.isdigit() for ch in token)
    return 1 + digits // 2


def split_sentences(text: MappedText) -> list[MappedText]:
    """Sentences of ``text`` (cut after . ! ? … before a capital or a digit)."""
    out, last = [], 0
    for m in _SENTENCE_END.finditer(text.text):
        out.append(text.slice(last, m.start()))
        last = m.end()
    out.append(text.slice(last, len(text)))
    return [s.strip() for s in out if s.text.strip()]


def _comma_after(text: MappedText) -> MappedText:
    """``text`` ending in a clause mark (a comma added where it ends in none), so the voice phrases it as a clause."""
    if not text.text or text.text[-1] in ",;:.!?…—–-":
        return text
    return text + MappedText(",", (text.src_end[-1],), (text.src_end[-1],))


def split_long(sentence: MappedText, max_words: int = MAX_PIECE_WORDS,
               target_words: int = TARGET_PIECE_WORDS, min_words: int = MIN_PIECE_WORDS) -> list[MappedText]:
    """Cut a sentence longer than ``max_words`` into pieces: at clause marks, else before conjunctions, else between
    words; each cut is aimed at ``target_words`` and leaves at least ``min_words`` where it can."""
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(sentence.text)]
    weights = [spoken_words(sentence.text[s:e]) for s, e in tokens]
    if sum(weights) <= max_words:
        return [sentence]
    pieces: list[MappedText] = []
    first = 0
    while first < len(tokens):
        rest = sum(weights[first:])
        if rest <= max_words:
            pieces.append(sentence.slice(tokens[first][0], tokens[-1][1]))
            break
        best, best_key = None, None
        total = 0
        for i in range(first, len(tokens)):
            total += weights[i]
            if total > max_words and best is not None:
                break
            word = sentence.text[tokens[i][0]:tokens[i][1]]
            nxt = sentence.text[tokens[i + 1][0]:tokens[i + 1][1]].lower() if i + 1 < len(tokens) else ""
            score = 2 if _CLAUSE_END.search(word) else 1 if nxt.strip("\"'“‘(") in _CONJUNCTIONS else 0
            if total < min_words and i + 1 < len(tokens):
                continue
            if rest - total < min_words:  # would leave too little for the last piece
                continue
            key = (score, -abs(total - target_words))
            if best_key is None or key > best_key:
                best, best_key = i, key
            if total > max_words:
                break
        if best is None:
            best = min(len(tokens) - 1, first + max(1, target_words) - 1)
        pieces.append(_comma_after(sentence.slice(tokens[first][0], tokens[best][1])))
        first = best + 1
    return pieces


def plan_script(script: str, voice: str, voice_language: str, sentence_silence_s: float) -> ScriptPlan:
    """The pieces to speak and the pauses between them; raises SpeechError for a script with nothing to say, a
    script the voice cannot read, or bad markup."""
    parsed = parse_script(script)
    language = check_language(parsed.spoken_text, voice, voice_language)
    warnings = list(parsed.warnings) + list(language.warnings)
    texts: list[tuple[MappedText, bool]] = []  # (piece, cut inside its sentence)
    pauses: list[float] = []  # markup pause after each piece
    lead_in = 0.0
    for item in parsed.items:
        if isinstance(item, Pause):
            if texts:
                pauses[-1] += item.seconds
            else:
                lead_in += item.seconds
            continue
        text = normalize(drop_letters(item.text, language.unreadable))
        for sentence in split_sentences(text):
            parts = [p for p in split_long(sentence) if _SPEAKABLE.search(p.text)]
            for k, part in enumerate(parts):
                texts.append((part, k < len(parts) - 1))
                pauses.append(0.0)
    if not texts:
        raise SpeechError("The script has nothing to say once its markup is removed: type the words the presenter "
                          "should speak.")
    pieces = []
    for i, ((text, inside), pause) in enumerate(zip(texts, pauses)):
        last = i == len(texts) - 1
        gap = pause + (0.0 if inside or last else sentence_silence_s)
        # a markup pause inside a sentence ends the clause: no trimming of that join
        pieces.append(Piece(text, gap, inside and pause == 0.0))
    return ScriptPlan(tuple(pieces), lead_in, parsed.emphasis, tuple(warnings))


# -- joining ----------------------------------------------------------------------------------------------------------

def _edge_silence(phones: tuple[PhonemeTiming, ...], duration_s: float) -> tuple[float, float]:
    """Seconds of silence at the start and at the end of an utterance (its silence phones)."""
    lead = phones[0].end_s if phones and phones[0].phoneme == SILENCE_PHONE else 0.0
    tail = duration_s - phones[-1].start_s if phones and phones[-1].phoneme == SILENCE_PHONE else 0.0
    return max(0.0, lead), max(0.0, tail)


def _trim(utt: Utterance, head_s: float, tail_s: float) -> Utterance:
    """``utt`` without ``head_s`` seconds at the start and ``tail_s`` at the end (both inside its edge silence)."""
    rate = utt.sample_rate_hz
    a = int(round(head_s * rate))
    b = len(utt.audio) - int(round(tail_s * rate))
    if a <= 0 and b >= len(utt.audio):
        return utt
    audio = utt.audio[a:b].copy()
    fade = min(len(audio) // 2, int(EDGE_FADE_S * rate))
    if fade > 0:
        ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
        if a > 0:
            audio[:fade] *= ramp
        if b < len(utt.audio):
            audio[-fade:] *= ramp[::-1]
    t0, dur = a / rate, len(audio) / rate

    def shift(s: float) -> float:
        return min(max(0.0, s - t0), dur)

    phones = tuple(PhonemeTiming(p.phoneme, shift(p.start_s), shift(p.end_s), p.stress) for p in utt.phonemes)
    phones = tuple(p for p in phones if p.end_s > p.start_s)
    words = tuple(replace(w, start_s=shift(w.start_s), end_s=shift(w.end_s)) for w in utt.words)
    return replace(utt, audio=audio, phonemes=phones, words=words)


def _trim_joins(parts: list[Utterance], plan: ScriptPlan) -> list[Utterance]:
    """Keep the silence at every cut inside a sentence to ``FORCED_JOIN_SILENCE_S`` (taken from both sides)."""
    heads = [0.0] * len(parts)
    tails = [0.0] * len(parts)
    for i, piece in enumerate(plan.pieces[:-1]):
        if not piece.cut_inside_sentence:
            continue
        _, tail = _edge_silence(parts[i].phonemes, parts[i].duration_s)
        lead, _ = _edge_silence(parts[i + 1].phonemes, parts[i + 1].duration_s)
        excess = tail + lead - FORCED_JOIN_SILENCE_S
        if excess <= 0:
            continue
        keep_tail = min(tail, FORCED_JOIN_SILENCE_S * 0.6)
        keep_lead = FORCED_JOIN_SILENCE_S - keep_tail
        tails[i] = max(0.0, tail - keep_tail)
        heads[i + 1] = max(0.0, lead - keep_lead)
    return [_trim(u, h, t) for u, h, t in zip(parts, heads, tails)]


def _add_phone(phones: list[PhonemeTiming], phone: PhonemeTiming) -> None:
    if phone.end_s <= phone.start_s:
        return
    if phones and phone.phoneme == SILENCE_PHONE and phones[-1].phoneme == SILENCE_PHONE:
        phones[-1] = PhonemeTiming(SILENCE_PHONE, phones[-1].start_s, phone.end_s)
    else:
        phones.append(phone)


def join_pieces(script: str, plan: ScriptPlan, parts: list[Utterance], voice: str,
                peak_level: float) -> Utterance:
    """One utterance from the pieces' utterances (``parts[i]`` spoke ``plan.pieces[i]``), the pauses between them,
    word timings on the script's characters and the emphasis applied."""
    if len(parts) != len(plan.pieces) or not parts:
        raise ValueError("one utterance per piece is needed")
    rate = parts[0].sample_rate_hz
    parts = _trim_joins(parts, plan)
    audio: list[np.ndarray] = []
    phones: list[PhonemeTiming] = []
    words: list[WordTiming] = []
    n = 0

    def silence(seconds: float) -> None:
        nonlocal n
        k = int(round(seconds * rate))
        if k > 0:
            audio.append(np.zeros(k, np.float32))
            _add_phone(phones, PhonemeTiming(SILENCE_PHONE, n / rate, (n + k) / rate))
            n += k

    silence(plan.lead_in_s)
    for piece, utt in zip(plan.pieces, parts):
        if utt.sample_rate_hz != rate:
            raise SpeechError("The voice changed its sample rate between sentences; choose another voice.")
        t0 = n / rate
        audio.append(np.asarray(utt.audio, np.float32))
        for p in utt.phonemes:
            _add_phone(phones, PhonemeTiming(p.phoneme, t0 + p.start_s, t0 + p.end_s, p.stress))
        for w in utt.words:
            if w.char_start < 0 or w.char_end <= w.char_start:
                continue
            s, e = piece.text.source_span(w.char_start, w.char_end)
            if words and s < words[-1].char_end:  # one script word spoken as several ("$5" -> "5 dollars")
                s, e = min(s, words[-1].char_start), max(e, words[-1].char_end)
                words[-1] = WordTiming(script[s:e], words[-1].start_s, t0 + w.end_s, s, e)
            else:
                words.append(WordTiming(script[s:e], t0 + w.start_s, t0 + w.end_s, s, e))
        n += len(utt.audio)
        silence(piece.gap_after_s)
    joined = np.concatenate(audio) if audio else np.zeros(0, np.float32)
    utt = Utterance(joined, rate, tuple(phones), tuple(words), voice=voice, text=script, warnings=plan.warnings)
    return apply_emphasis(utt, plan.emphasis, peak_level)


def apply_emphasis(utt: Utterance, spans: tuple[tuple[int, int], ...], peak_level: float,
                   gain_db: float = EMPHASIS_GAIN_DB) -> Utterance:
    """The words inside ``spans`` (script characters) ``gain_db`` louder than the rest, with soft ramps; the whole
    is scaled down only as far as needed to stay under ``peak_level``."""
    stressed = [w for w in utt.words if any(w.char_start < e and w.char_end > s for s, e in spans)]
    if not stressed or len(utt.audio) == 0:
        return utt
    rate = utt.sample_rate_hz
    t = (np.arange(len(utt.audio)) + 0.5) / rate
    envelope = np.zeros(len(utt.audio), np.float32)
    ramp = EMPHASIS_RAMP_S
    for w in stressed:
        rise = np.clip((t - (w.start_s - ramp)) / ramp, 0.0, 1.0)
        fall = np.clip(((w.end_s + ramp) - t) / ramp, 0.0, 1.0)
        shape = (0.5 - 0.5 * np.cos(np.pi * np.minimum(rise, fall))).astype(np.float32)
        np.maximum(envelope, shape, out=envelope)
    gain = 1.0 + (10 ** (gain_db / 20) - 1.0) * envelope
    audio = utt.audio * gain
    peak = float(np.abs(audio).max())
    if peak > peak_level > 0:
        audio *= peak_level / peak
    return replace(utt, audio=audio.astype(np.float32))


def resample_utterance(utt: Utterance, rate_hz: int) -> Utterance:
    """``utt`` at ``rate_hz`` (polyphase, Kaiser-windowed low-pass: alias products below -80 dB); the timings are in
    seconds and stay valid (the last phone is clipped to the new length)."""
    if rate_hz == utt.sample_rate_hz:
        return utt
    from studio.resample import resample_poly

    audio = resample_poly(utt.audio, int(rate_hz), int(utt.sample_rate_hz), beta=10.0).astype(np.float32)
    duration = len(audio) / rate_hz
    phones = tuple(PhonemeTiming(p.phoneme, min(p.start_s, duration), min(p.end_s, duration), p.stress)
                   for p in utt.phonemes)
    if phones:
        last = phones[-1]
        phones = phones[:-1] + (PhonemeTiming(last.phoneme, last.start_s, duration, last.stress),)
    return replace(utt, audio=np.clip(audio, -1.0, 1.0), sample_rate_hz=int(rate_hz),
                   phonemes=tuple(p for p in phones if p.end_s > p.start_s))
