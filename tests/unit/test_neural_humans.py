"""The human-speech evaluation set: transcripts as the words said, a fixed split, the Asterisk transcript file read
the way the Debian package lays it out (a fake package folder made here)."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest

from studio.neural.training import humans


def test_prompts_become_the_words_said():
    assert humans._spoken("Press 1, or # to exit. [beep]") == "Press one, or pound to exit."
    assert humans._spoken("Call-Forward on Busy (pause)") == "Call Forward on Busy"
    assert humans._spoken("Press * then 25") == "Press star then twenty five"


def test_the_split_is_the_crc_of_the_key():
    keys = [f"asterisk:prompt-{i}" for i in range(200)]
    splits = [humans._split_of(k) for k in keys]
    assert set(splits) == {"validation", "test"}
    for k, s in zip(keys, splits):
        assert (s == "validation") == (zlib.crc32(k.encode()) % 2 == 0)


def test_asterisk_prompts_are_read_from_the_package_layout(tmp_path, monkeypatch):
    sounds = tmp_path / "sounds"
    sounds.mkdir()
    (sounds / "digits").mkdir()
    for name in ("auth-thankyou", "digits/7", "beep", "vm-nonsense"):
        (sounds / f"{name}.g722").write_bytes(b"\0" * 64)
    text = tmp_path / "core-sounds-en.txt.gz"
    with gzip.open(text, "wt") as f:
        f.write("; Core Asterisk Sounds in English\n\nauth-thankyou: Thank you.\ndigits/7: 7\n"
                "beep: [this is a simple beep tone]\nvm-nonsense: Zzyzxq blorft.\nmissing-file: Hello.\n")
    monkeypatch.setattr(humans, "ASTERISK_DIR", sounds)
    monkeypatch.setattr(humans, "ASTERISK_TEXT", text)
    clips = {c.key: c for c in humans._asterisk_clips()}
    # Tones, words the aligner does not know and prompts without a file are left out.
    assert set(clips) == {"asterisk:auth-thankyou", "asterisk:digits/7"}
    assert clips["asterisk:digits/7"].text == "seven"
    assert clips["asterisk:auth-thankyou"].speaker == "allison (f)"
    assert all(c.split == humans._split_of(c.key) for c in clips.values())


@pytest.mark.parametrize("f0", [110.0, 210.0])
def test_median_f0_tells_a_low_voice_from_a_high_one(f0):
    rate = 16000
    t = np.arange(rate) / rate
    x = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8))
    assert abs(humans.median_f0_hz(x, rate) - f0) < 0.05 * f0
