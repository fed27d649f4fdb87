"""Train the audio-to-motion model on the shards of ``studio.neural.data``.

CPU, small configuration, minutes:   python -m studio.neural.train --data data/a2m --config small --minutes 5
Device machine, full configuration:  python -m studio.neural.train --config full --minutes 5.5 --batch 128 --device cuda
Writes ``audio2motion.pt`` (fp16 state dict + config), ``train_log.jsonl`` and ``train_metrics.json`` to ``--out``.

Each step: random crops of 150 frames (6 s, longer than the 75-token window so the summary token is trained).
Two passes per batch against exposure bias: (1) teacher forcing with noisy previous coefficients, (2) the previous
coefficients are the model's own (detached) outputs of pass 1. Loss: L1 on the 5 mouth coefficients (lip press x2)
+ 0.3 x cross-entropy on the viseme class. Cosine learning rate over the wall-clock budget.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from studio.neural.data import MEL_FRONT_PAD, dequantize_mel
from studio.neural.model import Audio2Motion, ModelConfig

log = logging.getLogger(__name__)

CONFIGS = {
    "small": ModelConfig(enc_channels=64, d_model=96, n_layers=2, n_heads=4),
    "full": ModelConfig(),
}
CROP = 150
LEFT_CTX = 8  # mel frames of real left context for the encoder (>= receptive field - 1)
COEFF_W = torch.tensor([1.0, 1.0, 1.0, 1.0, 2.0])


class Shards:
    """All clips of a folder of shards, in memory: per clip (mel uint8 (8 + 4T + 4) x 40, coeffs T x 5, vis T)."""

    def __init__(self, folder: Path) -> None:
        self.clips: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.voices: list[str] = []
        for f in sorted(folder.glob("*.npz")):
            z = np.load(f)
            mo, fo = z["mel_offsets"], z["frame_offsets"]
            for i in range(len(fo) - 1):
                self.clips.append((z["mel"][mo[i]:mo[i + 1]], z["coeffs"][fo[i]:fo[i + 1]].astype(np.float32),
                                   z["vis"][fo[i]:fo[i + 1]]))
                self.voices.append(f.stem)
        if not self.clips:
            raise FileNotFoundError(f"no shards in {folder}: run python -m studio.neural.data first")
        self.frames = np.array([len(c[1]) for c in self.clips])

    def batch(
        self, rng: np.random.Generator, b: int, crop: int = CROP, augment: bool = False
    ) -> dict[str, torch.Tensor]:
        """Random crops: mel B x (LEFT_CTX + 4*crop + 4) x 40, y B x crop x 5, vis B x crop, mask B x crop, prev0."""
        p = self.frames / self.frames.sum()
        idx = rng.choice(len(self.clips), size=b, p=p)
        n_mel = LEFT_CTX + 4 * crop + 4
        silence = np.float32(np.log(1e-5))
        mel = np.full((b, n_mel, 40), silence, np.float32)
        y = np.zeros((b, crop, 5), np.float32)
        vis = np.zeros((b, crop), np.int64)
        mask = np.zeros((b, crop), np.float32)
        prev0 = np.zeros((b, 5), np.float32)
        for k, ci in enumerate(idx):
            m, c, v = self.clips[ci]
            t = len(c)
            i0 = int(rng.integers(0, max(1, t - crop + 1)))
            n = min(crop, t - i0)
            a = MEL_FRONT_PAD + 4 * i0 - LEFT_CTX  # >= 0 since MEL_FRONT_PAD == LEFT_CTX
            seg = dequantize_mel(m[a : a + LEFT_CTX + 4 * n + 4])
            if augment:  # on-the-fly: level offset, spectral tilt, a masked band (on top of the recipe's audio aug)
                seg = seg + rng.uniform(-1.5, 1.5) + rng.uniform(-1.0, 1.0) * np.linspace(-1, 1, 40, dtype=np.float32)
                f0 = int(rng.integers(0, 40))
                seg[:, f0 : f0 + int(rng.integers(0, 5))] = silence
                seg = np.maximum(seg, silence)
            mel[k, : len(seg)] = seg
            y[k, :n], vis[k, :n], mask[k, :n] = c[i0 : i0 + n], v[i0 : i0 + n], 1.0
            if i0 > 0:
                prev0[k] = c[i0 - 1]
        return {k: torch.from_numpy(v) for k, v in dict(mel=mel, y=y, vis=vis, mask=mask, prev0=prev0).items()}


def run_model(model: Audio2Motion, mel: torch.Tensor, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """mel with LEFT_CTX frames of left context -> outputs for every token of ``prev``."""
    enc = model.encoder(mel)[:, LEFT_CTX:]
    return model.motion(model.motion.tokens(enc, prev.shape[1]), prev)


def losses(model: Audio2Motion, bt: dict[str, torch.Tensor], noise: float, train: bool) -> dict[str, torch.Tensor]:
    y, vis, mask = bt["y"], bt["vis"], bt["mask"]
    prev = torch.cat([bt["prev0"][:, None], y[:, :-1]], dim=1)
    if train:
        prev = (prev + noise * torch.randn_like(prev)).clamp(0, 1)
    out1, log1 = run_model(model, bt["mel"], prev)
    prev2 = torch.cat([bt["prev0"][:, None], out1[:, :-1].detach().float()], dim=1)
    out2, log2 = run_model(model, bt["mel"], prev2)
    w = COEFF_W.to(y.device)
    res = {}
    denom = mask.sum().clamp_min(1.0)
    for name, out, lg in (("tf", out1, log1), ("self", out2, log2)):
        l1 = ((out.float() - y).abs() * w).sum(-1) / w.sum()
        ce = F.cross_entropy(lg.float().transpose(1, 2), vis, reduction="none", label_smoothing=0.05)
        res[f"l1_{name}"] = (l1 * mask).sum() / denom
        res[f"ce_{name}"] = (ce * mask).sum() / denom
        res[f"acc_{name}"] = ((lg.argmax(-1) == vis).float() * mask).sum() / denom
    res["loss"] = 0.5 * (res["l1_tf"] + 0.3 * res["ce_tf"]) + res["l1_self"] + 0.3 * res["ce_self"]
    return res


def save_weights(model: Audio2Motion, path: Path, extra: dict) -> None:
    sd = {k: v.detach().to("cpu", torch.float16) for k, v in model.state_dict().items()}
    torch.save({"config": model.cfg.to_dict(), "state_dict": sd, **extra}, path)


def load_weights(path: Path, device: str = "cpu") -> Audio2Motion:
    ck = torch.load(path, map_location="cpu", weights_only=True)
    cfg = ModelConfig(**{**ck["config"], "dropout": 0.0})
    model = Audio2Motion(cfg)
    model.load_state_dict({k: v.float() for k, v in ck["state_dict"].items()})
    return model.to(device).eval()


def train(data: Path, out: Path, config: str, minutes: float, device: str, batch: int, lr: float, seed: int) -> dict:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tr, va = Shards(data / "train"), Shards(data / "val")
    cfg = CONFIGS[config]
    model = Audio2Motion(cfg).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    out.mkdir(parents=True, exist_ok=True)
    log_f = (out / "train_log.jsonl").open("w")
    val_rng = np.random.default_rng(1234)
    val_batches = [va.batch(val_rng, 32) for _ in range(4)]
    amp = device.startswith("cuda")
    t_start = time.time()
    budget_s = minutes * 60
    step = 0
    info = {"config": config, "model": cfg.to_dict(), "params": n_params, "device": device, "batch": batch,
            "train_clips": len(tr.clips), "train_frames": int(tr.frames.sum()), "val_clips": len(va.clips),
            "val_frames": int(va.frames.sum())}
    log.info("%s", info)
    log_f.write(json.dumps({"info": info}) + "\n")

    def evaluate() -> dict[str, float]:
        model.eval()
        acc: dict[str, float] = {}
        with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=amp):
            for vb in val_batches:
                r = losses(model, {k: v.to(device) for k, v in vb.items()}, 0.0, False)
                for k, v in r.items():
                    acc[k] = acc.get(k, 0.0) + float(v) / len(val_batches)
        model.train()
        return acc

    last_eval = 0.0
    while True:
        el = time.time() - t_start
        if el >= budget_s:
            break
        frac = el / budget_s
        cur_lr = lr * min(1.0, (step + 1) / 200) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = cur_lr
        bt = {k: v.to(device, non_blocking=True) for k, v in tr.batch(rng, batch, augment=True).items()}
        with torch.autocast("cuda", torch.bfloat16, enabled=amp):
            r = losses(model, bt, 0.05, True)
        opt.zero_grad(set_to_none=True)
        r["loss"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if time.time() - last_eval > max(20.0, budget_s / 15) or step == 1:
            last_eval = time.time()
            v = evaluate()
            rec = {"step": step, "elapsed_s": round(time.time() - t_start, 1), "lr": cur_lr,
                   "train": {k: round(float(x.detach()), 4) for k, x in r.items()},
                   "val": {k: round(x, 4) for k, x in v.items()}}
            log.info("%s", rec)
            log_f.write(json.dumps(rec) + "\n")
            log_f.flush()
    v = evaluate()
    metrics = {**info, "steps": step, "train_s": round(time.time() - t_start, 1),
               "val_held_out_voices": {k: round(x, 4) for k, x in v.items()}}
    log_f.write(json.dumps({"final": metrics}) + "\n")
    log_f.close()
    save_weights(model, out / "audio2motion.pt", {"metrics": metrics})
    (out / "train_metrics.json").write_text(json.dumps(metrics, indent=1))
    return metrics


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("data/a2m"))
    p.add_argument("--out", type=Path, default=Path("resources/models/audio2motion"))
    p.add_argument("--config", choices=sorted(CONFIGS), default="small")
    p.add_argument("--minutes", type=float, default=5.0, help="wall-clock training budget")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=0, help="0: 16 for small, 64 for full")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    batch = args.batch or (16 if args.config == "small" else 64)
    m = train(args.data, args.out, args.config, args.minutes, args.device, batch, args.lr, args.seed)
    print(json.dumps(m, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
