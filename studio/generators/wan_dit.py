"""Wan-2.1 video DiTs as generators: EchoMimicV3-flash (Wan2.1-Fun 1.3B InP with audio cross-attention, Apache-2.0)
and a Wan-14B-shaped twin of the FantasyTalking2 class (no public weights).

The DiT is our module in the flash release's own key layout (EchoMimicV3's ``wan_transformer3d_audio_2512.py``, the
original Wan names: ``patch_embedding``, ``blocks.N.self_attn.q``, ``blocks.N.cross_attn.k_audio``,
``audio_injection.proj1_vf``, ``head.head``, ...), so its loader reads the release's
``transformer/diffusion_pytorch_model.safetensors`` strictly. diffusers' ``WanTransformer3DModel`` has the same
backbone shapes but other key names and no audio path. The release computes ``cross_attn.q_audio`` and discards the
result; the weight is loaded, the discarded product is not computed.

Audio (the release's ``infer_flash.py``): wav2vec2's 12 layers at the video rate, a 5-frame window around each output
frame; the first latent frame reads its frame's window, each later one 8 windows of its 4 frames (``get_ai2v_audio``);
``audio_injection`` turns them into 32 tokens of width C per latent frame.

One window = ``LATENT_FRAMES`` latent frames = 81 output frames (the VAE's 4x temporal compression, first frame
alone). Per window: ``STEPS`` flow-matching Euler steps (shift 5), each with 2 guidance passes (audio on / off, one
batch of 2), over (size / 16)^2 tokens per latent frame (patch 1 x 2 x 2 on the VAE's / 8 latent: 324 at 288 px,
1,024 at 512, 4,096 at 1024), each block: self-attention with 3-D RoPE, cross-attention to the prompt (512 tokens),
the portrait's CLIP tokens (257) and the latent frame's 32 audio tokens, a feed-forward; then the Wan VAE decodes
the window (diffusers ``AutoencoderKLWan``, random weights).

Sizes: ``native_px`` 1024 is the size a 1080p program is generated at without the pyramidal route (the release's
own default is 768 x 768; any multiple of 16 works); ``pyramidal_px`` 288 is the small size the pyramidal route
generates at before the core upscales.

What is left out in this phase, said plainly: with real weights the engine also needs the Wan VAE's own file
(``Wan2.1_VAE.pth``, original key names), the UMT5-XXL prompt encoder and the open-CLIP-H image encoder of the
release; none is read yet, so ``open`` with a weights folder loads and checks the DiT and then refuses with a
ModelLoadError that says so. The engine runs as a timing twin (the DiT, the VAE decoder and the conditioning with
their real shapes and random weights).

Streaming (``stream_first_latents``, ``studio.generators.windows``): a stream starts with a short window (3 latent
frames, 9 output frames, by default) and every later window is given the previous one's last latent frame as a known
frame of the InP conditioning, so that the first frame waits for a ninth of a window's tokens and the windows follow
on; 0 gives whole windows, each on its own. The short window is a CUDA graph of its own, not compiled by TorchInductor
(it runs once a stream; compiling it would cost another compile of the DiT at every start-up).

Two options of the engine, each a registered variant whose label says it (``variant_info``):
- ``decoder``: the Wan VAE's decoder (the release's) or TAEHV's tiny decoder (``studio.generators.taehv``, the
  release ``taew2_1.pth``, MIT), which decodes the same latents with far fewer operations and less fidelity;
- ``fp8_linears``: the Linear layers of the DiT's blocks with fp8 (e4m3) weights and activations, each scaled per
  row (torchao's dynamic float8), on GPUs with FP8 tensor cores (CUDA capability 8.9 or newer) and bf16 compute;
  elsewhere the DiT stays in its compute dtype and ``precision_label`` says why. The compiled form
  (``compiled_targets``) compiles the converted module.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from studio.errors import InputError, ModelLoadError
from studio.generators.audio_encoders import Wav2Vec2Base
from studio.generators.common import NeuralGenerator, to_size
from studio.generators.taehv import TAEHV_WEIGHTS, TAEHVDecoder, load_taehv
from studio.generators.weights import default_dtype, load_strict, read_state, require_file, seeded
from studio.generators.windows import WindowPlan, WindowSchedule, frames_of
from studio.contracts import GENERATORS, STREAM_FIRST_LATENTS, CompileTarget, GeneratorInfo, InterpolationKind

log = logging.getLogger(__name__)

LATENT_FRAMES = 21
WINDOW_FRAMES = 4 * (LATENT_FRAMES - 1) + 1  # 81
STEPS = 8  # EchoMimicV3-flash
SHIFT = 5.0
AUDIO_TOKENS = 32  # per latent frame
AUDIO_WINDOW = 5  # output frames of audio around each output frame
TEXT_TOKENS = 512
CLIP_TOKENS = 257
DIT_WEIGHTS = "transformer/diffusion_pytorch_model.safetensors"
FP8_LABEL = "fp8 (rowwise) DiT linears"
MASK_CHANNELS = 4  # of the InP conditioning: 1 where a latent frame is given (Wan 2.1 I2V's mask), then its latent
CONTEXT_LATENTS = 1  # latent frames of the previous window each later window of a stream is given


class VideoDecoder(enum.Enum):
    """What turns a window's latents into frames."""

    WAN_VAE = "wan-vae"  # the release's Wan VAE decoder (diffusers ``AutoencoderKLWan``)
    TAEHV = "taehv"  # TAEHV's tiny decoder for Wan 2.1 latents (``taew2_1.pth``)


@dataclass(frozen=True)
class WanConfig:
    dim: int = 1536
    ffn_dim: int = 8960
    num_heads: int = 12
    num_layers: int = 30
    in_dim: int = 36  # 16 noisy latent + 4 mask + 16 reference latent (InP)
    out_dim: int = 16
    freq_dim: int = 256
    text_dim: int = 4096
    clip_dim: int = 1280
    audio_dim: int = 768  # wav2vec2-base width ...
    audio_layers: int = 12  # ... and layers, all kept
    audio_hidden: int = 512
    eps: float = 1e-6
    vae_base_dim: int = 96


WAN_1_3B = WanConfig()
WAN_14B = WanConfig(dim=5120, ffn_dim=13824, num_heads=40, num_layers=40)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def layer_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Wan's affine-free LayerNorm, computed in fp32."""
    return F.layer_norm(x.float(), x.shape[-1:], eps=eps).type_as(x)


def rope_tables(f: int, h: int, w: int, head_dim: int, device, theta: float = 10000.0):
    """cos, sin of Wan's 3-D RoPE for an f x h x w token grid: each L x head_dim/2 (pairs (2i, 2i + 1))."""
    c = head_dim // 2
    parts = [c - 2 * (c // 3), c // 3, c // 3]  # frequency pairs for t, y, x
    dims = [2 * p for p in parts]
    angles = []
    for n, d, p in zip((f, h, w), dims, parts):
        inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64, device=device)[:p] / d)
        angles.append(torch.arange(n, dtype=torch.float64, device=device)[:, None] * inv[None])
    a = torch.cat([angles[0][:, None, None].expand(f, h, w, -1), angles[1][None, :, None].expand(f, h, w, -1),
                   angles[2][None, None].expand(f, h, w, -1)], dim=-1).reshape(f * h * w, c)
    return a.cos().float(), a.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """B x L x H x D rotated pairwise by (cos, sin): L x D/2."""
    xf = x.float().unflatten(-1, (-1, 2))
    a, b = xf[..., 0], xf[..., 1]
    c, s = cos[None, :, None], sin[None, :, None]
    return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2).type_as(x)


# SDPA's kernels in the order tried on CUDA: cuDNN's fused attention first (on the H100 at the 288-px DiT's
# self-attention shape, 2x12 heads x 6804 tokens x 128, bf16: 0.99 ms, FlashAttention-2 1.64 ms), then the others
_CUDA_SDPA_ORDER = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.MATH]


def attention(q, k, v):
    """B x L x H x D each -> B x L x (H D) (PyTorch SDPA; on CUDA cuDNN's kernel first, ``_CUDA_SDPA_ORDER``)."""
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if q.is_cuda:
        with sdpa_kernel(_CUDA_SDPA_ORDER, set_priority=True):
            out = F.scaled_dot_product_attention(q, k, v)
    else:
        out = F.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2).flatten(2)


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = RMSNorm(dim, eps)
        self.norm_k = RMSNorm(dim, eps)

    def forward(self, x, rope):
        b, n, _ = x.shape
        q = self.norm_q(self.q(x)).view(b, n, self.heads, -1)
        k = self.norm_k(self.k(x)).view(b, n, self.heads, -1)
        v = self.v(x).view(b, n, self.heads, -1)
        return self.o(attention(apply_rope(q, *rope), apply_rope(k, *rope), v))


class AudioCrossAttention(SelfAttention):
    """Cross-attention to the prompt, to the portrait's CLIP tokens and, per latent frame, to its audio tokens (the
    release's ``WanI2VCrossAttentionAudio``)."""

    def __init__(self, dim: int, heads: int, eps: float) -> None:
        super().__init__(dim, heads, eps)
        self.k_img = nn.Linear(dim, dim)
        self.v_img = nn.Linear(dim, dim)
        self.norm_k_img = RMSNorm(dim, eps)
        self.q_audio = nn.Linear(dim, dim)  # in the release's file; its product is discarded there (docstring)
        self.k_audio = nn.Linear(dim, dim)
        self.v_audio = nn.Linear(dim, dim)
        self.norm_k_audio = RMSNorm(dim, eps)

    def forward(self, x, context, audio, frames: int):
        """x: B x L x C; context: B x (257 + 512) x C (CLIP tokens first); audio: (B frames) x 32 x C."""
        b, n, _ = x.shape
        h = self.heads
        img, txt = context[:, :CLIP_TOKENS], context[:, CLIP_TOKENS:]
        q = self.norm_q(self.q(x)).view(b, n, h, -1)
        out = attention(q, self.norm_k(self.k(txt)).view(b, -1, h, q.shape[-1]), self.v(txt).view(b, -1, h,
                                                                                                 q.shape[-1]))
        out = out + attention(q, self.norm_k_img(self.k_img(img)).view(b, -1, h, q.shape[-1]),
                              self.v_img(img).view(b, -1, h, q.shape[-1]))
        qa = q.reshape(b * frames, n // frames, h, -1)
        ka = self.norm_k_audio(self.k_audio(audio)).view(b * frames, -1, h, q.shape[-1])
        va = self.v_audio(audio).view(b * frames, -1, h, q.shape[-1])
        out = out + attention(qa, ka, va).view(b, n, -1)
        return self.o(out)


class WanBlock(nn.Module):
    def __init__(self, cfg: WanConfig) -> None:
        super().__init__()
        d = cfg.dim
        self.eps = cfg.eps
        self.self_attn = SelfAttention(d, cfg.num_heads, cfg.eps)
        self.norm3 = nn.LayerNorm(d, eps=cfg.eps)
        self.cross_attn = AudioCrossAttention(d, cfg.num_heads, cfg.eps)
        self.ffn = nn.Sequential(nn.Linear(d, cfg.ffn_dim), nn.GELU(approximate="tanh"), nn.Linear(cfg.ffn_dim, d))
        self.modulation = nn.Parameter(torch.randn(1, 6, d) / d ** 0.5)

    def forward(self, x, e, rope, context, audio, frames: int):
        e = (self.modulation + e).chunk(6, dim=1)  # each B x 1 x C
        y = self.self_attn(layer_norm(x, self.eps) * (1 + e[1]) + e[0], rope)
        x = x + y * e[2]
        x = x + self.cross_attn(self.norm3(x), context, audio, frames)
        return x + self.ffn(layer_norm(x, self.eps) * (1 + e[4]) + e[3]) * e[5]


class Head(nn.Module):
    def __init__(self, cfg: WanConfig) -> None:
        super().__init__()
        self.eps = cfg.eps
        self.head = nn.Linear(cfg.dim, 4 * cfg.out_dim)  # patch 1 x 2 x 2
        self.modulation = nn.Parameter(torch.randn(1, 2, cfg.dim) / cfg.dim ** 0.5)

    def forward(self, x, e):
        e = (self.modulation + e[:, None]).chunk(2, dim=1)
        return self.head(layer_norm(x, self.eps) * (1 + e[1]) + e[0])


class AudioInjection(nn.Module):
    """The release's ``AudioProjModel``: per latent frame, its audio windows (5 for the first, 8 for the others, each
    12 layers x 768) -> 32 tokens of width C."""

    def __init__(self, cfg: WanConfig) -> None:
        super().__init__()
        per = cfg.audio_layers * cfg.audio_dim
        self.tokens = AUDIO_TOKENS
        self.proj1 = nn.Linear(AUDIO_WINDOW * per, cfg.audio_hidden)
        self.proj1_vf = nn.Linear((AUDIO_WINDOW + 3) * per, cfg.audio_hidden)
        self.proj2 = nn.Linear(cfg.audio_hidden, cfg.audio_hidden)
        self.proj3 = nn.Linear(cfg.audio_hidden, AUDIO_TOKENS * cfg.dim)
        self.norm = nn.LayerNorm(cfg.dim)

    def forward(self, first: torch.Tensor, latter: torch.Tensor) -> torch.Tensor:
        """B x 1 x 5 x 12 x 768, B x (F - 1) x 8 x 12 x 768 -> B x F x 32 x C."""
        b = first.shape[0]
        h = torch.cat([F.relu(self.proj1(first.flatten(2))), F.relu(self.proj1_vf(latter.flatten(2)))], dim=1)
        h = self.proj3(F.relu(self.proj2(h)))  # B x F x 32 C
        return self.norm(h.view(b, h.shape[1], self.tokens, -1))


class ImageProj(nn.Module):
    def __init__(self, cin: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Sequential(nn.LayerNorm(cin), nn.Linear(cin, cin), nn.GELU(), nn.Linear(cin, dim),
                                  nn.LayerNorm(dim))

    def forward(self, x):
        return self.proj(x)


def sinusoidal(dim: int, t: torch.Tensor) -> torch.Tensor:
    half = dim // 2
    pos = t.double()[:, None] * torch.pow(10000, -torch.arange(half, device=t.device, dtype=torch.float64) / half)
    return torch.cat([pos.cos(), pos.sin()], dim=1).float()


class WanAudioDiT(nn.Module):
    """The DiT: B x 36 x F x h x w latents (+ conditioning) -> B x 16 x F x h x w velocity."""

    def __init__(self, cfg: WanConfig) -> None:
        super().__init__()
        d = cfg.dim
        self.cfg = cfg
        self.audio_injection = AudioInjection(cfg)
        self.patch_embedding = nn.Conv3d(cfg.in_dim, d, kernel_size=(1, 2, 2), stride=(1, 2, 2))
        self.text_embedding = nn.Sequential(nn.Linear(cfg.text_dim, d), nn.GELU(approximate="tanh"), nn.Linear(d, d))
        self.time_embedding = nn.Sequential(nn.Linear(cfg.freq_dim, d), nn.SiLU(), nn.Linear(d, d))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))
        self.blocks = nn.ModuleList([WanBlock(cfg) for _ in range(cfg.num_layers)])
        self.head = Head(cfg)
        self.img_emb = ImageProj(cfg.clip_dim, d)
        self._rope: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def context(self, text: torch.Tensor, clip: torch.Tensor) -> torch.Tensor:
        """Prompt (B x 512 x 4096) and portrait (B x 257 x 1280) encoder outputs -> B x 769 x C."""
        return torch.cat([self.img_emb(clip), self.text_embedding(text)], dim=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, context: torch.Tensor, audio_first: torch.Tensor,
                audio_latter: torch.Tensor) -> torch.Tensor:
        """x: B x 36 x F x H x W; t: B (0..1000); context: B x 769 x C; audio_first: B x 1 x 5 x 12 x 768,
        audio_latter: B x (F - 1) x 8 x 12 x 768 -> B x 16 x F x H x W."""
        b, _, f, hh, ww = x.shape
        x = self.patch_embedding(x)  # B x C x F x H/2 x W/2
        h, w = x.shape[-2:]
        x = x.flatten(2).transpose(1, 2)  # B x L x C
        key = (f, h, w, x.device)
        if key not in self._rope:
            self._rope[key] = rope_tables(f, h, w, self.cfg.dim // self.cfg.num_heads, x.device)
        e = self.time_embedding(sinusoidal(self.cfg.freq_dim, t).to(x.dtype))  # B x C
        e0 = self.time_projection(e).unflatten(1, (6, self.cfg.dim))
        a = self.audio_injection(audio_first, audio_latter).flatten(0, 1)  # (B F) x 32 x C
        for blk in self.blocks:
            x = blk(x, e0, self._rope[key], context, a, f)
        x = self.head(x, e)  # B x L x 64
        x = x.view(b, f, h, w, self.cfg.out_dim, 2, 2).permute(0, 4, 1, 2, 5, 3, 6)
        return x.reshape(b, self.cfg.out_dim, f, hh, ww)


def load_dit(folder: Path, cfg: WanConfig, engine: str) -> WanAudioDiT:
    """The release's DiT from ``transformer/diffusion_pytorch_model.safetensors``, strictly."""
    path = require_file(folder, DIT_WEIGHTS, engine)
    model = WanAudioDiT(cfg)
    load_strict(model, read_state(path, engine), f"{engine}: {DIT_WEIGHTS}")
    return model


def fp8_refusal(device: torch.device, dtype: torch.dtype) -> str:
    """Why the DiT's linears cannot run in fp8 on ``device`` at ``dtype`` ("" where they can)."""
    if device.type != "cuda":
        return f"fp8 matmuls need a CUDA GPU with FP8 tensor cores, and this runs on the {device.type}"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (8, 9):
        return f"this GPU (CUDA capability {major}.{minor}) has no FP8 tensor cores (8.9 or newer has them)"
    if dtype != torch.bfloat16:
        return f"rowwise fp8 needs bf16 compute, and this runs in {str(dtype).removeprefix('torch.')}"
    try:
        import torchao.quantization  # noqa: F401
    except ImportError:
        return "torchao is not installed (NEWSSTUDIO_EXTRAS=gpu ./installers/setup.sh)"
    except Exception as exc:  # torchao checks the torch it finds at import and may raise anything
        return f"torchao failed to import ({type(exc).__name__}: {str(exc)[:120]})"
    return ""


def fp8_dit_linears(dit: WanAudioDiT) -> int:
    """Every Linear of the DiT's blocks to fp8 (e4m3) weights scaled per output row, with activations quantized per
    row at each call (torchao's ``Float8DynamicActivationFloat8WeightConfig``), in place; returns how many. The
    embeddings, the audio projection and the head stay in the compute dtype."""
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

    chosen = []

    def in_blocks(module: nn.Module, fqn: str) -> bool:
        if isinstance(module, nn.Linear) and fqn.startswith("blocks."):
            chosen.append(fqn)
            return True
        return False

    # set_inductor_config=False: torchao's recommended inductor settings are process-wide (coordinate-descent tuning
    # lengthens every later compile in the process, the bf16 forms' too)
    config = Float8DynamicActivationFloat8WeightConfig(granularity=PerRow(), set_inductor_config=False)
    try:
        quantize_(dit, config, filter_fn=in_blocks)
    except Exception as exc:  # the boundary to torchao
        raise ModelLoadError(f"torchao could not convert the DiT's linears to fp8 ({type(exc).__name__}: "
                             f"{str(exc)[:200]}): use the engine without fp8.") from exc
    return len(chosen)


def variant_info(base: GeneratorInfo, decoder: VideoDecoder, fp8_linears: bool, first_window_frames: int = 0
                 ) -> GeneratorInfo:
    """The facts of the engine with its options: its own registry name and a label that says them (and the frames
    of its stream's first window, which the core reads)."""
    name, label, weights, licence = base.name, base.label, base.weights, base.licence
    if decoder is VideoDecoder.TAEHV:
        name, label = f"{name}-taehv", f"{label}, tiny decoder (TAEHV)"
        weights, licence = weights + (TAEHV_WEIGHTS,), f"{licence}; MIT (TAEHV)"
    if fp8_linears:
        name, label = f"{name}-fp8", f"{label}, {FP8_LABEL}"
    return replace(base, name=name, label=label, weights=weights, licence=licence,
                   first_window_frames=first_window_frames)


def shifted_sigmas(steps: int, shift: float = SHIFT) -> list[float]:
    s = torch.linspace(1.0, 0.0, steps + 1, dtype=torch.float64)
    return (shift * s / (1 + (shift - 1) * s)).tolist()


class WanDiTGenerator(NeuralGenerator):
    info = GeneratorInfo(
        name="wan2.1-1.3b", label="EchoMimicV3-flash (Wan2.1 1.3B DiT)",
        family="video DiT (flow matching, 8 steps x 2 CFG)",
        native_px=1024, pyramidal_px=288, audio=Wav2Vec2Base.spec, interpolation=InterpolationKind.FLOW,
        batch_sizes=(WINDOW_FRAMES,), compile_backends=("inductor", "cuda_graphs"), stream_windows=True,
        weights=(DIT_WEIGHTS,), licence="Apache-2.0 (EchoMimicV3 and Wan2.1)",
        needs_gpu_reason="one 81-frame window is 8 steps x 2 passes of a 1.9 G-parameter DiT over 6,804 to 86,016 "
                         "tokens plus a video VAE decode: minutes on a 2-core CPU")
    config = WAN_1_3B
    audio_dirs = ("chinese-wav2vec2-base",)  # the flash release's
    # the DiT at the window's shape: its norms, modulation and RoPE fused (1.74 -> 0.89 s a window, H100); the short
    # first window ("dit_first") is graphed uncompiled (module docstring)
    compiled_targets = frozenset({"dit"})
    requires = ("diffusers", "transformers", "safetensors")
    loads_weights = False  # the Wan VAE and the prompt / image encoders are not read yet (module docstring)

    def __init__(self, config: WanConfig | None = None, steps: int = STEPS, latent_frames: int = LATENT_FRAMES,
                 vae_config: dict | None = None, decoder: VideoDecoder = VideoDecoder.WAN_VAE,
                 fp8_linears: bool = False, stream_first_latents: int = STREAM_FIRST_LATENTS,
                 context_latents: int = CONTEXT_LATENTS) -> None:
        super().__init__()
        self.cfg = config or self.config
        self.steps = steps
        self.latent_frames = latent_frames
        self.window_frames = frames_of(latent_frames)
        self.schedule = WindowSchedule(latent_frames, stream_first_latents, context_latents)
        self.opened_first_latents = stream_first_latents  # the short window the opened form has graphs for
        self.vae_config = {"base_dim": self.cfg.vae_base_dim, "z_dim": 16, **(vae_config or {})}
        self.decoder = decoder
        self.fp8_linears = fp8_linears
        self.fp8_count = 0  # linears converted to fp8 by ``open``
        self.fp8_note = "not opened yet"  # why they were not ("" once they are)
        self.info = variant_info(type(self).info, decoder, fp8_linears, self.schedule.first_window_frames)

    @property
    def precision_label(self) -> str:
        p = self.settings.precision
        if not self.fp8_linears:
            return p
        return f"{p}, {FP8_LABEL}" if self.fp8_count else f"{p} (no fp8 DiT linears: {self.fp8_note})"

    def _build_twin(self) -> None:
        # built where it runs and in its dtype: the 14 B twin is 37 GB in bf16, with no host copy and no fp32 stage
        with torch.device(self.device), default_dtype(self.dtype):
            self.dit = WanAudioDiT(self.cfg)
            if self.decoder is VideoDecoder.TAEHV:
                self.taehv = TAEHVDecoder()
            else:
                from diffusers import AutoencoderKLWan

                self.vae = AutoencoderKLWan(**self.vae_config)

    def _load(self, folder: Path) -> None:
        self.dit = load_dit(folder, self.cfg, self.info.label)
        loaded = "the DiT"
        if self.decoder is VideoDecoder.TAEHV:
            self.taehv = load_taehv(folder, self.info.label)
            loaded = f"the DiT and {TAEHV_WEIGHTS}"
        raise ModelLoadError(f"{self.info.label}: {loaded} in {folder} loaded, but its Wan VAE, UMT5-XXL prompt "
                             "encoder and CLIP image encoder are not supported yet: the engine runs only as a timing "
                             "twin (start it without a weights folder).")

    def _to_device(self) -> None:
        self.dit.to(self.device, self.dtype).eval()
        if self.fp8_linears:
            self.fp8_note = fp8_refusal(self.device, self.dtype)
            if self.fp8_note:
                log.warning("%s: the DiT's linears stay in %s: %s", self.info.label, self.settings.precision,
                            self.fp8_note)
            else:
                self.fp8_count = fp8_dit_linears(self.dit)
        if self.decoder is VideoDecoder.TAEHV:
            self.taehv.to(self.device, self.dtype).eval()
            decode = self._decode_taehv
        else:
            torch.nn.Module.to(self.vae, self.device, self.dtype).eval()
            decode = self._decode
        self.fns = {"dit": self.dit, "vae_decoder": decode}
        self.opened_first_latents = self.schedule.first_latents
        if self._short_first:
            self.fns["dit_first"] = self.dit  # the short first window's shapes (``_capture_graphs``)

    @property
    def _short_first(self) -> bool:
        """A stream starts with a window shorter than the others (a DiT call of another shape)."""
        return 0 < self.schedule.first_latents < self.latent_frames

    def _decode(self, z: torch.Tensor) -> torch.Tensor:
        """1 x 16 x F x h x w -> 1 x 3 x (4 (F - 1) + 1) x 8h x 8w in -1..1."""
        return self.vae.decode(z).sample

    def _decode_taehv(self, z: torch.Tensor) -> torch.Tensor:
        """1 x 16 x F x h x w -> 1 x 3 x (4 (F - 1) + 1) x 8h x 8w in -1..1 (TAEHV's 0..1 rescaled)."""
        return self.taehv(z) * 2 - 1

    def _prepare(self, anchor) -> None:
        s = self.settings.size_px
        if s % 16:
            raise ModelLoadError(f"{self.info.label}: the size must be a multiple of 16 px, got {s}.")
        h = s // 8
        d, dev, dt = self.cfg, self.device, self.dtype
        with seeded(self.settings.seed + 1, dev):
            # the conditioning a real run computes once per portrait and prompt (UMT5, CLIP, VAE encode of the
            # portrait + mask): random here, with their real shapes
            text = torch.randn((1, TEXT_TOKENS, d.text_dim), device=dev, dtype=dt)
            clip = torch.randn((1, CLIP_TOKENS, d.clip_dim), device=dev, dtype=dt)
            self.y = torch.randn((1, d.in_dim - d.out_dim, self.latent_frames, h, h), device=dev, dtype=dt)
            self.noise = torch.randn((1, d.out_dim, self.latent_frames, h, h), device=dev, dtype=dt)
        self.context = self.dit.context(text, clip)  # 1 x 769 x C
        self.sigmas = shifted_sigmas(self.steps)
        self.new_stream()

    def new_stream(self) -> None:
        """The next window is a stream's first (``Generator.new_stream``): what was made ahead, the audio waiting for
        its window and the context carried between windows are dropped."""
        d, s = self.cfg, self.settings.size_px
        self.ahead = torch.zeros((0, 3, s, s), device=self.device)  # frames generated, not yet handed out
        self.pending = torch.zeros((0, d.audio_layers, d.audio_dim), device=self.device)  # audio of frames from made on
        self.fed = 0  # frames whose audio has arrived
        self.made = 0  # frames generated
        self.windows = 0  # windows run in this stream
        # streaming: the last window's last latent frames (1 x 16 x k x h x w) and the audio of the frames they show
        self.tail: tuple[torch.Tensor, torch.Tensor] | None = None

    def set_first_window(self, latents: int) -> None:
        """From the next stream on: a short first window of ``latents`` latent frames, or whole windows (0), so that
        a benchmark runs both schedules on one opened form. A short window of another size than the form was opened
        with has no CUDA graph there, and is refused."""
        schedule = WindowSchedule(self.latent_frames, latents, self.schedule.context_latents)
        short = 0 < latents < self.latent_frames
        if short and self.settings.cuda_graphs and latents != self.opened_first_latents:
            raise InputError(f"{self.info.label}: this form has no CUDA graph of a {latents}-latent first window: "
                             "open one with that stream_first_latents.")
        if short:
            self.fns.setdefault("dit_first", self.dit)
        self.schedule = schedule
        self.info = replace(self.info, first_window_frames=schedule.first_window_frames)

    def audio_windows(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """frames_of(F) x 12 x 768 -> the first latent frame's 1 x 5 windows and the others' (F - 1) x 8 (the
        release's 5-frame windows, clamped at the edges, and its ``get_ai2v_audio``)."""
        n = feats.shape[0]
        half = AUDIO_WINDOW // 2
        idx = (torch.arange(n)[:, None] + torch.arange(-half, half + 1)[None]).clamp(0, n - 1).to(feats.device)
        win = feats[idx]  # n x 5 x 12 x 768
        first = win[:1][None]  # 1 x 1 x 5 x 12 x 768
        groups = win[1:].view((n - 1) // 4, 4, AUDIO_WINDOW, *feats.shape[1:])  # (F - 1) x 4 x 5 x 12 x 768
        latter = torch.cat([groups[:, 0, :half + 1], groups[:, 1:-1, half], groups[:, -1, half:]], dim=1)
        return first, latter[None]  # ..., 1 x (F - 1) x 8 x 12 x 768

    def run_window(self, feats: torch.Tensor) -> torch.Tensor:
        """One whole window on its own: window_frames x 12 x 768 audio -> window_frames x 3 x S x S frames, 0..255."""
        return self._frames(self.fns["vae_decoder"](self.denoise(feats)))

    def _frames(self, video: torch.Tensor) -> torch.Tensor:
        """The decoder's 1 x 3 x T x H x W in -1..1 -> T x 3 x S x S, 0..255."""
        frames = ((video[0].transpose(0, 1).float() + 1) * 127.5).clamp(0, 255)
        return to_size(frames, self.settings.size_px)

    def denoise(self, feats: torch.Tensor, given: torch.Tensor | None = None) -> torch.Tensor:
        """The DiT's steps over one window: frames_of(F) x 12 x 768 audio -> 1 x 16 x F x h x w latents (F from the
        audio's length). ``given``: 1 x 16 x k x h x w latents of its first k latent frames, known frames of the InP
        conditioning (mask 1, their latents), as the portrait's frame is in the release's image-to-video run."""
        f = (feats.shape[0] - 1) // 4 + 1
        first, latter = self.audio_windows(feats.to(self.device, self.dtype))
        first2 = torch.cat([first, torch.zeros_like(first)])  # guidance: audio on / off (the release's zeros)
        latter2 = torch.cat([latter, torch.zeros_like(latter)])
        ctx2 = self.context.expand(2, -1, -1)
        x, y = self.noise[:, :, :f], self.y[:, :, :f]
        if given is not None:
            k = given.shape[2]
            y = y.clone()
            y[:, :MASK_CHANNELS, :k] = 1.0
            y[:, MASK_CHANNELS:, :k] = given
        dit = self.fns["dit"] if f == self.latent_frames else self.fns["dit_first"]
        for s0, s1 in zip(self.sigmas[:-1], self.sigmas[1:]):
            inp = torch.cat([x, y], dim=1).expand(2, -1, -1, -1, -1)
            t = torch.full((2,), s0 * 1000.0, device=self.device)
            v = dit(inp, t, ctx2, first2, latter2)
            v = v[1:] + 2.0 * (v[:1] - v[1:])  # audio guidance 2
            x = x + (s1 - s0) * v
        return x

    def _next_window(self) -> torch.Tensor:
        """The stream's next window (``self.schedule``) on the audio that has arrived for its new frames (the rest of
        them silent) -> its new frames, N x 3 x S x S, 0..255."""
        plan: WindowPlan = self.schedule.plan(self.windows)
        n = plan.new_frames
        feats = self.pending[:n]
        feats = torch.cat([feats, feats.new_zeros(n - feats.shape[0], *feats.shape[1:])])
        self.pending = self.pending[n:]
        self.made += n
        self.windows += 1
        if not self.schedule.streaming:
            return self.run_window(feats)
        given = None
        if plan.context:
            given, heard = self.tail
            feats = torch.cat([heard, feats])  # the window's audio from its first frame, the context's
        z = self.denoise(feats, given)
        k = self.schedule.context_latents
        self.tail = (z[:, :, -k:].clone(), feats[feats.shape[0] - frames_of(k):])
        return self._frames(self.fns["vae_decoder"](z))[plan.skip_frames:]

    def _generate(self, coeffs: torch.Tensor, features: torch.Tensor | None) -> torch.Tensor:
        """A window runs when the frames handed out reach its start, on the audio that has arrived for it (the rest
        of it silent): with ``batch_frames`` = the window (``info.batch_sizes``) every whole window hears all its
        audio. Audio for frames already generated is too late and dropped."""
        b = features.shape[0]
        late = max(0, self.made - self.fed)
        self.fed += b
        fresh = features[late:].reshape(-1, *self.pending.shape[1:]).to(self.device).float()  # one row per frame
        self.pending = torch.cat([self.pending, fresh])
        while self.ahead.shape[0] < b:
            self.ahead = torch.cat([self.ahead, self._next_window()])
        out, self.ahead = self.ahead[:b], self.ahead[b:]
        return out

    def _targets(self) -> list[CompileTarget]:
        return [self._dit_target("dit", self.latent_frames)]

    def _capture_graphs(self) -> None:
        """The window's DiT (``_targets``, compiled) as the base captures it; then the short first window's as a graph
        of its eager code. Where that capture fails, the short window stays eager, and a warning says why: it runs
        once a stream."""
        super()._capture_graphs()
        if not self._short_first:
            return
        from studio.generators.graphs import Graphed

        t = self._dit_target("dit_first", self.schedule.first_latents)
        try:
            with torch.inference_mode():
                self.fns["dit_first"] = Graphed(self.dit, t.example_inputs, torch.cuda.Stream(self.device))
        except RuntimeError as exc:  # the boundary to CUDA graph capture
            log.warning("%s: the short first window runs eager (its CUDA graph failed: %s)", self.info.label,
                        (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200])

    def _dit_target(self, name: str, latents: int) -> CompileTarget:
        """The DiT at a window of ``latents`` latent frames (one batch of the 2 guidance passes)."""
        h = self.settings.size_px // 8
        x = torch.zeros((2, self.cfg.in_dim, latents, h, h), device=self.device, dtype=self.dtype)
        t = torch.zeros(2, device=self.device)
        first, latter = self.audio_windows(torch.zeros((frames_of(latents), self.cfg.audio_layers,
                                                        self.cfg.audio_dim), device=self.device, dtype=self.dtype))
        return CompileTarget(name, self.dit, (x, t, self.context.expand(2, -1, -1).contiguous(),
                                              first.expand(2, -1, -1, -1, -1).contiguous(),
                                              latter.expand(2, -1, -1, -1, -1).contiguous()), dynamic_batch=False)


class Wan14BGenerator(WanDiTGenerator):
    info = GeneratorInfo(
        name="wan2.1-14b", label="FantasyTalking2-class (Wan2.1 14B DiT)",
        family="video DiT (flow matching, 8 steps x 2 CFG)", native_px=1024, pyramidal_px=288,
        audio=Wav2Vec2Base.spec, interpolation=InterpolationKind.FLOW, batch_sizes=(WINDOW_FRAMES,),
        compile_backends=("inductor", "cuda_graphs"), stream_windows=True, weights=(),
        licence="no public weights (paper arXiv 2508.11255): a timing twin only",
        needs_gpu_reason="a 20 G-parameter DiT (Wan 14B with its audio layers): 37 GiB of bf16 weights, on a GPU "
                         "with room for them")
    config = WAN_14B

    def _load(self, folder: Path) -> None:
        raise ModelLoadError(f"{self.info.label}: no public weights exist for this engine; it runs only as a timing "
                             "twin (start it without a weights folder).")


def _stream(kwargs: dict) -> dict:
    """The streaming option of the factory's keyword arguments (``GeneratorInfo.stream_windows``)."""
    return {k: kwargs[k] for k in ("stream_first_latents",) if k in kwargs}


@GENERATORS.register("wan2.1-1.3b")
def _make_1_3b(**kwargs) -> WanDiTGenerator:
    return WanDiTGenerator(**_stream(kwargs))


@GENERATORS.register("wan2.1-1.3b-taehv")
def _make_1_3b_taehv(**kwargs) -> WanDiTGenerator:
    return WanDiTGenerator(decoder=VideoDecoder.TAEHV, **_stream(kwargs))


@GENERATORS.register("wan2.1-1.3b-fp8")
def _make_1_3b_fp8(**kwargs) -> WanDiTGenerator:
    return WanDiTGenerator(fp8_linears=True, **_stream(kwargs))


@GENERATORS.register("wan2.1-1.3b-taehv-fp8")
def _make_1_3b_taehv_fp8(**kwargs) -> WanDiTGenerator:
    return WanDiTGenerator(decoder=VideoDecoder.TAEHV, fp8_linears=True, **_stream(kwargs))


@GENERATORS.register("wan2.1-14b")
def _make_14b(**kwargs) -> Wan14BGenerator:
    return Wan14BGenerator(**_stream(kwargs))
