"""What every engine builder shares: the ``Backend`` interface, the built engine (``Built``) and the call wrappers
that give a built engine the module's signature (casts, inference mode, fixed batches). The backends themselves:
``studio.compile.builders``."""

from __future__ import annotations

import abc
import copy
import logging
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import torch

from studio.compile.settings import BACKEND_LABELS, BuildSettings
from studio.compile.silicon import PRECISION_LABELS, PRECISIONS, Fingerprint, supported_precisions
from studio.errors import CompileError

if TYPE_CHECKING:
    from studio.contracts import CompileTarget

log = logging.getLogger(__name__)

_TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
BuildSteps = Generator[str, None, "Built"]


@dataclass
class Built:
    """A built engine: the callable, the files to install (in the build folder), and what was done."""

    fn: Callable
    files: list[Path] = field(default_factory=list)
    details: dict = field(default_factory=dict)


# -- call wrappers -----------------------------------------------------------------------------------------------------

def target_device(inputs: Sequence) -> torch.device:
    for x in inputs:
        if isinstance(x, torch.Tensor):
            return x.device
    return torch.device("cpu")


def module_dtype(module: torch.nn.Module) -> torch.dtype:
    """The floating dtype of the module's first floating parameter or buffer (float32 when it has none)."""
    for t in list(module.parameters()) + list(module.buffers()):
        if t.is_floating_point():
            return t.dtype
    return torch.float32


class _Cast:
    """Runs ``fn`` in ``dtype``: floating inputs are cast to it, floating outputs back to ``out_dtype``."""

    def __init__(self, fn: Callable, dtype: torch.dtype, out_dtype: torch.dtype) -> None:
        self.fn, self.dtype, self.out_dtype = fn, dtype, out_dtype

    def __call__(self, *xs):
        ys = self.fn(*[x.to(self.dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs])
        if isinstance(ys, torch.Tensor):
            return ys.to(self.out_dtype) if ys.is_floating_point() else ys
        return tuple(y.to(self.out_dtype) if y.is_floating_point() else y for y in ys)


class _Inference:
    """Calls ``fn`` under ``torch.inference_mode`` (compiled code is guarded on the grad mode: one mode, one build)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __call__(self, *xs):
        with torch.inference_mode():
            return self.fn(*xs)


class _GraphSteps:
    """For Inductor modes that replay CUDA graphs: marks a new step before each call and clones the outputs, which
    the next replay would overwrite while the pipeline still holds them."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __call__(self, *xs):
        torch.compiler.cudagraph_mark_step_begin()
        ys = self.fn(*xs)
        return ys.clone() if isinstance(ys, torch.Tensor) else tuple(y.clone() for y in ys)


class _FixedBatch:
    """Calls a fixed-batch ``fn`` for any batch: larger inputs are split, the last part is padded by repeating its
    last row, and the outputs are sliced and joined."""

    def __init__(self, fn: Callable, batch: int) -> None:
        self.fn, self.batch = fn, batch

    def __call__(self, *xs):
        n = int(xs[0].shape[0])
        if n == self.batch:
            return self.fn(*xs)
        parts = []
        for i in range(0, n, self.batch):
            part = [x[i:i + self.batch] for x in xs]
            k = int(part[0].shape[0])
            if k < self.batch:
                part = [torch.cat([x, x[-1:].expand(self.batch - k, *x.shape[1:])]) for x in part]
            out = self.fn(*part)
            parts.append([out] if isinstance(out, torch.Tensor) else list(out))
        joined = [torch.cat([p[j][:min(self.batch, n - i * self.batch)] for i, p in enumerate(parts)])
                  for j in range(len(parts[0]))]
        return joined[0] if len(joined) == 1 else tuple(joined)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _cast_module(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """The module itself in its own dtype, else a cast copy (the generator's module stays as it is)."""
    if module_dtype(module) == dtype:
        return module
    return copy.deepcopy(module).to(dtype)


def _wrap(fn: Callable, target: "CompileTarget", settings: BuildSettings, ref_dtype: torch.dtype,
          dtype: torch.dtype, fixed_batch: bool) -> Callable:
    if dtype != ref_dtype:
        fn = _Cast(fn, dtype, ref_dtype)
    if fixed_batch and target.dynamic_batch:
        fn = _FixedBatch(fn, settings.batch)
    return fn


# -- the backends --------------------------------------------------------------------------------------------------

class Backend(abc.ABC):
    """One way to build engines. ``precisions``: what this backend can build at all (the device narrows it)."""

    name: ClassVar[str]
    ext: ClassVar[str]  # the engine file's extension (the sidecar alone for in-process backends)
    serializable: ClassVar[bool]  # False: the engine lives in the process; loading it rebuilds and re-verifies it
    precisions: ClassVar[tuple[str, ...]]

    @property
    def label(self) -> str:
        return BACKEND_LABELS[self.name]

    def unavailable(self, fp: Fingerprint) -> str | None:
        """None where this backend runs on ``fp``, else why not (one sentence that says what to do)."""
        return None

    def precision_reasons(self, fp: Fingerprint) -> dict[str, str | None]:
        """precision -> None where this backend builds it on ``fp``, else the reason (the backend's or the
        device's)."""
        reason = self.unavailable(fp)
        device = supported_precisions(fp)
        out: dict[str, str | None] = {}
        for p in PRECISIONS:
            if reason is not None:
                out[p] = reason
            elif device[p] is not None:
                out[p] = device[p]
            elif p not in self.precisions:
                out[p] = f"{self.label} does not build {PRECISION_LABELS[p]} engines here: " + self._hint(p)
            else:
                out[p] = None
        return out

    def _hint(self, precision: str) -> str:
        return "choose another backend."

    @abc.abstractmethod
    def build(self, target: "CompileTarget", inputs: tuple, settings: BuildSettings, fp: Fingerprint,
              workdir: Path, stem: str) -> BuildSteps:
        """Yield log lines while building; return the ``Built`` engine (files only inside ``workdir``)."""

    def load(self, path: Path, target: "CompileTarget", inputs: tuple, settings: BuildSettings,
             fp: Fingerprint, details: dict) -> Callable:
        """The engine from its installed file (serializable backends only)."""
        raise CompileError(f"{self.label} engines are rebuilt in the process, not loaded from a file.")
