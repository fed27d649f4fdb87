"""MuseTalk 1.5: the UNet and VAE have the release's shapes; the loader reads the release's layout strictly."""

from __future__ import annotations

import json

import pytest
import torch

from _engine_fixtures import EXTRA, motion, small_anchor
from studio.errors import ModelLoadError
from studio.contracts import GeneratorSettings

diffusers = pytest.importorskip("diffusers", reason=EXTRA)
from studio.generators import musetalk as mt  # noqa: E402
from studio.generators.weights import param_count  # noqa: E402

SMALL_UNET = dict(block_out_channels=[32, 64, 64, 64], cross_attention_dim=32, norm_num_groups=8,
                  attention_head_dim=2)
SMALL_VAE = dict(block_out_channels=[16, 32, 32, 32], norm_num_groups=8)


def test_release_config_builds_the_release_sizes():
    with torch.device("meta"):
        unet = diffusers.UNet2DConditionModel(**mt.UNET_CONFIG)
        vae = diffusers.AutoencoderKL(**mt.VAE_CONFIG)
    assert param_count(vae) == 83_653_863  # sd-vae-ft-mse
    assert 849e6 < param_count(unet) < 851e6  # SD-1.x UNet with 8 input channels and 384-d cross-attention
    assert unet.conv_in.in_channels == 8 and unet.config.cross_attention_dim == 384


def _write_release(gen, folder):
    (folder / "musetalkV15").mkdir(parents=True)
    (folder / "sd-vae").mkdir()
    (folder / mt.UNET_JSON).write_text(json.dumps({"_class_name": "UNet2DConditionModel",
                                                   "_diffusers_version": "0.6.0.dev0", **gen.unet_config}))
    torch.save(gen.unet.state_dict(), folder / mt.UNET_WEIGHTS)
    (folder / mt.VAE_JSON).write_text(json.dumps({"_class_name": "AutoencoderKL", **gen.vae_config}))
    old_names = {".to_q.": ".query.", ".to_k.": ".key.", ".to_v.": ".value.", ".to_out.0.": ".proj_attn."}
    vae = {}
    for k, v in gen.vae.state_dict().items():  # sd-vae-ft-mse's file has diffusers' pre-0.14 attention names
        for new, old in old_names.items():
            k = k.replace(new, old) if ".attentions." in k else k
        vae[k] = v
    assert any(".query." in k for k in vae)
    torch.save(vae, folder / mt.VAE_WEIGHTS[0])


def test_round_trip_twin_files_loader(tmp_path):
    anchor = small_anchor()
    twin = mt.MuseTalkGenerator(SMALL_UNET, SMALL_VAE, face_px=64)
    twin.open(anchor, GeneratorSettings(size_px=64, batch_frames=2, seed=4))
    assert twin.twin
    _write_release(twin, tmp_path)
    loaded = mt.MuseTalkGenerator(face_px=64)
    loaded.open(anchor, GeneratorSettings(size_px=64, batch_frames=2, weights_dir=tmp_path))
    assert not loaded.twin and loaded.label == "MuseTalk 1.5"
    audio = torch.randn(3, 50, 32)
    a, b = twin.generate(motion(3), audio), loaded.generate(motion(3), audio)
    assert a.shape == (3, 3, 64, 64) and torch.equal(a, b)
    assert [t.name for t in loaded.compile_targets()] == ["unet", "vae_decoder"]


def test_missing_file_and_wrong_shape(tmp_path):
    twin = mt.MuseTalkGenerator(SMALL_UNET, SMALL_VAE, face_px=64)
    twin.open(small_anchor(), GeneratorSettings(size_px=64))
    _write_release(twin, tmp_path)
    (tmp_path / mt.VAE_WEIGHTS[0]).unlink()
    with pytest.raises(ModelLoadError, match="missing sd-vae/diffusion_pytorch_model.bin") as e:
        mt.MuseTalkGenerator(face_px=64).open(small_anchor(), GeneratorSettings(size_px=64, weights_dir=tmp_path))
    assert "\n" not in str(e.value)
    state = twin.unet.state_dict()
    state["conv_in.weight"] = torch.zeros(32, 4, 3, 3)
    torch.save(state, tmp_path / mt.UNET_WEIGHTS)
    with pytest.raises(ModelLoadError, match=r"unet.pth: key 'conv_in.weight' has shape \(32, 4, 3, 3\)"):
        mt.MuseTalkGenerator(face_px=64).open(small_anchor(), GeneratorSettings(size_px=64, weights_dir=tmp_path))


def test_audio_encoder_comes_from_the_release_folder(tmp_path):
    twin = mt.MuseTalkGenerator(SMALL_UNET, SMALL_VAE, face_px=64)
    twin.open(small_anchor(), GeneratorSettings(size_px=64))
    enc = twin.audio_encoder()
    assert enc.twin and enc.spec == mt.MuseTalkGenerator.info.audio
    _write_release(twin, tmp_path)
    loaded = mt.MuseTalkGenerator(face_px=64)
    loaded.open(small_anchor(), GeneratorSettings(size_px=64, weights_dir=tmp_path))
    with pytest.raises(ModelLoadError, match="missing its audio encoder folder \\(whisper\\)"):
        loaded.audio_encoder()
