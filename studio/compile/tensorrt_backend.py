"""The TensorRT backend: TensorRT's Python API on the exported ONNX (parser, builder config with the precision flags,
one optimization profile per batch size, a timing cache per GPU architecture, the serialized engine). Feature-detected:
where the ``tensorrt`` package is absent it says so in one line."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

import torch

from studio.compile.backend import Backend, BuildSteps, Built, _first_line, _FixedBatch
from studio.compile.onnx_backend import export_onnx, quantize_onnx
from studio.compile.settings import BuildSettings
from studio.compile.silicon import PRECISION_LABELS, Fingerprint
from studio.errors import CompileError

log = logging.getLogger(__name__)


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
