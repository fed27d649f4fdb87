"""Reading the releases' weight files strictly, and building seeded timing twins.

Loading is strict on purpose: a release file with a missing key, an extra key or a wrong shape is refused with a
one-line ``ModelLoadError`` that names the file and the first offending key, instead of running a half-loaded network.
A timing twin is the same modules built under a fixed seed (``seeded``): the same shapes, so the same latency and
memory, and never put on air (``Generator.twin``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch

from studio.errors import ModelLoadError

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
    cuda = []
    if device is not None and device.type == "cuda":
        cuda = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=cuda, device_type="cuda"):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Modules built inside get parameters of ``dtype`` (a 14 B twin built in bf16 needs half the memory of fp32)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


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
