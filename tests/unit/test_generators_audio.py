"""The engines' audio encoders: the features' framing, the slicing per slot, the cache, and the loaders."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from _engine_fixtures import EXTRA
from studio.audio.fingerprint import FingerprintCache
from studio.errors import ModelLoadError
from studio.generators import audio_encoders as ae
from studio.contracts import AudioFeatureSpec


def _speech_like(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t)
    return (0.2 * env * np.sin(2 * np.pi * 220 * t) + 0.02 * rng.standard_normal(len(t))).astype(np.float32)


class FrameMean(ae.AudioEncoder):
    """A stand-in encoder: frame k is the mean of its 320 samples (depends on nothing but those samples)."""

    name = "frame-mean"
    feature_fps = 50.0
    left_frames = 4
    frames_per_slot = 10
    samples_per_frame = 320
    spec = AudioFeatureSpec("frame-mean", 10, (10, 1))

    def _frame_shape(self):
        return (1,)

    def _encode(self, audio):
        return audio.reshape(-1, 320).mean(1, keepdims=True)


def test_slots_read_the_frames_at_their_time_across_window_edges():
    audio = _speech_like(5.3)
    times = np.arange(0, 5.3, 0.04)
    got = FrameMean().features_for_slots(audio, times, 25.0)
    whole = np.concatenate([audio.reshape(-1)[: len(audio) // 320 * 320].reshape(-1, 320).mean(1)])
    for k, t in enumerate(times):
        start = int(np.floor(t * 50 + 1e-6)) - 4
        want = [whole[i] if 0 <= i < len(whole) else 0.0 for i in range(start, start + 10)]
        np.testing.assert_allclose(got[k, :, 0], want, rtol=1e-6, atol=1e-7)


def test_cached_encoder_gives_the_same_features_and_hits_on_a_repeat():
    enc = FrameMean()
    cache = FingerprintCache()
    audio = _speech_like(4.0)
    times = np.arange(0, 4.0, 0.04)
    first = enc.features_for_slots(audio, times, 25.0, encode=ae.cached(enc, cache))
    misses = cache.misses
    again = enc.features_for_slots(audio, times, 25.0, encode=ae.cached(enc, cache))
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, enc.features_for_slots(audio, times, 25.0))
    assert misses >= 2 and cache.misses == misses and cache.hits == misses


def test_segment_features_encode_each_complete_window_once():
    enc = FrameMean()
    calls = []
    seg = ae.SegmentFeatures(enc, encode=lambda w: calls.append(1) or enc.encode_window(w))
    audio = _speech_like(6.0)
    whole = enc.features_for_slots(audio, np.arange(0, 6.0, 0.04), 25.0)
    parts = []
    for a in range(0, 150, 25):  # one second of slots at a time, with the audio that has arrived (+0.5 s)
        t = np.arange(a, a + 25) * 0.04
        parts.append(seg.features(audio[:min(len(audio), int((t[-1] + 0.5) * 16000))], t))
    got = np.concatenate(parts)
    np.testing.assert_array_equal(got[:100], whole[:100])  # slots whose windows had all their audio in time
    assert len(calls) < 12 and set(seg.memo) >= {0, 1}


def test_wav2lip_mel_basis_matches_librosa_slaney():
    audio_utils = pytest.importorskip("transformers.audio_utils", reason=EXTRA)
    ref = audio_utils.mel_filter_bank(num_frequency_bins=401, num_mel_filters=80, min_frequency=55.0,
                                      max_frequency=7600.0, sampling_rate=16000, norm="slaney", mel_scale="slaney")
    np.testing.assert_allclose(ae.slaney_mel(16000, 800, 80, 55.0, 7600.0), ref.T, rtol=1e-4, atol=1e-7)


def test_wav2lip_mel_window_shapes_and_range():
    enc = ae.Wav2LipMel()
    f = enc.features_for_slots(_speech_like(1.0), np.array([0.0, 0.5, 0.98]), 25.0)
    assert f.shape == (3, 1, 80, 16) and f.min() >= -4 and f.max() <= 4
    assert np.all(f[2, :, :, 2:] == 0)  # past the end of the audio: zeros, as the release pads


def test_whisper_log_mel_matches_the_feature_extractor():
    transformers = pytest.importorskip("transformers", reason=EXTRA)
    enc = ae.WhisperTiny(config=dict(encoder_layers=1, d_model=64, encoder_attention_heads=2, encoder_ffn_dim=64))
    audio = _speech_like(2.0)
    ours = enc.log_mel(audio).numpy()
    fe = transformers.WhisperFeatureExtractor(feature_size=80)
    theirs = fe(audio, sampling_rate=16000, return_tensors="np").input_features[0][:, :ours.shape[1]]
    # the last frame differs by construction: the extractor pads the audio with zeros to 30 s, a window reflects
    np.testing.assert_allclose(ours[:, :-1], theirs[:, :-1], atol=2e-3)


def _save_hf(folder, config, state, name="model.safetensors"):
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config.to_dict()))
    if name.endswith(".bin"):
        torch.save(state, folder / name)
    else:
        save_file({k: v.contiguous() for k, v in state.items()}, str(folder / name))


SMALL_WHISPER = dict(encoder_layers=2, decoder_layers=1, d_model=64, encoder_attention_heads=2,
                     decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                     max_target_positions=16)


def test_whisper_round_trip(tmp_path):
    pytest.importorskip("transformers", reason=EXTRA)
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    twin = ae.WhisperTiny(config=SMALL_WHISPER, seed=5)
    full = WhisperForConditionalGeneration(WhisperConfig(**{**ae.WhisperTiny.TWIN_CONFIG, **SMALL_WHISPER}))
    state = {k: v for k, v in full.state_dict().items() if not k.startswith("model.encoder.")}
    state.update({"model.encoder." + k: v for k, v in twin.model.state_dict().items()})
    _save_hf(tmp_path / "whisper", full.config, state, name="pytorch_model.bin")  # as MuseTalk's download has it
    loaded = ae.WhisperTiny(folder=tmp_path / "whisper")
    assert twin.twin and not loaded.twin
    w = _speech_like(ae.WINDOW_S + 2 * ae.CONTEXT_S)
    a, b = twin.encode_window(w), loaded.encode_window(w)
    assert a.shape == (140, 3, 64)  # 2.8 s at 50 Hz, embeddings + 2 layers
    np.testing.assert_array_equal(a, b)
    assert twin.spec.shape_per_frame == (30, 64)


def test_whisper_wrong_shape_and_missing_file(tmp_path):
    pytest.importorskip("transformers", reason=EXTRA)
    twin = ae.WhisperTiny(config=SMALL_WHISPER)
    from transformers import WhisperConfig

    state = {"model.encoder." + k: v for k, v in twin.model.state_dict().items()}
    state["model.encoder.layer_norm.weight"] = torch.ones(65)
    _save_hf(tmp_path, WhisperConfig(**{**ae.WhisperTiny.TWIN_CONFIG, **SMALL_WHISPER}), state)
    with pytest.raises(ModelLoadError, match=r"layer_norm\.weight' has shape \(65,\), expected \(64,\)") as e:
        ae.WhisperTiny(folder=tmp_path)
    assert "\n" not in str(e.value)
    with pytest.raises(ModelLoadError, match="missing config.json"):
        ae.WhisperTiny(folder=tmp_path / "nowhere")


@pytest.mark.parametrize("cls,prefix,extra", [
    (ae.Wav2Vec2Base, "wav2vec2.", dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,
                                        intermediate_size=32, conv_dim=[16] * 7)),
    (ae.HubertLarge, "hubert.", dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,
                                     intermediate_size=32, conv_dim=[16] * 7)),
])
def test_wav2vec2_family_round_trip_with_old_weight_norm_names(tmp_path, cls, prefix, extra):
    pytest.importorskip("transformers", reason=EXTRA)
    twin = cls(config=extra, seed=2)
    state = {}
    for k, v in twin.model.state_dict().items():  # as the released checkpoints name them
        k = k.replace("parametrizations.weight.original0", "weight_g").replace("parametrizations.weight.original1",
                                                                                "weight_v")
        state[prefix + k] = v
    state["lm_head.weight"] = torch.zeros(4, 32)  # a head the encoder does not use
    _save_hf(tmp_path, twin.model.config, state, name="pytorch_model.bin" if prefix == "hubert." else
             "model.safetensors")
    loaded = cls(folder=tmp_path)
    w = _speech_like(ae.WINDOW_S + 2 * ae.CONTEXT_S, seed=4)
    np.testing.assert_array_equal(twin.encode_window(w), loaded.encode_window(w))
    times = np.arange(0, 2.0, 0.04)
    f = loaded.features_for_slots(_speech_like(2.0), times, 25.0)
    assert f.shape == (len(times), *loaded.spec.shape_per_frame)


def _onnx_hubert(path, out_dim: int = 1024) -> None:
    """A stand-in with Ditto's HuBERT interface: 'input_values' (1 x 6480) -> 20 x out_dim (one strided conv)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((out_dim, 1, 400)).astype(np.float32) * 0.05
    nodes = [helper.make_node("Reshape", ["input_values", "shape3"], ["x3"]),
             helper.make_node("Conv", ["x3", "w"], ["y"], strides=[320]),
             helper.make_node("Squeeze", ["y", "axis0"], ["y2"]),
             helper.make_node("Transpose", ["y2"], ["encoding_out"], perm=[1, 0])]
    graph = helper.make_graph(
        nodes, "hubert", [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, [1, 6480])],
        [helper.make_tensor_value_info("encoding_out", TensorProto.FLOAT, [20, out_dim])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([1, 1, 6480], np.int64),
                                                                                 "shape3"),
                     numpy_helper.from_array(np.array([0], np.int64), "axis0")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_wav2vec2_layer_outputs_end_where_the_transformers_encoder_ends():
    pytest.importorskip("transformers", reason=EXTRA)
    enc = ae.Wav2Vec2Base(config=dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                      intermediate_size=32, conv_dim=[16] * 7), seed=1)
    hidden = torch.randn(1, 20, 32)
    with torch.inference_mode():
        states = enc.layer_outputs(hidden)
        ref = enc.model.encoder(hidden).last_hidden_state
    assert len(states) == 2
    torch.testing.assert_close(states[-1], ref)
    f = enc.encode_window(_speech_like(ae.WINDOW_S + 2 * ae.CONTEXT_S))
    assert f.shape == (70, 2, 32)  # 2.8 s at the video rate, every layer


def test_ditto_hubert_onnx(tmp_path):
    path = tmp_path / "hubert_streaming_fix_kv.onnx"
    _onnx_hubert(path)
    enc = ae.HubertOnnx(path=path)
    f = enc.features_for_slots(_speech_like(3.0), np.arange(0, 3.0, 0.04), 25.0)
    assert f.shape == (75, 1, 1024) and not enc.twin and np.abs(f[:-1]).sum(axis=(1, 2)).min() > 0
    _onnx_hubert(path, out_dim=512)
    with pytest.raises(ModelLoadError, match="not Ditto's HuBERT"):
        ae.HubertOnnx(path=path)
