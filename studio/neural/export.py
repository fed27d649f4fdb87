"""Export the audio-to-motion model to ONNX: ``encoder.onnx`` (one 200 ms window) and ``step.onnx`` (one frame with
the KV cache as inputs and outputs).  ``python -m studio.neural.export [--weights W] [--out DIR] [--cache int8]``
"""

from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path

import torch

from studio.audio.fingerprint import WINDOW_MEL
from studio.neural.kvcache import CacheDType
from studio.neural.model import Audio2Motion, StepGraph
from studio.neural.settings import MODEL_DIR

log = logging.getLogger(__name__)

STATE_NAMES = ("k", "k_scale", "v", "v_scale", "sum_k", "sum_v", "count", "n_valid")


class _EncoderGraph(torch.nn.Module):
    def __init__(self, model: Audio2Motion) -> None:
        super().__init__()
        self.encoder = model.encoder

    def forward(self, mel: torch.Tensor) -> torch.Tensor:  # 1 x WINDOW_MEL x n_mels -> 1 x WINDOW_MEL x C
        return self.encoder(mel)


def export(model: Audio2Motion, out_dir: Path, cache: CacheDType = CacheDType.INT8) -> tuple[Path, Path]:
    """Write encoder.onnx and step.onnx for ``model`` (batch 1) into ``out_dir``."""
    model = model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = model.cfg
    enc_path, step_path = out_dir / "encoder.onnx", out_dir / "step.onnx"
    mel = torch.zeros(1, WINDOW_MEL, cfg.n_mels)
    state = model.empty_state(cache).tensors()
    enc = torch.zeros(cfg.mel_per_token, cfg.enc_channels)
    prev = torch.zeros(cfg.n_out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_EncoderGraph(model), (mel,), str(enc_path), input_names=["mel"], output_names=["enc"],
                          opset_version=17, dynamo=False)
        torch.onnx.export(StepGraph(model), (enc, prev, *state), str(step_path),
                          input_names=["enc", "prev", *STATE_NAMES],
                          output_names=["coeffs", "visemes", *[f"{n}_out" for n in STATE_NAMES]],
                          opset_version=17, dynamo=False)
    log.info("wrote %s and %s", enc_path, step_path)
    return enc_path, step_path


def main(argv: list[str] | None = None) -> int:
    from studio.neural.weights import load_weights

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--weights", type=Path, default=MODEL_DIR / "audio2motion.pt")
    p.add_argument("--out", type=Path, default=MODEL_DIR)
    p.add_argument("--cache", choices=[c.value for c in CacheDType], default="int8")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    export(load_weights(args.weights), args.out, CacheDType(args.cache))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
