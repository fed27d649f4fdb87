"""TAEHV's decoder for Wan 2.1 latents: the release's key layout and frame count, causality, and the loader."""

from __future__ import annotations

import pytest
import torch

from studio.errors import ModelLoadError
from studio.generators import taehv as tv
from studio.generators.weights import seeded


def test_release_keys_shapes_and_frames():
    dec = tv.TAEHVDecoder()
    keys = dec.state_dict()
    # taew2_1.pth's decoder half: 64 tensors, the indices of the release's sequential decoder
    assert len(keys) == 64
    assert keys["decoder.1.weight"].shape == (256, 16, 3, 3)
    assert keys["decoder.3.conv.0.weight"].shape == (256, 512, 3, 3)
    assert keys["decoder.7.conv.weight"].shape == (256, 256, 1, 1)  # TGrow stride 1
    assert keys["decoder.13.conv.weight"].shape == (256, 128, 1, 1)  # TGrow stride 2
    assert keys["decoder.19.conv.weight"].shape == (128, 64, 1, 1)
    assert keys["decoder.20.weight"].shape == (64, 64, 3, 3) and "decoder.20.bias" not in keys
    assert keys["decoder.22.weight"].shape == (3, 64, 3, 3) and keys["decoder.22.bias"].shape == (3,)
    with torch.inference_mode():
        out = dec(torch.randn(1, 16, 21, 1, 1))
    assert out.shape == (1, 3, 81, 8, 8)  # 21 latent frames -> 84, less the release's 3 leading ones: the Wan VAE's 81
    assert 0 <= float(out.min()) and float(out.max()) <= 1


def test_a_frame_depends_on_its_latent_and_earlier_ones_only():
    with seeded(1):
        dec = tv.TAEHVDecoder().eval()
    z = torch.randn(1, 16, 3, 2, 2)
    later = z.clone()
    later[:, :, 2] = torch.randn(1, 16, 2, 2)
    with torch.inference_mode():
        a, b = dec(z), dec(later)
    assert torch.equal(a[:, :, :5], b[:, :, :5])  # frames of latent frames 0 (1 frame) and 1 (4 frames)
    assert not torch.equal(a[:, :, 5:], b[:, :, 5:])


def test_loader_round_trip_and_errors(tmp_path):
    with seeded(3):
        dec = tv.TAEHVDecoder().eval()
    state = dict(dec.state_dict())
    release = {**state, "encoder.0.weight": torch.randn(64, 3, 3, 3), "encoder.0.bias": torch.randn(64)}
    torch.save(release, tmp_path / tv.TAEHV_WEIGHTS)
    loaded = tv.load_taehv(tmp_path, "TAEHV").eval()
    z = torch.randn(1, 16, 2, 3, 3)
    with torch.inference_mode():
        assert torch.equal(dec(z), loaded(z))
    bad = dict(release)
    bad["decoder.7.conv.weight"] = torch.zeros(512, 256, 1, 1)
    torch.save(bad, tmp_path / tv.TAEHV_WEIGHTS)
    with pytest.raises(ModelLoadError, match=r"'decoder.7.conv.weight' has shape \(512, 256, 1, 1\), expected "
                                             r"\(256, 256, 1, 1\)"):
        tv.load_taehv(tmp_path, "TAEHV")
    del bad["decoder.7.conv.weight"], release["decoder.22.bias"]
    torch.save(release, tmp_path / tv.TAEHV_WEIGHTS)
    with pytest.raises(ModelLoadError, match="missing key 'decoder.22.bias'") as e:
        tv.load_taehv(tmp_path, "TAEHV")
    assert "\n" not in str(e.value)
    with pytest.raises(ModelLoadError, match="missing taew2_1.pth"):
        tv.load_taehv(tmp_path / "x", "TAEHV")
