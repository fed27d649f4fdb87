"""Checking an engine against eager output, and timing both in the same run.

Verification: the engine and the eager module run on the same input sets (the target's example inputs at the engine's
batch, and seeded perturbations of them); every output is compared by its largest absolute error and its PSNR, the
peak being the reference output's range (for frames in 0..255: the PSNR of the frames). An engine passes when every
output is finite, shaped like the reference and at least ``threshold`` dB.

Timing: warm-up calls of each, then eager and engine calls alternated (so that load on the machine hits both alike),
the device synchronized around every call; medians are reported with the speed-up measured in that same run.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch


def flatten_outputs(out) -> list[torch.Tensor]:
    """A module's output as a list of tensors (a tensor, or a tuple / list of them)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    from studio.errors import CompileError

    raise CompileError(f"An engine can replace a module returning tensors only, not {type(out).__name__}: "
                       "wrap the module so that its forward returns a tensor or a tuple of tensors.")


def at_batch(inputs: Sequence, batch: int, dynamic_batch: bool) -> tuple:
    """The example inputs with dimension 0 resized to ``batch`` (rows repeated cyclically); unchanged when the
    target's batch is fixed."""
    if not dynamic_batch:
        return tuple(inputs)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            idx = torch.arange(batch, device=x.device) % x.shape[0]
            out.append(x.index_select(0, idx).contiguous())
        else:
            out.append(x)
    return tuple(out)


def perturbed(inputs: Sequence, seed: int) -> tuple:
    """Floating inputs plus seeded noise of a tenth of their spread (1 where they are constant); others unchanged.
    Example inputs are often zeros (a neutral face): the perturbed set exercises the rest of the input range."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
            spread = float(x.float().std()) if x.numel() > 1 else 0.0
            scale = 0.1 * (spread if spread > 0 and math.isfinite(spread) else 1.0)
            noise = torch.randn(x.shape, generator=gen, dtype=torch.float32) * scale
            out.append((x.float() + noise.to(x.device)).to(x.dtype))
        else:
            out.append(x)
    return tuple(out)


@dataclass(frozen=True)
class Verification:
    """The engine against eager output, over every output of every verification input set."""

    max_abs_error: float
    psnr_db: float  # the worst output's PSNR (inf: identical)
    threshold_db: float
    finite: bool
    shapes_match: bool
    input_sets: int
    detail: str = ""  # why it failed, in words

    @property
    def passed(self) -> bool:
        return self.finite and self.shapes_match and self.psnr_db >= self.threshold_db

    def as_dict(self) -> dict:
        return {"max_abs_error": _json_float(self.max_abs_error), "psnr_db": _json_float(self.psnr_db),
                "threshold_db": self.threshold_db, "finite": self.finite, "shapes_match": self.shapes_match,
                "input_sets": self.input_sets, "passed": self.passed, "detail": self.detail}

    @classmethod
    def from_dict(cls, d: dict) -> "Verification":
        return cls(float(d["max_abs_error"]), float(d["psnr_db"]), float(d["threshold_db"]), bool(d["finite"]),
                   bool(d["shapes_match"]), int(d["input_sets"]), str(d.get("detail", "")))

    def summary(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        return (f"{verdict}: max abs error {self.max_abs_error:.4g}, PSNR {self.psnr_db:.1f} dB "
                f"(needs {self.threshold_db:.0f})" + (f"; {self.detail}" if self.detail else ""))


def _json_float(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "nan")


def compare(reference: list[list[torch.Tensor]], engine: list[list[torch.Tensor]], threshold_db: float
            ) -> Verification:
    """Per input set, the reference's and the engine's outputs (lists of tensors) -> the verdict."""
    worst_abs, worst_psnr, finite, shapes, detail = 0.0, math.inf, True, True, ""
    for ref_set, eng_set in zip(reference, engine):
        if len(ref_set) != len(eng_set):
            shapes, detail = False, f"{len(eng_set)} outputs instead of {len(ref_set)}"
            continue
        for k, (ref, got) in enumerate(zip(ref_set, eng_set)):
            if tuple(ref.shape) != tuple(got.shape):
                shapes, detail = False, f"output {k} is {tuple(got.shape)}, eager gives {tuple(ref.shape)}"
                continue
            r = ref.detach().double().cpu()
            g = got.detach().double().cpu()
            if not bool(torch.isfinite(g).all()):
                finite, detail = False, f"output {k} has NaN or infinite values"
                continue
            err = (g - r).abs()
            mae = float(err.max()) if err.numel() else 0.0
            mse = float((err * err).mean()) if err.numel() else 0.0
            peak = float(r.max() - r.min()) if r.numel() else 0.0
            peak = peak if peak > 0 else max(float(r.abs().max()) if r.numel() else 0.0, 1e-6)
            psnr = math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)
            worst_abs = max(worst_abs, mae)
            worst_psnr = min(worst_psnr, psnr)
    if finite and shapes and worst_psnr < threshold_db:
        detail = f"PSNR {worst_psnr:.1f} dB is below the {threshold_db:.0f} dB this precision needs"
    return Verification(worst_abs, worst_psnr, threshold_db, finite, shapes, len(reference), detail)


@dataclass(frozen=True)
class Timing:
    """Medians of calls at the engine's batch, eager and engine alternated in one run."""

    eager_ms: float
    engine_ms: float
    batch: int
    calls: int
    warmup: int
    peak_memory_mib: float = float("nan")  # torch's peak device memory over one engine call (CUDA; TensorRT and
    # ONNX Runtime allocate outside torch: their own memory is not in it)

    @property
    def speedup(self) -> float:
        return self.eager_ms / self.engine_ms if self.engine_ms > 0 else float("nan")

    @property
    def engine_ms_per_frame(self) -> float:
        return self.engine_ms / self.batch

    def as_dict(self) -> dict:
        return {"eager_ms": self.eager_ms, "engine_ms": self.engine_ms, "speedup": self.speedup,
                "engine_ms_per_frame": self.engine_ms_per_frame, "batch": self.batch, "calls": self.calls,
                "warmup": self.warmup, "peak_memory_mib": _json_float(self.peak_memory_mib)}

    @classmethod
    def from_dict(cls, d: dict) -> "Timing":
        return cls(float(d["eager_ms"]), float(d["engine_ms"]), int(d["batch"]), int(d["calls"]), int(d["warmup"]),
                   float(d.get("peak_memory_mib", "nan")))

    def summary(self) -> str:
        return (f"eager {self.eager_ms:.3f} ms, engine {self.engine_ms:.3f} ms per call of {self.batch} "
                f"({self.engine_ms_per_frame:.3f} ms per frame): {self.speedup:.2f}x")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_pair(eager: Callable, engine: Callable, inputs: tuple, device: torch.device, warmup: int, calls: int,
              abort: threading.Event | None = None) -> Timing | None:
    """Time ``eager(*inputs)`` and ``engine(*inputs)`` alternately (see the module docstring); None if aborted."""
    batch = next((int(x.shape[0]) for x in inputs if isinstance(x, torch.Tensor) and x.dim() > 0), 1)
    with torch.inference_mode():
        for _ in range(warmup):
            eager(*inputs)
            engine(*inputs)
        _sync(device)
        t_eager, t_engine = [], []
        for _ in range(calls):
            if abort is not None and abort.is_set():
                return None
            for fn, acc in ((eager, t_eager), (engine, t_engine)):
                _sync(device)
                t0 = time.perf_counter()
                fn(*inputs)
                _sync(device)
                acc.append((time.perf_counter() - t0) * 1e3)
        peak = float("nan")
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            engine(*inputs)
            _sync(device)
            peak = torch.cuda.max_memory_allocated(device) / 2**20
    return Timing(statistics.median(t_eager), statistics.median(t_engine), batch, calls, warmup, peak)
