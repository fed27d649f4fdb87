"""Model shapes and causality: the output at frame t ignores audio after t + the stated look-ahead, with and without
the VAD gate; the gate rests the mouth where Silero hears no speech and nowhere else."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from studio.neural.engine import NeuralMotionEngine
from studio.neural.model import LOOKAHEAD_MS, Audio2Motion, ModelConfig
from studio.neural.settings import Backend, NeuralSettings


def _tiny() -> Audio2Motion:
    torch.manual_seed(1)
    return Audio2Motion(ModelConfig(enc_channels=16, d_model=32, n_layers=2, n_heads=2, window=8, dropout=0.0)).eval()


def test_shapes_and_ranges() -> None:
    m = _tiny()
    with torch.no_grad():
        y, logits = m(torch.randn(2, 4 * 12 + 4, 40), torch.rand(2, 12, 5))
    assert y.shape == (2, 12, 5) and logits.shape == (2, 12, 16)
    assert float(y.min()) >= 0 and float(y.max()) <= 1


def test_lookahead_is_at_most_80_ms() -> None:
    assert LOOKAHEAD_MS <= 80


def _engine(vad_gate: bool = False) -> NeuralMotionEngine:
    return NeuralMotionEngine(NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0, vad_gate=vad_gate),
                              model=_tiny())


def test_engine_output_is_causal_up_to_the_lookahead() -> None:
    eng = _engine()
    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(16000 * 2)).astype(np.float32)
    base = eng.motion(audio).mouth
    t = 20  # frame 20: centre at 820 ms; it may see audio up to 820 + LOOKAHEAD_MS
    cut = int((t + 0.5) / 25 * 16000 + LOOKAHEAD_MS / 1000 * 16000)
    changed = audio.copy()
    changed[cut:] = rng.standard_normal(len(audio) - cut).astype(np.float32)
    other = eng.motion(changed).mouth
    assert np.array_equal(base[: t + 1], other[: t + 1])
    assert not np.allclose(base[t + 2 :], other[t + 2 :])  # later frames do see it


def test_streaming_in_chunks_equals_offline() -> None:
    eng = _engine()
    audio = (0.1 * np.random.default_rng(3).standard_normal(16000)).astype(np.float32)
    whole = eng.motion(audio).mouth
    s = eng.session()
    parts = [s.push(audio[i:i + 777])[0] for i in range(0, len(audio), 777)] + [s.flush()[0]]
    assert np.allclose(np.concatenate(parts), whole, atol=1e-6)
    assert len(whole) == 25


ALSA_CLIP = Path("/usr/share/sounds/alsa/Front_Center.wav")  # a human voice (alsa-utils, installers/setup.sh)


def _speech_in_noise() -> np.ndarray:
    """0.6 s of a quiet room (-50 dBFS noise), "Front Center" spoken, 0.6 s of room again (16 kHz)."""
    if not ALSA_CLIP.exists():
        pytest.skip("alsa-utils sound clips not installed")
    from studio.audio.io import load_audio_file

    voice, rate = load_audio_file(ALSA_CLIP)
    assert rate == 16000
    room = (0.003 * np.random.default_rng(5).standard_normal(int(0.6 * rate))).astype(np.float32)
    return np.concatenate([room, voice + 0.003 * np.random.default_rng(6).standard_normal(len(voice)), room]
                          ).astype(np.float32)


def test_vad_gate_rests_the_mouth_in_the_room_noise_not_in_the_speech() -> None:
    audio = _speech_in_noise()
    gated, free = _engine(vad_gate=True).motion(audio), _engine().motion(audio)
    rest = np.all(gated.mouth == 0.0, axis=1) & (gated.visemes == 0)
    room = np.r_[np.arange(0, 12), np.arange(len(rest) - 12, len(rest) - 2)]  # well inside the noise, both ends
    assert rest[room].all()  # the noise: at rest
    speech = slice(20, len(rest) - 20)
    assert (~rest[speech]).mean() > 0.6  # the words move the mouth
    assert not np.allclose(free.mouth[room], 0.0)  # the random tiny model would move the mouth there (the test bites)


def test_vad_gate_is_causal_up_to_the_lookahead_and_streams_like_offline() -> None:
    eng = _engine(vad_gate=True)
    audio = _speech_in_noise()
    base = eng.motion(audio)
    for t in (15, 30, 45):  # in the room noise before the words, in the words, at their end
        cut = int((t + 0.5) / 25 * 16000 + LOOKAHEAD_MS / 1000 * 16000)
        changed = audio.copy()
        changed[cut:] = 0.3 * np.sin(np.arange(len(audio) - cut) * 0.07)  # loud, voiced-looking
        assert np.array_equal(base.mouth[: t + 1], eng.motion(changed).mouth[: t + 1])
    s = eng.session()
    parts = [s.push(audio[i:i + 333])[0] for i in range(0, len(audio), 333)] + [s.flush()[0]]
    # the same numbers by construction: a frame's log-mel does not depend on the chunking (no BLAS batch shapes)
    assert np.array_equal(np.concatenate(parts), base.mouth)
    assert 0 < s.frames_gated < len(base.mouth)


def test_log_mel_of_a_stream_is_the_log_mel_of_the_file_whatever_the_chunks() -> None:
    """Bit for bit, for any chunking: the mel projection sums each frame in one fixed order (a matrix product's order
    depends on the batch's shape and the BLAS kernel: 1-2 ulp apart, which the INT8 KV cache can turn into 2e-5)."""
    from studio.audio.features import StreamingLogMel, log_mel, mel_filterbank

    audio = _speech_in_noise()
    whole = log_mel(audio)
    for step in (1, 100, 333, 640, 4096):
        s = StreamingLogMel()
        parts = [s.push(audio[i:i + step]) for i in range(0, len(audio), step)]
        assert np.array_equal(np.concatenate(parts), whole), step
    spec = np.abs(np.fft.rfft(audio[:400 * 50].reshape(50, 400), n=512, axis=1)).astype(np.float32) ** 2
    from studio.audio.features import _mel_energies

    ref = spec.astype(np.float64) @ mel_filterbank().T.astype(np.float64)
    assert np.abs(_mel_energies(spec) - ref).max() <= 1e-6 * np.abs(ref).max()  # the projection, to float rounding


def test_sieves_sharing_one_silero_model_decide_like_separate_ones() -> None:
    from studio.audio.settings import SieveSettings
    from studio.audio.sieve import SilenceSieve

    audio = _speech_in_noise()
    st = SieveSettings(rms_gate_dbfs=float("-inf"), hangover_ms=0.0)
    first = SilenceSieve(st)
    a, b = SilenceSieve(st, share_model_of=first), SilenceSieve(st)
    da = [a.process(audio[i:i + 512]) for i in range(0, len(audio) - 511, 512)]
    first.process(audio[:5000])  # another stream on the shared model in between keeps its own state
    db = [b.process(audio[i:i + 512]) for i in range(0, len(audio) - 511, 512)]
    assert da == db and any(da) and not all(da)


def _tiny_seed(seed: int) -> Audio2Motion:
    torch.manual_seed(seed)
    return Audio2Motion(ModelConfig(enc_channels=16, d_model=32, n_layers=2, n_heads=2, window=8, dropout=0.0)).eval()


def test_ensemble_step_is_the_mean_of_its_members_on_one_stacked_cache() -> None:
    """Members get the same previous frame; out come their mean coefficients and mean log-probabilities, and each
    member's part of the stacked cache is what it would hold alone."""
    from studio.neural.kvcache import CacheDType
    from studio.neural.model import Audio2MotionEnsemble, StepGraph

    members = [_tiny_seed(1), _tiny_seed(2), _tiny_seed(3)]
    ens = Audio2MotionEnsemble(members).eval()
    assert ens.n_members == 3 and ens.cfg.n_layers == 6 and ens.cfg.enc_channels == 48
    mel = torch.randn(1, 4 * 12 + 4, 40) - 5
    g, gm = StepGraph(ens), [StepGraph(m) for m in members]
    st = ens.empty_state(CacheDType.INT8).tensors()
    sts = [m.empty_state(CacheDType.INT8).tensors() for m in members]
    enc = ens.encoder(mel)[0]  # T x 48
    encs = [m.encoder(mel)[0] for m in members]
    assert torch.allclose(enc, torch.cat(encs, -1))
    prev = torch.zeros(5)
    with torch.no_grad():
        for t in range(12):  # past the window of 8: eviction into the summary too
            sl = slice(4 * t, 4 * t + 8)
            out = g(enc[sl], prev, *st)
            outs = [gm[i](encs[i][sl], prev, *sts[i]) for i in range(3)]
            assert torch.allclose(out[0], torch.stack([o[0] for o in outs]).mean(0), atol=1e-6)
            lp = torch.stack([torch.log_softmax(o[1], -1) for o in outs]).mean(0)
            assert torch.allclose(out[1], lp, atol=1e-5)
            st, sts = out[2:], [o[2:] for o in outs]
            for j in range(6):  # per-layer tensors: member i on layers 2i, 2i + 1
                assert torch.equal(st[j], torch.cat([s[j] for s in sts]))
            prev = out[0]
    y, logits = ens(mel, torch.rand(1, 12, 5))  # the parallel form (bench baseline) averages the same way
    assert y.shape == (1, 12, 5) and logits.shape == (1, 12, 16)
    from studio.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="one configuration"):
        Audio2MotionEnsemble([_tiny_seed(1), Audio2Motion(ModelConfig(enc_channels=8, d_model=32, n_layers=2,
                                                                      n_heads=2, window=8))])


def test_ensemble_weights_file_round_trip_and_errors(tmp_path: Path) -> None:
    from studio.errors import ModelLoadError
    from studio.neural.model import Audio2MotionEnsemble
    from studio.neural.training.train import CONFIGS, ensemble_weights, load_weights, read_weights, save_weights

    paths = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        paths.append(tmp_path / f"w{seed}.pt")
        save_weights(Audio2Motion(CONFIGS["small"]), paths[-1], {})
    info = ensemble_weights(paths, tmp_path / "ens" / "audio2motion.pt")
    assert info["ensemble_of"] == [str(p) for p in paths]
    ens = load_weights(tmp_path / "ens" / "audio2motion.pt")
    assert isinstance(ens, Audio2MotionEnsemble) and ens.n_members == 2
    for i, p in enumerate(paths):
        want = load_weights(p).state_dict()
        got = {**{f"motion.{k}": v for k, v in ens.motion.members[i].state_dict().items()},
               **{f"encoder.{k}": v for k, v in ens.encoder.encoders[i].state_dict().items()}}
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    with pytest.raises(ModelLoadError, match="ensemble"):
        read_weights(tmp_path / "ens" / "audio2motion.pt")  # not a starting point for training
    with pytest.raises(ModelLoadError, match="another"):
        ensemble_weights([paths[0], tmp_path / "ens" / "audio2motion.pt"], tmp_path / "bad.pt")
    save_weights(Audio2Motion(CONFIGS["medium"]), tmp_path / "other.pt", {})
    with pytest.raises(ModelLoadError, match="one configuration"):
        ensemble_weights([paths[0], tmp_path / "other.pt"], tmp_path / "bad.pt")
    with pytest.raises(ModelLoadError, match="two"):
        ensemble_weights(paths[:1], tmp_path / "bad.pt")


def test_engine_streams_an_ensemble_through_torch_and_onnx_alike(tmp_path: Path) -> None:
    from studio.neural.export import export
    from studio.neural.model import Audio2MotionEnsemble

    ens = Audio2MotionEnsemble([_tiny_seed(1), _tiny_seed(2)]).eval()
    a = NeuralMotionEngine(NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0, vad_gate=False), model=ens)
    export(ens, tmp_path)
    b = NeuralMotionEngine(NeuralSettings(backend=Backend.ONNX, onnx_dir=tmp_path, fingerprint_capacity=0,
                                          vad_gate=False), model=ens)
    audio = (0.1 * np.random.default_rng(5).standard_normal(16000)).astype(np.float32)
    x, y = a.motion(audio), b.motion(audio)
    assert x.mouth.shape == (25, 5) and np.abs(x.mouth - y.mouth).max() < 0.02
    assert (x.visemes == y.visemes).mean() > 0.9
    one = NeuralMotionEngine(NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0), model=_tiny_seed(1))
    assert a.session().cache_nbytes() == 2 * one.session().cache_nbytes() - 8  # count and n_valid are shared


def test_pbm_closure_closes_the_lips_on_pbm_frames_only_and_leaves_the_model_alone() -> None:
    """Frames the viseme head calls p/b/m come out with LIP_PART 0; everything else (the other coefficients, the
    visemes, and so the model's own feedback) is what the engine gives without it."""
    from dataclasses import replace

    from studio.speech.visemes import Viseme

    m, k = _tiny(), int(Viseme.PBM)
    base = NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0, vad_gate=False, pbm_closure=False,
                          pbm_threshold=0.0)  # the top viseme alone
    audio = (0.1 * np.random.default_rng(8).standard_normal(16000 * 2)).astype(np.float32)
    lp = np.log(NeuralMotionEngine(base, model=m).motion(audio).viseme_probs)
    with torch.no_grad():  # p/b/m's logit raised by the median gap to the best class: it wins on about half the frames
        m.motion.vis_head.bias[k] += float(np.median(np.delete(lp, k, axis=1).max(1) - lp[:, k]))
    off = NeuralMotionEngine(base, model=m).motion(audio)
    on = NeuralMotionEngine(replace(base, pbm_closure=True), model=m).motion(audio)
    pbm = off.visemes == int(Viseme.PBM)
    assert 0 < pbm.sum() < len(pbm)
    assert np.array_equal(on.visemes, off.visemes)
    assert np.all(on.mouth[pbm, 1] == 0.0) and np.all(off.mouth[pbm, 1] > 0.0)
    assert np.array_equal(on.mouth[~pbm], off.mouth[~pbm])
    assert np.array_equal(np.delete(on.mouth, 1, axis=1), np.delete(off.mouth, 1, axis=1))


def test_pbm_threshold_closes_where_pbm_is_likely_as_the_evaluation_simulates_it() -> None:
    """With ``pbm_threshold`` the lips also close where P(p/b/m) reaches it; the engine gives exactly what
    ``evaluate.close_lips`` makes of a run without closure (the sweep that chose the threshold scored that)."""
    from dataclasses import replace

    from studio.neural.training.evaluate import close_lips
    from studio.speech.visemes import Viseme

    m, k = _tiny(), int(Viseme.PBM)
    base = NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0, vad_gate=False, pbm_closure=False)
    audio = (0.1 * np.random.default_rng(9).standard_normal(16000 * 2)).astype(np.float32)
    off = NeuralMotionEngine(base, model=m).motion(audio)
    tau = float(np.quantile(off.viseme_probs[:, k], 0.7))  # about 30 % of the frames reach it
    on = NeuralMotionEngine(replace(base, pbm_closure=True, pbm_threshold=tau), model=m).motion(audio)
    likely = off.viseme_probs[:, k] >= tau
    assert 0 < likely.sum() < len(likely) and np.all(on.mouth[likely, 1] == 0.0)
    expected = close_lips(off.mouth[:, 1], off.visemes, off.viseme_probs, np.array([len(off.visemes)]), tau, 0)
    assert np.array_equal(on.mouth[:, 1], expected)
    assert np.array_equal(on.visemes, off.visemes)


def test_an_ensembles_members_come_out_as_weights_files_that_rebuild_it(tmp_path: Path) -> None:
    from studio.errors import ModelLoadError
    from studio.neural.training.train import ensemble_members, ensemble_weights
    from studio.neural.weights import load_weights, save_weights

    singles = []
    for seed in (1, 2):
        singles.append(tmp_path / f"s{seed}.pt")
        save_weights(_tiny_seed(seed), singles[-1], {})
    ensemble_weights(singles, tmp_path / "ens.pt")
    members = ensemble_members(tmp_path / "ens.pt", tmp_path / "members")
    assert [m.name for m in members] == ["member0.pt", "member1.pt"]
    for single, member in zip(singles, members):
        a, b = load_weights(single).state_dict(), load_weights(member).state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ModelLoadError):
        ensemble_members(singles[0], tmp_path / "none")


def test_a_long_recording_is_streamed_and_matches_the_whole_track() -> None:
    """The program's neural mouth track is computed as far as the frames asked for (a long file starts at once, with
    true progress), and each row equals the whole track resampled to the output rate."""
    from studio.pipeline.motion import ProgramMotion, _NeuralTrack
    from studio.contracts import ProgramFormat
    from studio.pipeline.sources import ProgramSource, item_from_audio

    eng = _engine()
    rng = np.random.default_rng(3)
    audio = (0.1 * rng.standard_normal(16000 * 12)).astype(np.float32)
    fps = 30
    item = item_from_audio(np.zeros(48000 * 12, np.float32), 48000, audio)
    source = ProgramSource([item])
    fmt = ProgramFormat(width=64, height=64, fps=fps)
    source.open(fmt)
    motion = ProgramMotion()
    motion._neural = eng
    motion.open(fmt)
    pushed: list[int] = []
    track = motion._track(item, frozenset())
    assert isinstance(track, _NeuralTrack)
    push = track.session.push
    track.session.push = lambda x: (pushed.append(len(x)), push(x))[1]
    first = track.row(0, motion).copy()
    assert sum(pushed) <= _NeuralTrack.BLOCK_SAMPLES  # the first frame did not wait for the whole file
    rows = np.stack([track.row(r, motion) for r in range(item.n_slots)])
    from studio.neural.engine import NeuralMotion

    ref = eng.session(fingerprints=False, kv_cache=False)  # the plain core's options, the whole file at once
    m1, v1 = ref.push(audio)
    m2, v2 = ref.flush()
    model = NeuralMotion(np.concatenate([m1, m2]), np.concatenate([v1, v2]))
    whole = model.resample(fps, item.n_slots)
    assert np.array_equal(first, whole[0])
    assert np.allclose(rows, whole, rtol=0, atol=1e-6), float(np.abs(rows - whole).max())
    assert motion._model_frames == len(model.mouth)
