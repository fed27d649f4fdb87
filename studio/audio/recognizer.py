"""Streaming phone recognition and forced alignment with pocketsphinx's bundled en-us model.

Live: allphone search with the bundled phone LM (``en-us-phone.lm.bin``), context-independent phones. Audio is fed
as it arrives; after every chunk the partial segmentation is read and every phone that is followed by another one
is emitted (its boundaries are then stable), so phones come out during the utterance, not at its end.
Labels are pocketsphinx ARPAbet (``AA``, ``B``, ``SIL``, ``+NSN+``...); times are seconds of the whole stream.

Pitfall (measured: segfault): a ``SegmentList`` from ``Decoder.seg()`` is invalidated by any later decoder call
(``hyp()``, ``process_raw``); it is always turned into a list at once here.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass

import numpy as np

from studio.audio.settings import RecognizerSettings
from studio.errors import ModelLoadError, SpeechError
from studio.speech.types import PhonemeTiming

log = logging.getLogger(__name__)


def _model_paths() -> tuple[str, str, str]:
    """(acoustic model dir, phone LM, dictionary) of the pocketsphinx wheel."""
    try:
        from pocketsphinx import get_model_path
    except ImportError as exc:
        raise ModelLoadError("pocketsphinx is not installed: run `pip install pocketsphinx`.") from exc
    root = get_model_path()
    paths = (
        os.path.join(root, "en-us", "en-us"),
        os.path.join(root, "en-us", "en-us-phone.lm.bin"),
        os.path.join(root, "en-us", "cmudict-en-us.dict"),
    )
    for p in paths:
        if not os.path.exists(p):
            raise ModelLoadError(f"pocketsphinx model file missing: {p}. Reinstall pocketsphinx.")
    return paths


def _to_int16_bytes(audio: np.ndarray) -> bytes:
    x = np.asarray(audio)
    if x.dtype == np.int16:
        return x.reshape(-1).tobytes()
    x = np.clip(x.astype(np.float32).reshape(-1), -1.0, 1.0)
    return (x * 32767.0).astype(np.int16).tobytes()


@dataclass(frozen=True)
class RecognizerStats:
    chunks: int
    phones_emitted: int
    utterances: int
    cpu_ms_per_chunk_median: float  # wall time of process_raw + reading the partial result, per fed chunk
    cpu_ms_per_chunk_p95: float
    audio_ms_per_chunk_median: float  # audio duration of a fed chunk (to put the CPU time in proportion)
    emit_delay_ms_median: float  # phone end -> emission, in stream time (audio fed after the end + CPU time)
    emit_delay_ms_p95: float


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


class StreamingPhoneRecognizer:
    """Feeds 16 kHz audio to pocketsphinx allphone search and emits timed ARPAbet phones with bounded latency."""

    _MAX_SAMPLES_KEPT = 4096  # bounded history of per-chunk measurements

    def __init__(self, settings: RecognizerSettings | None = None) -> None:
        self.settings = settings or RecognizerSettings()
        s = self.settings
        hmm, phone_lm, _ = _model_paths()
        try:
            from pocketsphinx import Decoder

            self._decoder = Decoder(
                hmm=hmm,
                allphone=phone_lm,
                allphone_ci=True,
                beam=s.beam,
                pbeam=s.pbeam,
                lw=s.language_weight,
                samprate=float(s.sample_rate_hz),
                loglevel="ERROR",
            )
        except Exception as exc:  # pocketsphinx raises RuntimeError / ValueError with C messages
            raise ModelLoadError(f"Cannot start pocketsphinx phone recognizer: {exc}") from exc
        self._in_utt = False
        self._utt_start_sample = 0  # absolute stream sample of the utterance's frame 0
        self._utt_samples = 0
        self._emitted_frames = 0  # frames of this utterance already covered by emitted phones
        self._last_label = ""
        self._n_chunks = 0
        self._n_phones = 0
        self._n_utts = 0
        self._chunk_ms: list[float] = []
        self._chunk_audio_ms: list[float] = []
        self._delays_ms: list[float] = []

    @property
    def in_utterance(self) -> bool:
        return self._in_utt

    @property
    def fed_until_s(self) -> float:
        """Stream time of the end of the audio fed so far."""
        return (self._utt_start_sample + self._utt_samples) / self.settings.sample_rate_hz

    def start(self, stream_sample: int) -> None:
        """Begin an utterance whose first sample is absolute stream sample ``stream_sample``."""
        if self._in_utt:
            self.finish()
        self._decoder.start_utt()
        self._in_utt = True
        self._utt_start_sample = int(stream_sample)
        self._utt_samples = 0
        self._emitted_frames = 0
        self._last_label = ""
        self._n_utts += 1

    def feed(self, audio: np.ndarray) -> list[PhonemeTiming]:
        """Feed the next samples (int16, or float32 in -1..1); returns phones that became final."""
        if not self._in_utt:
            self.start(self._utt_start_sample + self._utt_samples)
        data = _to_int16_bytes(audio)
        n = len(data) // 2
        t0 = time.perf_counter()
        self._decoder.process_raw(data, False, False)
        self._utt_samples += n
        segs = self._segments()
        out = self._emit(segs, final=False)
        cpu_s = time.perf_counter() - t0
        self._record(self._chunk_ms, cpu_s * 1e3)
        self._record(self._chunk_audio_ms, n / self.settings.sample_rate_hz * 1e3)
        self._n_chunks += 1
        self._note_delays(out, cpu_s)
        if self._utt_samples >= self.settings.max_utterance_s * self.settings.sample_rate_hz:
            out += self.finish()
        return out

    def finish(self) -> list[PhonemeTiming]:
        """End the utterance (on silence); returns the phones not emitted yet."""
        if not self._in_utt:
            return []
        t0 = time.perf_counter()
        self._decoder.end_utt()
        self._in_utt = False
        out = self._emit(self._segments(), final=True)
        self._note_delays(out, time.perf_counter() - t0)
        return out

    def _segments(self) -> list[tuple[str, int, int]]:
        segs = self._decoder.seg()
        if segs is None:
            return []
        return [(seg.word, int(seg.start_frame), int(seg.end_frame)) for seg in segs]  # consume at once (see top)

    def _emit(self, segs: list[tuple[str, int, int]], final: bool) -> list[PhonemeTiming]:
        """Phones after the emitted prefix; the last one only when the utterance is final."""
        out: list[PhonemeTiming] = []
        frate = float(self.settings.frame_rate_hz)
        t0_s = self._utt_start_sample / self.settings.sample_rate_hz
        stable = segs if final else segs[:-1]
        for label, start_f, end_f in stable:
            # Boundaries of emitted phones may still be revised; what was shown stays shown.
            if end_f < self._emitted_frames:
                continue
            if start_f < self._emitted_frames and label == self._last_label:
                continue  # the tail of a phone already emitted
            start_f = max(start_f, self._emitted_frames)
            self._last_label = label
            out.append(PhonemeTiming(label, t0_s + start_f / frate, t0_s + (end_f + 1) / frate))
            self._emitted_frames = end_f + 1
        self._n_phones += len(out)
        return out

    def _note_delays(self, phones: list[PhonemeTiming], cpu_s: float) -> None:
        now_s = self.fed_until_s + cpu_s
        for p in phones:
            self._record(self._delays_ms, (now_s - p.end_s) * 1e3)

    def _record(self, values: list[float], v: float) -> None:
        values.append(v)
        if len(values) > self._MAX_SAMPLES_KEPT:
            del values[: len(values) - self._MAX_SAMPLES_KEPT]

    def stats(self) -> RecognizerStats:
        return RecognizerStats(
            chunks=self._n_chunks,
            phones_emitted=self._n_phones,
            utterances=self._n_utts,
            cpu_ms_per_chunk_median=_pct(self._chunk_ms, 50),
            cpu_ms_per_chunk_p95=_pct(self._chunk_ms, 95),
            audio_ms_per_chunk_median=_pct(self._chunk_audio_ms, 50),
            emit_delay_ms_median=_pct(self._delays_ms, 50),
            emit_delay_ms_p95=_pct(self._delays_ms, 95),
        )


_WORD_RE = re.compile(r"[a-z0-9']+")


def align(audio: np.ndarray, sample_rate_hz: int, transcript: str) -> list[PhonemeTiming]:
    """Forced alignment of a known transcript: ARPAbet phones (with SIL) timed in seconds from the clip's start.

    ``audio`` is mono float32 (-1..1) or int16 at any rate (resampled to 16 kHz).
    """
    from math import gcd

    from scipy.signal import resample_poly

    x = np.asarray(audio)
    if x.ndim != 1:
        raise ValueError("align() wants mono audio (N,)")
    if x.dtype == np.int16:
        x = x.astype(np.float32) / 32768.0
    x = x.astype(np.float32)
    if sample_rate_hz != 16000:
        g = gcd(int(sample_rate_hz), 16000)
        x = resample_poly(x, 16000 // g, int(sample_rate_hz) // g).astype(np.float32)
    words = _WORD_RE.findall(transcript.lower())
    if not words:
        raise SpeechError("Nothing to align: the transcript has no words.")
    hmm, _, dict_path = _model_paths()
    try:
        from pocketsphinx import Decoder

        decoder = Decoder(hmm=hmm, dict=dict_path, lm=None, loglevel="ERROR")
    except Exception as exc:
        raise ModelLoadError(f"Cannot start pocketsphinx aligner: {exc}") from exc
    missing = [w for w in words if decoder.lookup_word(w) is None]
    if missing:
        raise SpeechError(f"Cannot align: words not in the pronunciation dictionary: {', '.join(missing)}. "
                          "Spell numbers and abbreviations out as words.")
    pcm = _to_int16_bytes(x)
    try:
        decoder.set_align_text(" ".join(words))
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        decoder.set_alignment()
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        alignment = decoder.get_alignment()
    except RuntimeError as exc:
        raise SpeechError(f"Alignment failed ({exc}): check that the transcript matches the audio.") from exc
    if alignment is None:
        raise SpeechError("Alignment failed: check that the transcript matches the audio.")
    out: list[PhonemeTiming] = []
    for word in alignment:
        for phone in word:
            out.append(PhonemeTiming(phone.name, phone.start / 100.0, (phone.start + phone.duration) / 100.0))
    return out


def recognize_file_phones(audio: np.ndarray, sample_rate_hz: int, chunk_s: float = 5.0) -> list[PhonemeTiming]:
    """Timed ARPAbet phones of a whole recording (16 kHz mono float32), fed in chunks; silence is marked ``SIL``."""
    from studio.audio.settings import RecognizerSettings

    rec = StreamingPhoneRecognizer(RecognizerSettings(sample_rate_hz=sample_rate_hz))
    rec.start(0)
    phones: list[PhonemeTiming] = []
    step = int(chunk_s * sample_rate_hz)
    for i in range(0, len(audio), step):
        phones += rec.feed(audio[i:i + step])
    phones += rec.finish()
    return phones
