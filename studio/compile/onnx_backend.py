"""The ONNX Runtime backend: ``torch.onnx`` export with a dynamic batch, INT8 through ``onnxruntime.quantization``
(dynamic, or static with calibration), sessions on the CPU providers or ONNX Runtime's CUDA provider."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from studio.compile.backend import Backend, BuildSteps, Built, _first_line, target_device
from studio.compile.silicon import Fingerprint
from studio.errors import CompileError

if TYPE_CHECKING:
    from studio.contracts import CompileTarget

log = logging.getLogger(__name__)


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
