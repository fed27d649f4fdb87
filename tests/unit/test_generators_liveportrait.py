"""LivePortrait and Ditto: the networks have the release's sizes; their loaders read the releases' layouts."""

from __future__ import annotations

import pytest
import torch

from _engine_fixtures import motion, small_anchor
from studio.errors import ModelLoadError
from studio.generators import ditto as dt
from studio.generators.weights import param_count
from studio.generators.liveportrait import LivePortraitConfig, LivePortraitGenerator, LivePortraitNets
from studio.contracts import GeneratorSettings

SMALL = LivePortraitConfig(block_expansion=8, max_features=64, reshape_channel=8, reshape_depth=8, num_resblocks=1,
                           convnext_depths=(1, 1, 1, 1), convnext_dims=(8, 16, 16, 16), dense_block_expansion=8,
                           dense_max_features=16, dense_num_blocks=2, spade_hidden=8)
SETTINGS = dict(size_px=64, batch_frames=2)


def test_release_sizes():
    with torch.device("meta"):
        n = LivePortraitNets(LivePortraitConfig())
    # the release's speed.md: F 0.84 M, M 28.12 M, W 45.53 M, G 55.37 M, stitching + retargeting 0.23 M
    assert round(param_count(n.appearance_feature_extractor) / 1e6, 2) == 0.84
    assert round(param_count(n.motion_extractor) / 1e6, 2) == 28.12
    assert round(param_count(n.warping_module) / 1e6, 2) == 45.53
    assert round(param_count(n.spade_generator) / 1e6, 2) == 55.37
    assert round((param_count(n.stitching) + param_count(n.lip) + param_count(n.eye)) / 1e6, 2) == 0.23


def _randomize_norm_stats(module):
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)


def _write_liveportrait(nets: LivePortraitNets, folder):
    for name, rel in LivePortraitNets.FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        torch.save(getattr(nets, name).state_dict(), folder / rel)
    path = folder / LivePortraitNets.STITCHING
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({key: {"module." + k: v for k, v in getattr(nets, name).state_dict().items()}
                for name, key in LivePortraitNets.STITCH_KEYS.items()}, path)


def test_liveportrait_round_trip(tmp_path):
    anchor = small_anchor()
    twin = LivePortraitGenerator(SMALL, source_px=64)
    twin.open(anchor, GeneratorSettings(**SETTINGS, seed=2))
    _randomize_norm_stats(twin.nets)
    twin._prepare(anchor)
    _write_liveportrait(twin.nets, tmp_path)
    loaded = LivePortraitGenerator(SMALL, source_px=64)
    loaded.open(anchor, GeneratorSettings(**SETTINGS, weights_dir=tmp_path))
    assert twin.twin and not loaded.twin and loaded.label == "LivePortrait"
    c = motion(3)
    a, b = twin.generate(c), loaded.generate(c)
    assert a.shape == (3, 3, 64, 64) and torch.equal(a, b)
    assert not torch.equal(a[0], a[1])  # the coefficients move the picture


def test_liveportrait_missing_stitching_and_wrong_shape(tmp_path):
    twin = LivePortraitGenerator(SMALL, source_px=64)
    twin.open(small_anchor(), GeneratorSettings(**SETTINGS))
    _write_liveportrait(twin.nets, tmp_path)
    (tmp_path / LivePortraitNets.STITCHING).unlink()
    with pytest.raises(ModelLoadError, match="missing retargeting_models/stitching_retargeting_module.pth") as e:
        LivePortraitGenerator(SMALL, source_px=64).open(small_anchor(), GeneratorSettings(**SETTINGS,
                                                                                          weights_dir=tmp_path))
    assert "\n" not in str(e.value)
    _write_liveportrait(twin.nets, tmp_path)
    state = twin.nets.motion_extractor.state_dict()
    state["detector.fc_kp.weight"] = torch.zeros(60, 16)
    torch.save(state, tmp_path / LivePortraitNets.FILES["motion_extractor"])
    with pytest.raises(ModelLoadError, match=r"motion_extractor.pth: key 'detector.fc_kp.weight' has shape"):
        LivePortraitGenerator(SMALL, source_px=64).open(small_anchor(), GeneratorSettings(**SETTINGS,
                                                                                          weights_dir=tmp_path))


def _write_ditto(nets: dt.DittoNets, folder):
    (folder / dt.DIR).mkdir(parents=True)
    for name in ("appearance", "motion", "warp", "decoder"):
        torch.save(getattr(nets, name).state_dict(), folder / dt.FILES[name])
    torch.save({"retarget_shoulder": {"module." + k: v for k, v in nets.stitch.state_dict().items()}},
               folder / dt.FILES["stitch"])
    torch.save({"model_state_dict": nets.lmdm.state_dict(), "epoch": 1}, folder / dt.FILES["lmdm"])


def test_ditto_lmdm_has_the_release_keys():
    keys = dt.MotionDecoder(d=32, ff=64, layers=2).state_dict()
    # the rotary buffer is saved once per module that holds it, as the release's checkpoint has it
    assert {"rotary.freqs", "cond_encoder.0.rotary.freqs", "seqTransDecoder.stack.1.rotary.freqs",
            "time_mlp.1.weight", "to_time_tokens.0.weight", "non_attn_cond_projection.3.weight",
            "seqTransDecoder.stack.0.film2.block.1.weight", "null_cond_embed"} <= set(keys)
    assert keys["input_projection.weight"].shape == (32, 2 * dt.MOTION_DIM)
    assert keys["cond_projection.weight"].shape == (32, dt.AUDIO_DIM)


def test_ditto_round_trip(tmp_path):
    anchor = small_anchor()
    kw = dict(config=SMALL, sampling_steps=2, lmdm_width=32, lmdm_layers=1, source_px=64)
    twin = dt.DittoGenerator(**kw)
    twin.open(anchor, GeneratorSettings(**SETTINGS, seed=6))
    _randomize_norm_stats(twin.nets)
    twin._prepare(anchor)
    _write_ditto(twin.nets, tmp_path)
    loaded = dt.DittoGenerator(**kw)
    loaded.open(anchor, GeneratorSettings(**SETTINGS, seed=6, weights_dir=tmp_path))
    assert not loaded.twin
    feats = torch.randn(3, 1, 1024)
    a, b = twin.generate(motion(3), feats), loaded.generate(motion(3), feats)
    assert a.shape == (3, 3, 64, 64) and torch.equal(a, b)
    lmdm = twin.nets.lmdm.state_dict()
    lmdm["final_layer.weight"] = torch.zeros(264, 32)
    torch.save({"model_state_dict": lmdm}, tmp_path / dt.FILES["lmdm"])
    with pytest.raises(ModelLoadError, match=r"lmdm_v0.4_hubert.pth: key 'final_layer.weight' has shape \(264, 32\)"):
        dt.DittoGenerator(**kw).open(anchor, GeneratorSettings(**SETTINGS, weights_dir=tmp_path))
    torch.save({"state_dict": {}}, tmp_path / dt.FILES["lmdm"])
    with pytest.raises(ModelLoadError, match="lmdm_v0.4_hubert.pth has no 'model_state_dict' entry"):
        dt.DittoGenerator(**kw).open(anchor, GeneratorSettings(**SETTINGS, weights_dir=tmp_path))
    with pytest.raises(ModelLoadError, match="missing ditto_pytorch/aux_models/hubert_streaming_fix_kv.onnx"):
        loaded.audio_encoder()
