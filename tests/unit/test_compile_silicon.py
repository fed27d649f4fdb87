"""The silicon fingerprint and the precisions each device and backend offer (synthetic fingerprints: the verdicts do
not depend on the machine the tests run on)."""

from __future__ import annotations

import pytest

from studio.compile.builders import precision_choices
from studio.compile.silicon import (PRECISIONS, TENSOR_CORE_PRECISIONS, Fingerprint, fingerprint, generation_of,
                                    supported_precisions)


def _gpu(cc: tuple[int, int], name: str = "Test GPU") -> Fingerprint:
    return Fingerprint(kind="cuda", name=name, arch=f"sm_{cc[0]}{cc[1]}", capability=cc,
                       generation=generation_of(cc), memory_gib=80.0, driver="580.1", cuda="13.0")


def _cpu(*isa: str) -> Fingerprint:
    return Fingerprint(kind="cpu", name="Test CPU", arch="cpu", cpu_isa=tuple(isa), cores=2)


@pytest.mark.parametrize("cc, gen", [((7, 0), "Volta"), ((7, 5), "Turing"), ((8, 0), "Ampere"), ((8, 6), "Ampere"),
                                     ((8, 9), "Ada"), ((9, 0), "Hopper"), ((10, 0), "Blackwell"),
                                     ((12, 0), "Blackwell"), ((6, 1), ""), ((5, 2), "")])
def test_generation_of_compute_capability(cc, gen) -> None:
    assert generation_of(cc) == gen


def test_hopper_supports_every_precision() -> None:
    fp = _gpu((9, 0), "NVIDIA H200")
    assert supported_precisions(fp) == {p: None for p in PRECISIONS}
    assert set(TENSOR_CORE_PRECISIONS["Hopper"]) == {"fp16", "bf16", "fp8", "int8"}
    assert "sm_90" in fp.summary() and "Hopper" in fp.summary()


def test_older_gpus_give_reasons() -> None:
    turing = supported_precisions(_gpu((7, 5), "Tesla T4"))
    assert turing["fp16"] is None and turing["int8"] is None
    assert "Ampere" in turing["bf16"] and "sm_75" in turing["bf16"]
    assert "sm_89" in turing["fp8"]
    ampere = supported_precisions(_gpu((8, 0), "A100"))
    assert ampere["bf16"] is None and "Ada" in ampere["fp8"]
    assert supported_precisions(_gpu((8, 9), "L4"))["fp8"] is None


def test_cpu_precisions_follow_the_instruction_sets() -> None:
    plain = supported_precisions(_cpu("AVX2"))
    assert plain["fp32"] is None and plain["int8"] is None
    assert "BF16" in plain["bf16"] and "FP16" in plain["fp16"]
    assert "GPU" in plain["fp8"]
    amx = supported_precisions(_cpu("AVX2", "AVX-512", "AMX-BF16", "AVX512-FP16"))
    assert amx["bf16"] is None and amx["fp16"] is None and amx["fp8"] is not None
    assert supported_precisions(_cpu())["int8"] is not None


def test_backend_choices_combine_device_and_backend() -> None:
    cpu = _cpu("AVX2")
    ort = precision_choices(cpu, "onnxruntime")
    assert ort["fp32"] is None and ort["int8"] is None
    assert ort["bf16"] is not None and ort["fp8"] is not None
    graphs = precision_choices(cpu, "cuda_graphs")
    assert all("NVIDIA GPU" in r for r in graphs.values())
    eager = precision_choices(_gpu((9, 0)), "eager")
    assert eager["bf16"] is None and eager["int8"] is not None


def test_this_machine_has_a_fingerprint() -> None:
    fp = fingerprint("cpu")
    assert fp.kind == "cpu" and fp.arch == "cpu" and fp.name
    assert supported_precisions(fp)["fp32"] is None
    assert fp.as_dict()["arch"] == "cpu"
