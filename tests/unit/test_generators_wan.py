"""The Wan DiT engines: the release's key layout and sizes, the DiT loader, one window per 81 output frames, and the
engine's options (TAEHV's decoder, fp8 DiT linears) as engines of their own."""

from __future__ import annotations

import sys

import pytest
import torch

from _engine_fixtures import EXTRA, motion, small_anchor
from studio.errors import ModelLoadError
from studio.generators.weights import param_count
from studio.contracts import GeneratorSettings

pytest.importorskip("diffusers", reason=EXTRA)
from safetensors.torch import save_file  # noqa: E402

from studio.generators import wan_dit as wd  # noqa: E402

SMALL = wd.WanConfig(dim=64, ffn_dim=128, num_heads=4, num_layers=2, text_dim=32, clip_dim=32, audio_dim=16,
                     audio_layers=3, audio_hidden=16, vae_base_dim=8)


def test_release_shapes_and_keys():
    with torch.device("meta"):
        dit = wd.WanAudioDiT(wd.WAN_1_3B)
    keys = dit.state_dict()
    # EchoMimicV3-flash's transformer (Wan2.1-Fun 1.3B InP + audio cross-attention), original Wan names
    assert keys["patch_embedding.weight"].shape == (1536, 36, 1, 2, 2)
    assert keys["blocks.29.cross_attn.k_audio.weight"].shape == (1536, 1536)
    assert keys["blocks.0.cross_attn.q_audio.bias"].shape == (1536,)
    assert keys["blocks.0.ffn.0.weight"].shape == (8960, 1536)
    assert keys["audio_injection.proj1.weight"].shape == (512, 5 * 12 * 768)
    assert keys["audio_injection.proj1_vf.weight"].shape == (512, 8 * 12 * 768)
    assert keys["audio_injection.proj3.weight"].shape == (32 * 1536, 512)
    assert keys["img_emb.proj.3.weight"].shape == (1536, 1280)
    assert keys["head.head.weight"].shape == (64, 1536)
    n = param_count(dit)
    assert 1.86e9 < n < 1.87e9, n  # Wan-1.3B's 1.39 G + image and audio cross-attention + the audio projection
    assert wd.WINDOW_FRAMES == 81


def test_dit_loader_round_trip_and_errors(tmp_path):
    with wd.seeded(3):
        dit = wd.WanAudioDiT(SMALL).eval()
    (tmp_path / "transformer").mkdir()
    save_file({k: v.contiguous() for k, v in dit.state_dict().items()}, str(tmp_path / wd.DIT_WEIGHTS))
    loaded = wd.load_dit(tmp_path, SMALL, "EchoMimicV3").eval()
    x = torch.randn(1, 36, 2, 8, 8)
    t = torch.tensor([500.0])
    ctx = dit.context(torch.randn(1, wd.TEXT_TOKENS, 32), torch.randn(1, wd.CLIP_TOKENS, 32))
    first, latter = torch.randn(1, 1, 5, 3, 16), torch.randn(1, 1, 8, 3, 16)
    with torch.inference_mode():
        a, b = dit(x, t, ctx, first, latter), loaded(x, t, ctx, first, latter)
    assert a.shape == (1, 16, 2, 8, 8) and torch.equal(a, b)
    state = dit.state_dict()
    state["head.head.weight"] = torch.zeros(32, 64)
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / wd.DIT_WEIGHTS))
    with pytest.raises(ModelLoadError, match=r"key 'head.head.weight' has shape \(32, 64\), expected \(64, 64\)"):
        wd.load_dit(tmp_path, SMALL, "EchoMimicV3")
    state = dit.state_dict()
    del state["blocks.1.cross_attn.norm_k_audio.weight"]
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / wd.DIT_WEIGHTS))
    with pytest.raises(ModelLoadError, match="missing key 'blocks.1.cross_attn.norm_k_audio.weight'") as e:
        wd.load_dit(tmp_path, SMALL, "EchoMimicV3")
    assert "\n" not in str(e.value)
    with pytest.raises(ModelLoadError, match="missing transformer/diffusion_pytorch_model.safetensors"):
        wd.load_dit(tmp_path / "x", SMALL, "EchoMimicV3")


def test_open_with_weights_says_what_is_not_supported(tmp_path):
    with wd.seeded(0):
        dit = wd.WanAudioDiT(SMALL)
    (tmp_path / "transformer").mkdir()
    save_file({k: v.contiguous() for k, v in dit.state_dict().items()}, str(tmp_path / wd.DIT_WEIGHTS))
    with pytest.raises(ModelLoadError, match="not supported yet"):
        wd.WanDiTGenerator(SMALL).open(small_anchor(), GeneratorSettings(size_px=64, weights_dir=tmp_path))
    with pytest.raises(ModelLoadError, match="no public weights"):
        wd.Wan14BGenerator(SMALL).open(small_anchor(), GeneratorSettings(size_px=64, weights_dir=tmp_path))


def test_one_window_per_window_frames():
    g = wd.WanDiTGenerator(SMALL, steps=2, latent_frames=2, stream_first_latents=0)  # whole windows of 5 frames
    g.open(small_anchor(), GeneratorSettings(size_px=64, batch_frames=5))
    calls = []
    eager = g.fns["dit"]
    g.install_engine("dit", lambda *a: calls.append(a[0].shape) or eager(*a))
    first = g.generate(motion(3), torch.randn(3, 3, 16))
    assert first.shape == (3, 3, 64, 64) and len(calls) == 2  # one window: 2 steps, each one batch of 2 passes
    assert calls[0] == (2, 36, 2, 8, 8)
    g.generate(motion(2), torch.randn(2, 3, 16))
    assert len(calls) == 2  # the window's remaining 2 frames
    g.generate(motion(1), torch.randn(1, 3, 16))
    assert len(calls) == 4
    assert g.made == 10 and g.fed == 6 and g.pending.shape[0] == 0  # the second window heard frame 5's audio


def test_audio_windows_follow_the_release():
    g = wd.WanDiTGenerator(SMALL, latent_frames=3)  # 9 output frames
    feats = torch.arange(9, dtype=torch.float32)[:, None, None].expand(9, 3, 16)
    first, latter = g.audio_windows(feats)
    assert first[0, 0, :, 0, 0].tolist() == [0, 0, 0, 1, 2]  # frame 0's window, clamped
    # latent frame 1 = output frames 1..4: frame 1's window up to its centre, the centres of 2 and 3, frame 4's on
    assert latter[0, 0, :, 0, 0].tolist() == [0, 0, 1, 2, 3, 4, 5, 6]
    assert latter[0, 1, :, 0, 0].tolist() == [3, 4, 5, 6, 7, 8, 8, 8]


def test_late_audio_is_dropped_and_windows_stay_aligned():
    g = wd.WanDiTGenerator(SMALL, steps=1, latent_frames=2, stream_first_latents=0)
    g.open(small_anchor(), GeneratorSettings(size_px=64, batch_frames=5))
    heard = []
    run = g.run_window
    g.run_window = lambda feats: heard.append(feats[:, 0, 0].clone()) or run(feats)
    frame_id = torch.arange(12, dtype=torch.float32)[:, None, None].expand(12, 3, 16)  # audio of frame k = k
    g.generate(motion(3), frame_id[0:3] + 1)
    g.generate(motion(4), frame_id[3:7] + 1)
    g.generate(motion(5), frame_id[7:12] + 1)
    assert torch.equal(heard[0], torch.tensor([1.0, 2, 3, 0, 0]))  # frames 3 and 4 not heard yet: silent
    assert torch.equal(heard[1], torch.tensor([6.0, 7, 0, 0, 0]))  # frames 5, 6 arrived in time, 3 and 4 too late
    assert torch.equal(heard[2], torch.tensor([11.0, 12, 0, 0, 0]))
    with pytest.raises(ModelLoadError, match="multiple of 16"):
        wd.WanDiTGenerator(SMALL).open(small_anchor(), GeneratorSettings(size_px=72))


@pytest.mark.parametrize("engine, params_g, gib", [("wan2.1-1.3b", "1.9", None), ("wan2.1-14b", "20", "37")])
def test_the_size_a_dit_row_states_is_the_size_of_its_twin(engine, params_g, gib):
    """The "needs a GPU" reasons name the twin's own size (counted on the meta device: nothing is allocated)."""
    from studio.contracts import GENERATORS

    gen = GENERATORS.create(engine)
    with torch.device("meta"):
        n = sum(p.numel() for p in wd.WanAudioDiT(gen.config).parameters())
    assert f"{n / 1e9:.2g}" == params_g and f"a {params_g} G-parameter DiT" in gen.info.needs_gpu_reason
    if gib:
        assert f"{n * 2 / 2 ** 30:.0f}" == gib and f"{gib} GiB of bf16 weights" in gen.info.needs_gpu_reason


def test_the_options_are_engines_of_their_own_whose_labels_say_them():
    from studio.contracts import GENERATORS

    base = GENERATORS.create("wan2.1-1.3b").info
    tiny = GENERATORS.create("wan2.1-1.3b-taehv")
    fp8 = GENERATORS.create("wan2.1-1.3b-fp8")
    both = GENERATORS.create("wan2.1-1.3b-taehv-fp8")
    assert tiny.decoder is wd.VideoDecoder.TAEHV and not tiny.fp8_linears and tiny.info.name == "wan2.1-1.3b-taehv"
    assert tiny.info.label == base.label + ", tiny decoder (TAEHV)" and tiny.info.weights[-1] == "taew2_1.pth"
    assert fp8.decoder is wd.VideoDecoder.WAN_VAE and fp8.info.label == base.label + ", fp8 (rowwise) DiT linears"
    assert both.info.name == "wan2.1-1.3b-taehv-fp8" and both.decoder is wd.VideoDecoder.TAEHV and both.fp8_linears
    assert GENERATORS.create("wan2.1-1.3b").info == base and base.name == "wan2.1-1.3b"  # the class's own facts stay


def test_taehv_decodes_the_window():
    g = wd.WanDiTGenerator(SMALL, steps=1, latent_frames=2, decoder=wd.VideoDecoder.TAEHV, stream_first_latents=0)
    g.open(small_anchor(), GeneratorSettings(size_px=64, batch_frames=5))
    assert not hasattr(g, "vae") and g.fns["vae_decoder"] == g._decode_taehv
    out = g.generate(motion(5), torch.randn(5, 3, 16))
    assert out.shape == (5, 3, 64, 64) and 0 <= float(out.min()) and float(out.max()) <= 255
    assert g.precision_label == "fp32"


def test_fp8_off_the_gpu_stays_in_the_compute_dtype_and_says_why():
    g = wd.WanDiTGenerator(SMALL, steps=1, latent_frames=2, fp8_linears=True, stream_first_latents=2)
    assert "not opened yet" in g.precision_label
    g.open(small_anchor(), GeneratorSettings(size_px=64, batch_frames=5))
    assert g.fp8_count == 0 and g.dit.blocks[0].ffn[0].weight.dtype == torch.float32
    assert g.precision_label == ("fp32 (no fp8 DiT linears: fp8 matmuls need a CUDA GPU with FP8 tensor cores, and "
                                 "this runs on the cpu)")
    assert g.generate(motion(5), torch.randn(5, 3, 16)).shape == (5, 3, 64, 64)


def test_fp8_says_which_gpu_dtype_or_package_it_lacks(monkeypatch):
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert wd.fp8_refusal(cuda, torch.bfloat16) == ("this GPU (CUDA capability 8.0) has no FP8 tensor cores (8.9 or "
                                                    "newer has them)")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert wd.fp8_refusal(cuda, torch.float16) == "rowwise fp8 needs bf16 compute, and this runs in float16"
    monkeypatch.setitem(sys.modules, "torchao", None)  # not installed
    assert wd.fp8_refusal(cuda, torch.bfloat16).startswith("torchao is not installed")


def test_taehv_engine_loads_the_release_file_beside_the_dit(tmp_path):
    from studio.generators.taehv import TAEHVDecoder

    with wd.seeded(0):
        dit = wd.WanAudioDiT(SMALL)
    (tmp_path / "transformer").mkdir()
    save_file({k: v.contiguous() for k, v in dit.state_dict().items()}, str(tmp_path / wd.DIT_WEIGHTS))
    settings = GeneratorSettings(size_px=64, weights_dir=tmp_path)
    with pytest.raises(ModelLoadError, match="missing taew2_1.pth"):
        wd.WanDiTGenerator(SMALL, decoder=wd.VideoDecoder.TAEHV).open(small_anchor(), settings)
    torch.save(TAEHVDecoder().state_dict(), tmp_path / "taew2_1.pth")
    with pytest.raises(ModelLoadError, match="the DiT and taew2_1.pth in .* loaded, but .* not supported yet"):
        wd.WanDiTGenerator(SMALL, decoder=wd.VideoDecoder.TAEHV).open(small_anchor(), settings)
