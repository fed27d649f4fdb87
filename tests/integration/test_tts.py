"""Real text-to-speech: Piper (default) and eSpeak NG, with their timings."""

from __future__ import annotations

import numpy as np
import pytest

from studio.errors import SpeechError, VoiceNotFoundError
from studio.speech import SpeechSettings, Utterance, list_voices, synthesize
from studio.speech.visemes import Viseme, stress_times, viseme_for_phone

pytestmark = pytest.mark.integration

TWO_SENTENCES = "Good evening, and welcome to the news. The moon was blue over Boston tonight!"


def _check_timings(utt: Utterance) -> None:
    assert utt.audio.dtype == np.float32 and utt.audio.ndim == 1
    assert 0.1 < float(np.abs(utt.audio).max()) <= 1.0
    ph = utt.phonemes
    assert ph[0].start_s == pytest.approx(0.0, abs=1e-9)
    assert ph[-1].end_s == pytest.approx(utt.duration_s, abs=1.0 / utt.sample_rate_hz)
    for a, b in zip(ph, ph[1:]):
        assert b.start_s == pytest.approx(a.end_s, abs=1e-9)  # contiguous: they tile the audio
        assert a.end_s > a.start_s
    assert not any(p.phoneme in ("ˈ", "ˌ", "^", "$", " ") for p in ph)
    # Words carry char offsets into the text and lie inside the audio, in order.
    assert len(utt.words) >= 10
    for w in utt.words:
        assert utt.text[w.char_start : w.char_end] == w.text
        assert 0 <= w.start_s < w.end_s <= utt.duration_s + 1e-6
    assert [w.start_s for w in utt.words] == sorted(w.start_s for w in utt.words)
    words = [w.text.lower() for w in utt.words]
    assert "moon" in words and "boston" in words
    # The p/b/m phones are there for the mouth to close on, and they are short but not empty.
    assert any(viseme_for_phone(p.phoneme) is Viseme.PBM for p in ph)


@pytest.fixture(scope="module")
def piper_utt() -> Utterance:
    return synthesize(TWO_SENTENCES)  # default voice: piper:joe


def test_voices_listed() -> None:
    names = [v.name for v in list_voices()]
    assert names[0] == "piper:joe"
    assert "espeak:en-us" in names and "espeak:en-gb" in names


def test_piper_two_sentences(piper_utt: Utterance) -> None:
    assert piper_utt.voice == "piper:joe" and piper_utt.sample_rate_hz == 22050
    _check_timings(piper_utt)
    assert 3.0 < piper_utt.duration_s < 10.0
    moon = next(w for w in piper_utt.words if w.text == "moon")
    # The second sentence starts after a pause: there is a silence phone between the sentences.
    sil = [p for p in piper_utt.phonemes if p.phoneme == "_" and 0.5 < p.start_s < moon.start_s]
    assert sil and max(p.end_s - p.start_s for p in sil) > 0.1
    assert len(stress_times(piper_utt.phonemes)) >= 5  # stress marks became stressed vowels


def test_piper_is_repeatable(piper_utt: Utterance) -> None:
    again = synthesize(TWO_SENTENCES, "piper:joe")
    np.testing.assert_array_equal(again.audio, piper_utt.audio)
    assert again.phonemes == piper_utt.phonemes


def test_piper_timings_follow_the_audio(piper_utt: Utterance) -> None:
    """Speech energy is high inside vowels and low inside long pauses."""
    sr = piper_utt.sample_rate_hz

    def rms(p) -> float:  # type: ignore[no-untyped-def]
        seg = piper_utt.audio[int(p.start_s * sr) : int(p.end_s * sr)]
        return float(np.sqrt(np.mean(seg**2)))

    vowels = [rms(p) for p in piper_utt.phonemes if viseme_for_phone(p.phoneme) in (Viseme.AA, Viseme.AE_EH)]
    pauses = [rms(p) for p in piper_utt.phonemes if p.phoneme == "_" and p.end_s - p.start_s > 0.15]
    assert np.median(vowels) > 4 * np.median(pauses)


def test_espeak_synthesis() -> None:
    utt = synthesize(TWO_SENTENCES, "espeak:en-gb")
    assert utt.voice == "espeak:en-gb"
    _check_timings(utt)


def test_espeak_is_repeatable_whatever_was_spoken_before() -> None:
    """The render farm relies on it: a worker speaks the segments it is given, after whatever it spoke before."""
    first = synthesize(TWO_SENTENCES, "espeak:en-gb")
    synthesize("The council met for three hours tonight?", "espeak:en-us")
    synthesize("Rain at first, then sun.", "espeak:en-gb")
    again = synthesize(TWO_SENTENCES, "espeak:en-gb")
    np.testing.assert_array_equal(again.audio, first.audio)
    assert again.phonemes == first.phonemes and again.words == first.words


def test_unknown_voice() -> None:
    with pytest.raises(VoiceNotFoundError, match="Installed voices: piper:joe, espeak:en-us"):
        synthesize("Hello.", "piper:nobody")


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_empty_text(text: str) -> None:
    with pytest.raises(SpeechError, match="The script is empty: type something for the presenter to say."):
        synthesize(text)


def test_settings_slow_down() -> None:
    fast = synthesize("This is a test of the speaking rate.", "espeak:en-us")
    slow = synthesize("This is a test of the speaking rate.", "espeak:en-us", SpeechSettings(length_scale=1.5))
    assert slow.duration_s > 1.2 * fast.duration_s


# -- hostile and marked-up scripts ----------------------------------------------------------------------------------


def _contiguous(utt: Utterance) -> None:
    ph = utt.phonemes
    assert ph[0].start_s == pytest.approx(0.0, abs=1e-9)
    assert ph[-1].end_s == pytest.approx(utt.duration_s, abs=1.0 / utt.sample_rate_hz)
    for a, b in zip(ph, ph[1:]):
        assert b.start_s == pytest.approx(a.end_s, abs=1e-6) and a.end_s > a.start_s
    for w in utt.words:
        assert utt.text[w.char_start:w.char_end] == w.text
        assert 0 <= w.start_s < w.end_s <= utt.duration_s + 1e-6


def test_long_text_without_punctuation_is_spoken_in_pieces() -> None:
    text = " ".join(["news"] * 150)
    utt = synthesize(text)
    _contiguous(utt)
    assert [w.text for w in utt.words] == text.split()
    pauses = [p.end_s - p.start_s for p in utt.phonemes[1:-1] if p.phoneme == "_"]
    assert 3 <= len(pauses) <= 8 and max(pauses) < 0.3  # clause pauses at the cuts, no sentence breaks


@pytest.mark.parametrize("text", ["今天的新闻很重要，我们马上开始。", "Сегодня в новостях: погода и спорт."])
def test_foreign_script_is_refused_before_speaking(text: str) -> None:
    from studio.speech import check_request

    with pytest.raises(SpeechError, match="cannot read"):
        check_request(text)
    with pytest.raises(SpeechError, match="cannot read"):
        synthesize(text)


def test_a_foreign_name_is_left_out_with_a_warning() -> None:
    utt = synthesize("The minister, 王毅, spoke to reporters in Geneva this morning about the new trade rules.")
    assert len(utt.warnings) == 1 and "王毅" in utt.warnings[0]
    assert "王毅" not in " ".join(w.text for w in utt.words)


def test_markup_is_never_read_aloud() -> None:
    plain = synthesize("Good evening. Here is the news.")
    marked = synthesize("Good evening. <break time='1s'/> Here is the news. [pause 500ms]")
    _contiguous(marked)
    assert [w.text for w in marked.words] == [w.text for w in plain.words]
    assert marked.duration_s == pytest.approx(plain.duration_s + 1.5, abs=0.02)
    assert max(p.end_s - p.start_s for p in marked.phonemes if p.phoneme == "_") >= 1.0


def test_emphasis_makes_the_word_louder() -> None:
    def level_db(utt: Utterance, word: str) -> float:
        w = next(w for w in utt.words if w.text == word)
        seg = utt.audio[int(w.start_s * utt.sample_rate_hz):int(w.end_s * utt.sample_rate_hz)]
        return 20 * float(np.log10(np.sqrt(np.mean(seg.astype(np.float64) ** 2))))

    plain = synthesize("This is big news tonight.")
    stressed = synthesize("This is *big* news tonight.")
    gain = (level_db(stressed, "big") - level_db(stressed, "tonight")) - \
        (level_db(plain, "big") - level_db(plain, "tonight"))
    assert 3.0 < gain < 5.0


def test_money_is_one_word_in_the_timings() -> None:
    utt = synthesize("Profits reached $5.2 billion on 2026-12-04.")
    assert [w.text for w in utt.words] == ["Profits", "reached", "$5.2 billion", "on", "2026-12-04"]


def test_program_audio_at_48k_keeps_the_timings() -> None:
    native = synthesize(TWO_SENTENCES)
    program = synthesize(TWO_SENTENCES, sample_rate_hz=48000)
    assert program.sample_rate_hz == 48000
    assert program.duration_s == pytest.approx(native.duration_s, abs=1e-3)
    assert program.words == native.words
    assert [(p.phoneme, p.start_s) for p in program.phonemes] == [(p.phoneme, p.start_s) for p in native.phonemes]
    spectrum = np.abs(np.fft.rfft(program.audio.astype(np.float64)))
    freqs = np.fft.rfftfreq(len(program.audio), 1 / 48000)
    above = spectrum[freqs > native.sample_rate_hz / 2 + 200].max()
    assert 20 * np.log10(above / spectrum.max()) < -60  # nothing mirrored above the voice's own band


@pytest.mark.parametrize("voice", ["piper:joe", "espeak:en-us"])
def test_every_spoken_word_has_a_timing(voice: str) -> None:
    """Engines speak some word pairs as one ("from the"); each word of the script still gets its own timing, in
    order, and markup never becomes a word."""
    script = ("Good evening. [pause 1s] This is *big* news <emphasis>tonight</emphasis> from the harbour, "
              "<break time='300ms'/> a lone * star and an unclosed tag. Goodnight.")
    utt = synthesize(script, voice)
    assert [w.text for w in utt.words] == ["Good", "evening", "This", "is", "big", "news", "tonight", "from", "the",
                                           "harbour", "a", "lone", "star", "and", "an", "unclosed", "tag",
                                           "Goodnight"]
    for a, b in zip(utt.words, utt.words[1:]):
        assert a.start_s < a.end_s <= b.start_s + 1e-6


def test_the_prepared_voice_model_speaks_as_the_original(tmp_path, monkeypatch) -> None:
    """The first load prepares the voice's model (alignment output, optimized graph) into the data folder; the next
    load reads it and speaks the same samples."""
    from studio.speech.piper_engine import PiperEngine

    monkeypatch.setenv("NEWSSTUDIO_HOME", str(tmp_path))
    if not PiperEngine().voices():
        pytest.skip("no Piper voice installed")
    first = PiperEngine().synthesize(TWO_SENTENCES, "joe", SpeechSettings())
    prepared = list((tmp_path / "cache" / "voices").glob("*.onnx"))
    assert len(prepared) == 1
    stamp = prepared[0].stat().st_mtime_ns
    second = PiperEngine().synthesize(TWO_SENTENCES, "joe", SpeechSettings())
    assert prepared[0].stat().st_mtime_ns == stamp  # read, not made again
    assert np.array_equal(first.audio, second.audio) and first.phonemes == second.phonemes


def test_speaking_a_script_imports_no_scipy_signal() -> None:
    """The resampling on the way to the first frame is numpy's (``studio.resample``): importing scipy.signal cost
    more than the resampling."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    code = ("import sys\nfrom studio.pipeline.sources import item_from_utterance\n"
            "from studio.speech.registry import synthesize\n"
            "item_from_utterance(synthesize('Good evening.', sample_rate_hz=48000))\n"
            "print('scipy.signal' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=repo,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.strip() == "False"
