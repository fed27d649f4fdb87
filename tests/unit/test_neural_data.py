"""The data recipe's text side: numbers spoken as words, so what the TTS says is what the forced aligner is given."""

from __future__ import annotations

import random

import pytest

from studio.audio.recognizer import _WORD_RE
from studio.neural.training.data import news_text, spoken_numbers


@pytest.mark.parametrize("text, spoken", [
    ("Shares rose 4.7 percent.", "Shares rose four point seven percent."),
    ("on September 12th", "on September twelfth"),
    ("wait until 1991?", "wait until nineteen ninety one?"),
    ("cost 9,163 pounds", "cost nine thousand one hundred and sixty three pounds"),
    ("highs of 27 degrees by 7 am.", "highs of twenty seven degrees by seven in the morning."),
    ("at 9 o'clock", "at nine o'clock"),
])
def test_numbers_are_spoken(text: str, spoken: str) -> None:
    assert spoken_numbers(text) == spoken


def test_no_digits_left_in_the_recipe_text() -> None:
    r = random.Random(7)
    for _ in range(300):
        words = _WORD_RE.findall(spoken_numbers(news_text(r)).lower())
        assert words and not any(ch.isdigit() for w in words for ch in w)


def test_trainer_can_keep_only_the_aligned_clips(tmp_path) -> None:
    import numpy as np

    from studio.neural.training.train import Shards

    mel = np.zeros((2 * 16, 40), np.uint8)
    np.savez(tmp_path / "v.npz", mel=mel, mel_offsets=np.array([0, 16, 32]), coeffs=np.zeros((4, 5), np.float16),
             vis=np.zeros(4, np.uint8), frame_offsets=np.array([0, 2, 4]), clip_aligned=np.array([0, 1], np.uint8))
    assert len(Shards(tmp_path).clips) == 2
    assert len(Shards(tmp_path, aligned_only=True).clips) == 1


@pytest.mark.parametrize("ipa, kokoro", [
    ("tʃˈeɪndʒ", "ʧˈAnʤ"),  # affricates and diphthongs are one symbol each
    ("mɚɹˈiːʲə", "məɹˈiə"),  # r-coloured schwa before ɹ, no palatal glide, no length marks
    ("nˈaʊ bˈɔɪ ɡˈoʊ", "nˈW bˈY ɡˈO"),
])
def test_espeak_ipa_becomes_kokoro_symbols(ipa: str, kokoro: str) -> None:
    from studio.neural.training.kokoro import to_kokoro

    assert to_kokoro(ipa) == kokoro


def test_held_out_kokoro_voice_never_trains() -> None:
    from studio.neural.training.data import KOKORO_TRAIN, KOKORO_VAL
    from studio.neural.training.kokoro import VOICES

    assert not set(KOKORO_TRAIN) & set(KOKORO_VAL)
    assert {v.split(":")[1] for v in KOKORO_TRAIN + KOKORO_VAL} - {"blend"} == set(VOICES)


def test_selection_can_use_some_held_out_voices_only(tmp_path) -> None:
    import numpy as np

    from studio.neural.training.train import Shards

    for name in ("kokoro_jf_tebukuro", "espeak_en-029"):
        np.savez(tmp_path / f"{name}.npz", mel=np.zeros((16, 40), np.uint8), mel_offsets=np.array([0, 16]),
                 coeffs=np.zeros((2, 5), np.float16), vis=np.zeros(2, np.uint8), frame_offsets=np.array([0, 2]))
    assert Shards(tmp_path, prefix="kokoro").voices == ["kokoro_jf_tebukuro"]
    assert len(Shards(tmp_path).clips) == 2


def test_fortune_sentences_are_plain_known_words_and_never_the_evaluation_text(tmp_path, monkeypatch) -> None:
    from studio.neural.training import data

    (tmp_path / "wisdom").write_text(
        "A penny saved is a penny earned by the careful.\n"
        "\t\t-- Benjamin Franklin\n%\n"
        "It was the best of times for the farmers of the valley.\n%\n"  # four words of the Dickens clip: out
        "The zyxwvut of the dog was quite remarkable today.\n%\n"  # a word the aligner does not know: out
        "Too short.\n%\n"
        "Call 555 1234 now for a free gift today.\n",  # digits: out
        encoding="utf-8")
    monkeypatch.setattr(data, "FORTUNE_DIR", tmp_path)
    data.fortune_sentences.cache_clear()
    try:
        assert data.fortune_sentences() == ("A penny saved is a penny earned by the careful.",)
        assert data.fortune_text(random.Random(0)) == "A penny saved is a penny earned by the careful."
    finally:
        data.fortune_sentences.cache_clear()


def test_flite_and_excluded_voices_never_leave_the_training_side(tmp_path) -> None:
    import numpy as np

    from studio.neural.training.data import FLITE_TRAIN, VAL_VOICES
    from studio.neural.training.train import Shards

    assert not set(FLITE_TRAIN) & set(VAL_VOICES)
    for name in ("kokoro_jf_alpha", "flite_awb"):
        np.savez(tmp_path / f"{name}.npz", mel=np.zeros((16, 40), np.uint8), mel_offsets=np.array([0, 16]),
                 coeffs=np.zeros((2, 5), np.float16), vis=np.zeros(2, np.uint8), frame_offsets=np.array([0, 2]))
    assert set(Shards(tmp_path, exclude=("kokoro",)).voices) == {"flite_awb"}


def test_fine_tuning_starts_from_the_given_weights(tmp_path) -> None:
    """``--init``: the given weights' configuration and values are where training starts (no step taken here)."""
    import numpy as np
    import torch

    from studio.neural.model import Audio2Motion
    from studio.neural.training.train import CONFIGS, load_weights, save_weights, train

    rng = np.random.default_rng(0)
    for side in ("train", "val"):
        (tmp_path / side).mkdir()
        t = 40
        np.savez(tmp_path / side / "v.npz", mel=rng.integers(0, 255, (8 + 4 * t + 4, 40), dtype=np.uint8),
                 mel_offsets=np.array([0, 8 + 4 * t + 4]), coeffs=rng.random((t, 5)).astype(np.float16),
                 vis=rng.integers(0, 16, t, dtype=np.uint8), frame_offsets=np.array([0, t]))
    torch.manual_seed(5)
    start = Audio2Motion(CONFIGS["small"])
    save_weights(start, tmp_path / "start.pt", {})
    m = train(tmp_path, tmp_path / "out", "full", 0.0, "cpu", 2, 1e-3, 0, init=tmp_path / "start.pt")
    assert m["model"]["d_model"] == CONFIGS["small"].d_model and m["steps"] == 0
    got = load_weights(tmp_path / "out" / "audio2motion.pt").state_dict()
    want = load_weights(tmp_path / "start.pt").state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_only_names_voices_of_the_chosen_set(tmp_path, capsys) -> None:
    from studio.neural.training import data

    with pytest.raises(SystemExit) as e:
        data.main(["--out", str(tmp_path), "--voices", "flite", "--only", "kokoro:blend"])
    assert e.value.code == 2
    assert "kokoro:blend" in capsys.readouterr().err


def _median_f0(audio, sr: int) -> float:
    import numpy as np

    f0 = []
    for i in range(0, len(audio) - 1024, 256):
        fr = audio[i : i + 1024]
        if np.sqrt((fr**2).mean()) < 0.03:
            continue
        ac = np.correlate(fr, fr, "full")[1023:]
        lo, hi = sr // 400, sr // 60
        k = lo + int(np.argmax(ac[lo:hi]))
        if ac[k] > 0.4 * ac[0]:
            f0.append(sr / k)
    return float(np.median(f0))


@pytest.mark.skipif(__import__("shutil").which("flite") is None, reason="needs Debian flite (training-deps.sh)")
def test_flite_pitch_option_moves_the_voice_f0(monkeypatch) -> None:
    from studio.audio.features import SAMPLE_RATE_HZ
    from studio.neural.training import data

    text = "The city council approved a new bridge on Monday morning"
    f0 = {}
    for hz in (100.0, 220.0):
        monkeypatch.setitem(data.FLITE_F0, "slt", (hz, hz))
        f0[hz] = _median_f0(data._flite(text, "flite:slt", random.Random(0), vary_pitch=True).audio, SAMPLE_RATE_HZ)
    assert 85 < f0[100.0] < 120 and 190 < f0[220.0] < 250, f0


def test_breaths_and_noise_floor_touch_only_what_they_should() -> None:
    """Training-time augmentation: breaths only in silent motion frames; the floor lifts the pauses, not the speech."""
    import numpy as np

    from studio.neural.training.train import LEFT_CTX, SILENCE_LOG, add_breaths, add_floor

    rng = np.random.default_rng(0)
    vis = np.array([0] * 10 + [5] * 20 + [0] * 12 + [9] * 8, np.int64)  # silence, speech, silence, speech
    seg = np.full((LEFT_CTX + 4 * len(vis) + 4, 40), SILENCE_LOG, np.float32)
    speech_rows = LEFT_CTX + 4 * np.flatnonzero(vis != 0)[:, None] + np.arange(4)
    seg[speech_rows.ravel()] = rng.uniform(-2.0, 2.0, (speech_rows.size, 40))
    b = seg.copy()
    add_breaths(b, vis, rng, p=1.0)
    changed = np.abs(b - seg)[LEFT_CTX : LEFT_CTX + 4 * len(vis)].max(1).reshape(len(vis), 4).max(1) > 1e-6
    assert np.isfinite(b).all() and changed.any() and not (changed & (vis != 0)).any()
    f = seg.copy()
    add_floor(f, vis, rng)
    pause, speech = LEFT_CTX + 4 * 35, speech_rows.ravel()
    assert f[pause].mean() > seg[pause].mean() + 5  # pauses were at the log-mel floor: 12-35 dB below speech now
    assert np.abs(f[speech] - seg[speech]).mean() < 0.15  # speech barely changes (< 0.7 dB on average)
    assert (f >= seg - 1e-5).all()


def test_prefetched_batches_are_the_batches_in_order_and_errors_reach_the_trainer() -> None:
    """The training loop takes its batches from a background thread: the same batches, in the same order, as making
    them in the loop with the same seed; a failure while making one is raised in the loop, not lost in the thread."""
    import numpy as np

    from studio.neural.training.train import Prefetcher

    def maker(seed: int):
        rng = np.random.default_rng(seed)
        return lambda: {"x": rng.normal(size=(4, 3))}

    direct = maker(5)
    want = [direct()["x"] for _ in range(6)]
    feed = Prefetcher(maker(5), depth=2)
    try:
        got = [feed.next()["x"] for _ in range(6)]
    finally:
        feed.close()
    assert all(np.array_equal(a, b) for a, b in zip(want, got))

    calls = iter(range(3))

    def failing():
        if next(calls) == 2:
            raise FileNotFoundError("shard gone")
        return {"x": 0}

    feed = Prefetcher(failing, depth=1)
    try:
        assert feed.next() == {"x": 0} and feed.next() == {"x": 0}
        with pytest.raises(FileNotFoundError, match="shard gone"):
            feed.next()
    finally:
        feed.close()


def test_average_of_weights_is_their_mean_and_needs_one_configuration(tmp_path) -> None:
    import torch

    from studio.errors import ModelLoadError
    from studio.neural.model import Audio2Motion
    from studio.neural.training.train import CONFIGS, average_weights, read_weights, save_weights

    paths = []
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        paths.append(tmp_path / f"w{seed}.pt")
        save_weights(Audio2Motion(CONFIGS["small"]), paths[-1], {})
    info = average_weights(paths, tmp_path / "soup" / "audio2motion.pt")
    assert info["average_of"] == [str(p) for p in paths]
    cfg, got = read_weights(tmp_path / "soup" / "audio2motion.pt")
    assert cfg == CONFIGS["small"]
    states = [read_weights(p)[1] for p in paths]
    for k, v in got.items():
        want = sum(s[k] for s in states) / 3
        assert torch.allclose(v, want, atol=2e-3, rtol=1e-3), k  # saved as fp16
    assert any(not torch.allclose(got[k], states[0][k]) for k in got)  # not just the first one
    save_weights(Audio2Motion(CONFIGS["medium"]), tmp_path / "other.pt", {})
    with pytest.raises(ModelLoadError, match="one configuration"):
        average_weights([paths[0], tmp_path / "other.pt"], tmp_path / "bad.pt")
