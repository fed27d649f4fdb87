"""The script path before and after the voice: markup, language, numbers, long sentences, joins, emphasis, 48 kHz."""

from __future__ import annotations

import re

import numpy as np
import pytest

from studio.errors import SpeechError
from studio.speech.language import check_language, drop_letters
from studio.speech.mapped import MappedText
from studio.speech.markup import Pause, Speech, parse_script
from studio.speech.normalize import normalize, ordinal, year_words
from studio.speech.script import (
    MAX_PIECE_WORDS,
    apply_emphasis,
    join_pieces,
    plan_script,
    resample_utterance,
    split_long,
    spoken_words,
)
from studio.speech.types import PhonemeTiming, Utterance, WordTiming

# -- numbers, dates, money ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, spoken", [
    ("$5.2 billion", "5.2 billion dollars"),
    ("£3.50", "3 pounds 50"),
    ("$0.99", "99 cents"),
    ("€20", "20 euros"),
    ("$1", "1 dollar"),
    ("US$3m", "3 million US dollars"),
    ("4.5bn", "4.5 billion"),
    ("at 3:45 pm today", "at 3 45 PM today"),
    ("12:00", "12 o'clock"),
    ("3:05 p.m. Then", "3 oh 5 PM. Then"),
    ("3 p.m. today", "3 PM today"),
    ("14:30", "14 30"),
    ("2026-12-04", "December 4th, 20 26"),
    ("Dec. 4, 2026", "December 4th, 20 26"),
    ("4 December 2026", "the 4th of December, 20 26"),
    ("in 1998", "in 19 98"),
    ("in 1905", "in 19 oh 5"),
    ("in 2005", "in 2005"),
    ("It was 2026.", "It was 20 26."),
    ("the 1990s", "the 19 nineties"),
    ("2024-25 season", "20 24 to 25 season"),
    ("Mr. Smith met Dr. Jones", "Mister Smith met Doctor Jones"),
    ("No. 5", "number 5"),
    ("1/2 of it", "one half of it"),
    ("24/7", "24 7"),
    ("100km/h", "100 kilometers per hour"),
    ("1 km", "1 kilometer"),
    ("22°C", "22 degrees Celsius"),
    # left to the voice, which reads these well
    ("10%", "10%"),
    ("the 1st", "the 1st"),
    ("1,234 people", "1,234 people"),
    ("-5 degrees", "-5 degrees"),
])
def test_newsreader_numbers(text: str, spoken: str) -> None:
    assert normalize(text).text == spoken


def test_rewrites_map_back_to_the_script() -> None:
    text = "Costs hit $5.2 billion today."
    mt = normalize(text)
    start = mt.text.index("dollars")
    s, e = mt.source_span(start, start + len("dollars"))
    assert text[s:e] == "$5.2 billion"
    k = mt.text.index("today")
    assert mt.source_span(k, k + 5) == (text.index("today"), text.index("today") + 5)


def test_ordinals_and_years() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)] == \
        ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]
    assert [year_words(y) for y in (1066, 1900, 1905, 1998, 2000, 2009, 2010, 2026)] == \
        ["10 66", "19 hundred", "19 oh 5", "19 98", "2000", "2009", "20 10", "20 26"]


# -- markup ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mark, seconds", [
    ("[pause]", 0.5), ("[pause 1s]", 1.0), ("[pause 1.5 s]", 1.5), ("[pause 300ms]", 0.3), ("[break 2s]", 2.0),
    ("[2s]", 2.0), ("<break time='1s'/>", 1.0), ('<break time="500ms"/>', 0.5), ("<break/>", 0.5),
    ('<break strength="strong"/>', 0.7), ("<break time='1s'></break>", 1.0),
])
def test_pauses(mark: str, seconds: float) -> None:
    parsed = parse_script(f"Good evening. {mark} Here is the news.")
    kinds = [type(i) for i in parsed.items]
    assert kinds == [Speech, Pause, Speech]
    assert parsed.items[1].seconds == pytest.approx(seconds)
    assert "break" not in parsed.spoken_text and "pause" not in parsed.spoken_text and "<" not in parsed.spoken_text


def test_pause_too_long_or_unreadable() -> None:
    with pytest.raises(SpeechError, match="longer than 10 s"):
        parse_script("Wait [pause 30s] here.")
    with pytest.raises(SpeechError, match="time="):
        parse_script("Wait <break time='soon'/> here.")
    with pytest.raises(SpeechError, match="strength"):
        parse_script("Wait <break strength='huge'/> here.")


def test_emphasis_spans_and_unknown_tags() -> None:
    script = "This is *really big* news, <emphasis>truly</emphasis>. <speak>Done</speak> 5 * 3"
    parsed = parse_script(script)
    spans = [script[s:e] for s, e in parsed.emphasis]
    assert spans == ["really big", "truly"]
    assert "*" not in parsed.spoken_text and "emphasis" not in parsed.spoken_text
    assert "speak" not in parsed.spoken_text.replace("Done", "")
    assert len(parsed.warnings) == 1 and "<speak>" in parsed.warnings[0]


# -- language ----------------------------------------------------------------------------------------------------------


def test_chinese_script_refused_for_an_english_voice() -> None:
    with pytest.raises(SpeechError, match="Chinese characters.*piper:joe.*English"):
        check_language("今天的新闻很重要，我们马上开始。", "piper:joe", "en-US")


def test_a_few_foreign_letters_are_left_out_with_a_warning() -> None:
    text = "The minister, 王毅, met the press in Geneva today to talk about trade."
    check = check_language(text, "piper:joe", "en-US")
    assert len(check.warnings) == 1 and "王毅" in check.warnings[0]
    cleaned = drop_letters(MappedText.of(text), check.unreadable)
    assert "王" not in cleaned.text and "Geneva" in cleaned.text


def test_latin_with_accents_and_unknown_languages_pass() -> None:
    assert check_language("Café in São Paulo, Zürich and Kraków", "piper:joe", "en-US").warnings == ()
    assert check_language("今天", "x:y", "tlh").warnings == ()  # a language we do not know: not checked
    assert check_language("Привет, мир", "espeak:ru", "ru").warnings == ()


# -- long sentences ----------------------------------------------------------------------------------------------------


def _words(mt: MappedText) -> int:
    return sum(spoken_words(t) for t in mt.text.split())


def test_no_punctuation_is_cut_into_bounded_pieces() -> None:
    text = " ".join(["word"] * 3000)
    plan = plan_script(text, "piper:joe", "en-US", 0.1)
    assert all(_words(p.text) <= MAX_PIECE_WORDS + 1 for p in plan.pieces)
    assert sum(_words(p.text) for p in plan.pieces) == 3000
    assert all(p.text.text.endswith(",") for p in plan.pieces[:-1])  # phrased as clauses
    assert all(p.cut_inside_sentence for p in plan.pieces[:-1]) and not plan.pieces[-1].cut_inside_sentence


def test_cuts_prefer_clause_marks_then_conjunctions() -> None:
    clause = "the council met on Tuesday to discuss the budget for the coming year"  # 13 words
    text = MappedText.of(", ".join([clause] * 6))
    pieces = split_long(text)
    assert len(pieces) >= 2 and all(p.text.rstrip().endswith(",") for p in pieces[:-1])
    assert all(p.text.rstrip(",").endswith("year") for p in pieces[:-1])
    plain = MappedText.of(" and ".join([clause] * 5))  # no commas: cut before "and"
    cut = split_long(plain)
    assert len(cut) >= 2
    for a, b in zip(cut, cut[1:]):
        assert b.text.startswith("and ")


def test_short_sentences_are_not_cut() -> None:
    plan = plan_script("Good evening. Here is the news. [pause 1s] Markets fell.", "piper:joe", "en-US", 0.1)
    assert [p.text.text for p in plan.pieces] == ["Good evening.", "Here is the news.", "Markets fell."]
    assert [p.gap_after_s for p in plan.pieces] == [pytest.approx(0.1), pytest.approx(1.1), 0.0]


def test_nothing_to_say() -> None:
    with pytest.raises(SpeechError, match="nothing to say"):
        plan_script("[pause 1s] <break/>", "piper:joe", "en-US", 0.1)


# -- joining, emphasis, resampling -----------------------------------------------------------------------------------

RATE = 1000


def _fake_voice(text: str, lead_s: float = 0.2, tail_s: float = 0.3, word_s: float = 0.25) -> Utterance:
    """An utterance like an engine's: edge silence phones around one tone per word, word timings on ``text``."""
    tokens = [(m.start(), m.end()) for m in re.finditer(r"[^\s,.]+", text)]
    n = int(round((lead_s + word_s * len(tokens) + tail_s) * RATE))
    audio = np.zeros(n, np.float32)
    phones = [PhonemeTiming("_", 0.0, lead_s)]
    words = []
    for i, (s, e) in enumerate(tokens):
        t0 = lead_s + i * word_s
        audio[int(t0 * RATE):int((t0 + word_s) * RATE)] = 0.5
        phones.append(PhonemeTiming("a", t0, t0 + word_s))
        words.append(WordTiming(text[s:e], t0, t0 + word_s, s, e))
    phones.append(PhonemeTiming("_", lead_s + word_s * len(tokens), n / RATE))
    return Utterance(audio, RATE, tuple(phones), tuple(words), "fake", text)


def test_join_trims_cut_joins_and_maps_words() -> None:
    script = " ".join(f"w{i}" for i in range(90))
    plan = plan_script(script, "fake", "en", 0.1)
    parts = [_fake_voice(p.text.text) for p in plan.pieces]
    utt = join_pieces(script, plan, parts, "fake", 0.89)
    assert [w.text for w in utt.words] == script.split()
    assert all(script[w.char_start:w.char_end] == w.text for w in utt.words)
    gaps = [b.start_s - a.end_s for a, b in zip(utt.words, utt.words[1:]) if b.start_s - a.end_s > 1e-6]
    assert len(gaps) == len(plan.pieces) - 1 and max(gaps) <= 0.22 + 1e-3  # 0.5 s of edge silence -> a clause pause
    assert utt.phonemes[0].start_s == 0.0 and utt.phonemes[-1].end_s == pytest.approx(utt.duration_s)
    assert all(a.end_s == pytest.approx(b.start_s) for a, b in zip(utt.phonemes, utt.phonemes[1:]))


def test_join_keeps_sentence_gaps_and_pauses() -> None:
    script = "[pause 0.5s] One two. Three four. [pause 1s] Five."
    plan = plan_script(script, "fake", "en", 0.1)
    parts = [_fake_voice(p.text.text) for p in plan.pieces]
    utt = join_pieces(script, plan, parts, "fake", 0.89)
    expected = 0.5 + sum(p.duration_s for p in parts) + 0.1 + 1.1
    assert utt.duration_s == pytest.approx(expected, abs=2e-3)
    assert utt.words[0].start_s == pytest.approx(0.5 + 0.2)


def test_emphasis_is_louder_and_stays_under_the_peak() -> None:
    script = "a *b* c"
    plan = plan_script(script, "fake", "en", 0.1)
    utt = join_pieces(script, plan, [_fake_voice(p.text.text) for p in plan.pieces], "fake", 0.5)
    level = {w.text: float(np.abs(utt.audio[int((w.start_s + 0.05) * RATE):int((w.end_s - 0.05) * RATE)]).max())
             for w in utt.words}
    assert 20 * np.log10(level["b"] / level["a"]) == pytest.approx(4.0, abs=0.05)
    assert float(np.abs(utt.audio).max()) <= 0.5 + 1e-6
    assert apply_emphasis(utt, (), 0.5) is utt


def test_resample_to_48k_keeps_timings_and_the_tone() -> None:
    rate = 22050
    t = np.arange(rate) / rate
    tone = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    phones = (PhonemeTiming("_", 0.0, 0.25), PhonemeTiming("a", 0.25, 1.0))
    utt = Utterance(tone, rate, phones, (WordTiming("a", 0.25, 1.0, 0, 1),), "fake", "a")
    up = resample_utterance(utt, 48000)
    assert up.sample_rate_hz == 48000 and abs(len(up.audio) - 48000) <= 1
    assert up.duration_s == pytest.approx(1.0, abs=1e-4)
    assert up.phonemes[0] == phones[0] and up.phonemes[-1].end_s == pytest.approx(up.duration_s)
    assert up.words == utt.words
    mid = up.audio[12000:36000].astype(np.float64)
    tt = np.arange(12000, 36000) / 48000
    basis = np.stack([np.sin(2 * np.pi * 1000 * tt), np.cos(2 * np.pi * 1000 * tt)], 1)
    coef, *_ = np.linalg.lstsq(basis, mid, rcond=None)
    residual = mid - basis @ coef
    assert 10 * np.log10(np.sum((basis @ coef) ** 2) / np.sum(residual ** 2)) > 80
    assert resample_utterance(utt, rate) is utt


@pytest.mark.parametrize("mark", ["[pause -3s]", "[pause abc]", "[pause 1e3s]", "[break -1s]", "[-3s]",
                                  "[pause 2s and more", "[PAUSE 2 hours]"])
def test_a_malformed_pause_is_refused_in_one_line_naming_it(mark: str) -> None:
    with pytest.raises(SpeechError, match="Cannot read the pause") as info:
        parse_script(f"Good evening. {mark} Here is the news.")
    assert mark.split()[0] in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("mark", ["<break time='1s'", "<emphasis here", "</emphasis"])
def test_a_tag_left_open_is_refused(mark: str) -> None:
    with pytest.raises(SpeechError, match="not closed"):
        parse_script(f"Good evening. {mark} Here is the news.")


@pytest.mark.parametrize("script, note", [
    ("This is <emphasis>big news tonight.", "<emphasis> never closed"),
    ("This is big</emphasis> news tonight.", "</emphasis> with no <emphasis>"),
    ("This is <emphasis>big <emphasis>news</emphasis> tonight.", "<emphasis> inside <emphasis>"),
    ("This is big * news tonight.", "*"),
])
def test_unbalanced_emphasis_is_dropped_with_a_warning(script: str, note: str) -> None:
    parsed = parse_script(script)
    assert len(parsed.warnings) == 1 and note in parsed.warnings[0]
    assert parsed.spoken_text.split() == ["This", "is", "big", "news", "tonight."]
    if "never closed" in note:
        assert parsed.emphasis == ()


def test_words_that_only_look_like_markup_are_read() -> None:
    parsed = parse_script("Breaking news [Breaking] from the break room: a < b and 5 * 3.")
    assert "[Breaking]" in parsed.spoken_text and "break room" in parsed.spoken_text and "a < b" in parsed.spoken_text


def test_sections_are_whole_sentences_the_first_one_short() -> None:
    from studio.speech.registry import sections

    sentence = "The council met tonight and approved the budget for the parks, the libraries and the pools."
    script = "[pause 1s] Good evening. " + " ".join([sentence] * 12)
    plan = plan_script(script, "piper:joe", "en-US", 0.1)
    parts = sections(plan, first_words=1, words=40)
    assert [p for s in parts for p in s.pieces] == list(plan.pieces)  # every piece once, in order
    assert [p.text.text for p in parts[0].pieces] == ["Good evening."]
    assert parts[0].lead_in_s == 1.0 and all(s.lead_in_s == 0.0 for s in parts[1:])
    assert all(not s.pieces[-1].cut_inside_sentence for s in parts)
    assert all(40 <= sum(len(p.text.text.split()) for p in s.pieces) < 40 + 16 for s in parts[1:-1])
