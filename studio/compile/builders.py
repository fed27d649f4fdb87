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

import abc
import copy
import importlib
import importlib.util
import logging
import os
import queue
import shutil
import threading
import time
import warnings
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


# -- ONNX export and ONNX Runtime ------------------------------------------------------------------------------------

def export_onnx(module: torch.nn.Module, inputs: tuple, path: Path, n_outputs: int, dynamic_batch: bool,
                opset: int) -> str:
    """Export ``module`` at ``inputs`` to ``path`` (dimension 0 dynamic where ``dynamic_batch``); returns the route
    taken. torch's exporter (torch.export + onnxscript) where onnxscript is installed, else the TorchScript one."""
    input_names = [f"in{i}" for i in range(len(inputs))]
    output_names = [f"out{i}" for i in range(n_outputs)]
    if dynamic_batch:  # export at batch >= 2: torch.export specializes a dimension of size 1
        n = int(inputs[0].shape[0])
        if n < 2:
            inputs = tuple(torch.cat([x, x]) if isinstance(x, torch.Tensor) and x.dim() > 0 else x for x in inputs)
    if importlib.util.find_spec("onnxscript") is not None:
        dyn = _dynamic_batch_shapes(module, inputs) if dynamic_batch else None
        try:
            with torch.no_grad():
                program = torch.onnx.export(module, inputs, dynamo=True, dynamic_shapes=dyn, opset_version=opset,
                                            input_names=input_names, output_names=output_names, verbose=False)
            program.save(str(path))
        except Exception as exc:  # torch.export / onnxscript translation: the boundary of the exporter
            raise CompileError(f"ONNX export failed: {_export_reason(exc)}") from exc
        return f"torch.onnx (torch.export + onnxscript), opset {opset}"
    axes = {name: {0: "batch"} for name in input_names + output_names} if dynamic_batch else None
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # The TorchScript exporter announces its deprecation on every call; this route is taken only where
            # onnxscript is missing, and the returned route says so.
            warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*TorchScript-based ONNX.*")
            torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=opset, input_names=input_names,
                              output_names=output_names, dynamic_axes=axes)
    except Exception as exc:  # the TorchScript tracer's boundary
        raise CompileError(f"ONNX export (TorchScript route: onnxscript is not installed) failed: "
                           f"{_first_line(exc)}. Install onnxscript for torch's current exporter.") from exc
    return f"torch.onnx TorchScript exporter (onnxscript not installed), opset {opset}"


def _dynamic_batch_shapes(module: torch.nn.Module, inputs: tuple):
    """torch.export's ``dynamic_shapes`` with dimension 0 of every tensor input as one shared batch dimension,
    following the forward's signature (a ``forward(self, *args)`` wrapper takes them as one nested tuple)."""
    import inspect

    batch = torch.export.Dim("batch", min=1, max=4096)

    def spec(x):
        return {0: batch} if isinstance(x, torch.Tensor) and x.dim() > 0 else None

    try:
        bound = inspect.signature(module.forward).bind(*inputs)
    except (TypeError, ValueError):  # a signature inspect cannot read: one spec per positional input
        return tuple(spec(x) for x in inputs)
    params = inspect.signature(module.forward).parameters
    out = {}
    for name, value in bound.arguments.items():
        if params[name].kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = tuple(spec(x) for x in value)
        else:
            out[name] = spec(value)
    return out


def _export_reason(exc: BaseException) -> str:
    """The useful sentence of an exporter error: the operator without an ONNX translation, or the first line."""
    import re

    text = str(exc)
    m = re.search(r"No ONNX function found for <OpOverload\(op='([^']+)'", text)
    if m:
        return (f"the operator {m.group(1)} has no ONNX translation; rewrite that step of the module with "
                "exportable operations (or register a translation)")
    m = re.search(r"(Constraints violated[^\n]*\n[^\n]*)", text)
    if m:
        return "the batch dimension is specialized by the module (" + " ".join(m.group(1).split())[:240] + ")"
    where = re.search(r"Caused by: \(([^)]+)\)", text)
    at = f" at {where.group(1)}" if where else ""
    if "data-dependent" in text:
        return (f"the forward depends on tensor values{at} (a data-dependent shape or a Python branch on a tensor: "
                ".item(), nonzero, `if tensor`); give the module a static-shape path for export")
    m = re.search(r"## Exception summary\s*\n\s*<class '([^']+)'>: ([^\n]+)", text)
    if m:
        return f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2).strip()[:240]}{at}"
    return _first_line(exc)


def _np_inputs(xs: Sequence) -> list:
    return [x.detach().cpu().contiguous().numpy() if isinstance(x, torch.Tensor) else x for x in xs]


class _Calibration:
    """onnxruntime.quantization's CalibrationDataReader protocol over our verification input sets."""

    def __init__(self, sets: list[tuple]) -> None:
        self._it = iter([{f"in{i}": a for i, a in enumerate(_np_inputs(s))} for s in sets])

    def get_next(self):
        return next(self._it, None)

    def rewind(self) -> None:  # ORT calls it between passes of some calibration methods
        raise CompileError("INT8 calibration asked to read the data twice; use --int8 dynamic.")


_INT8_OPS = {"MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeMatMul",
             "MatMulIntegerToFloat", "QGemm", "QAttention"}
_QDQ_OPS = {"QuantizeLinear", "DynamicQuantizeLinear"}


def _count_quantized(path: Path) -> tuple[int, int]:
    """(integer compute nodes, quantize nodes) in an ONNX file."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    ops = [n.op_type for n in model.graph.node]
    return sum(op in _INT8_OPS for op in ops), sum(op in _QDQ_OPS for op in ops)


def quantize_onnx(src: Path, dst: Path, method: str, calibration: list[tuple], qtype: str = "int8") -> dict:
    """INT8 (or, for TensorRT, FP8 e4m3 / symmetric INT8 QDQ) quantization with onnxruntime.quantization.

    CPU INT8 weights use 7 bits (``reduce_range``): without VNNI (AVX2, AVX-512F) onnxruntime's u8 x s8 kernels
    saturate their 16-bit pair sums on full-range weights, so the same engine would be accurate on one x86 CPU and
    not on another."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    try:
        if method == "dynamic":
            quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, reduce_range=True)
        else:
            kw: dict = {"quant_format": QuantFormat.QDQ, "per_channel": True}
            if qtype == "fp8":
                kw.update(activation_type=QuantType.QFLOAT8E4M3FN, weight_type=QuantType.QFLOAT8E4M3FN)
            elif qtype == "int8_symmetric":  # TensorRT's explicit quantization takes symmetric INT8 only
                kw.update(activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                          extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
            else:
                kw.update(activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=True)
            quantize_static(str(src), str(dst), _Calibration(calibration), **kw)
    except CompileError:
        raise
    except Exception as exc:  # onnxruntime.quantization's boundary
        raise CompileError(f"Quantization ({method}) failed: {_first_line(exc)}") from exc
    compute, quant = _count_quantized(dst)
    if compute + quant == 0:
        raise CompileError("Nothing in this network is quantizable by ONNX Runtime (no MatMul, Gemm or Conv with "
                           "weights): an INT8 engine would be FP32 in disguise. Build it in FP32.")
    return {"int8_method": method, "integer_nodes": compute, "quantize_nodes": quant}


class _OrtCall:
    """An ONNX Runtime session with the module's signature: torch tensors in and out, on the inputs' device.

    On the CUDA provider inputs and outputs stay on the GPU (I/O binding to torch's memory; output shapes follow
    the eager reference's, dimension 0 scaled with the batch)."""

    def __init__(self, session, n_outputs: int, out_shapes: list[tuple[int, ...]], out_dtypes: list[torch.dtype],
                 dynamic_batch: bool) -> None:
        self.session = session
        self.inputs = [i.name for i in session.get_inputs()]
        self.outputs = [o.name for o in session.get_outputs()][:n_outputs]
        self.on_cuda = session.get_providers()[0] == "CUDAExecutionProvider"
        self.out_shapes, self.out_dtypes, self.dynamic_batch = out_shapes, out_dtypes, dynamic_batch

    def __call__(self, *xs):
        device = target_device(xs)
        if self.on_cuda and device.type == "cuda":
            outs = self._run_bound(xs, device)
        else:
            feed = dict(zip(self.inputs, _np_inputs(xs)))
            outs = [torch.from_numpy(o).to(device) for o in self.session.run(self.outputs, feed)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _run_bound(self, xs, device: torch.device) -> list[torch.Tensor]:
        import numpy as np

        torch.cuda.current_stream(device).synchronize()  # the inputs are written before ONNX Runtime reads them
        binding = self.session.io_binding()
        idx = device.index or 0
        xs = [x.contiguous() for x in xs]
        for name, x in zip(self.inputs, xs):
            binding.bind_input(name, "cuda", idx, torch.empty((), dtype=x.dtype).numpy().dtype, list(x.shape),
                               x.data_ptr())
        n = int(xs[0].shape[0])
        outs = []
        for name, shape, dtype in zip(self.outputs, self.out_shapes, self.out_dtypes):
            shape = (n, *shape[1:]) if self.dynamic_batch else shape
            y = torch.empty(shape, dtype=dtype, device=device)
            binding.bind_output(name, "cuda", idx, np.dtype(torch.empty((), dtype=dtype).numpy().dtype),
                                list(shape), y.data_ptr())
            outs.append(y)
        self.session.run_with_iobinding(binding)
        return outs


def ort_session(path: Path, fp: Fingerprint):
    """An ONNX Runtime session: the CUDA provider on a GPU where ONNX Runtime has it, else the CPU's; intra-op
    threads as many as torch uses (so that the engine and eager are timed on the same cores)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = torch.get_num_threads()
    # ONNX Runtime's workers spin after each run by default: on a small CPU they would take the cores from torch
    # (eager calls measured 250x slower beside a spinning session on 2 cores) and from the rest of the studio.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.log_severity_level = 3
    providers = ["CPUExecutionProvider"]
    if fp.is_cuda and "CUDAExecutionProvider" in ort.get_available_providers():
        providers = [("CUDAExecutionProvider", {"device_id": torch.cuda.current_device()}), "CPUExecutionProvider"]
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=providers)
    except Exception as exc:  # ONNX Runtime's boundary: an operator it lacks, a corrupt file
        raise CompileError(f"ONNX Runtime cannot load {path.name}: {_first_line(exc)}") from exc


class OnnxRuntimeBackend(Backend):
    name, ext, serializable = "onnxruntime", "onnx", True
    precisions = ("fp32", "int8")

    def unavailable(self, fp: Fingerprint) -> str | None:
        for pkg in ("onnxruntime", "onnx"):
            if importlib.util.find_spec(pkg) is None:
                return f"ONNX Runtime engines need the {pkg} package, which is not installed (pip install {pkg})."
        return None

    def _hint(self, precision: str) -> str:
        return "use FP32 or INT8 with ONNX Runtime, or TensorRT / TorchInductor for FP16, BF16 and FP8."

    def build(self, target, inputs, settings, fp, workdir, stem) -> BuildSteps:
        from studio.compile.verify import flatten_outputs, perturbed

        with torch.no_grad():
            ref = flatten_outputs(target.module(*inputs))
        path = workdir / f"{stem}.{self.ext}"
        fp32_path = path if settings.precision == "fp32" else workdir / f"{stem}.fp32-src.onnx"
        yield f"exporting {target.name} to ONNX"
        route = export_onnx(target.module, inputs, fp32_path, len(ref), target.dynamic_batch, settings.opset)
        size = sum(f.stat().st_size for f in workdir.glob(fp32_path.name + "*"))  # with external weights
        yield f"exported ({route}): {size / 2**20:.1f} MiB"
        details: dict = {"export": route}
        if settings.precision == "int8":
            yield f"quantizing to INT8 ({settings.int8_method})"
            calib = [inputs] + [perturbed(inputs, settings.verify_seed + 100 + i)
                                for i in range(max(0, settings.calibration_sets - 1))]
            details.update(quantize_onnx(fp32_path, path, settings.int8_method, calib))
            yield (f"quantized: {details['integer_nodes']} integer nodes, {details['quantize_nodes']} quantize "
                   "nodes")
        fn = self._session_call(path, target, ref, fp)
        details["providers"] = list(fn.session.get_providers())
        files = [path] + sorted(p for p in workdir.glob(f"{stem}.{self.ext}*") if p != path)
        return Built(fn, files=files, details=details)

    def _session_call(self, path: Path, target: "CompileTarget", ref: list[torch.Tensor], fp: Fingerprint):
        session = ort_session(path, fp)
        return _OrtCall(session, len(ref), [tuple(r.shape) for r in ref], [r.dtype for r in ref],
                        target.dynamic_batch)

    def load(self, path, target, inputs, settings, fp, details) -> Callable:
        from studio.compile.verify import flatten_outputs

        with torch.no_grad():
            ref = flatten_outputs(target.module(*inputs))
        return self._session_call(path, target, ref, fp)


# -- TensorRT ---------------------------------------------------------------------------------------------------------

def tensorrt_unavailable() -> str | None:
    """None where TensorRT imports, else one sentence why not."""
    if importlib.util.find_spec("tensorrt") is None:
        return ("TensorRT is not installed: its PyPI package only downloads NVIDIA's libraries at install time, "
                "which this machine cannot reach; use ONNX Runtime, TorchInductor or CUDA graphs.")
    try:
        importlib.import_module("tensorrt")
    except Exception as exc:  # the PyPI stub raises when its libraries are missing
        return f"TensorRT does not load ({_first_line(exc)}); use ONNX Runtime, TorchInductor or CUDA graphs."
    return None


class _TrtCall:
    """A deserialized TensorRT engine with the module's signature: picks the smallest optimization profile that holds
    the batch, binds torch's memory and runs on torch's current stream."""

    def __init__(self, engine, profiles: list[int], dynamic_batch: bool) -> None:
        import tensorrt as trt

        self.trt = trt
        self.engine = engine
        self.context = engine.create_execution_context()
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        self.profiles, self.dynamic_batch = profiles, dynamic_batch
        self._profile = -1

    def _torch_dtype(self, name: str) -> torch.dtype:
        trt = self.trt
        dtypes = {trt.float32: torch.float32, trt.float16: torch.float16, trt.bfloat16: torch.bfloat16,
                  trt.int32: torch.int32, trt.int64: torch.int64, trt.int8: torch.int8, trt.bool: torch.bool,
                  trt.uint8: torch.uint8}
        dt = self.engine.get_tensor_dtype(name)
        if dt not in dtypes:
            raise CompileError(f"TensorRT engine tensor {name} has type {dt}, which torch cannot hold.")
        return dtypes[dt]

    def __call__(self, *xs):
        n = int(xs[0].shape[0])
        if self.dynamic_batch and n > self.profiles[-1]:
            return _FixedBatch(self, self.profiles[-1])(*xs)
        stream = torch.cuda.current_stream()
        if self.dynamic_batch:
            k = next(i for i, b in enumerate(self.profiles) if n <= b)
            if k != self._profile:
                self.context.set_optimization_profile_async(k, stream.cuda_stream)
                self._profile = k
        xs = [x.contiguous() for x in xs]
        for name, x in zip(self.inputs, xs):
            self.context.set_input_shape(name, tuple(x.shape))
            self.context.set_tensor_address(name, x.data_ptr())
        outs = []
        for name in self.outputs:
            y = torch.empty(tuple(self.context.get_tensor_shape(name)), dtype=self._torch_dtype(name),
                            device=xs[0].device)
            self.context.set_tensor_address(name, y.data_ptr())
            outs.append(y)
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise CompileError("TensorRT failed to run the engine (execute_async_v3 returned False).")
        return outs[0] if len(outs) == 1 else tuple(outs)


class TensorRTBackend(Backend):
    """Written against TensorRT 10's Python API (builder, ONNX parser, builder config, optimization profiles, timing
    cache, progress monitor). INT8 and FP8 use explicit quantization: the ONNX gets QDQ nodes from
    onnxruntime.quantization's calibrated static quantization (TensorRT 10 deprecates implicit INT8 calibrators)."""

    name, ext, serializable = "tensorrt", "plan", True
    precisions = ("fp32", "fp16", "bf16", "fp8", "int8")

    def unavailable(self, fp: Fingerprint) -> str | None:
        reason = tensorrt_unavailable()
        if reason is not None:
            return reason
        if not fp.is_cuda:
            return "TensorRT needs an NVIDIA GPU; this machine computes on the CPU."
        return None

    def _profiles(self, settings: BuildSettings, dynamic_batch: bool) -> list[int]:
        if not dynamic_batch:
            return [settings.batch]
        return sorted(set(settings.trt_profiles) | {settings.batch})

    def build(self, target, inputs, settings, fp, workdir, stem) -> BuildSteps:
        import tensorrt as trt

        from studio.compile.verify import flatten_outputs, perturbed

        with torch.no_grad():
            ref = flatten_outputs(target.module(*inputs))
        src = workdir / f"{stem}.trt-src.onnx"
        yield f"exporting {target.name} to ONNX for TensorRT"
        details: dict = {"export": export_onnx(target.module, inputs, src, len(ref), target.dynamic_batch,
                                               settings.opset)}
        if settings.precision in ("int8", "fp8"):
            yield f"inserting {PRECISION_LABELS[settings.precision]} quantize / dequantize nodes (calibrated)"
            calib = [inputs] + [perturbed(inputs, settings.verify_seed + 100 + i)
                                for i in range(max(0, settings.calibration_sets - 1))]
            qdq = workdir / f"{stem}.trt-qdq.onnx"
            details.update(quantize_onnx(src, qdq, "static", calib,
                                         "fp8" if settings.precision == "fp8" else "int8_symmetric"))
            src = qdq
        logger = trt.Logger(trt.Logger.WARNING)
        builder = trt.Builder(logger)
        network = builder.create_network(0)  # TensorRT 10: explicit batch is the only mode
        parser = trt.OnnxParser(network, logger)
        if not parser.parse_from_file(str(src)):
            errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise CompileError(f"TensorRT's ONNX parser rejected {target.name}: {errors[:400]}")
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, settings.trt_workspace_mib * 2**20)
        flags = {"fp16": [trt.BuilderFlag.FP16], "bf16": [trt.BuilderFlag.BF16],
                 "int8": [trt.BuilderFlag.INT8, trt.BuilderFlag.FP16],
                 "fp8": [trt.BuilderFlag.FP8, trt.BuilderFlag.FP16]}.get(settings.precision, [])
        for flag in flags:
            config.set_flag(flag)
        profiles = self._profiles(settings, target.dynamic_batch)
        lo = 1
        for b in profiles:
            profile = builder.create_optimization_profile()
            for i in range(network.num_inputs):
                t = network.get_input(i)
                shape = list(inputs[i].shape)
                if target.dynamic_batch:
                    profile.set_shape(t.name, [lo] + shape[1:], [b] + shape[1:], [b] + shape[1:])
                else:
                    profile.set_shape(t.name, shape, shape, shape)
            config.add_optimization_profile(profile)
            lo = b + 1
        cache_path = workdir.parent / f"timing_{fp.arch}.cache"
        cache_bytes = cache_path.read_bytes() if cache_path.exists() else b""
        timing_cache = config.create_timing_cache(cache_bytes)
        config.set_timing_cache(timing_cache, ignore_mismatch=False)
        monitor, events = _progress_monitor(trt)
        config.progress_monitor = monitor
        result: dict = {}

        def run() -> None:
            try:
                result["plan"] = builder.build_serialized_network(network, config)
            except Exception as exc:  # re-raised on the job's thread below
                result["error"] = exc
            finally:
                events.put(None)

        yield f"building the TensorRT engine ({PRECISION_LABELS[settings.precision]}, profiles {profiles})"
        thread = threading.Thread(target=run, name="tensorrt-build", daemon=True)
        thread.start()
        try:
            while True:
                try:
                    msg = events.get(timeout=0.5)
                except queue.Empty:
                    yield ""  # a heartbeat: the job checks its abort flag at every yield
                    continue
                if msg is None:
                    break
                yield msg
        finally:
            monitor.cancelled = True  # a job closed early (cancelled) stops the builder at its next step
            thread.join()
        if "error" in result:
            raise CompileError(f"TensorRT could not build {target.name}: {_first_line(result['error'])}") \
                from result["error"]
        if result.get("plan") is None:
            raise CompileError(f"TensorRT could not build {target.name} (see the log for the builder's messages).")
        path = workdir / f"{stem}.{self.ext}"
        path.write_bytes(bytes(result["plan"]))
        tmp_cache = workdir / cache_path.name
        tmp_cache.write_bytes(bytes(config.get_timing_cache().serialize()))
        os.replace(tmp_cache, cache_path)  # shared by every build for this architecture; written whole
        details.update(profiles=profiles, timing_cache=cache_path.name)
        return Built(self._call(path, profiles, target.dynamic_batch), files=[path], details=details)

    def _call(self, path: Path, profiles: list[int], dynamic_batch: bool) -> _TrtCall:
        import tensorrt as trt

        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        engine = runtime.deserialize_cuda_engine(path.read_bytes())
        if engine is None:
            raise CompileError(f"TensorRT cannot deserialize {path.name}: rebuild it (compile --force).")
        call = _TrtCall(engine, profiles, dynamic_batch)
        call.runtime = runtime  # the runtime must outlive the engine
        return call

    def load(self, path, target, inputs, settings, fp, details) -> Callable:
        return self._call(path, list(details.get("profiles", [settings.batch])), target.dynamic_batch)


def _progress_monitor(trt):
    """A ``trt.IProgressMonitor`` that forwards phases to a queue and cancels the build once ``cancelled`` is set."""
    events: queue.Queue = queue.Queue()

    class Monitor(trt.IProgressMonitor):
        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self.cancelled = False

        def phase_start(self, phase_name, parent_phase, num_steps):
            events.put(f"TensorRT: {phase_name} ({num_steps} steps)")

        def step_complete(self, phase_name, step):
            return not self.cancelled

        def phase_finish(self, phase_name):
            events.put(f"TensorRT: {phase_name} done")

    return Monitor(), events


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
