"""What every neural engine shares: strict weight loading, seeded timing twins, the face crop, the wrapper base.

Loading is strict on purpose: a release file with a missing key, an extra key or a wrong shape is refused with a
one-line ``ModelLoadError`` that names the file and the first offending key, instead of running a half-loaded network.
A timing twin is the same modules built under a fixed seed (``seeded``): the same shapes, so the same latency and
memory, and never put on air (``Generator.twin``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from studio.errors import ModelLoadError, RenderError
from studio.pipeline.roles import CompileTarget, Generator, GeneratorSettings

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def torch_dtype(precision: str, device: torch.device) -> torch.dtype:
    """The compute dtype for ``precision``; the CPU always computes in fp32 (its half-precision kernels are slower)."""
    if precision not in _DTYPES:
        raise ModelLoadError(f"Unknown precision '{precision}': use fp32, fp16 or bf16.")
    return torch.float32 if device.type == "cpu" else _DTYPES[precision]


@contextlib.contextmanager
def seeded(seed: int, device: torch.device | None = None) -> Iterator[None]:
    """Build modules under a fixed seed without disturbing the caller's random state (timing twins repeat); with a
    CUDA ``device`` its generator is forked too (modules built on the GPU draw from it)."""
    cuda = [device] if device is not None and device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda, device_type="cuda"):
        torch.manual_seed(seed)
        yield


def require_file(folder: Path, rel: str, engine: str) -> Path:
    """``folder / rel``, or a one-line ModelLoadError naming the missing file."""
    p = Path(folder) / rel
    if not p.is_file():
        raise ModelLoadError(f"{engine}: missing {rel} in {folder}: copy the release's files there in its own layout.")
    return p


def read_state(path: Path, engine: str, key: str | None = None) -> dict[str, torch.Tensor]:
    """Tensors of a weights file (.safetensors, or a torch pickle read with ``weights_only``); ``key`` picks a nested
    dict of the checkpoint (e.g. "state_dict")."""
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            obj: object = load_file(str(path))
        else:
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch and safetensors raise many kinds for a corrupt or foreign file
        raise ModelLoadError(f"{engine}: cannot read {path.name} ({type(exc).__name__}): the file is damaged or "
                             "not the release's; download it again.") from exc
    if key is not None:
        if not isinstance(obj, Mapping) or key not in obj:
            raise ModelLoadError(f"{engine}: {path.name} has no '{key}' entry: it is not the release's checkpoint.")
        obj = obj[key]
    if not isinstance(obj, Mapping):
        raise ModelLoadError(f"{engine}: {path.name} holds no state dict: it is not the release's checkpoint.")
    return dict(obj)


def strip_prefix(state: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """Keys without ``prefix`` where they have it (DataParallel's ``module.``, a model wrapper's name)."""
    return {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in state.items()}


def load_strict(module: torch.nn.Module, state: Mapping[str, torch.Tensor], where: str,
                ignore_prefixes: tuple[str, ...] = ()) -> None:
    """Copy ``state`` into ``module``: every key present, none extra (but ``ignore_prefixes``), every shape equal;
    else a one-line ModelLoadError naming ``where`` and the first offending key."""
    own = module.state_dict()
    given = {k: v for k, v in state.items() if not k.startswith(ignore_prefixes)}
    missing = [k for k in own if k not in given]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ModelLoadError(f"{where}: missing key '{missing[0]}'{more}: the file is not this release's weights.")
    extra = [k for k in given if k not in own]
    if extra:
        more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
        raise ModelLoadError(f"{where}: unexpected key '{extra[0]}'{more}: the file is not this release's weights.")
    for k, v in given.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise ModelLoadError(f"{where}: key '{k}' has shape {tuple(v.shape)}, expected {tuple(own[k].shape)}: "
                                 "the file is another model's weights.")
    module.load_state_dict(given, strict=True)


def param_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


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
    called for it (the eager module until ``install_engine`` replaces it).
    """

    requires: tuple[str, ...] = ()  # optional packages (the 'engines' extra) it needs to run
    loads_weights = True  # False: the engine runs only as a timing twin in this version (its docstring says why)
    audio_dirs: tuple[str, ...] = ()  # where the release keeps its audio encoder (Hugging Face layout), first found

    def __init__(self) -> None:
        super().__init__()
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.fns: dict[str, Callable] = {}

    def audio_encoder(self):
        """The ``studio.generators.audio_encoders.AudioEncoder`` the core runs in stage A for this engine (after
        ``open``): the release's own from ``weights_dir`` when the engine's weights are installed, else a seeded twin
        on the same device. None for engines driven by motion alone."""
        from studio.generators.audio_encoders import ENCODERS

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

    def open(self, anchor, settings: GeneratorSettings) -> None:
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
        except torch.cuda.OutOfMemoryError as exc:
            raise RenderError(f"{self.info.label}: the GPU ran out of memory loading the engine: close other GPU "
                              "work or choose a smaller size.") from exc

    def _build_twin(self) -> None:
        raise NotImplementedError

    def _load(self, folder: Path) -> None:
        raise NotImplementedError

    def _to_device(self) -> None:
        raise NotImplementedError

    def _prepare(self, anchor) -> None:
        raise NotImplementedError

    def _generate(self, coeffs: torch.Tensor, features: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def _targets(self) -> list[CompileTarget]:
        return []

    @torch.inference_mode()
    def generate(self, coeffs: torch.Tensor, features: torch.Tensor | None = None) -> torch.Tensor:
        if self.info.audio is not None and features is None:
            raise RenderError(f"{self.info.label} needs audio features ({self.info.audio.encoder}).")
        try:
            return self._generate(coeffs, features)
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
        self.fns = {}
