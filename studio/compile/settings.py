"""Settings of an engine build: backend, precision, batch profile, verification thresholds and timing."""

from __future__ import annotations

from dataclasses import dataclass, field

BACKENDS = ("eager", "inductor", "cuda_graphs", "onnxruntime", "tensorrt")
BACKEND_LABELS = {"eager": "eager (reference)", "inductor": "TorchInductor", "cuda_graphs": "CUDA Graphs",
                  "onnxruntime": "ONNX Runtime", "tensorrt": "TensorRT"}
BATCH_PROFILES = (1, 16, 32, 64)
INDUCTOR_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
INT8_METHODS = ("dynamic", "static")

# The lowest PSNR (dB, peak = the reference output's range) an engine of each precision must reach against eager
# output on the verification inputs. FP32 engines reorder float arithmetic only; the rest trade accuracy for speed,
# down to 30 dB (below it the difference shows: the built-in renderer with every tensor statically quantized to INT8
# measured 27.6 dB, its warp coordinates a pixel off; with INT8 weights only, 44.8 dB).
MIN_PSNR_DB = {"fp32": 50.0, "fp16": 35.0, "bf16": 30.0, "fp8": 30.0, "int8": 30.0}


@dataclass(frozen=True)
class BuildSettings:
    """One engine build. ``batch`` is the batch the engine is built and timed at (its file name's ``b{batch}``)."""

    backend: str = field(default="onnxruntime",
                         metadata={"help": "eager, inductor, cuda_graphs, onnxruntime, tensorrt"})
    precision: str = field(default="fp32", metadata={"help": "fp32, fp16, bf16, fp8 (e4m3), int8"})
    batch: int = field(default=1, metadata={"help": "Batch size of the engine (profiles 1, 16, 32, 64)"})
    inductor_mode: str = field(default="default", metadata={"help": "torch.compile mode"})
    int8_method: str = field(default="dynamic", metadata={
        "help": "ONNX Runtime INT8: dynamic (weights INT8, activations scaled per call) or static (calibrated)"})
    calibration_sets: int = field(default=8, metadata={"help": "Input sets for static INT8 / FP8 calibration"})
    opset: int = field(default=18, metadata={"help": "ONNX opset of the export"})
    trt_profiles: tuple[int, ...] = field(default=BATCH_PROFILES, metadata={
        "help": "TensorRT optimization profiles: one per batch size (and the engine's own batch)"})
    trt_workspace_mib: int = field(default=4096, metadata={"help": "TensorRT builder workspace"})
    warmup_calls: int = field(default=3, metadata={"help": "Untimed calls before timing (each of eager and engine)"})
    timed_calls: int = field(default=20, metadata={"help": "Timed calls of each; the median is reported"})
    min_psnr_db: float = field(default=0.0, metadata={"help": "Verification threshold; 0: the precision's default"})
    verify_seed: int = field(default=0, metadata={"help": "Seed of the perturbed verification inputs"})

    @property
    def psnr_threshold_db(self) -> float:
        return self.min_psnr_db if self.min_psnr_db > 0 else MIN_PSNR_DB[self.precision]

    def check(self) -> None:
        """Raise InputError on a value no backend takes."""
        from studio.compile.silicon import PRECISIONS
        from studio.errors import InputError

        if self.backend not in BACKENDS:
            raise InputError(f"Unknown backend '{self.backend}': use one of {', '.join(BACKENDS)}.")
        if self.precision not in PRECISIONS:
            raise InputError(f"Unknown precision '{self.precision}': use one of {', '.join(PRECISIONS)}.")
        if not 1 <= self.batch <= 1024:
            raise InputError(f"Batch {self.batch} is out of range: use 1 to 1024 (profiles 1, 16, 32, 64).")
        if self.inductor_mode not in INDUCTOR_MODES:
            raise InputError(f"Unknown Inductor mode '{self.inductor_mode}': use one of {', '.join(INDUCTOR_MODES)}.")
        if self.int8_method not in INT8_METHODS:
            raise InputError(f"Unknown INT8 method '{self.int8_method}': use dynamic or static.")
        if self.timed_calls < 1 or self.warmup_calls < 0:
            raise InputError("Timing needs at least one timed call and no negative warm-up.")
