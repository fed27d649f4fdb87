"""The silicon fingerprint: what this machine computes on, and which precisions it supports.

A CUDA GPU is named by its compute capability (``sm_90``) and the tensor-core generation that goes with it; a machine
without one is "CPU" with its vector instruction sets (from /proc/cpuinfo, and torch's own dispatch level). The
compile panel enables only the precisions ``supported_precisions`` returns without a reason; engines in the cache are
keyed by ``Fingerprint.arch``.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass

PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8")
PRECISION_LABELS = {"fp32": "FP32", "fp16": "FP16", "bf16": "BF16", "fp8": "FP8 e4m3", "int8": "INT8"}

# Tensor-core generations by compute capability (major, minor) -> name. Below Volta there are no tensor cores.
_GENERATIONS = (
    ((12, 0), "Blackwell"), ((10, 0), "Blackwell"), ((9, 0), "Hopper"), ((8, 9), "Ada"), ((8, 0), "Ampere"),
    ((7, 5), "Turing"), ((7, 0), "Volta"), ((6, 0), "Pascal"), ((5, 0), "Maxwell"),
)
# What each generation's tensor cores compute (FP32 always runs, on the CUDA cores).
TENSOR_CORE_PRECISIONS = {
    "Volta": ("fp16",),
    "Turing": ("fp16", "int8"),
    "Ampere": ("fp16", "bf16", "int8"),
    "Ada": ("fp16", "bf16", "fp8", "int8"),
    "Hopper": ("fp16", "bf16", "fp8", "int8"),
    "Blackwell": ("fp16", "bf16", "fp8", "int8"),
}
# /proc/cpuinfo flag -> the name shown. x86 first, then Arm ("Features" line).
_CPU_FLAGS = (
    ("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_vnni", "AVX512-VNNI"), ("avx_vnni", "AVX-VNNI"),
    ("avx512_bf16", "AVX512-BF16"), ("avx512_fp16", "AVX512-FP16"), ("amx_bf16", "AMX-BF16"),
    ("amx_int8", "AMX-INT8"), ("amx_fp16", "AMX-FP16"),
    ("asimd", "NEON"), ("asimddp", "NEON-dotprod"), ("asimdhp", "NEON-FP16"), ("bf16", "ARM-BF16"),
    ("i8mm", "ARM-I8MM"), ("sve", "SVE"),
)


@dataclass(frozen=True)
class Fingerprint:
    """What engines are built for. ``arch`` is ``sm_XX`` on a CUDA GPU and ``cpu`` otherwise."""

    kind: str  # "cuda" or "cpu"
    name: str  # GPU name, or the CPU's model name
    arch: str  # "sm_90" / "cpu": the engine cache's key
    capability: tuple[int, int] | None = None  # CUDA compute capability
    generation: str = ""  # tensor-core generation ("Hopper"), "" for a CPU or a GPU without tensor cores
    memory_gib: float = 0.0  # GPU memory (CUDA) or the machine's memory (CPU)
    multiprocessors: int = 0
    driver: str = ""  # NVIDIA driver version, "" when unknown or no GPU
    cuda: str = ""  # CUDA version of the torch build ("" for a CPU build)
    cpu_isa: tuple[str, ...] = ()  # vector instruction sets found (AVX2, AVX-512, AMX-BF16, NEON, ...)
    torch_cpu_capability: str = ""  # torch.backends.cpu.get_cpu_capability(): the kernels torch dispatches to
    cores: int = 0

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    def summary(self) -> str:
        """One line for the panel and the command."""
        if self.is_cuda:
            gen = f"{self.generation} tensor cores" if self.generation else "no tensor cores"
            return (f"{self.name}, {self.arch} ({gen}), {self.memory_gib:.0f} GiB, driver {self.driver or 'unknown'}, "
                    f"CUDA {self.cuda or 'unknown'}")
        isa = ", ".join(self.cpu_isa) or "no vector extensions found"
        return f"CPU: {self.name} ({self.cores} cores; {isa}; torch kernels {self.torch_cpu_capability or 'default'})"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "arch": self.arch,
                "capability": list(self.capability) if self.capability else None, "generation": self.generation,
                "memory_gib": round(self.memory_gib, 1), "multiprocessors": self.multiprocessors,
                "driver": self.driver, "cuda": self.cuda, "cpu_isa": list(self.cpu_isa),
                "torch_cpu_capability": self.torch_cpu_capability, "cores": self.cores}


def generation_of(capability: tuple[int, int]) -> str:
    """Tensor-core generation of a compute capability ("" below Volta: Pascal and Maxwell have none)."""
    for cc, name in _GENERATIONS:
        if tuple(capability) >= cc:
            return name if name in TENSOR_CORE_PRECISIONS else ""
    return ""


def _cpuinfo() -> tuple[str, tuple[str, ...]]:
    """(model name, instruction sets shown) from /proc/cpuinfo; ("", ()) where it cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return "", ()
    name = ""
    m = re.search(r"^(model name|Hardware|CPU part)\s*:\s*(.+)$", text, re.MULTILINE)
    if m:
        name = m.group(2).strip()
    m = re.search(r"^(flags|Features)\s*:\s*(.+)$", text, re.MULTILINE)
    flags = set(m.group(2).split()) if m else set()
    return name, tuple(label for flag, label in _CPU_FLAGS if flag in flags)


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 0.0


def nvidia_driver() -> str:
    """The NVIDIA driver's version: /proc/driver/nvidia/version, then NVML, then nvidia-smi; "" when none says."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", fh.read())
            if m:
                return m.group(1)
    except OSError:
        pass
    try:
        import pynvml  # nvidia-ml-py, where installed

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except ImportError:
        pass
    except Exception as exc:  # NVML present but the library or the driver refuses: fall through to nvidia-smi
        import logging

        logging.getLogger(__name__).info("NVML did not give the driver version: %s", exc)
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=10, check=False).stdout.strip().splitlines()
            return out[0].strip() if out else ""
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return ""


def fingerprint(device: str = "auto") -> Fingerprint:
    """The fingerprint of ``device`` ("auto": the CUDA GPU where there is one, else the CPU; "cuda:1" etc.)."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            from studio.errors import InputError

            raise InputError("No CUDA GPU is available on this machine: use --device cpu (or auto).")
        idx = torch.device(device).index
        return _cuda_fingerprint(torch.cuda.current_device() if idx is None else idx)
    return _cpu_fingerprint()


@functools.lru_cache(maxsize=None)
def _cuda_fingerprint(index: int) -> Fingerprint:
    import torch

    props = torch.cuda.get_device_properties(index)
    cc = (int(props.major), int(props.minor))
    _, isa = _cpuinfo()
    return Fingerprint(kind="cuda", name=props.name, arch=f"sm_{cc[0]}{cc[1]}", capability=cc,
                       generation=generation_of(cc), memory_gib=props.total_memory / 2**30,
                       multiprocessors=int(props.multi_processor_count), driver=nvidia_driver(),
                       cuda=torch.version.cuda or "", cpu_isa=isa,
                       torch_cpu_capability=torch.backends.cpu.get_cpu_capability(), cores=os.cpu_count() or 0)


@functools.lru_cache(maxsize=None)
def _cpu_fingerprint() -> Fingerprint:
    import torch

    name, isa = _cpuinfo()
    return Fingerprint(kind="cpu", name=name or platform.processor() or platform.machine(), arch="cpu",
                       memory_gib=_memory_gib(), cuda=torch.version.cuda or "", cpu_isa=isa,
                       torch_cpu_capability=torch.backends.cpu.get_cpu_capability(), cores=os.cpu_count() or 0)


def supported_precisions(fp: Fingerprint) -> dict[str, str | None]:
    """precision -> None where the device computes in it, else the reason it does not (shown by the panel)."""
    if fp.is_cuda:
        return _cuda_precisions(fp)
    return _cpu_precisions(fp)


def _cuda_precisions(fp: Fingerprint) -> dict[str, str | None]:
    cc = fp.capability or (0, 0)
    here = f"this {fp.name} is {fp.arch}" + (f" ({fp.generation})" if fp.generation else "")
    out: dict[str, str | None] = {"fp32": None}
    out["fp16"] = None if cc >= (5, 3) else f"FP16 arithmetic needs sm_53 or newer; {here}."
    out["bf16"] = None if cc >= (8, 0) else f"BF16 needs Ampere (sm_80) or newer tensor cores; {here}."
    out["fp8"] = None if cc >= (8, 9) else f"FP8 e4m3 needs Ada (sm_89) or newer tensor cores; {here}."
    out["int8"] = None if cc >= (6, 1) else f"INT8 needs DP4A (sm_61) or newer; {here}."
    return out


def _cpu_precisions(fp: Fingerprint) -> dict[str, str | None]:
    isa = set(fp.cpu_isa)
    out: dict[str, str | None] = {"fp32": None}
    if isa & {"AVX512-FP16", "AMX-FP16", "NEON-FP16"}:
        out["fp16"] = None
    else:
        out["fp16"] = ("This CPU has no FP16 arithmetic (AVX512-FP16, AMX-FP16 or Arm FP16): FP16 would be emulated, "
                       "slower than FP32. Use FP32 or INT8 here.")
    if isa & {"AVX512-BF16", "AMX-BF16", "ARM-BF16"}:
        out["bf16"] = None
    else:
        out["bf16"] = ("This CPU has no BF16 instructions (AVX512-BF16, AMX-BF16 or Arm BF16): BF16 would be "
                       "emulated, slower than FP32. Use FP32 or INT8 here.")
    out["fp8"] = "No CPU computes in FP8: FP8 e4m3 needs an NVIDIA GPU of the Ada (sm_89) or a newer generation."
    if isa & {"AVX2", "AVX-512", "NEON"}:
        out["int8"] = None
    else:
        out["int8"] = "INT8 engines need AVX2 or NEON on the CPU; none was found in /proc/cpuinfo."
    return out
