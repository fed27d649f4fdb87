"""Reading and writing the audio-to-motion weights files (one model, or an ensemble of one configuration).

The runtime's only door to weights: the training tools (``studio.neural.training``) write files through
``save_weights`` and the engine reads them through ``load_weights``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from studio.errors import ModelLoadError
from studio.neural.model import Audio2Motion, Audio2MotionEnsemble, ModelConfig


def save_weights(model: Audio2Motion, path: Path, extra: dict) -> None:
    sd = {k: v.detach().to("cpu", torch.float16) for k, v in model.state_dict().items()}
    torch.save({"config": model.cfg.to_dict(), "state_dict": sd, **extra}, path)


def read_weights(path: Path) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """The configuration (as trained, dropout included) and the float32 state dict of a weights file."""
    ck = _single_model_checkpoint(path)
    return ModelConfig(**ck["config"]), {k: v.float() for k, v in ck["state_dict"].items()}


def _single_model_checkpoint(path: Path) -> dict:
    """A weights file of one model, loaded; ModelLoadError for an ensemble file."""
    ck = torch.load(path, map_location="cpu", weights_only=True)
    if "ensemble" in ck:
        raise ModelLoadError(f"{path} is an ensemble of {len(ck['ensemble'])} models: it cannot start training, be "
                             "averaged or join another ensemble; use its members' weights files")
    return ck


def _model_of(config: dict, state: dict[str, torch.Tensor]) -> Audio2Motion:
    model = Audio2Motion(replace(ModelConfig(**config), dropout=0.0))
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model


def load_weights(path: Path, device: str = "cpu") -> Audio2Motion:
    """A weights file -> the model for inference (an ``Audio2MotionEnsemble`` for an ensemble file)."""
    ck = torch.load(path, map_location="cpu", weights_only=True)
    models = [_model_of(m["config"], m["state_dict"]) for m in ck.get("ensemble", [ck])]
    model = Audio2MotionEnsemble(models) if "ensemble" in ck else models[0]
    return model.to(device).eval()
