"""MuseTalk 1.5 as a generator: one-step latent inpainting with a Stable-Diffusion-shaped UNet (MIT licence).

Release layout (``weights_dir``, the release's ``models`` folder):
``musetalkV15/musetalk.json`` (the UNet's diffusers config) + ``musetalkV15/unet.pth`` (its state dict),
``sd-vae/config.json`` + ``sd-vae/diffusion_pytorch_model.bin`` (or ``.safetensors``: sd-vae-ft-mse),
``whisper/`` (whisper-tiny: ``config.json`` + ``pytorch_model.bin``).

Once per anchor (the release's avatar preparation): the 256 x 256 face crop is VAE-encoded twice, with its lower half
blacked out and whole, giving the UNet's 8 x 32 x 32 input. Per output frame: the whisper features (50 x 384) plus
the release's sinusoidal positional encoding, the UNet at timestep 0 (one step), and the VAE decoder at 256 x 256
(latent / 0.18215); the face is pasted back into the frame.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from studio.errors import ModelLoadError
from studio.generators.audio_encoders import WhisperTiny
from studio.generators.common import FacePaste, NeuralGenerator, face_box, image_tensor
from studio.generators.weights import load_strict, read_state, require_file
from studio.contracts import GENERATORS, CompileTarget, GeneratorInfo, InterpolationKind

FACE_PX = 256
VAE_SCALE = 0.18215
UNET_CONFIG = dict(  # musetalkV15/musetalk.json
    act_fn="silu", attention_head_dim=8, block_out_channels=[320, 640, 1280, 1280], center_input_sample=False,
    cross_attention_dim=384, down_block_types=["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"], downsample_padding=1,
    flip_sin_to_cos=True, freq_shift=0, in_channels=8, layers_per_block=2, mid_block_scale_factor=1, norm_eps=1e-5,
    norm_num_groups=32, out_channels=4, sample_size=64, up_block_types=["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3)
VAE_CONFIG = dict(  # sd-vae-ft-mse/config.json
    act_fn="silu", block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
    in_channels=3, latent_channels=4, layers_per_block=2, norm_num_groups=32, out_channels=3, sample_size=256,
    up_block_types=["UpDecoderBlock2D"] * 4)
UNET_JSON = "musetalkV15/musetalk.json"
UNET_WEIGHTS = "musetalkV15/unet.pth"
VAE_JSON = "sd-vae/config.json"
VAE_WEIGHTS = ("sd-vae/diffusion_pytorch_model.bin", "sd-vae/diffusion_pytorch_model.safetensors")
WHISPER_DIR = "whisper"


def positional_encoding(d_model: int = 384, max_len: int = 5000) -> torch.Tensor:
    """The release's fixed sinusoidal encoding added to the audio tokens: max_len x d_model."""
    pe = torch.zeros(max_len, d_model)
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def _diffusers_config(raw: dict) -> dict:
    """A diffusers config without its bookkeeping keys (``_class_name``, ``_diffusers_version``, ...)."""
    return {k: v for k, v in raw.items() if not k.startswith("_")}


def legacy_vae_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """sd-vae-ft-mse's file names its mid-block attention as diffusers did before 0.14 (``query``, ``key``, ``value``,
    ``proj_attn``); today's AutoencoderKL calls them ``to_q``, ``to_k``, ``to_v``, ``to_out.0``."""
    names = {".query.": ".to_q.", ".key.": ".to_k.", ".value.": ".to_v.", ".proj_attn.": ".to_out.0."}
    out = {}
    for k, v in state.items():
        if ".attentions." in k:
            for old, new in names.items():
                k = k.replace(old, new)
        out[k] = v
    return out


def _read_json(path: Path, engine: str) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{engine}: {path} is not readable JSON: copy the release's file again.") from exc


class MuseTalkGenerator(NeuralGenerator):
    info = GeneratorInfo(
        name="musetalk-1.5", label="MuseTalk 1.5", family="latent inpainting UNet (one step, 256 px face)",
        native_px=FACE_PX, pyramidal_px=0, audio=WhisperTiny.spec, interpolation=InterpolationKind.FLOW,
        batch_sizes=(1, 4, 8, 16, 20, 32), compile_backends=("inductor", "cuda_graphs", "onnxruntime", "tensorrt"),
        weights=(UNET_JSON, UNET_WEIGHTS, VAE_JSON, VAE_WEIGHTS[0], WHISPER_DIR + "/config.json",
                 WHISPER_DIR + "/pytorch_model.bin"),
        licence="MIT (code and weights); sd-vae-ft-mse: CreativeML OpenRAIL-M", pastes_face=True)

    audio_dirs = (WHISPER_DIR,)
    requires = ("diffusers", "transformers", "safetensors")

    def __init__(self, unet_config: dict | None = None, vae_config: dict | None = None,
                 face_px: int = FACE_PX) -> None:
        super().__init__()
        self.face_px = face_px  # the release's 256; tests shrink it
        self.unet_config = {**UNET_CONFIG, **(unet_config or {})}
        self.vae_config = {**VAE_CONFIG, **(vae_config or {})}

    def _build_twin(self) -> None:
        from diffusers import AutoencoderKL, UNet2DConditionModel

        self.unet = UNet2DConditionModel(**self.unet_config)
        self.vae = AutoencoderKL(**self.vae_config)

    def _load(self, folder: Path) -> None:
        from diffusers import AutoencoderKL, UNet2DConditionModel

        name = self.info.label
        self.unet_config = _diffusers_config(_read_json(require_file(folder, UNET_JSON, name), name))
        self.vae_config = _diffusers_config(_read_json(require_file(folder, VAE_JSON, name), name))
        self.unet = UNet2DConditionModel(**self.unet_config)
        path = require_file(folder, UNET_WEIGHTS, name)
        load_strict(self.unet, read_state(path, name), f"{name}: {UNET_WEIGHTS}")
        vae_path = next((folder / f for f in VAE_WEIGHTS if (folder / f).is_file()), None)
        if vae_path is None:
            raise ModelLoadError(f"{name}: missing {VAE_WEIGHTS[0]} in {folder}: copy sd-vae-ft-mse there.")
        self.vae = AutoencoderKL(**self.vae_config)
        load_strict(self.vae, legacy_vae_keys(read_state(vae_path, name)), f"{name}: {vae_path.relative_to(folder)}")

    def _to_device(self) -> None:
        # nn.Module.to: diffusers' own ``to`` logs a note about dtype casts on every call
        torch.nn.Module.to(self.unet, self.device, self.dtype).eval()
        torch.nn.Module.to(self.vae, self.device, self.dtype).eval()
        self.pe = positional_encoding(self.unet_config["cross_attention_dim"]).to(self.device, self.dtype)
        self.t0 = torch.zeros((), device=self.device, dtype=torch.long)
        self.fns = {"unet": self._unet, "vae_decoder": self._decode}

    def _unet(self, latents: torch.Tensor, audio: torch.Tensor) -> torch.Tensor:
        """B x 8 x 32 x 32, B x 50 x 384 -> B x 4 x 32 x 32 (timestep 0)."""
        return self.unet(latents, self.t0, encoder_hidden_states=audio).sample

    def _decode(self, latents: torch.Tensor) -> torch.Tensor:
        """B x 4 x 32 x 32 -> B x 3 x 256 x 256 in -1..1."""
        return self.vae.decode(latents / VAE_SCALE).sample

    def _encode(self, img: torch.Tensor) -> torch.Tensor:
        """1 x 3 x 256 x 256 in 0..1 -> 1 x 4 x 32 x 32 (the posterior's mean, scaled)."""
        return self.vae.encode((img * 2 - 1).to(self.dtype)).latent_dist.mean * VAE_SCALE

    def _prepare(self, anchor) -> None:
        box = face_box(anchor)
        x0, y0, side = box
        face = image_tensor(anchor.image[y0:y0 + side, x0:x0 + side], self.face_px, self.device)
        masked = face.clone()
        masked[:, :, self.face_px // 2:] = 0  # the release masks the lower half
        self.latents = torch.cat([self._encode(masked), self._encode(face)], 1)  # 1 x 8 x 32 x 32
        self.paste = FacePaste(anchor, box, self.settings.size_px, self.device)

    def _generate(self, coeffs: torch.Tensor, features: torch.Tensor | None) -> torch.Tensor:
        d = self.unet_config["cross_attention_dim"]
        audio = features.reshape(features.shape[0], -1, d).to(self.device, self.dtype)  # B x 50 x 384
        audio = audio + self.pe[:audio.shape[1]]
        bs = self.settings.batch_frames
        out = []
        for i in range(0, audio.shape[0], bs):
            a = audio[i:i + bs]
            pred = self.fns["unet"](self.latents.expand(a.shape[0], -1, -1, -1), a)
            out.append(self.fns["vae_decoder"](pred))
        faces = ((torch.cat(out).float() + 1) * 127.5).clamp(0, 255)  # B x 3 x 256 x 256 RGB
        return self.paste(faces)

    def _targets(self) -> list[CompileTarget]:
        b = self.settings.batch_frames
        d = self.unet_config["cross_attention_dim"]
        lat = self.latents.expand(b, -1, -1, -1).contiguous()
        audio = torch.zeros((b, 50, d), device=self.device, dtype=self.dtype)
        pred = torch.zeros((b, 4, *lat.shape[2:]), device=self.device, dtype=self.dtype)
        return [CompileTarget("unet", _Call(self._unet, self.unet), (lat, audio)),
                CompileTarget("vae_decoder", _Call(self._decode, self.vae), (pred,))]


class _Call(torch.nn.Module):
    """A bound method as a module (a compile target), keeping the module that owns its weights."""

    def __init__(self, fn, owner: torch.nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.owner = owner

    def forward(self, *args):
        return self.fn(*args)


@GENERATORS.register("musetalk-1.5")
def _make(**kwargs) -> MuseTalkGenerator:
    return MuseTalkGenerator()
