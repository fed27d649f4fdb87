"""Compile jobs: cancelled or failing compiles leave no engine behind, a failing engine is reported and never used,
and TensorRT's absence is one line and a non-zero exit."""

from __future__ import annotations

import argparse
import importlib.util
import threading

import pytest
import torch
from compile_fixtures import FP, run, tiny_target
from torch import nn

from studio.compile import cache
from studio.compile.backend import _FixedBatch
from studio.compile.builders import precision_choices
from studio.compile.tensorrt_backend import tensorrt_unavailable
from studio.compile.cli import add_arguments, run_compile
from studio.compile.jobs import compile_target
from studio.compile.settings import BuildSettings
from studio.compile.verify import compare
from studio.errors import CompileError
from studio.contracts import CompileTarget

ORT = BuildSettings(backend="onnxruntime", batch=4, timed_calls=2, warmup_calls=0)


def test_cancel_between_steps_leaves_no_file(tmp_path) -> None:
    abort = threading.Event()
    job = compile_target("tiny", tiny_target(), ORT, fp=FP, root=tmp_path, abort=abort)
    seen = []
    while True:
        try:
            p = next(job)
        except StopIteration as stop:
            result = stop.value
            break
        seen.append(p)
        if p.message == "building":
            abort.set()
    assert result is None
    assert any(p.message == "building" for p in seen) and not any(p.message == "verifying" for p in seen)
    assert list(tmp_path.iterdir()) == []


def test_closing_the_worker_leaves_no_file(tmp_path) -> None:
    job = compile_target("tiny", tiny_target(), ORT, fp=FP, root=tmp_path)
    for p in job:
        if p.message == "building":
            break
    job.close()  # what a worker does when it is quit mid-compile
    assert list(tmp_path.iterdir()) == []


class Drifting(nn.Module):
    """Its output depends on how often it was called: an export bakes in one call's Python state, so the engine
    cannot match eager (the failure mode of modules with Python-side effects)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Linear(13, 13)
        self.calls = 0

    def forward(self, c: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.scale(c) * float(self.calls)


def test_an_engine_failing_verification_is_reported_and_never_used(tmp_path) -> None:
    target = CompileTarget("net", Drifting().eval(), (torch.randn(4, 13),))
    with pytest.raises(CompileError, match="failed verification"):
        run(compile_target("drift", target, ORT, fp=FP, root=tmp_path))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["drift-net_cpu_fp32_b4.onnx.json"]  # the figures are kept; the engine file is not
    entry = cache.read_entry(tmp_path / names[0], FP)
    assert entry.status.startswith("failed verification")
    assert cache.find_engine("drift", "net", "fp32", 4, fp=FP, root=tmp_path) is None


def test_an_export_failure_is_a_compile_error_and_leaves_nothing(tmp_path) -> None:
    class HostSync(nn.Module):
        def forward(self, c: torch.Tensor) -> torch.Tensor:
            return c[: int(c.sum() > 0) + 1]  # a data-dependent shape

    with pytest.raises(CompileError, match="ONNX export failed"):
        run(compile_target("sync", CompileTarget("net", HostSync(), (torch.randn(4, 13),)), ORT, fp=FP,
                           root=tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def no_tensorrt(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorrt" else real(name, *a))


def test_tensorrt_absent_is_one_line(no_tensorrt, tmp_path, capsys) -> None:
    reason = tensorrt_unavailable()
    assert reason and "\n" not in reason and "not installed" in reason
    assert set(precision_choices(FP, "tensorrt").values()) == {reason}
    with pytest.raises(CompileError) as err:
        run(compile_target("tiny", tiny_target(), BuildSettings(backend="tensorrt"), fp=FP, root=tmp_path))
    assert str(err.value) == reason
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--model", "builtin", "--backend", "tensorrt", "--device", "cpu"])
    args.engines_dir = tmp_path
    with pytest.raises(CompileError) as err:
        run_compile(args)
    assert "\n" not in str(err.value) and "TensorRT" in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_list_names_backends_precisions_and_reasons(no_tensorrt, tmp_path, capsys) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--list", "--device", "cpu"])
    args.engines_dir = tmp_path
    assert run_compile(args) == 0
    out = capsys.readouterr().out
    for word in ("silicon", "ONNX Runtime", "TensorRT", "CUDA Graphs", "FP8 e4m3", "builtin", "cached engines"):
        assert word in out
    assert "TensorRT is not installed" in out


def test_fixed_batch_splits_and_pads() -> None:
    calls = []

    def fixed(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape[0])
        return x * 2

    fn = _FixedBatch(fixed, 4)
    x = torch.arange(10.0).view(10, 1)
    assert torch.equal(fn(x), x * 2) and calls == [4, 4, 4]
    assert torch.equal(fn(x[:3]), x[:3] * 2)


def test_compare_measures_error_and_psnr() -> None:
    ref = [[torch.zeros(2, 3, 4, 4)]]
    ref[0][0][:, :, 0, 0] = 255.0
    same = compare(ref, [[ref[0][0].clone()]], 50.0)
    assert same.passed and same.max_abs_error == 0.0 and same.psnr_db == float("inf")
    off = ref[0][0] + 1.0  # one grey level everywhere: PSNR = 20 log10(255) = 48.1 dB
    v = compare(ref, [[off]], 50.0)
    assert v.max_abs_error == 1.0 and abs(v.psnr_db - 48.13) < 0.01 and not v.passed
    assert not compare(ref, [[torch.full_like(off, float("nan"))]], 0.0).passed
    assert not compare(ref, [[off[:1]]], 0.0).shapes_match
