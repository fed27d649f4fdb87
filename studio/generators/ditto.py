"""Ditto as a generator: HuBERT features -> motion-space diffusion (LMDM) -> LivePortrait-style warp and decoder
(Apache-2.0 code; its InsightFace parts are non-commercial and not used here).

Release layout (``weights_dir``, the release's ``checkpoints`` folder), the PyTorch models:
``ditto_pytorch/models/{appearance_extractor, motion_extractor, warp_network, decoder, stitch_network,
lmdm_v0.4_hubert}.pth`` (LMDM's tensors under ``model_state_dict``; the stitching MLP under ``retarget_shoulder``).
Its HuBERT ships as ONNX (``ditto_pytorch/aux_models/hubert_streaming_fix_kv.onnx``), read through ONNX Runtime
(``audio_encoders.HubertOnnx``); the twin uses transformers' HuBERT-large with random weights instead.

Per call of B output frames: the LMDM (8 FiLM transformer layers, 8 heads, width 512, rotary positions) denoises an
80-frame window of 265-d motion (scale, pitch / yaw / roll bins, shift, expression) by DDIM with classifier-free
guidance (two passes per step), conditioned on the window's audio (1024 HuBERT + 35 control channels, zero here: the
release's cfg pickle that sets them is not read) and on the previous frame's motion; the window ends at the newest
frame, so the B newest rows are this call's motion. Then per frame: keypoints, stitching, warp, 512 px decoder.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from studio.generators.audio_encoders import HubertLarge
from studio.generators.common import NeuralGenerator, image_tensor, to_size
from studio.generators.liveportrait import (MLP, AppearanceFeatureExtractor, LivePortraitConfig, MotionExtractor,
                                            SPADEDecoder, WarpingNetwork, bins_to_degrees, stitch, transform_keypoints)
from studio.generators.weights import load_strict, read_state, require_file, strip_prefix
from studio.contracts import GENERATORS, CompileTarget, GeneratorInfo, InterpolationKind

MOTION_DIM = 265  # scale 1 + pitch 66 + yaw 66 + roll 66 + t 3 + exp 63
AUDIO_DIM = 1024 + 35
SEQ_FRAMES = 80
DIR = "ditto_pytorch/models/"
HUBERT_ONNX = "ditto_pytorch/aux_models/hubert_streaming_fix_kv.onnx"
FILES = {"appearance": DIR + "appearance_extractor.pth", "motion": DIR + "motion_extractor.pth",
         "warp": DIR + "warp_network.pth", "decoder": DIR + "decoder.pth", "stitch": DIR + "stitch_network.pth",
         "lmdm": DIR + "lmdm_v0.4_hubert.pth"}


# -- LMDM (the release's lmdm_modules/model.py, names kept for its state dict) -----------------------------------------

class RotaryEmbedding(nn.Module):
    """Rotary positions over the whole width (``freqs`` is a buffer the release saves)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("freqs", 1.0 / (10000 ** (torch.arange(0, dim, 2)[:dim // 2].float() / dim)))

    def rotate(self, t: torch.Tensor) -> torch.Tensor:
        """B x N x D -> rotated, pairs (2i, 2i + 1) by position x freqs[i]."""
        n = t.shape[-2]
        ang = torch.arange(n, device=t.device, dtype=self.freqs.dtype)[:, None] * self.freqs[None]
        ang = ang.repeat_interleave(2, dim=-1).to(t.dtype)  # N x D
        x = t.unflatten(-1, (-1, 2))
        rot = torch.stack((-x[..., 1], x[..., 0]), dim=-1).flatten(-2)
        return t * ang.cos() + rot * ang.sin()


class DenseFiLM(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Mish(), nn.Linear(d, d * 2))

    def forward(self, t):
        scale, shift = self.block(t)[:, None].chunk(2, dim=-1)
        return scale, shift


def _film(x, ss):
    return (ss[0] + 1) * x + ss[1]


class EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.linear1 = nn.Linear(d, ff)
        self.linear2 = nn.Linear(ff, d)
        self.norm1 = nn.LayerNorm(d)
        self.norm2 = nn.LayerNorm(d)
        self.rotary = rotary

    def forward(self, x):
        h = self.norm1(x)
        qk = self.rotary.rotate(h)
        x = x + self.self_attn(qk, qk, h, need_weights=False)[0]
        return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))


class FiLMDecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.linear1 = nn.Linear(d, ff)
        self.linear2 = nn.Linear(ff, d)
        self.norm1 = nn.LayerNorm(d)
        self.norm2 = nn.LayerNorm(d)
        self.norm3 = nn.LayerNorm(d)
        self.film1 = DenseFiLM(d)
        self.film2 = DenseFiLM(d)
        self.film3 = DenseFiLM(d)
        self.rotary = rotary

    def forward(self, x, mem, t):
        h = self.norm1(x)
        qk = self.rotary.rotate(h)
        x = x + _film(self.self_attn(qk, qk, h, need_weights=False)[0], self.film1(t))
        h = self.norm2(x)
        x = x + _film(self.multihead_attn(self.rotary.rotate(h), self.rotary.rotate(mem), mem,
                                          need_weights=False)[0], self.film2(t))
        return x + _film(self.linear2(F.gelu(self.linear1(self.norm3(x)))), self.film3(t))


class LayerStack(nn.Module):
    def __init__(self, layers: list[nn.Module]) -> None:
        super().__init__()
        self.stack = nn.ModuleList(layers)

    def forward(self, x, mem, t):
        for layer in self.stack:
            x = layer(x, mem, t)
        return x


class MotionDecoder(nn.Module):
    """The LMDM's denoiser: x_t (B x 80 x 265) + last motion + audio (B x 80 x 1059) + step -> x_0."""

    def __init__(self, nfeats: int = MOTION_DIM, seq_len: int = SEQ_FRAMES, d: int = 512, ff: int = 1024,
                 layers: int = 8, heads: int = 8, cond_dim: int = AUDIO_DIM) -> None:
        super().__init__()
        self.d = d
        self.rotary = RotaryEmbedding(d)
        self.time_mlp = nn.Sequential(nn.Identity(), nn.Linear(d, d * 4), nn.Mish())  # [0]: sinusoidal (no weights)
        self.to_time_cond = nn.Sequential(nn.Linear(d * 4, d))
        self.to_time_tokens = nn.Sequential(nn.Linear(d * 4, d * 2))
        self.null_cond_embed = nn.Parameter(torch.randn(1, seq_len, d))
        self.null_cond_hidden = nn.Parameter(torch.randn(1, d))
        self.norm_cond = nn.LayerNorm(d)
        self.input_projection = nn.Linear(nfeats * 2, d)
        self.cond_encoder = nn.Sequential(*[EncoderLayer(d, heads, ff, self.rotary) for _ in range(2)])
        self.cond_projection = nn.Linear(cond_dim, d)
        self.non_attn_cond_projection = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.SiLU(), nn.Linear(d, d))
        self.seqTransDecoder = LayerStack([FiLMDecoderLayer(d, heads, ff, self.rotary) for _ in range(layers)])
        self.final_layer = nn.Linear(d, nfeats)

    def time_embedding(self, t: torch.Tensor) -> torch.Tensor:
        half = self.d // 2
        emb = torch.exp(torch.arange(half, device=t.device) * -(math.log(10000) / (half - 1)))
        emb = t.float()[:, None] * emb[None]
        return torch.cat((emb.sin(), emb.cos()), dim=-1)

    def forward(self, x, cond_frame, cond, t, keep: torch.Tensor):
        """x: B x N x 265, cond_frame: B x 265, cond: B x N x 1059, t: B long, keep: B bool (False: unconditional)
        -> B x N x 265."""
        b, n, _ = x.shape
        x = self.input_projection(torch.cat([x, cond_frame[:, None].expand(b, n, -1)], dim=-1))
        tokens = self.cond_encoder(self.cond_projection(cond))
        tokens = torch.where(keep[:, None, None], tokens, self.null_cond_embed.to(tokens.dtype)[:, :n])
        hidden = self.non_attn_cond_projection(tokens.mean(dim=-2))
        th = self.time_mlp(self.time_embedding(t).to(x.dtype))
        tc = self.to_time_cond(th) + torch.where(keep[:, None], hidden, self.null_cond_hidden.to(hidden.dtype))
        t_tokens = self.to_time_tokens(th).view(b, 2, self.d)
        mem = self.norm_cond(torch.cat((tokens, t_tokens), dim=-2))
        return self.final_layer(self.seqTransDecoder(x, mem, tc))


def cosine_alphas_cumprod(n: int = 1000, s: float = 8e-3) -> torch.Tensor:
    t = torch.arange(n + 1, dtype=torch.float64) / n + s
    a = torch.cos(t / (1 + s) * math.pi / 2) ** 2
    betas = (1 - a[1:] / a[:-1]).clamp(0, 0.999)
    return torch.cumprod(1 - betas, 0)


class DDIMSampler:
    """The LMDM's sampling (release: 1000-step cosine schedule, DDIM with eta 1, guidance weight 2) around a
    denoiser ``fn(x, cond_frame, cond, t, keep)``; its noise is drawn once from ``seed`` (a run repeats)."""

    def __init__(self, fn, steps: int, seed: int, device: torch.device) -> None:
        self.fn = fn
        self.guidance = 2.0
        self.ac = cosine_alphas_cumprod().float().to(device)
        times = list(reversed(torch.linspace(-1, 999, steps + 1).int().tolist()))
        self.pairs = list(zip(times[:-1], times[1:]))
        g = torch.Generator().manual_seed(seed)
        self.x_T = torch.randn((1, SEQ_FRAMES, MOTION_DIM), generator=g).to(device)
        self.noise = torch.randn((steps, SEQ_FRAMES, MOTION_DIM), generator=g).to(device)
        self.keep = torch.tensor([True, False], device=device)

    def guided(self, x, cond_frame, cond, t):
        """Classifier-free guidance: the conditional and the unconditional pass as one batch of two."""
        out = self.fn(x.expand(2, -1, -1), cond_frame.expand(2, -1), cond.expand(2, -1, -1), t.expand(2), self.keep)
        return out[1:] + (out[:1] - out[1:]) * self.guidance

    def sample(self, cond_frame: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """1 x 265 (previous motion), 1 x 80 x 1059 (audio) -> 1 x 80 x 265."""
        x = self.x_T.to(cond.dtype)
        for i, (tt, tn) in enumerate(self.pairs):
            t = torch.full((1,), tt, device=cond.device, dtype=torch.long)
            x0 = self.guided(x, cond_frame, cond, t)
            if tn < 0:
                return x0
            a, an = self.ac[tt], self.ac[tn]
            eps = x / (1 - a).sqrt() - x0 / (1 / a - 1).sqrt()
            sigma = ((1 - a / an) * (1 - an) / (1 - a)).sqrt()
            c = (1 - an - sigma ** 2).clamp(min=0).sqrt()  # >= 0 exactly; fp32 rounding can dip below with few steps
            x = x0 * an.sqrt() + c * eps + sigma * self.noise[i].to(x.dtype)
        return x


class DittoNets(nn.Module):
    def __init__(self, cfg: LivePortraitConfig, lmdm_width: int = 512, lmdm_layers: int = 8) -> None:
        super().__init__()
        k = cfg.num_kp
        self.appearance = AppearanceFeatureExtractor(cfg)
        self.motion = MotionExtractor(cfg)
        self.warp = WarpingNetwork(cfg)
        self.decoder = SPADEDecoder(cfg)
        self.stitch = MLP(6 * k, cfg.stitching_hidden, 3 * k + 2)
        self.lmdm = MotionDecoder(d=lmdm_width, ff=2 * lmdm_width, layers=lmdm_layers)

    def load_release(self, folder: Path, engine: str) -> None:
        for name in ("appearance", "motion", "warp", "decoder"):
            path = require_file(folder, FILES[name], engine)
            load_strict(getattr(self, name), read_state(path, engine), f"{engine}: {FILES[name]}")
        path = require_file(folder, FILES["stitch"], engine)
        load_strict(self.stitch, strip_prefix(read_state(path, engine, key="retarget_shoulder"), "module."),
                    f"{engine}: {FILES['stitch']}")
        path = require_file(folder, FILES["lmdm"], engine)
        load_strict(self.lmdm, read_state(path, engine, key="model_state_dict"), f"{engine}: {FILES['lmdm']}")


def motion_to_keypoints(m: torch.Tensor, kp_c: torch.Tensor) -> torch.Tensor:
    """B x 265 motion rows + canonical keypoints (1 x K x 3) -> B x K x 3 driving keypoints."""
    b = m.shape[0]
    scale = m[:, 0] + 1
    pitch, yaw, roll = (bins_to_degrees(m[:, 1 + 66 * i:67 + 66 * i]) for i in range(3))
    t = m[:, 199:202]
    exp = m[:, 202:265].reshape(b, -1, 3)
    return transform_keypoints(kp_c.expand(b, -1, -1), pitch, yaw, roll, exp, scale, t)


class DittoGenerator(NeuralGenerator):
    info = GeneratorInfo(
        name="ditto", label="Ditto", family="motion-space diffusion (LMDM) + 3-D warp + SPADE decoder",
        native_px=512, pyramidal_px=0, audio=HubertLarge.spec, interpolation=InterpolationKind.FLOW,
        batch_sizes=(1, 5, 8, 16), compile_backends=("inductor", "cuda_graphs", "onnxruntime"),
        weights=tuple(FILES.values()) + (HUBERT_ONNX,),
        licence="Apache-2.0 (code and weights); InsightFace parts: non-commercial (not used here)",
        needs_gpu_reason="per frame it runs HuBERT-large, 50 DDIM steps x 2 guidance passes of its motion "
                         "transformer (amortized over the batch), a 5-D warp and a 512 px decoder: seconds per "
                         "frame on a 2-core CPU")

    def __init__(self, config: LivePortraitConfig | None = None, sampling_steps: int = 50, lmdm_width: int = 512,
                 lmdm_layers: int = 8, source_px: int = 256) -> None:
        super().__init__()
        self.source_px = source_px  # the release's 256; tests shrink it
        self.cfg = config or LivePortraitConfig()
        self.steps = sampling_steps
        self.lmdm_width, self.lmdm_layers = lmdm_width, lmdm_layers

    requires = ("transformers",)  # the HuBERT-large twin (the release's own HuBERT is ONNX)

    def audio_encoder(self):
        """Ditto's own HuBERT (ONNX) when the weights are installed, else the HuBERT-large twin."""
        from studio.generators.audio_encoders import HubertLarge, HubertOnnx
        s = self.settings
        if s.weights_dir is not None and not self.twin:
            return HubertOnnx(s.device, s.precision, require_file(Path(s.weights_dir), HUBERT_ONNX, self.info.label))
        return HubertLarge(s.device, s.precision, seed=s.seed)

    def _build_twin(self) -> None:
        self.nets = DittoNets(self.cfg, self.lmdm_width, self.lmdm_layers)

    def _load(self, folder: Path) -> None:
        self.nets = DittoNets(self.cfg, self.lmdm_width, self.lmdm_layers)
        self.nets.load_release(folder, self.info.label)

    def _to_device(self) -> None:
        self.nets.to(self.device, self.dtype).eval()
        self.sampler = DDIMSampler(lambda *a: self.fns["lmdm"](*a), self.steps, self.settings.seed, self.device)
        self.fns = {"lmdm": self.nets.lmdm, "warp": self.nets.warp, "decoder": self.nets.decoder}

    def _prepare(self, anchor) -> None:
        n = self.nets
        src = image_tensor(anchor.image, self.source_px, self.device).to(self.dtype)
        self.feature = n.appearance(src)  # 1 x 32 x 16 x 64 x 64
        info = {k: v.float() for k, v in n.motion(src).items()}
        k = self.cfg.num_kp
        self.kp_c = info["kp"].view(1, k, 3)
        # the source's motion row (the release's _cvt_LP_motion_info, scale - 1): the first frame's condition
        self.motion0 = torch.cat([info["scale"] - 1, info["pitch"], info["yaw"], info["roll"], info["t"],
                                  info["exp"]], dim=1)  # 1 x 265
        self.kp_source = motion_to_keypoints(self.motion0, self.kp_c)
        self.last = self.motion0.clone()
        self.history = torch.zeros((0, AUDIO_DIM), device=self.device)

    def _generate(self, coeffs: torch.Tensor, features: torch.Tensor | None) -> torch.Tensor:
        b = features.shape[0]
        aud = features.reshape(b, -1).to(self.device).float()  # B x 1024
        aud = torch.cat([aud, aud.new_zeros(b, AUDIO_DIM - aud.shape[1])], 1)
        self.history = torch.cat([self.history, aud])[-SEQ_FRAMES:]
        window = F.pad(self.history, (0, 0, SEQ_FRAMES - self.history.shape[0], 0))[None].to(self.dtype)
        motion = self.sampler.sample(self.last.to(self.dtype), window)[0, -b:].float()  # B x 265
        self.last = motion[-1:]
        kp_d = motion_to_keypoints(motion, self.kp_c)
        kp_d = stitch(lambda x: self.nets.stitch(x.to(self.dtype)).float(), self.kp_source.expand(b, -1, -1), kp_d)
        bs = self.settings.batch_frames
        out = []
        for i in range(0, b, bs):
            kd = kp_d[i:i + bs].to(self.dtype)
            n = kd.shape[0]
            w = self.fns["warp"](self.feature.expand(n, -1, -1, -1, -1), self.kp_source.expand(n, -1, -1).to(
                self.dtype), kd)
            out.append(self.fns["decoder"](w))
        return to_size(torch.cat(out).float() * 255.0, self.settings.size_px)

    def _targets(self) -> list[CompileTarget]:
        b = self.settings.batch_frames
        kp = self.kp_source.expand(b, -1, -1).to(self.dtype).contiguous()
        vol = self.feature.expand(b, -1, -1, -1, -1).contiguous()
        c = self.cfg.block_expansion * 4
        w = self.feature.shape[-1]
        x = torch.zeros((2, SEQ_FRAMES, MOTION_DIM), device=self.device, dtype=self.dtype)
        return [CompileTarget("lmdm", self.nets.lmdm, (x, x[:, 0], torch.zeros((2, SEQ_FRAMES, AUDIO_DIM),
                              device=self.device, dtype=self.dtype), torch.zeros(2, dtype=torch.long,
                              device=self.device), torch.tensor([True, False], device=self.device)),
                              dynamic_batch=False),
                CompileTarget("warp", self.nets.warp, (vol, kp, kp)),
                CompileTarget("decoder", self.nets.decoder, (torch.zeros((b, c, w, w), device=self.device,
                                                                         dtype=self.dtype),))]


@GENERATORS.register("ditto")
def _make(**kwargs) -> DittoGenerator:
    return DittoGenerator()
