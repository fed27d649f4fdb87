"""The data recipe of the audio-to-motion model: aligned TTS speech -> augmented log-mel + per-frame targets.

Reproducible from a seed (the shipped weights' set):
``python -m studio.neural.training.data --out data/a2m_aligned --minutes 72 --val-minutes 10 --copies 2 --labels aligned+engine``
- Text: news-like sentences made by code (names, places, numbers, dates, times, money, scores; see ``news_text``); with
  aligned labels the numbers are spelled out first (``spoken_numbers``) so the aligner gets the words the TTS says.
- Voices: Piper joe (length scales 0.8..1.25), eSpeak NG (several accents, rates 120..230 wpm, pitch 20..80) and
  Festival (cmu_us_slt_arctic_hts, kal_diphone; Debian, ``installers/training-deps.sh``). MBROLA stays out (licence).
  Whole voices are held out for validation (``VAL_VOICES``). ``--voices kokoro`` adds Kokoro-82M voices
  (``studio.neural.training.kokoro``: four voices and blends of two, jf_tebukuro held out; aligned labels only) to an existing
  folder; ``--voices flite`` adds Flite's awb, rms and slt voices (Debian ``flite``) reading the news text and
  sentences from Debian's ``fortunes`` (``fortune_sentences``), aligned labels only.
- Targets per 25 fps frame from the phone timings: the 5 mouth coefficients of ``mouth_track`` (with the clean audio's
  loudness, like the script path) and the viseme class at the frame centre. The timings come from pocketsphinx forced
  alignment of each clean clip to its text (``--labels aligned``, the default): that is how the human-speech
  evaluation makes its reference, and the engines' own timings disagree with it (measured on 40 sentences: Piper joe
  agrees on 55 % of frames and is one frame late, Festival voices 79..87 %). eSpeak NG speech rarely aligns (79 to 100 %
  of its clips fail, depending on the voice); ``aligned+engine`` keeps such clips with the engine's timings and flags
  them (``clip_aligned``) so the trainer can use or leave them (``--aligned-only``).
- Augmentation (per copy, random): speed/pitch by resampling (timings scaled with it), gain, reverb (synthetic
  exponential room response), additive noise (white / pink / brown / hum at 5..40 dB SNR), band limits (telephone to
  wideband), microphone-like EQ (random smooth spectral tilt and peaks).
Stored as shards of uint8-quantized log-mel (``quantize_mel``) + float16 coefficients + uint8 visemes.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import random
import re
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache
from math import gcd
from pathlib import Path

import numpy as np

from studio.audio.features import HOP, N_MELS, SAMPLE_RATE_HZ, log_mel
from studio.contracts.coeffs import MOUTH_COEFFS
from studio.speech.types import PhonemeTiming
from studio.speech.visemes import Viseme, mouth_track, viseme_for_phone
from studio.neural.training.text import spoken_numbers  # noqa: F401 (the recipe's, kept importable here)

log = logging.getLogger(__name__)

from studio.neural.constants import FPS, LOOKAHEAD_MEL, MEL_FRONT_PAD, MEL_PER_FRAME, SAMPLES_PER_FRAME  # noqa: E402,F401

MOUTH_IDX = [int(c) for c in MOUTH_COEFFS]

TRAIN_VOICES = (
    "piper:joe", "espeak:en-us", "espeak:en-gb", "espeak:en-us-nyc", "espeak:en-gb-x-gbcwmd",
    "espeak:en-gb-scotland", "festival:cmu_us_slt_arctic_hts", "festival:kal_diphone",
)  # fmt: skip
VAL_VOICES = ("espeak:en-029", "espeak:en-gb-x-rp", "espeak:en-gb-x-gbclan", "festival:ked_diphone")
# Kokoro-82M (``studio.neural.training.kokoro``): four of its five voices, plus ``kokoro:blend`` (each clip a random mix of two
# of those four); jf_tebukuro is held out. Made with ``--voices kokoro`` into an existing data folder.
KOKORO_TRAIN = ("kokoro:jf_alpha", "kokoro:jf_gongitsune", "kokoro:jf_nezumi", "kokoro:jm_kumo", "kokoro:blend")
KOKORO_VAL = ("kokoro:jf_tebukuro",)
# Flite (Debian ``flite``): its three statistical (clustergen) voices, US and Scottish male, US female, reading the news
# text and sentences from Debian's ``fortunes`` (``fortune_text``), at duration stretches 0.8..1.25. Made with
# ``--voices flite`` into an existing data folder; labels from forced alignment only.
FLITE_TRAIN = ("flite:awb", "flite:rms", "flite:slt")
FORTUNE_DIR = Path("/usr/share/games/fortunes")
FORTUNE_FILES = ("literature", "wisdom", "people", "science", "education", "work", "platitudes", "love", "politics",
                 "law", "humorists", "miscellaneous", "fortunes", "news", "sports", "food", "pets", "kids", "medicine",
                 "pratchett", "tao", "magic", "paradoxum")
# Share of the clean minutes per voice family (Piper is the only natural-sounding voice: it gets the most).
_WEIGHTS = {"piper:joe": 4.0, "festival:cmu_us_slt_arctic_hts": 2.0}

# -- text --------------------------------------------------------------------------------------------------------------

_FIRST = "Maria James Aisha Robert Chen Olga Pedro Fatima William Yuki Hannah Kwame Sophie Dmitri Grace Liam".split()
_LAST = "Thompson Okafor Garcia Baker Nakamura Patel Lindqvist Moreau Brown Kowalski Mbeki Fischer Walsh Rossi".split()
_PLACES = ("Boston", "the capital", "Manchester", "Lagos", "Melbourne", "the northern district", "Berlin", "Toronto",
           "the harbour", "Cape Town", "the valley", "Mumbai", "Glasgow", "Phoenix", "the old town", "Birmingham")
_ORGS = ("the city council", "the central bank", "the health ministry", "the university", "the transport authority",
         "the football club", "the space agency", "the workers' union", "the energy company", "the school board")
_TOPICS = ("a new bridge", "the budget", "rail fares", "the water supply", "a housing plan", "the new stadium",
           "flood defences", "the trade deal", "bus lanes", "the hospital wing", "a cycling scheme", "broadband")
_MONTHS = "January February March April May June July August September October November December".split()
_DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_VERBS = ("approved", "rejected", "announced", "delayed", "questioned", "defended", "unveiled", "postponed")
_UNITS = ("people", "homes", "jobs", "passengers", "students", "votes", "tonnes", "kilometres", "visitors")


def _num(r: random.Random) -> str:
    kind = r.random()
    if kind < 0.3:
        return str(r.randint(2, 99))
    if kind < 0.6:
        return f"{r.randint(1, 999):,}".replace(",", ",") if r.random() < 0.5 else str(r.randint(100, 999))
    if kind < 0.8:
        return f"{r.randint(1, 99)},{r.randint(0, 999):03d}"
    return f"{r.randint(1, 9)}.{r.randint(1, 9)} million"


def _date(r: random.Random) -> str:
    d = r.randint(1, 28)
    suffix = "th" if 4 <= d <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th")
    forms = [f"{_MONTHS[r.randrange(12)]} {d}{suffix}", f"{_DAYS[r.randrange(7)]}",
             f"{_DAYS[r.randrange(7)]} the {d}{suffix} of {_MONTHS[r.randrange(12)]}", f"{r.randint(1990, 2031)}"]
    return r.choice(forms)


def _name(r: random.Random) -> str:
    return f"{r.choice(_FIRST)} {r.choice(_LAST)}"


def news_text(r: random.Random) -> str:
    """One news-like sentence with names, numbers and dates (varied structure)."""
    t = [
        lambda: f"{r.choice(_ORGS).capitalize()} {r.choice(_VERBS)} {r.choice(_TOPICS)} on {_date(r)}.",
        lambda: f"Police in {r.choice(_PLACES)} say {_num(r)} {r.choice(_UNITS)} were affected by the storm.",
        lambda: f"{_name(r)}, a spokesperson for {r.choice(_ORGS)}, said the plan would cost {_num(r)} pounds.",
        lambda: f"In sport, {r.choice(_PLACES)} beat {r.choice(_PLACES)} by {r.randint(0, 5)} goals to "
                f"{r.randint(0, 4)} in front of {_num(r)} fans.",
        lambda: f"The weather: {r.choice(['rain', 'sunshine', 'snow', 'fog', 'wind'])} in {r.choice(_PLACES)}, "
                f"with highs of {r.randint(-5, 38)} degrees by {r.randint(1, 12)} {r.choice(['am', 'pm'])}.",
        lambda: f"Shares in {r.choice(_LAST)} and {r.choice(_LAST)} rose {r.randint(1, 19)}.{r.randint(0, 9)} "
                f"percent after the report from {_date(r)}.",
        lambda: f"Good evening, I'm {_name(r)}, and this is the news at {r.randint(1, 12)} o'clock.",
        lambda: f"{_name(r)} will meet {_name(r)} in {r.choice(_PLACES)} on {_date(r)} to discuss "
                f"{r.choice(_TOPICS)}.",
        lambda: f"More than {_num(r)} {r.choice(_UNITS)} could benefit, according to figures published "
                f"{r.choice(['today', 'this morning', 'last week', 'on ' + _date(r)])}.",
        lambda: f"Why did {r.choice(_ORGS)} wait until {_date(r)}? Critics, including {_name(r)}, want answers.",
        lambda: f"Welcome back to {r.choice(['the evening news', 'the six o clock bulletin', 'Newsnight'])}; "
                f"our top story is {r.choice(_TOPICS)}.",
        lambda: f"Prices of bread, milk and petrol went up by {r.randint(2, 30)} pence, while wages fell.",
    ]
    return r.choice(t)()




_SENTENCE = re.compile(r"[A-Z][A-Za-z ,;:'-]*[.!?]")


@lru_cache(maxsize=1)
def fortune_sentences() -> tuple[str, ...]:
    """Plain sentences of 5..25 words from Debian's ``fortunes`` (quotes, literature, proverbs): varied English
    beyond the news templates. Kept only when every word is in the aligner's dictionary, and never when it shares
    four words in a row with a transcript of the human-speech evaluation (``humans.human_clips``, both splits)."""
    from studio.audio.recognizer import _WORD_RE, _model_paths  # the aligner's own word split and dictionary
    from studio.neural.training.humans import human_clips

    vocab = {ln.split(maxsplit=1)[0].split("(")[0] for ln in Path(_model_paths()[2]).read_text().splitlines() if ln}
    held_text = " ".join(c.text if isinstance(c.text, str) else " ".join(p[2] for p in c.text)
                         for c in human_clips("all"))
    hw = _WORD_RE.findall(held_text.lower())
    held4 = {tuple(hw[i : i + 4]) for i in range(len(hw) - 3)}
    out: set[str] = set()
    for name in FORTUNE_FILES:
        f = FORTUNE_DIR / name
        if not f.is_file():
            continue
        for rec in f.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
            lines = [ln for ln in rec.splitlines() if not ln.strip().startswith("--")]
            text = " ".join(" ".join(lines).split()).replace('"', "")
            for sent in _SENTENCE.findall(text):
                w = _WORD_RE.findall(sent.lower())
                if 5 <= len(w) <= 25 and all(x in vocab for x in w):
                    if not any(tuple(w[i : i + 4]) in held4 for i in range(len(w) - 3)):
                        out.add(sent.strip())
    if not out:
        raise FileNotFoundError(f"no usable sentences under {FORTUNE_DIR}: apt-get install fortunes "
                                "(installers/training-deps.sh)")
    return tuple(sorted(out))


def fortune_text(r: random.Random) -> str:
    return r.choice(fortune_sentences())


# -- synthesis -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clip:
    audio: np.ndarray  # N float32 at 16 kHz
    phones: tuple[PhonemeTiming, ...]
    voice: str
    text: str


def _resample(x: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    from scipy.signal import resample_poly

    if rate_in == rate_out:
        return x.astype(np.float32)
    g = gcd(rate_in, rate_out)
    return resample_poly(x, rate_out // g, rate_in // g).astype(np.float32)


def _festival(texts: list[str], voice: str) -> list[Clip]:
    """Synthesize with Festival in one process; phone end times from the Segment relation."""
    from scipy.io import wavfile

    out: list[Clip] = []
    with tempfile.TemporaryDirectory() as tmp:
        lines = [f"(voice_{voice})"]
        for i, t in enumerate(texts):
            safe = t.replace("\\", " ").replace('"', " ")
            lines += [f'(set! u (Utterance Text "{safe}"))', "(utt.synth u)",
                      f"(utt.save.wave u \"{tmp}/{i}.wav\" 'riff)", f'(utt.save.segs u "{tmp}/{i}.segs")']
        script = Path(tmp) / "s.scm"
        script.write_text("\n".join(lines))
        subprocess.run(["festival", "--batch", str(script)], check=True, capture_output=True, timeout=600)
        for i, t in enumerate(texts):
            rate, pcm = wavfile.read(f"{tmp}/{i}.wav")
            audio = _resample(pcm.astype(np.float32) / 32768.0, int(rate), SAMPLE_RATE_HZ)
            phones: list[PhonemeTiming] = []
            prev = 0.0
            for line in Path(f"{tmp}/{i}.segs").read_text().splitlines():
                parts = line.split()
                if len(parts) != 3 or parts[0] == "#":
                    continue
                end = float(parts[0])
                phones.append(PhonemeTiming(parts[2], prev, end))
                prev = end
            out.append(Clip(audio, tuple(phones), f"festival:{voice}", t))
    return out


@lru_cache(maxsize=1)
def _kokoro_voice():  # noqa: ANN202
    from studio.neural.training.kokoro import KokoroVoice

    return KokoroVoice(threads=1)


def _kokoro(text: str, voice: str, r: random.Random) -> Clip:
    """Kokoro speech at speeds 0.85..1.2 with 0.1..0.5 s between sentences; no phone timings (align it)."""
    from studio.neural.training.kokoro import SAMPLE_RATE, VOICES

    name = voice.split(":", 1)[1]
    if name == "blend":
        a, b = r.sample([v for v in VOICES if f"kokoro:{v}" in KOKORO_TRAIN], 2)
        w = r.uniform(0.2, 0.8)
        name = f"{a}*{w:.3f}+{b}*{1 - w:.3f}"
    audio = _kokoro_voice().synthesize(text, name, speed=r.uniform(0.85, 1.2), pause_s=r.uniform(0.1, 0.5))
    return Clip(_resample(audio, SAMPLE_RATE, SAMPLE_RATE_HZ), (), voice, text)


# F0 means (Hz) for ``--flite-pitch``: a range per voice around its own (slt is female, awb and rms male)
FLITE_F0 = {"slt": (150.0, 260.0), "awb": (85.0, 160.0), "rms": (80.0, 150.0)}


def _flite(text: str, voice: str, r: random.Random, vary_pitch: bool = False) -> Clip:
    """Flite speech at duration stretches 0.8..1.25; with ``vary_pitch`` also at a random mean F0 (``FLITE_F0``) and
    F0 spread (checked: int_f0_target_mean 80 / 120 / 200 gives 82 / 123 / 200 Hz with slt). No phone timings."""
    from scipy.io import wavfile

    name = voice.split(":", 1)[1]
    opts = ["--setf", f"duration_stretch={r.uniform(0.8, 1.25):.3f}"]
    if vary_pitch:
        opts += ["--setf", f"int_f0_target_mean={r.uniform(*FLITE_F0[name]):.1f}",
                 "--setf", f"int_f0_target_stddev={r.uniform(8.0, 40.0):.1f}"]
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "x.wav"
        subprocess.run(["flite", "-voice", name, *opts, "-t", text, "-o", str(wav)],
                       check=True, capture_output=True, timeout=120)
        rate, pcm = wavfile.read(wav)
    return Clip(_resample(pcm.astype(np.float32) / 32768.0, int(rate), SAMPLE_RATE_HZ), (), voice, text)


def _studio_tts(text: str, voice: str, r: random.Random) -> Clip:
    from studio.speech import SpeechSettings, synthesize

    if voice.startswith("piper:"):
        s = SpeechSettings(length_scale=r.uniform(0.8, 1.25))
    else:
        s = SpeechSettings(espeak_rate_wpm=r.randint(120, 230), espeak_pitch=r.randint(20, 80))
    utt = synthesize(text, voice, s)
    audio = _resample(utt.audio, utt.sample_rate_hz, SAMPLE_RATE_HZ)
    return Clip(audio, utt.phonemes, voice, text)


# -- augmentation ----------------------------------------------------------------------------------------------------


def _noise(n: int, r: np.random.Generator) -> np.ndarray:
    kind = r.integers(4)
    w = r.standard_normal(n).astype(np.float32)
    if kind == 0:
        return w
    spec = np.fft.rfft(w)
    f = np.arange(len(spec)) + 1.0
    if kind == 1:
        spec /= np.sqrt(f)  # pink
    elif kind == 2:
        spec /= f  # brown
    else:
        t = np.arange(n) / SAMPLE_RATE_HZ
        hum = sum(np.sin(2 * np.pi * 50 * k * t + r.uniform(0, 6)) / k for k in (1, 2, 3))
        return (0.3 * w + hum).astype(np.float32)
    x = np.fft.irfft(spec, n).astype(np.float32)
    return x / (x.std() + 1e-9)


def augment(audio: np.ndarray, r: np.random.Generator, strength: float,
            channel: float = 0.0) -> tuple[np.ndarray, float]:
    """(augmented audio, time scale of the result relative to the input). ``strength`` 0 = clean, 1 = heavy.
    ``channel``: the share of clips that go through ``channel.realistic_channel`` (a room, a microphone or phone line,
    a background bed, a codec) instead of the generic reverb / EQ / band limit / noise below."""
    from scipy.signal import butter, fftconvolve, sosfilt

    x = audio.astype(np.float32)
    scale = 1.0
    if strength <= 0:
        return x, scale
    if r.random() < 0.7:  # speed + pitch together by resampling: 0.88..1.12
        factor = float(r.uniform(0.88, 1.12))
        num = int(round(100 / factor))
        x = _resample(x, 100, num) if num != 100 else x
        scale = num / 100.0
    if channel > 0 and r.random() < channel:
        from studio.neural.training.channel import realistic_channel

        x = realistic_channel(x, r)
    else:
        if r.random() < 0.5 * strength + 0.2:  # reverb
            rt60 = float(r.uniform(0.1, 0.3 + 0.5 * strength))
            n = int(rt60 * SAMPLE_RATE_HZ)
            t = np.arange(n) / SAMPLE_RATE_HZ
            rir = (r.standard_normal(n) * np.exp(-6.9 * t / rt60)).astype(np.float32)
            rir[0] = 1.0 / max(float(r.uniform(0.2, 1.0)), 1e-3)  # direct path vs room
            y = fftconvolve(x, rir)[: len(x)]
            x = (y / (np.abs(y).max() + 1e-9) * np.abs(x).max()).astype(np.float32)
        if r.random() < 0.6:  # microphone-like EQ: smooth random gains over frequency (+-9 dB)
            spec = np.fft.rfft(x)
            f = np.linspace(0, 1, len(spec))
            nodes = r.uniform(-9, 9, 6) * strength
            gain_db = np.interp(f, np.linspace(0, 1, 6), nodes)
            x = np.fft.irfft(spec * 10 ** (gain_db / 20), len(x)).astype(np.float32)
        if r.random() < 0.5:  # band limits: 80..400 Hz high-pass, 3.2..7.6 kHz low-pass
            lo = float(r.uniform(80, 400))
            hi = float(r.uniform(3200, 7600))
            sos = butter(4, [lo, hi], btype="band", fs=SAMPLE_RATE_HZ, output="sos")
            x = sosfilt(sos, x).astype(np.float32)
        if r.random() < 0.8:  # noise at 5..40 dB SNR
            snr_db = float(r.uniform(40 - 35 * strength, 40))
            sig = float(np.sqrt(np.mean(x**2)) + 1e-9)
            nz = _noise(len(x), r)
            x = x + nz * sig / (10 ** (snr_db / 20))
    gain_db = float(r.uniform(-24, 6))  # gain, with clipping when too hot
    peak = float(np.abs(x).max() + 1e-9)
    x = x / peak * 0.7 * 10 ** (gain_db / 20)
    return np.clip(x, -1.0, 1.0).astype(np.float32), scale


# -- targets and storage ---------------------------------------------------------------------------------------------

MEL_Q_OFFSET = 12.0  # log-mel -> uint8: round((x + 12) * 16), i.e. -12..+3.9 in steps of 1/16
MEL_Q_STEP = 16.0


def quantize_mel(m: np.ndarray) -> np.ndarray:
    return np.clip(np.round((m + MEL_Q_OFFSET) * MEL_Q_STEP), 0, 255).astype(np.uint8)


def dequantize_mel(q: np.ndarray) -> np.ndarray:
    return q.astype(np.float32) / MEL_Q_STEP - MEL_Q_OFFSET


def _loudness(audio: np.ndarray, n_frames: int) -> np.ndarray:
    from studio.presenter.motion import loudness_envelope

    return loudness_envelope(audio, SAMPLE_RATE_HZ, FPS, n_frames)


def frame_visemes(phones: tuple[PhonemeTiming, ...] | list[PhonemeTiming], n_frames: int) -> np.ndarray:
    """Viseme class at each frame centre (T,) uint8; SIL outside every phone."""
    out = np.zeros(n_frames, np.uint8)
    centres = (np.arange(n_frames) + 0.5) / FPS
    for p in phones:
        a = int(np.searchsorted(centres, p.start_s))
        b = int(np.searchsorted(centres, p.end_s))
        out[a:b] = int(viseme_for_phone(p.phoneme))
    return out


def scale_phones(phones: tuple[PhonemeTiming, ...], scale: float) -> tuple[PhonemeTiming, ...]:
    return tuple(PhonemeTiming(p.phoneme, p.start_s * scale, p.end_s * scale, p.stress) for p in phones)


def clip_features(audio: np.ndarray) -> tuple[np.ndarray, int]:
    """(log-mel with MEL_FRONT_PAD silent frames in front and look-ahead frames behind, n motion frames)."""
    n_frames = len(audio) // SAMPLES_PER_FRAME
    pad_back = np.zeros(LOOKAHEAD_MEL * HOP + 400, np.float32)
    mel = log_mel(np.concatenate([audio, pad_back]))[: n_frames * MEL_PER_FRAME + LOOKAHEAD_MEL]
    front = np.full((MEL_FRONT_PAD, N_MELS), np.log(1e-5), np.float32)
    return np.concatenate([front, mel]), n_frames


def clip_targets(clean: np.ndarray, phones: tuple[PhonemeTiming, ...], n_frames: int) -> tuple[np.ndarray, np.ndarray]:
    """(mouth coefficients T x 5 float32, visemes T uint8) from the engine's phone timings + clean loudness."""
    loud = _loudness(clean, n_frames)
    coeffs = mouth_track(phones, FPS, n_frames, loudness=loud)[:, MOUTH_IDX]
    return coeffs.astype(np.float32), frame_visemes(phones, n_frames)


def _voice_minutes(voices: tuple[str, ...], minutes: float) -> dict[str, float]:
    w = {v: _WEIGHTS.get(v, 1.0) for v in voices}
    tot = sum(w.values())
    return {v: minutes * w[v] / tot for v in voices}


def _make_voice(
    voice: str, minutes: float, copies: int, seed: int, out_dir: Path, labels: str = "aligned", tag: str = "",
    vary_pitch: bool = False, channel: float = 0.0,
) -> dict:
    """Synthesize ~``minutes`` of clean speech with ``voice``, augment ``copies`` times, write one shard (named after
    the voice, plus ``_tag`` when a tag is given: a second batch of a voice with another seed sits beside the first).
    ``labels``: "aligned" = phone timings from pocketsphinx forced alignment of the clean clip to its text (clips that
    do not align are dropped and counted); "aligned+engine" = the same, but a clip that does not align keeps the
    engine's timings (the shard's ``clip_aligned`` flags say which; the trainer can leave them out); "engine" = the
    TTS engine's own timings for every clip."""
    from studio.audio.recognizer import align
    from studio.errors import SpeechError

    r = random.Random(f"{seed}:{voice}")
    g = np.random.default_rng(zlib.crc32(f"{seed}:{voice}".encode()))
    mels, coeffs, vis, starts, nframes = [], [], [], [], []
    clean_s = 0.0
    t0 = time.time()
    aligned = labels.startswith("aligned")
    fallback = labels == "aligned+engine"
    made_s, dropped = 0.0, 0
    flags: list[int] = []

    def text() -> str:
        if voice.startswith("flite:"):  # half news, half other English
            t = " ".join(news_text(r) if r.random() < 0.5 else fortune_text(r) for _ in range(r.randint(1, 3)))
        else:
            t = " ".join(news_text(r) for _ in range(r.randint(1, 3)))
        return spoken_numbers(t) if aligned else t

    while clean_s < minutes * 60:
        if aligned and not fallback and made_s > 60 * max(8 * minutes, 2.0):  # this voice can hardly be aligned: give up
            log.warning("%s: %d of its clips could not be aligned; %.1f min kept", voice, dropped, clean_s / 60)
            break
        if voice.startswith("festival:"):
            clips = _festival([text() for _ in range(8)], voice.split(":", 1)[1])
        elif voice.startswith("kokoro:"):
            clips = [_kokoro(text(), voice, r)]
        elif voice.startswith("flite:"):
            clips = [_flite(text(), voice, r, vary_pitch)]
        else:
            clips = [_studio_tts(text(), voice, r)]
        for clip in clips:
            made_s += len(clip.audio) / SAMPLE_RATE_HZ
            ok = False
            if aligned:
                try:
                    clip = Clip(clip.audio, tuple(align(clip.audio, SAMPLE_RATE_HZ, clip.text)), clip.voice, clip.text)
                    ok = True
                except SpeechError:
                    dropped += 1
                    if not fallback or not clip.phones:  # Kokoro and Flite give no timings here
                        continue
            clean_s += len(clip.audio) / SAMPLE_RATE_HZ
            for c in range(copies):
                strength = 0.0 if (c == 0 and copies > 2) else float(g.uniform(0.3, 1.0))
                aug, scale = augment(clip.audio, g, strength, channel)
                phones = scale_phones(clip.phones, scale)
                clean_scaled = _resample(clip.audio, 100, int(round(100 * scale))) if scale != 1.0 else clip.audio
                mel, n = clip_features(aug)
                co, vi = clip_targets(clean_scaled[: len(aug)], phones, n)
                mels.append(quantize_mel(mel))
                coeffs.append(co.astype(np.float16))
                vis.append(vi)
                nframes.append(n)
                flags.append(int(ok))
    offsets = np.cumsum([0] + [len(m) for m in mels])
    foffsets = np.cumsum([0] + nframes)
    name = voice.replace(":", "_") + (f"_{tag}" if tag else "")  # the info names the batch as voice#tag
    if mels:  # a voice none of whose clips aligned leaves no shard (its info says so)
        np.savez_compressed(
            out_dir / f"{name}.npz", mel=np.concatenate(mels), mel_offsets=offsets, coeffs=np.concatenate(coeffs),
            vis=np.concatenate(vis), frame_offsets=foffsets, clip_aligned=np.array(flags, np.uint8),
        )
    info = {"voice": voice + (f"#{tag}" if tag else ""), "labels": labels, "clean_minutes": clean_s / 60,
            "copies": copies, "clips": len(nframes), "clips_not_aligned": dropped, "minutes_synthesized": made_s / 60,
            "frames": int(foffsets[-1]), "gen_s": time.time() - t0}
    log.info("%s", info)
    return info


def _worker(args: tuple[str, float, int, int, str, str, str, bool, float]) -> dict:
    voice, minutes, copies, seed, out, labels, tag, vary_pitch, channel = args
    logging.basicConfig(level=logging.INFO)
    return _make_voice(voice, minutes, copies, seed, Path(out), labels, tag, vary_pitch, channel)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="make the audio-to-motion training set (see module docstring)")
    p.add_argument("--out", type=Path, default=Path("data/a2m"))
    p.add_argument("--minutes", type=float, default=40.0, help="clean training minutes over all training voices")
    p.add_argument("--val-minutes", type=float, default=8.0)
    p.add_argument("--copies", type=int, default=2, help="augmented copies of each clean clip")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--labels", choices=("aligned", "aligned+engine", "engine"), default="aligned",
                   help="targets from pocketsphinx forced alignment (the reference convention of the human-speech "
                        "evaluation) or from the TTS engines' own timings (the first shipped weights)")
    p.add_argument("--voices", choices=("base", "kokoro", "flite"), default="base",
                   help="base: Piper, eSpeak NG and Festival (a new folder); kokoro / flite: add the Kokoro or Flite "
                        "voices to an existing folder (aligned labels only; --minutes / --val-minutes are theirs)")
    p.add_argument("--only", default="", help="comma-separated voices of that set to make (e.g. kokoro:blend); "
                   "--minutes are shared among them as if the others were made too")
    p.add_argument("--tag", default="", help="suffix for the shard names (another batch of the same voices with "
                   "another --seed, kept beside the first)")
    p.add_argument("--flite-pitch", action="store_true", help="Flite voices at random mean F0 and F0 spread")
    p.add_argument("--channel", type=float, default=0.0, help="share of augmented copies that go through a realistic "
                   "channel (room, microphone / phone line, music or noise bed, codec: studio.neural.training.channel) "
                   "instead of the generic augmentation (0 = off, the recipe of the shipped weights)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    (args.out / "train").mkdir(parents=True, exist_ok=True)
    (args.out / "val").mkdir(parents=True, exist_ok=True)
    train_v, val_v = {"base": (TRAIN_VOICES, VAL_VOICES), "kokoro": (KOKORO_TRAIN, KOKORO_VAL),
                      "flite": (FLITE_TRAIN, ())}[args.voices]
    labels = args.labels if args.voices == "base" else "aligned"
    jobs = [(v, m, args.copies, args.seed, str(args.out / "train"), labels, args.tag, args.flite_pitch, args.channel)
            for v, m in _voice_minutes(train_v, args.minutes).items()]
    val = _voice_minutes(val_v, args.val_minutes)
    jobs += [(v, m, 1, args.seed, str(args.out / "val"), labels, args.tag, args.flite_pitch, args.channel)
             for v, m in val.items()]
    only = {v for v in args.only.split(",") if v}
    if unknown := only - {j[0] for j in jobs}:
        p.error(f"--only: not voices of --voices {args.voices}: {sorted(unknown)}")
    jobs = [j for j in jobs if not only or j[0] in only]
    jobs.sort(key=lambda j: -j[1] * (20 if j[0].startswith(("piper", "kokoro")) else 1))  # slowest first
    from multiprocessing import get_context

    with get_context("spawn").Pool(args.jobs) as pool:
        infos = pool.map(_worker, jobs, chunksize=1)
    recipe = args.out / "recipe.json"
    with (args.out / ".recipe.lock").open("w") as lock:  # two runs adding voices to one folder may end together
        fcntl.flock(lock, fcntl.LOCK_EX)
        if args.voices == "base":
            summary = {"seed": args.seed, "fps": FPS, "labels": args.labels, "train_voices": list(train_v),
                       "val_voices": list(val_v), "copies": args.copies, "voices": infos}
        else:  # add to the folder's recipe (a new one when the folder has none)
            summary = json.loads(recipe.read_text()) if recipe.is_file() else {
                "fps": FPS, "train_voices": [], "val_voices": [], "voices": []}
            summary["train_voices"] = [v for v in summary["train_voices"] if v not in train_v] + list(train_v)
            summary["val_voices"] = [v for v in summary["val_voices"] if v not in val_v] + list(val_v)
            mine = {i["voice"] for i in infos}
            summary["voices"] = [i for i in summary["voices"] if i["voice"] not in mine] + infos
            summary.setdefault("added", []).append({"voices": args.voices, "minutes": args.minutes,
                                                    "val_minutes": args.val_minutes, "copies": args.copies,
                                                    "seed": args.seed, "labels": labels, "only": sorted(only),
                                                    "tag": args.tag, "flite_pitch": args.flite_pitch,
                                                    "channel": args.channel})
        recipe.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
