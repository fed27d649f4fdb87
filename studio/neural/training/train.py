"""Train the audio-to-motion model on the shards of ``studio.neural.training.data``.

CPU, small configuration, minutes:   python -m studio.neural.training.train --data data/a2m --config small --minutes 5
Device machine, full configuration:  python -m studio.neural.training.train --config full --minutes 5.5 --batch 128 --device cuda
Writes ``audio2motion.pt`` (fp16 state dict + config), ``train_log.jsonl`` and ``train_metrics.json`` to ``--out``.
Average of fine-tunes:               python -m studio.neural.training.train --average A.pt B.pt ... --out DIR

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
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from studio.errors import ModelLoadError
from studio.neural.constants import MEL_FRONT_PAD
from studio.neural.training.data import dequantize_mel
from studio.neural.weights import _single_model_checkpoint, load_weights, read_weights, save_weights  # noqa: F401
from studio.neural.model import Audio2Motion, Audio2MotionEnsemble, ModelConfig

log = logging.getLogger(__name__)

CONFIGS = {
    "small": ModelConfig(enc_channels=64, d_model=96, n_layers=2, n_heads=4),
    "medium": ModelConfig(enc_channels=96, d_model=128, n_layers=3, n_heads=4),
    "full": ModelConfig(),
    "large": ModelConfig(enc_channels=160, d_model=256, n_layers=6, n_heads=4),
}
CROP = 150
LEFT_CTX = 8  # mel frames of real left context for the encoder (>= receptive field - 1)
COEFF_W = torch.tensor([1.0, 1.0, 1.0, 1.0, 2.0])
PBM_CLASS = 1  # Viseme.PBM
SILENCE_LOG = float(np.log(1e-5))


class Augment(str, Enum):
    """Training-time augmentation of the log-mel, on top of the recipe's audio augmentation."""

    RECIPE = "recipe"  # level offset, tilt, one masked band (the shipped weights)
    STRONG = "strong"  # ``strong_augment``: gain, smooth EQ, noise, mel-axis warp, SpecAugment masks
    # measured: better on held-out TTS voices, worse on human speech (viseme accuracy 0.51-0.56 against 0.61, f/v
    # recall 0.48 -> 0.12; resources/models/audio2motion/metrics.json): off by default, the shipped weights use RECIPE


def strong_augment(mel: torch.Tensor, gen: torch.Generator | None = None) -> torch.Tensor:
    """B x T x 40 log-mel (natural log power) -> augmented, vectorized on the batch's device. Why: the model
    overfits TTS voices; these perturb speaker (vocal-tract-length-like warp), channel (EQ, gain) and noise."""
    b, t, m = mel.shape
    dev = mel.device

    def u(*shape: int, lo: float = 0.0, hi: float = 1.0) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(*shape, device=dev, generator=gen)

    x = mel
    # vocal-tract-length-like warp of the mel axis: bin i reads bin i * alpha (linear interpolation), p = 0.8
    alpha = torch.where(u(b, 1) < 0.8, u(b, 1, lo=0.82, hi=1.18), torch.ones(b, 1, device=dev))
    pos = (torch.arange(m, device=dev, dtype=x.dtype)[None] * alpha).clamp(0, m - 1)  # B x M
    lo_i = pos.floor().long()
    hi_i = (lo_i + 1).clamp(max=m - 1)
    w = (pos - lo_i)[:, None, :]
    x_lo = torch.gather(x, 2, lo_i[:, None].expand(b, t, m))
    x = x_lo * (1 - w) + torch.gather(x, 2, hi_i[:, None].expand(b, t, m)) * w
    # smooth random EQ (+-8 dB at 6 nodes) + gain (-18..+12 dB); 1 dB = 0.23 in natural-log power
    nodes = u(b, 1, 6, lo=-8.0, hi=8.0)
    eq_db = F.interpolate(nodes, size=m, mode="linear", align_corners=True)  # B x 1 x M
    gain_db = u(b, 1, 1, lo=-18.0, hi=12.0)
    x = x + (eq_db + gain_db) * (np.log(10) / 10)
    # additive noise in the power domain at 0..30 dB SNR (p = 0.7), random smooth colour, slowly varying level
    p = x.exp()
    sig = p.mean(dim=(1, 2), keepdim=True)
    snr_db = u(b, 1, 1, lo=0.0, hi=30.0)
    colour = F.interpolate(u(b, 1, 4, lo=-10.0, hi=10.0), size=m, mode="linear", align_corners=True)
    colour = 10 ** (colour / 10)
    colour = colour / colour.mean(-1, keepdim=True)
    env = F.interpolate(u(b, 1, 4, lo=0.5, hi=1.5), size=t, mode="linear", align_corners=True).transpose(1, 2)
    fluct = torch.distributions.Exponential(torch.ones((), device=dev)).sample((b, t, m))  # noise-power periodogram
    noise = sig * 10 ** (-snr_db / 10) * colour * env * fluct
    on = (u(b, 1, 1) < 0.7).to(x.dtype)
    x = (p + on * noise).clamp_min(1e-5).log()
    # SpecAugment: 2 frequency masks (<= 8 bins), 2 time masks (<= 6 mel frames), filled with the floor
    ar_m = torch.arange(m, device=dev)[None, None, :]
    ar_t = torch.arange(t, device=dev)[None, :, None]
    for _ in range(2):
        f0 = (u(b, 1, 1) * m).long()
        fw = (u(b, 1, 1) * 9).long()
        x = torch.where((ar_m >= f0) & (ar_m < f0 + fw), torch.full_like(x, SILENCE_LOG), x)
        t0 = (u(b, 1, 1) * t).long()
        tw = (u(b, 1, 1) * 7).long()
        x = torch.where((ar_t >= t0) & (ar_t < t0 + tw), torch.full_like(x, SILENCE_LOG), x)
    return x.clamp(SILENCE_LOG, 3.9)


_DB = math.log(10) / 10  # natural-log power per dB


def add_breaths(seg: np.ndarray, vis: np.ndarray, rng: np.random.Generator, p: float) -> None:
    """Put breath-like noise into ``p`` of the silent stretches (>= 2 frames) of one crop, in place; labels stay
    silence.

    Why: on the human clips most silence frames the models call speech follow the end of a phrase (an exhale, a breathy
    tail: one run had 44 of its 68 there, pocketsphinx 6), and TTS speech never breathes. ``seg``: the crop's
    log-mel (LEFT_CTX frames of context, then 4 per motion frame); ``vis``: its motion frames' visemes (0 = silence).
    An event is a tail that decays from the start of the stretch, an inhale that swells before its end, or a burst
    anywhere in it: smooth random colour (up to three formant-like bumps and a tilt), its peak 10-30 dB below the
    crop's median speech frame (power over all bins; the human clips' tails sit ~20 dB below), periodogram-like
    fluctuation; 80-480 ms, never past the stretch."""
    ref = speech_level(seg, vis)
    if ref is None:
        return
    is_sil = np.concatenate([[False], vis == 0, [False]])
    edges = np.flatnonzero(np.diff(is_sil.astype(np.int8)))
    bins = np.arange(seg.shape[1], dtype=np.float32)
    for a, b in zip(edges[::2], edges[1::2]):
        if b - a < 2 or rng.random() >= p:
            continue
        length = int(min(b - a, rng.integers(2, 13)))
        kind = rng.random()
        k0 = a if kind < 0.5 else (b - length if kind < 0.8 else int(rng.integers(a, b - length + 1)))
        m0, m1 = LEFT_CTX + 4 * k0, min(len(seg), LEFT_CTX + 4 * (k0 + length))
        if m1 <= m0:
            continue
        shape = rng.uniform(-1.0, 2.0) * np.linspace(-0.5, 0.5, len(bins), dtype=np.float32)
        for _ in range(int(rng.integers(0, 4))):
            height, centre, width = rng.uniform(0.5, 2.5), rng.uniform(3, 36), rng.uniform(1.5, 5)
            shape += height * np.exp(-((bins - centre) ** 2) / (2 * width**2))
        t = np.linspace(0.0, 1.0, m1 - m0, dtype=np.float32)
        if kind < 0.5:  # a tail: decays from where the speech stopped
            env = np.exp(-t / rng.uniform(0.15, 0.6))
        else:  # an inhale or a burst: swells and fades
            env = np.clip(np.sin(np.pi * t), 1e-3, 1.0) ** rng.uniform(0.5, 2.0)
        colour = np.exp(shape)
        colour /= colour.mean()  # mean power 1 over the bins
        power = np.exp(ref - rng.uniform(10.0, 30.0) * _DB) * colour[None, :] * env[:, None]
        power *= rng.exponential(1.0, (m1 - m0, len(bins)))
        seg[m0:m1] = np.log(np.exp(seg[m0:m1]) + power.astype(np.float32))


def speech_level(seg: np.ndarray, vis: np.ndarray) -> float | None:
    """Natural log of the median power (mean over bins) of a crop's speech frames; None without speech."""
    n = min(len(vis), (len(seg) - LEFT_CTX) // 4)
    speech = vis[:n] != 0
    if not speech.any():
        return None
    frame_pow = np.exp(seg[LEFT_CTX : LEFT_CTX + 4 * n]).mean(1).reshape(n, 4).mean(1)
    return float(np.log(np.median(frame_pow[speech])))


def add_floor(seg: np.ndarray, vis: np.ndarray, rng: np.random.Generator) -> None:
    """Add a room-noise floor to one crop, in place: stationary smooth-coloured noise 12-35 dB below the crop's median
    speech frame, its level wandering by +-2 dB. Why: the human clips' pauses sit ~20 dB below their speech
    (two_cities: -60 vs -39 dBFS); in the training crops that gap is 31 dB at the median (15-44 dB from the 10th to the
    90th percentile, 512 crops of the session-5 set), so quiet-but-not-silent pauses are rarer there."""
    ref = speech_level(seg, vis)
    if ref is None:
        return
    nb = seg.shape[1]
    nodes = rng.uniform(-6.0, 6.0, 6)  # dB at 6 points over the mel axis
    colour = np.exp(np.interp(np.arange(nb), np.linspace(0, nb - 1, 6), nodes) * _DB)
    colour /= colour.mean()
    wander = np.exp(np.interp(np.arange(len(seg)), np.linspace(0, len(seg) - 1, 5), rng.uniform(-2, 2, 5)) * _DB)
    level = np.exp(ref - rng.uniform(12.0, 35.0) * _DB)
    power = level * colour[None, :] * wander[:, None] * rng.exponential(1.0, seg.shape)
    seg[:] = np.log(np.exp(seg) + power.astype(np.float32))


class Shards:
    """All clips of a folder of shards, in memory: per clip (mel uint8 (8 + 4T + 4) x 40, coeffs T x 5, vis T)."""

    def __init__(
        self, folder: Path, aligned_only: bool = False, prefix: str = "", exclude: tuple[str, ...] = ()
    ) -> None:
        self.clips: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.voices: list[str] = []
        for f in sorted(folder.glob(f"{prefix}*.npz")):
            if f.stem.startswith(exclude):  # an empty tuple excludes nothing
                continue
            with np.load(f) as z:  # each z[key] decompresses the whole array again: read every array once
                mel, coeffs, vis = z["mel"], z["coeffs"].astype(np.float32), z["vis"]
                mo, fo = z["mel_offsets"], z["frame_offsets"]
                ok = z["clip_aligned"] if "clip_aligned" in z.files else np.zeros(len(fo) - 1, np.uint8)
            for i in range(len(fo) - 1):
                if aligned_only and not ok[i]:
                    continue
                self.clips.append((mel[mo[i]:mo[i + 1]], coeffs[fo[i]:fo[i + 1]], vis[fo[i]:fo[i + 1]]))
                self.voices.append(f.stem)
        if not self.clips:
            raise FileNotFoundError(f"no shards in {folder}: run python -m studio.neural.training.data first")
        self.frames = np.array([len(c[1]) for c in self.clips])

    def batch(
        self, rng: np.random.Generator, b: int, crop: int = CROP, augment: Augment | None = None, breaths: float = 0.0,
        floor: float = 0.0,
    ) -> dict[str, torch.Tensor]:
        """Random crops: mel B x (LEFT_CTX + 4*crop + 4) x 40, y B x crop x 5, vis B x crop, mask B x crop, prev0.
        ``breaths``: share of silent stretches that get breath-like noise (``add_breaths``); ``floor``: share of crops
        that get a room-noise floor (``add_floor``)."""
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
            if augment is Augment.RECIPE:  # level offset, spectral tilt, a masked band (on top of the recipe's aug)
                seg = seg + rng.uniform(-1.5, 1.5) + rng.uniform(-1.0, 1.0) * np.linspace(-1, 1, 40, dtype=np.float32)
                f0 = int(rng.integers(0, 40))
                seg[:, f0 : f0 + int(rng.integers(0, 5))] = silence
                seg = np.maximum(seg, silence)
            if breaths > 0:
                add_breaths(seg, v[i0 : i0 + n], rng, breaths)
            if floor > 0 and rng.random() < floor:
                add_floor(seg, v[i0 : i0 + n], rng)
            mel[k, : len(seg)] = seg
            y[k, :n], vis[k, :n], mask[k, :n] = c[i0 : i0 + n], v[i0 : i0 + n], 1.0
            if i0 > 0:
                prev0[k] = c[i0 - 1]
        return {k: torch.from_numpy(v) for k, v in dict(mel=mel, y=y, vis=vis, mask=mask, prev0=prev0).items()}


class Prefetcher:
    """Makes training batches on a background thread, ``depth`` ahead, so the per-crop NumPy work (dequantizing,
    ``add_breaths``, ``add_floor``) overlaps the GPU step instead of running in series with it. Only this thread calls
    ``make`` (and so draws from its random generator): the batches and their order are those of calling ``make`` in
    the loop. The queue is bounded (the producer waits; nothing is dropped). An exception in ``make`` is raised again
    by ``next``; ``close`` stops the thread."""

    def __init__(self, make: Callable[[], dict[str, torch.Tensor]], depth: int = 3) -> None:
        self._make = make
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="batch-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                item: object = self._make()
            except BaseException as exc:  # handed to the training thread, which raises it
                item = exc
            while not self._stop.is_set():
                try:
                    self._q.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if isinstance(item, BaseException):
                return

    def next(self) -> dict[str, torch.Tensor]:
        item = self._q.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


def run_model(model: Audio2Motion, mel: torch.Tensor, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """mel with LEFT_CTX frames of left context -> outputs for every token of ``prev``."""
    enc = model.encoder(mel)[:, LEFT_CTX:]
    return model.motion(model.motion.tokens(enc, prev.shape[1]), prev)


def losses(
    model: Audio2Motion, bt: dict[str, torch.Tensor], noise: float, train: bool, pbm_weight: float = 1.0
) -> dict[str, torch.Tensor]:
    """Loss terms; ``pbm_weight`` scales the frames whose viseme is p/b/m (rare, and the most visible)."""
    y, vis, mask = bt["y"], bt["vis"], bt["mask"]
    if pbm_weight != 1.0:
        mask = mask * torch.where(vis == PBM_CLASS, pbm_weight, 1.0)
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
        res[f"acc_{name}"] = ((lg.argmax(-1) == vis).float() * bt["mask"]).sum() / bt["mask"].sum().clamp_min(1.0)
    res["loss"] = 0.5 * (res["l1_tf"] + 0.3 * res["ce_tf"]) + res["l1_self"] + 0.3 * res["ce_self"]
    return res


def _checkpoints_of_one_config(paths: list[Path]) -> list[dict]:
    """The weights files (single models, not ensembles) loaded; ModelLoadError unless they share one configuration."""
    cks = [_single_model_checkpoint(p) for p in paths]
    if any(c["config"] != cks[0]["config"] for c in cks[1:]):
        raise ModelLoadError("these weights do not share one configuration: " + ", ".join(map(str, paths)))
    return cks


def average_weights(paths: list[Path], path: Path) -> dict:
    """The uniform average of weights files that share one configuration (a "model soup": fine-tunes of one start
    lie in one basin, and their average is usually steadier than any one of them), saved to ``path``."""
    if not paths:
        raise ModelLoadError("no weights to average")
    cks = _checkpoints_of_one_config(paths)
    keys = cks[0]["state_dict"].keys()
    state = {k: sum(c["state_dict"][k].float() for c in cks) / len(cks) for k in keys}
    info = {"average_of": [str(p) for p in paths],
            "ingredients": [c.get("metrics", {}).get("val_held_out_voices") for c in cks]}
    model = Audio2Motion(ModelConfig(**cks[0]["config"]))
    model.load_state_dict(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_weights(model, path, {"metrics": info})
    return info


def ensemble_weights(paths: list[Path], path: Path) -> dict:
    """Weights files of one configuration (independently trained) saved together as one ensemble file (``path``),
    which ``load_weights`` turns into an ``Audio2MotionEnsemble``."""
    if len(paths) < 2:
        raise ModelLoadError("an ensemble needs two weights files or more")
    cks = _checkpoints_of_one_config(paths)
    info = {"ensemble_of": [str(p) for p in paths],
            "members": [c.get("metrics", {}).get("val_held_out_voices") for c in cks]}
    members = [{"config": c["config"], "state_dict": {k: v.to(torch.float16) for k, v in c["state_dict"].items()}}
               for c in cks]
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"ensemble": members, "metrics": info}, path)
    return info


def ensemble_members(path: Path, out: Path) -> list[Path]:
    """The members of an ensemble weights file written out one by one (``member0.pt``, ...), each a single model's
    weights file that ``--init`` can fine-tune."""
    ck = torch.load(path, map_location="cpu", weights_only=True)
    if "ensemble" not in ck:
        raise ModelLoadError(f"{path} holds one model, not an ensemble: use it with --init as it is")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, member in enumerate(ck["ensemble"]):
        info = (ck.get("metrics", {}).get("members") or [None] * len(ck["ensemble"]))[k]
        dest = out / f"member{k}.pt"
        torch.save({"config": member["config"], "state_dict": member["state_dict"],
                    "metrics": {"member_of": str(path), "index": k, "val_held_out_voices": info}}, dest)
        paths.append(dest)
    return paths


def train(
    data: Path, out: Path, config: str, minutes: float, device: str, batch: int, lr: float, seed: int,
    augment: Augment = Augment.RECIPE, pbm_weight: float = 1.0, dropout: float | None = None,
    keep_best: bool = False, weight_decay: float = 0.01, aligned_only: bool = False, select: str = "",
    ema: float = 0.0, exclude: tuple[str, ...] = (), init: Path | None = None, breaths: float = 0.0,
    floor: float = 0.0,
) -> dict:
    """Train for ``minutes`` of wall clock; ``keep_best`` saves the weights of the best held-out-voice loss (over the
    held-out voices whose shard names start with ``select``, e.g. ``kokoro``: all of them when empty). ``ema`` > 0
    keeps an exponential moving average of the weights (decay ``ema``): validation, the best weights and the saved
    weights are the average's. ``exclude``: leave out the training voices whose shard names start with these.
    ``init``: start from these weights (fine-tuning; their config is used, ``config`` is ignored). ``breaths``: share of
    the training crops' silent stretches that get breath-like noise (``add_breaths``); ``floor``: share of the training
    crops that get a room-noise floor (``add_floor``)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tr, va = Shards(data / "train", aligned_only, exclude=exclude), Shards(data / "val", aligned_only)
    base, start = (CONFIGS[config], None) if init is None else read_weights(init)
    cfg = base if dropout is None else replace(base, dropout=dropout)
    model = Audio2Motion(cfg)
    if start is not None:
        model.load_state_dict(start)
    model = model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    out.mkdir(parents=True, exist_ok=True)
    log_f = (out / "train_log.jsonl").open("w")
    val_rng = np.random.default_rng(1234)
    val_batches = [va.batch(val_rng, 32) for _ in range(4)]
    sel_batches = [Shards(data / "val", aligned_only, select).batch(val_rng, 32) for _ in range(4)] if select else []
    amp = device.startswith("cuda")
    t_start = time.time()
    budget_s = minutes * 60
    step = 0
    info = {"config": config if init is None else f"init {init.name}", "model": cfg.to_dict(), "params": n_params,
            "device": device, "batch": batch, "seed": seed,
            "train_clips": len(tr.clips), "train_frames": int(tr.frames.sum()), "val_clips": len(va.clips),
            "val_frames": int(va.frames.sum()), "augment": augment.value, "pbm_weight": pbm_weight,
            "keep_best": keep_best, "weight_decay": weight_decay, "lr": lr, "select": select, "ema": ema,
            "train_voices": sorted(set(tr.voices)), "exclude": list(exclude),
            "init": str(init) if init else None, "breaths": breaths, "floor": floor}
    log.info("%s", info)
    log_f.write(json.dumps({"info": info}) + "\n")

    params = list(model.parameters())
    ema_params = [p.detach().clone() for p in params] if ema > 0 else None

    def swap_ema() -> None:  # exchange the live weights and their average (a second call swaps back)
        if ema_params is not None:
            with torch.no_grad():
                for p, e in zip(params, ema_params):
                    tmp = p.detach().clone()
                    p.copy_(e)
                    e.copy_(tmp)

    def evaluate() -> dict[str, float]:
        model.eval()
        acc: dict[str, float] = {}
        with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=amp):
            for name, batches in (("", val_batches), ("sel_", sel_batches)):
                for vb in batches:
                    r = losses(model, {k: v.to(device) for k, v in vb.items()}, 0.0, False)
                    for k, v in r.items():
                        acc[name + k] = acc.get(name + k, 0.0) + float(v) / len(batches)
        model.train()
        return acc

    sel_key = "sel_loss" if select else "loss"

    last_eval = 0.0
    feed = Prefetcher(lambda: tr.batch(rng, batch, augment=augment, breaths=breaths, floor=floor))
    best: tuple[float, int, dict[str, torch.Tensor] | None, dict[str, float]] = (float("inf"), 0, None, {})
    try:
        while True:
            el = time.time() - t_start
            if el >= budget_s:
                break
            frac = el / budget_s
            cur_lr = lr * min(1.0, (step + 1) / 200) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
            for g in opt.param_groups:
                g["lr"] = cur_lr
            bt = {k: v.to(device, non_blocking=True) for k, v in feed.next().items()}
            if augment is Augment.STRONG:
                bt["mel"] = strong_augment(bt["mel"])
            with torch.autocast("cuda", torch.bfloat16, enabled=amp):
                r = losses(model, bt, 0.05, True, pbm_weight)
            opt.zero_grad(set_to_none=True)
            r["loss"].backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if ema_params is not None:
                with torch.no_grad():
                    decay = min(ema, (1 + step) / (10 + step))
                    torch._foreach_lerp_(ema_params, [p.detach() for p in params], 1.0 - decay)
            step += 1
            if time.time() - last_eval > max(20.0, budget_s / 15) or step == 1:
                last_eval = time.time()
                swap_ema()
                v = evaluate()
                rec = {"step": step, "elapsed_s": round(time.time() - t_start, 1), "lr": cur_lr,
                       "train": {k: round(float(x.detach()), 4) for k, x in r.items()},
                       "val": {k: round(x, 4) for k, x in v.items()}}
                log.info("%s", rec)
                log_f.write(json.dumps(rec) + "\n")
                log_f.flush()
                if keep_best and v[sel_key] < best[0] and frac > 0.3:
                    best = (v[sel_key], step, {k: x.detach().clone() for k, x in model.state_dict().items()}, v)
                swap_ema()
    finally:
        feed.close()
    swap_ema()  # from here on the model holds the average
    v = evaluate()
    if keep_best and best[2] is not None and best[0] < v[sel_key]:
        model.load_state_dict(best[2])
        v = {**best[3], "best_step": best[1]}
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
    p.add_argument("--augment", type=Augment, choices=list(Augment), default=Augment.RECIPE)
    p.add_argument("--pbm-weight", type=float, default=1.0, help="loss weight of p/b/m frames")
    p.add_argument("--dropout", type=float, default=None, help="default: the config's")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--keep-best", action="store_true", help="keep the weights of the best held-out-voice loss")
    p.add_argument("--select", default="", help="with --keep-best: judge on these held-out voices only (shard "
                   "name prefix, e.g. kokoro)")
    p.add_argument("--ema", type=float, default=0.0, help="keep and use an exponential moving average of the weights "
                   "with this decay (e.g. 0.999; 0 = off)")
    p.add_argument("--exclude", default="", help="comma-separated shard name prefixes of training voices to leave "
                   "out (e.g. kokoro)")
    p.add_argument("--init", type=Path, help="start from these weights (fine-tuning)")
    p.add_argument("--breaths", type=float, default=0.0, help="share of the silent stretches of training crops that "
                   "get breath-like noise (0 = off)")
    p.add_argument("--floor", type=float, default=0.0, help="share of training crops that get a room-noise floor "
                   "12-35 dB below their speech (0 = off)")
    p.add_argument("--aligned-only", action="store_true",
                   help="train and validate only on clips whose targets come from forced alignment")
    p.add_argument("--average", type=Path, nargs="+", metavar="WEIGHTS",
                   help="no training: write the uniform average of these weights files to --out/audio2motion.pt "
                   "(score it on the held-out voices with --init OUT/audio2motion.pt --minutes 0)")
    p.add_argument("--ensemble", type=Path, nargs="+", metavar="WEIGHTS",
                   help="no training: write these weights files as one ensemble to --out/audio2motion.pt")
    p.add_argument("--members-of", type=Path, metavar="ENSEMBLE",
                   help="no training: write the members of an ensemble weights file to --out/member0.pt, ...")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.members_of:
        print(json.dumps([str(x) for x in ensemble_members(args.members_of, args.out)], indent=1))
        return 0
    if args.average or args.ensemble:
        make = average_weights if args.average else ensemble_weights
        print(json.dumps(make(args.average or args.ensemble, args.out / "audio2motion.pt"), indent=1))
        return 0
    batch = args.batch or (16 if args.config == "small" else 64)
    m = train(args.data, args.out, args.config, args.minutes, args.device, batch, args.lr, args.seed,
              args.augment, args.pbm_weight, args.dropout, args.keep_best, args.weight_decay,
              args.aligned_only, args.select, args.ema, tuple(x for x in args.exclude.split(",") if x), args.init,
              args.breaths, args.floor)
    print(json.dumps(m, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
