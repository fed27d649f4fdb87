"""Wav2Lip: the network's size, and its loader on a checkpoint written in the release's layout."""

from __future__ import annotations

import pytest
import torch

from _engine_fixtures import motion, small_anchor
from studio.errors import ModelLoadError
from studio.generators.weights import param_count
from studio.generators.wav2lip import Wav2LipGenerator, Wav2LipNet
from studio.contracts import GeneratorSettings


def test_network_has_the_release_size():
    assert param_count(Wav2LipNet()) == 36_298_035  # the release's wav2lip_gan.pth holds 36.3 M parameters


def _save_release(gen: Wav2LipGenerator, folder, name="wav2lip_gan.pth"):
    state = {"module." + k: v for k, v in gen.net.state_dict().items()}  # DataParallel's prefix, as released
    torch.save({"state_dict": state, "global_step": 1}, folder / name)


def test_round_trip_twin_files_loader(tmp_path):
    anchor = small_anchor()
    twin = Wav2LipGenerator()
    twin.open(anchor, GeneratorSettings(size_px=64, batch_frames=2, seed=3))
    assert twin.twin and "timing twin" in twin.label
    with torch.no_grad():  # a twin's BatchNorm statistics are the default ones: give them values to carry over
        for m in twin.net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    _save_release(twin, tmp_path)
    loaded = Wav2LipGenerator()
    loaded.open(anchor, GeneratorSettings(size_px=64, batch_frames=2, weights_dir=tmp_path))
    assert not loaded.twin and loaded.label == "Wav2Lip"
    mel = torch.randn(3, 1, 80, 16)
    a, b = twin.generate(motion(3), mel), loaded.generate(motion(3), mel)
    assert a.shape == (3, 3, 64, 64)
    assert torch.equal(a, b)
    assert float(a.std()) > 0


def test_missing_file_is_one_line(tmp_path):
    g = Wav2LipGenerator()
    with pytest.raises(ModelLoadError, match="missing wav2lip_gan.pth") as e:
        g.open(small_anchor(), GeneratorSettings(size_px=64, weights_dir=tmp_path))
    assert "\n" not in str(e.value)


def test_wrong_shape_names_the_key(tmp_path):
    state = {"module." + k: v for k, v in Wav2LipNet().state_dict().items()}
    state["module.output_block.1.weight"] = torch.zeros(3, 16, 1, 1)
    torch.save({"state_dict": state}, tmp_path / "wav2lip.pth")
    with pytest.raises(ModelLoadError, match=r"output_block\.1\.weight.*\(3, 16, 1, 1\)") as e:
        Wav2LipGenerator().open(small_anchor(), GeneratorSettings(size_px=64, weights_dir=tmp_path))
    assert "\n" not in str(e.value)


def test_unexpected_key_is_refused(tmp_path):
    state = {"module." + k: v for k, v in Wav2LipNet().state_dict().items()}
    state["module.extra.weight"] = torch.zeros(1)
    torch.save({"state_dict": state}, tmp_path / "wav2lip.pth")
    with pytest.raises(ModelLoadError, match="unexpected key 'extra.weight'"):
        Wav2LipGenerator().open(small_anchor(), GeneratorSettings(size_px=64, weights_dir=tmp_path))


def test_close_drops_the_modules():
    g = Wav2LipGenerator()
    g.open(small_anchor(), GeneratorSettings(size_px=64))
    g.close()
    assert g.net is None and g.face_in is None and g.fns == {} and g.compile_targets() == []
