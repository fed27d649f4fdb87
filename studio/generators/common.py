"""What every neural engine shares: the face crop and paste-back, and the wrapper base that owns device, dtype, batch,
compiled engines and the choice between the release's weights and a seeded timing twin (``weights``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from studio.errors import ModelLoadError, RenderError
from studio.generators.audio_encoders import ENCODERS
from studio.generators.weights import seeded, torch_dtype
from studio.contracts import CompileTarget, Generator, GeneratorSettings, cast_refusal


# -- the face crop of the anchor (engines that generate a face and paste it back) ------------------------------------

def face_box(anchor, grow: float = 1.5) -> tuple[int, int, int]:
    """(x0, y0, side) of a square around the face landmarks, grown by ``grow``, inside the anchor image (pixels)."""
    pts = np.asarray(anchor.landmarks)[:, :2]
    s = anchor.image.shape[0]
    lo, hi = pts.min(0), pts.max(0)
    c = (lo + hi) / 2
    side = int(min(s, max(8, round(float((hi - lo).max()) * grow))))
    x0 = int(np.clip(round(c[0] - side / 2), 0, s - side))
    y0 = int(np.clip(round(c[1] - side / 2), 0, s - side))
    return x0, y0, side


def image_tensor(img: np.ndarray, size: int, device: torch.device) -> torch.Tensor:
    """H x W x 3 uint8 RGB -> 1 x 3 x size x size float 0..1 on ``device`` (area / bilinear resize)."""
    x = torch.from_numpy(np.ascontiguousarray(img)).to(device).permute(2, 0, 1)[None].float() / 255.0
    if x.shape[-1] != size or x.shape[-2] != size:
        mode = "area" if x.shape[-1] > size else "bilinear"
        x = F.interpolate(x, size=(size, size), mode=mode, **({} if mode == "area" else {"align_corners": False}))
    return x


class FacePaste:
    """Pastes generated face crops back into the anchor frame at the output size, with a feathered edge."""

    def __init__(self, anchor, box: tuple[int, int, int], out_px: int, device: torch.device) -> None:
        s = anchor.image.shape[0]
        k = out_px / s
        x0, y0, side = box
        self.x0, self.y0 = int(round(x0 * k)), int(round(y0 * k))
        self.side = max(2, min(out_px - max(self.x0, self.y0), int(round(side * k))))
        self.frame = image_tensor(anchor.image, out_px, device) * 255.0  # 1 x 3 x S x S, 0..255
        r = torch.linspace(-1, 1, self.side, device=device).abs()
        edge = ((1 - torch.maximum(r[:, None], r[None, :])) / 0.12).clamp(0, 1)  # feather: 6 % of the side
        self.alpha = edge[None, None]  # 1 x 1 x side x side

    def __call__(self, faces: torch.Tensor) -> torch.Tensor:
        """B x 3 x s x s face crops, 0..255 -> B x 3 x S x S frames, 0..255."""
        faces = F.interpolate(faces.float(), size=(self.side, self.side), mode="bilinear", align_corners=False)
        out = self.frame.expand(faces.shape[0], -1, -1, -1).clone()
        y, x, n = self.y0, self.x0, self.side
        out[:, :, y:y + n, x:x + n] = self.alpha * faces + (1 - self.alpha) * out[:, :, y:y + n, x:x + n]
        return out


def to_size(frames: torch.Tensor, size: int) -> torch.Tensor:
    """B x 3 x h x w -> B x 3 x size x size (bilinear; the identity when already that size)."""
    if frames.shape[-1] == size and frames.shape[-2] == size:
        return frames
    return F.interpolate(frames, size=(size, size), mode="bilinear", align_corners=False)


# -- the wrapper base --------------------------------------------------------------------------------------------------

class NeuralGenerator(Generator):
    """Owns device, dtype, batch and compiled engines for an engine's plain modules.

    Subclasses build their modules in ``_build`` (under ``seeded`` for a twin), load them in ``_load``, prepare the
    anchor in ``_prepare`` and compute in ``_generate``; ``self.fns`` maps each compile target's name to what is
    called for it (the eager module until ``install_engine`` replaces it). An engine with ``info.cast_rows`` gets a
    cast's packs (a tuple of several) in ``_prepare`` and the rows to show (``shown``) in ``_generate``; any other is
    refused a cast with the reason.
    """

    requires: tuple[str, ...] = ()  # optional packages (the 'engines' extra) it needs to run
    loads_weights = True  # False: the engine runs only as a timing twin in this version (its docstring says why)
    audio_dirs: tuple[str, ...] = ()  # where the release keeps its audio encoder (Hugging Face layout), first found
    compiled_targets: frozenset[str] = frozenset()  # targets TorchInductor compiles inside their CUDA graphs

    def __init__(self) -> None:
        super().__init__()
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.fns: dict[str, Callable] = {}

    def audio_encoder(self):
        """The ``studio.generators.audio_encoders.AudioEncoder`` the core runs in stage A for this engine (after
        ``open``): the release's own from ``weights_dir`` when the engine's weights are installed, else a seeded twin
        on the same device. None for engines driven by motion alone."""
        if self.info.audio is None:
            return None
        cls = ENCODERS[self.info.audio.encoder]
        s = self.settings
        if cls.has_weights is False:  # a spectrogram: nothing to load
            return cls(s.device, s.precision)
        folder = None
        if s.weights_dir is not None and not self.twin:
            found = [Path(s.weights_dir) / d for d in self.audio_dirs if (Path(s.weights_dir) / d).is_dir()]
            if not found:
                raise ModelLoadError(f"{self.info.label}: missing its audio encoder folder "
                                     f"({' or '.join(self.audio_dirs)}) in {s.weights_dir}: copy the release's "
                                     "files there.")
            folder = found[0]
        return cls(s.device, s.precision, folder=folder, seed=s.seed)

    @property
    def cast_size(self) -> int:
        """Anchors this engine was opened on (several: a cast, as rows of one call)."""
        return 1

    def open(self, anchor, settings: GeneratorSettings) -> None:
        packs = tuple(anchor) if isinstance(anchor, (tuple, list)) else (anchor,)
        if len(packs) > 1 and not self.info.cast_rows:
            raise RenderError(cast_refusal(self.info, len(packs)))
        anchor = packs if len(packs) > 1 else packs[0]
        self.settings = settings
        self.device = torch.device(settings.device)
        self.dtype = torch_dtype(settings.precision, self.device)
        try:
            if settings.weights_dir is not None:
                self._load(Path(settings.weights_dir))
                self.twin = False
            else:
                with seeded(settings.seed, self.device):
                    self._build_twin()
                self.twin = True
            self._to_device()
            with torch.inference_mode():
                self._prepare(anchor)
            if settings.cuda_graphs:
                self._capture_graphs()
        except torch.cuda.OutOfMemoryError as exc:
            raise RenderError(f"{self.info.label}: the GPU ran out of memory loading the engine: close other GPU "
                              "work or choose a smaller size.") from exc

    def _capture_graphs(self) -> None:
        """Every compile target replayed as a CUDA graph at its example shapes (inputs copied into static buffers; a
        smaller batch is padded, a larger one split: ``studio.generators.graphs.Graphed``)."""
        from studio.generators.graphs import graphed

        if self.device.type != "cuda":
            raise RenderError(f"{self.info.label}: CUDA graphs need a CUDA device.")
        stream = torch.cuda.Stream(self.device)
        with torch.inference_mode():
            for t in self._targets():
                self.fns[t.name] = graphed(self.fns[t.name], t.example_inputs, stream,
                                           compile=t.name in self.compiled_targets, name=f"{self.info.label} {t.name}")

    def _build_twin(self) -> None:
        raise NotImplementedError

    def _load(self, folder: Path) -> None:
        raise NotImplementedError

    def _to_device(self) -> None:
        raise NotImplementedError

    def _prepare(self, anchor) -> None:
        raise NotImplementedError

    def _generate(self, coeffs: torch.Tensor, features: torch.Tensor | None, **rows) -> torch.Tensor:
        raise NotImplementedError

    def _targets(self) -> list[CompileTarget]:
        return []

    @torch.inference_mode()
    def generate(self, coeffs: torch.Tensor, features: torch.Tensor | None = None,
                 shown: np.ndarray | None = None) -> torch.Tensor:
        if self.info.audio is not None and features is None:
            raise RenderError(f"{self.info.label} needs audio features ({self.info.audio.encoder}).")
        if shown is not None and self.cast_size < 2:
            raise RenderError(f"Only a cast of several anchors has rows to show: {self.info.label} was opened on one "
                              "anchor.")
        try:
            return self._generate(coeffs, features, **({} if shown is None else {"shown": shown}))
        except torch.cuda.OutOfMemoryError as exc:
            raise RenderError(f"{self.info.label}: the GPU ran out of memory generating: lower the batch size or "
                              "the size.") from exc

    def compile_targets(self) -> list[CompileTarget]:
        return self._targets() if self.fns else []

    def install_engine(self, name: str, fn: Callable) -> None:
        if name not in self.fns:
            super().install_engine(name, fn)
        self.fns[name] = fn

    def close(self) -> None:
        """Drop the modules and tensors (a closed engine holds no GPU memory once collected)."""
        self.fns = {}
        for k, v in list(vars(self).items()):
            if isinstance(v, (torch.nn.Module, torch.Tensor)) or k in ("sampler", "paste"):
                setattr(self, k, None)
