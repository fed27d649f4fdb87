"""Audio-to-motion network: causal conv encoder on log-mel + autoregressive motion transformer with a bounded cache.

Time bases: log-mel at 100 frames/s (``studio.audio.features``), motion at 25 frames/s (4 mel frames per frame).
- ``AudioEncoder``: 3 causal 3-tap convs + 2 pointwise residual blocks; receptive field 7 mel frames (70 ms of
  history, nothing ahead), so windows of 20 mel frames give the same outputs as the whole stream for their last 14.
- ``MotionTransformer``: token t = linear(encoder outputs of mel frames 4t .. 4t+7) + linear(previous frame's
  coefficients); the last 4 of those 8 mel frames are the look-ahead. Mel frame j spans audio [10j, 10j + 25) ms,
  so frame t (centred at 40t + 20 ms) sees audio up to 40t + 95 ms: LOOKAHEAD_MS = 75 ms after its centre (55 ms after
  its end). Pre-LN blocks; attention over a sliding window of W tokens plus one summary token (the mean of the keys /
  values that left the window), with a learned bias per head and window offset. Outputs: the 5 mouth coefficients
  (sigmoid, 0..1) and 16 viseme logits.
``forward`` runs a whole sequence in parallel (training); ``step`` runs one frame against a ``KVState`` (streaming).
``Audio2MotionEnsemble`` runs independently trained models of one configuration as one model (same interface).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from studio.errors import ModelLoadError
from studio.neural.kvcache import CacheDType, KVState, push

LOOKAHEAD_MS = 75.0  # audio after a motion frame's centre that its output depends on
ENC_RECEPTIVE_FIELD = 7  # mel frames


@dataclass(frozen=True)
class ModelConfig:
    n_mels: int = 40
    enc_channels: int = 128
    d_model: int = 192
    n_layers: int = 4
    n_heads: int = 4
    window: int = 75  # tokens (3 s at 25 fps)
    mel_per_frame: int = 4
    lookahead_mel: int = 4
    n_out: int = 5
    n_visemes: int = 16
    dropout: float = 0.1

    @property
    def mel_per_token(self) -> int:
        return self.mel_per_frame + self.lookahead_mel

    def to_dict(self) -> dict:
        return asdict(self)


MEL_MEAN = -5.0  # fixed input normalization of log-mel (natural log)
MEL_STD = 4.0


class _CausalConv(nn.Module):
    def __init__(self, c_in: int, c_out: int, k: int) -> None:
        super().__init__()
        self.pad = k - 1
        self.conv = nn.Conv1d(c_in, c_out, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B x C x T
        return self.conv(F.pad(x, (self.pad, 0)))


class AudioEncoder(nn.Module):
    """B x T x n_mels log-mel -> B x T x C, causal, receptive field 7 frames."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        c = cfg.enc_channels
        self.convs = nn.ModuleList([_CausalConv(cfg.n_mels, c, 3), _CausalConv(c, c, 3), _CausalConv(c, c, 3)])
        self.pw = nn.ModuleList([nn.Conv1d(c, c, 1) for _ in range(2)])
        self.norm = nn.LayerNorm(c)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = ((mel - MEL_MEAN) / MEL_STD).transpose(1, 2)  # B x M x T
        for conv in self.convs:
            x = F.gelu(conv(x))
        for pw in self.pw:
            x = x + F.gelu(pw(x))
        return self.norm(x.transpose(1, 2))  # B x T x C (per-step norm keeps causality)


class _Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d, h = cfg.d_model, cfg.n_heads
        self.h, self.hd, self.w = h, d // h, cfg.window
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.rel_bias = nn.Parameter(torch.zeros(h, cfg.window))  # per head, per offset 0..W-1 (0 = itself)
        self.sum_bias = nn.Parameter(torch.zeros(h))
        self.drop = nn.Dropout(cfg.dropout)

    def _attend_parallel(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)  # each B x H x N x hd
        scale = self.hd**-0.5
        logits = (q @ k.transpose(-1, -2)) * scale  # B x H x N x N
        i = torch.arange(n, device=x.device)
        off = i[:, None] - i[None, :]  # N x N
        inside = (off >= 0) & (off < self.w)
        bias = self.rel_bias[:, off.clamp(0, self.w - 1)]  # H x N x N
        logits = torch.where(inside, logits + bias, torch.full_like(logits, float("-inf")))
        # Summary of the tokens that left the window: mean of k/v[0 .. i-W] for query i >= W.
        ck, cv = k.cumsum(2), v.cumsum(2)
        src = (i - self.w).clamp_min(0)
        cnt = (i - self.w + 1).clamp_min(1).to(x.dtype)[None, None, :, None]
        sk, sv = ck[:, :, src] / cnt, cv[:, :, src] / cnt  # B x H x N x hd
        has = (i >= self.w)[None, None, :, None]
        slog = (q * sk).sum(-1, keepdim=True) * scale + self.sum_bias[None, :, None, None]
        slog = torch.where(has, slog, torch.full_like(slog, float("-inf")))
        p = torch.softmax(torch.cat([logits, slog], dim=-1), dim=-1)
        out = p[..., :n] @ v + p[..., n:] * sv  # B x H x N x hd
        return out.transpose(1, 2).reshape(b, n, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.proj(self._attend_parallel(self.ln1(x))))
        return x + self.drop(self.mlp(self.ln2(x)))

    def step(self, x: torch.Tensor, layer: int, st: KVState, full: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """x (d,) one token -> (d,), with this layer's cache updated (returned as new tensors)."""
        d = x.shape[-1]
        q, k, v = self.qkv(self.ln1(x)).view(3, d)
        kc, ks, sk, kw = push(st.k[layer], st.k_scale[layer], st.sum_k[layer], k, full)
        vc, vs, sv, vw = push(st.v[layer], st.v_scale[layer], st.sum_v[layer], v, full)
        count = st.count + full
        n_valid = torch.clamp(st.n_valid + 1.0, max=float(self.w))
        qh = q.view(self.h, 1, self.hd)
        kh = kw.view(self.w, self.h, self.hd).transpose(0, 1)  # H x W x hd (index W-1 = newest)
        vh = vw.view(self.w, self.h, self.hd).transpose(0, 1)
        scale = self.hd**-0.5
        logits = (qh @ kh.transpose(-1, -2))[:, 0] * scale + self.rel_bias.flip(-1)  # H x W
        idx = torch.arange(self.w, device=x.device, dtype=torch.float32)
        logits = torch.where(idx[None] >= self.w - n_valid, logits, torch.full_like(logits, float("-inf")))
        mk = (sk / count.clamp_min(1.0)).view(self.h, self.hd)
        mv = (sv / count.clamp_min(1.0)).view(self.h, self.hd)
        slog = (qh[:, 0] * mk).sum(-1, keepdim=True) * scale + self.sum_bias[:, None]  # H x 1
        slog = torch.where(count > 0, slog, torch.full_like(slog, float("-inf")))
        p = torch.softmax(torch.cat([logits, slog], dim=-1), dim=-1)  # H x (W+1)
        att = (p[:, None, : self.w] @ vh)[:, 0] + p[:, self.w :] * mv  # H x hd
        x = x + self.proj(att.reshape(d))
        x = x + self.mlp(self.ln2(x))
        return x, (kc, ks, vc, vs, sk, sv, count, n_valid)


class MotionTransformer(nn.Module):
    """Encoder features per token + previous coefficients -> coefficients and viseme logits."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.inp = nn.Linear(cfg.mel_per_token * cfg.enc_channels, d)
        self.prev = nn.Linear(cfg.n_out, d)
        self.blocks = nn.ModuleList([_Block(cfg) for _ in range(cfg.n_layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, cfg.n_out)
        self.vis_head = nn.Linear(d, cfg.n_visemes)

    def tokens(self, enc: torch.Tensor, n_tokens: int) -> torch.Tensor:
        """enc B x (4N + 4) x C -> B x N x (8C): the encoder frames each token sees."""
        return _tokens(enc, n_tokens, self.cfg.mel_per_frame, self.cfg.lookahead_mel)

    def forward(self, feats: torch.Tensor, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """feats B x N x 8C, prev B x N x 5 (coefficients of frame t-1) -> (B x N x 5 in 0..1, B x N x 16)."""
        x = self.inp(feats) + self.prev(prev)
        for blk in self.blocks:
            x = blk(x)
        x = self.ln(x)
        return torch.sigmoid(self.head(x)), self.vis_head(x)

    def step(self, feat: torch.Tensor, prev: torch.Tensor, st: KVState) -> tuple[torch.Tensor, torch.Tensor, KVState]:
        """feat (8C,), prev (5,) -> (coeffs (5,), logits (16,), new state)."""
        y, logits, outs = self.step_layers(feat, prev, st, 0)
        return y, logits, _state_of(outs)

    def step_layers(self, feat: torch.Tensor, prev: torch.Tensor, st: KVState,
                    first_layer: int) -> tuple[torch.Tensor, torch.Tensor, list[tuple]]:
        """``step`` on cache layers ``first_layer`` .. ``first_layer + n_layers - 1`` of ``st``; returns each layer's
        new cache tensors instead of a state (an ensemble stacks its members' layers in one cache)."""
        x = self.inp(feat) + self.prev(prev)
        full = (st.n_valid >= float(self.cfg.window)).to(torch.float32)  # (1,)
        outs = []
        for i, blk in enumerate(self.blocks):
            x, o = blk.step(x, first_layer + i, st, full)
            outs.append(o)
        x = self.ln(x)
        return torch.sigmoid(self.head(x)), self.vis_head(x), outs


def _tokens(enc: torch.Tensor, n_tokens: int, m: int, la: int) -> torch.Tensor:
    b, _, c = enc.shape
    parts = [enc[:, j : j + m * n_tokens : m] for j in range(m + la)]  # each B x N x C (frame 4t + j)
    return torch.stack(parts, dim=2).reshape(b, n_tokens, (m + la) * c)


def _state_of(outs: list[tuple]) -> KVState:
    """Per-layer new cache tensors (``_Block.step``'s second output) -> one state; count and n_valid are shared."""
    return KVState(*[torch.stack([o[j] for o in outs]) for j in range(6)], outs[0][6], outs[0][7])


class Audio2Motion(nn.Module):
    """Encoder + motion transformer (the whole trainable model)."""

    def __init__(self, cfg: ModelConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg or ModelConfig()
        self.encoder = AudioEncoder(self.cfg)
        self.motion = MotionTransformer(self.cfg)

    def forward(self, mel: torch.Tensor, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """mel B x (4N + 4) x n_mels (mel frame 0 = the first frame of token 0; causal left context is zero-padded
        by the convs), prev B x N x 5 -> (B x N x 5, B x N x 16)."""
        n = prev.shape[1]
        enc = self.encoder(mel)
        return self.motion(self.motion.tokens(enc, n), prev)

    def empty_state(self, dtype: CacheDType = CacheDType.INT8, device: str | torch.device = "cpu") -> KVState:
        c = self.cfg
        return KVState.empty(c.n_layers, c.window, c.d_model, dtype, device)


class _EnsembleEncoder(nn.Module):
    def __init__(self, encoders: list[AudioEncoder]) -> None:
        super().__init__()
        self.encoders = nn.ModuleList(encoders)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:  # B x T x n_mels -> B x T x (K C), member k at [kC, (k+1)C)
        return torch.cat([e(mel) for e in self.encoders], dim=-1)


class _EnsembleMotion(nn.Module):
    """K motion transformers as one: features B x N x 8 (K C) (each encoder frame holds the K members' channels),
    one stacked cache (member k on layers kL .. kL + L - 1). Every member gets the same previous frame; out come the
    mean coefficients and the mean log-probabilities of the visemes (logits of the normalized geometric mean)."""

    def __init__(self, members: list[MotionTransformer], cfg: ModelConfig) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)
        self.cfg = cfg  # the stacked shapes
        self._split = (cfg.mel_per_token, len(members), members[0].cfg.enc_channels)

    def tokens(self, enc: torch.Tensor, n_tokens: int) -> torch.Tensor:
        return _tokens(enc, n_tokens, self.cfg.mel_per_frame, self.cfg.lookahead_mel)

    def forward(self, feats: torch.Tensor, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t, k, c = self._split
        f = feats.reshape(*feats.shape[:-1], t, k, c)
        outs = [m(f[..., i, :].reshape(*feats.shape[:-1], t * c), prev) for i, m in enumerate(self.members)]
        return (torch.stack([y for y, _ in outs]).mean(0),
                torch.stack([torch.log_softmax(lg, -1) for _, lg in outs]).mean(0))

    def step(self, feat: torch.Tensor, prev: torch.Tensor, st: KVState) -> tuple[torch.Tensor, torch.Tensor, KVState]:
        t, k, c = self._split
        f = feat.reshape(t, k, c)
        ys, lps, outs = [], [], []
        for i, m in enumerate(self.members):
            y, lg, o = m.step_layers(f[:, i].reshape(-1), prev, st, i * m.cfg.n_layers)
            ys.append(y)
            lps.append(torch.log_softmax(lg, -1))
            outs += o
        return torch.stack(ys).mean(0), torch.stack(lps).mean(0), _state_of(outs)


class Audio2MotionEnsemble(Audio2Motion):
    """Independently trained models of one configuration, run as one model (same interface as ``Audio2Motion``): the
    members share the audio front end; each runs its own encoder and motion transformer on its own part of one KV
    cache; the mean coefficients are the output and every member's previous frame. ``cfg`` holds the stacked shapes
    (``enc_channels`` K C, ``n_layers`` K L) that the streaming session, the exported graphs and the benches see.
    Inference only (members are trained one by one)."""

    def __init__(self, members: list[Audio2Motion]) -> None:
        nn.Module.__init__(self)
        if not members or any(m.cfg != members[0].cfg for m in members[1:]):
            raise ModelLoadError("The ensemble's members do not share one configuration: rebuild it from weights of one "
                                 "configuration with `python -m studio.neural.training.train --ensemble`.")
        c = members[0].cfg
        self.cfg = replace(c, enc_channels=len(members) * c.enc_channels, n_layers=len(members) * c.n_layers)
        self.encoder = _EnsembleEncoder([m.encoder for m in members])
        self.motion = _EnsembleMotion([m.motion for m in members], self.cfg)

    @property
    def n_members(self) -> int:
        return len(self.motion.members)


class StepGraph(nn.Module):
    """One streaming step with the cache as flat tensors: what ONNX exports and both engine backends run.

    Inputs: enc (8 x C) encoder frames of the token, prev (5,), then the 8 KVState tensors.
    Outputs: coeffs (5,), viseme logits (16,), then the 8 new KVState tensors."""

    def __init__(self, model: Audio2Motion) -> None:
        super().__init__()
        self.motion = model.motion

    def forward(self, enc: torch.Tensor, prev: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        st = KVState(*state)
        y, logits, new = self.motion.step(enc.reshape(-1), prev, st)
        return (y, logits, *new.tensors())
