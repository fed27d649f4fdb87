"""Engine builders: one backend per way of running a compile target faster than eager PyTorch.

Every backend turns a ``CompileTarget`` (a plain module and one call's example inputs) into a callable with the
module's signature, which a generator installs with ``install_engine``:

- ``eager``: the module itself (the reference; at FP16 / BF16 a cast copy).
- ``inductor``: ``torch.compile`` (modes default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs), built
  for the engine's batch (``dynamic=False``); larger calls are split and the last part padded.
- ``cuda_graphs``: one static-shape call captured as a CUDA graph and replayed (CUDA only; the module must not
  synchronize with the host).
- ``onnxruntime``: ``torch.onnx`` export (dynamic batch) run by ONNX Runtime; INT8 through
  ``onnxruntime.quantization`` (dynamic: INT8 weights, activations scaled per call; static: calibrated, QDQ). CPU
  providers here, the CUDA provider where ONNX Runtime has it.
- ``tensorrt``: TensorRT's Python API on the exported ONNX (parser, builder config with the precision flags, one
  optimization profile per batch size, a timing cache per GPU architecture, the serialized engine). Feature-detected:
  where the ``tensorrt`` package is absent the backend says so in one line and nothing else changes.

Builders yield log lines while they work ("" is a heartbeat: so that a compile job can report progress and check for
cancellation between steps) and return a ``Built``; files are written into the job's private build folder, never
into the cache directly.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import shutil
import time
from collections.abc import Callable

import torch

from studio.compile.backend import (Backend, BuildSteps, Built, _cast_module, _first_line, _GraphSteps, _Inference,
                                    _TORCH_DTYPES, _wrap, module_dtype)
from studio.compile.onnx_backend import OnnxRuntimeBackend
from studio.compile.silicon import PRECISION_LABELS, Fingerprint
from studio.compile.tensorrt_backend import TensorRTBackend
from studio.errors import CompileError

log = logging.getLogger(__name__)


class EagerBackend(Backend):
    name, ext, serializable = "eager", "eager", False
    precisions = ("fp32", "fp16", "bf16")

    def build(self, target, inputs, settings, fp, workdir, stem) -> BuildSteps:
        ref = module_dtype(target.module)
        dtype = _TORCH_DTYPES[settings.precision]
        yield f"eager {target.name} in {PRECISION_LABELS[settings.precision]}"
        fn = _Inference(_cast_module(target.module, dtype))
        return Built(_wrap(fn, target, settings, ref, dtype, fixed_batch=False), details={"dtype": str(dtype)})


class InductorBackend(Backend):
    name, ext, serializable = "inductor", "inductor", False
    precisions = ("fp32", "fp16", "bf16")

    def unavailable(self, fp: Fingerprint) -> str | None:
        if not hasattr(torch, "compile"):
            return "This torch has no torch.compile: install torch 2.x."
        if fp.is_cuda:
            if importlib.util.find_spec("triton") is None:
                return "TorchInductor on the GPU needs Triton, which is not installed (pip install triton)."
            return None
        compilers = [os.environ.get("CXX", ""), "g++", "c++", "clang++"]
        if not any(c and shutil.which(c) for c in compilers):
            return "TorchInductor on the CPU needs a C++ compiler, and none was found (apt-get install g++)."
        return None

    def build(self, target, inputs, settings, fp, workdir, stem) -> BuildSteps:
        ref = module_dtype(target.module)
        dtype = _TORCH_DTYPES[settings.precision]
        module = _cast_module(target.module, dtype)
        mode = None if settings.inductor_mode == "default" else settings.inductor_mode
        try:
            compiled = torch.compile(module, mode=mode, dynamic=False, fullgraph=False)
        except RuntimeError as exc:  # torch refuses the module or the mode at once
            raise CompileError(f"TorchInductor refused {target.name}: {_first_line(exc)}") from exc
        call: Callable = _Inference(compiled)
        if fp.is_cuda and settings.inductor_mode in ("reduce-overhead", "max-autotune"):
            call = _GraphSteps(call)
        fn = _wrap(call, target, settings, ref, dtype, fixed_batch=True)
        yield f"compiling {target.name} with TorchInductor (mode {settings.inductor_mode}, batch {settings.batch})"
        t0 = time.perf_counter()
        try:
            fn(*inputs)
            if fp.is_cuda:
                torch.cuda.synchronize()
        except Exception as exc:  # the boundary to dynamo / inductor / triton: reported as the compile's failure
            raise CompileError(f"TorchInductor could not compile {target.name}: {_first_line(exc)}") from exc
        compile_s = time.perf_counter() - t0
        yield f"compiled in {compile_s:.1f} s"
        return Built(fn, details={"mode": settings.inductor_mode, "dtype": str(dtype), "compile_s": compile_s})


class _Graphed:
    """A CUDA graph of ``fn`` at the inputs' shapes: inputs are copied into static buffers, the graph replays, the
    outputs are cloned out of the graph's memory."""

    def __init__(self, fn: Callable, examples: tuple) -> None:
        self.static_in = [x.clone() if isinstance(x, torch.Tensor) else x for x in examples]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.inference_mode():
            for _ in range(3):  # warm-up off the default stream (allocator, lazy initialisation, cuBLAS handles)
                fn(*self.static_in)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(self.graph):
            out = fn(*self.static_in)
        self.single = isinstance(out, torch.Tensor)
        self.static_out = [out] if self.single else list(out)

    def __call__(self, *xs):
        for buf, x in zip(self.static_in, xs):
            if isinstance(buf, torch.Tensor):
                buf.copy_(x)
        self.graph.replay()
        outs = [o.clone() for o in self.static_out]
        return outs[0] if self.single else tuple(outs)


class CudaGraphBackend(Backend):
    name, ext, serializable = "cuda_graphs", "cudagraph", False
    precisions = ("fp32", "fp16", "bf16")

    def unavailable(self, fp: Fingerprint) -> str | None:
        if not fp.is_cuda:
            return "CUDA graphs need an NVIDIA GPU; this machine computes on the CPU."
        return None

    def build(self, target, inputs, settings, fp, workdir, stem) -> BuildSteps:
        ref = module_dtype(target.module)
        dtype = _TORCH_DTYPES[settings.precision]
        module = _cast_module(target.module, dtype)
        cast_in = tuple(x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)
        yield f"capturing {target.name} as a CUDA graph at batch {settings.batch}"
        try:
            graphed = _Graphed(module, cast_in)
        except RuntimeError as exc:  # capture refuses host synchronisation and data-dependent shapes
            raise CompileError(
                f"CUDA graph capture of {target.name} failed: {_first_line(exc)}. The module must not synchronize "
                "with the host (.item(), nonzero, data-dependent shapes) during forward.") from exc
        return Built(_wrap(graphed, target, settings, ref, dtype, fixed_batch=True), details={"dtype": str(dtype)})


BACKENDS: dict[str, Backend] = {b.name: b for b in (EagerBackend(), InductorBackend(), CudaGraphBackend(),
                                                   OnnxRuntimeBackend(), TensorRTBackend())}


def backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        from studio.errors import InputError

        raise InputError(f"Unknown backend '{name}': use one of {', '.join(BACKENDS)}.") from None


def precision_choices(fp: Fingerprint, backend_name: str) -> dict[str, str | None]:
    """precision -> None where ``backend_name`` builds it on ``fp``, else the reason (for the compile panel)."""
    return backend(backend_name).precision_reasons(fp)
