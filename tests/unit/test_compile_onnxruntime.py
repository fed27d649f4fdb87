"""ONNX Runtime engines on the CPU: FP32 and INT8 (dynamic and static) build, verify against eager output, install
under the cache's name with a sidecar, and load back through find_engine."""

from __future__ import annotations

import json

import pytest
import torch
from compile_fixtures import FP, run, tiny_target

from studio.compile import cache
from studio.compile.jobs import compile_target, load_engine
from studio.compile.settings import BuildSettings
from studio.contracts import CompileTarget


@pytest.mark.parametrize("precision, method", [("fp32", "dynamic"), ("int8", "dynamic"), ("int8", "static")])
def test_engine_builds_verifies_and_loads(tmp_path, precision, method) -> None:
    target = tiny_target()
    settings = BuildSettings(backend="onnxruntime", precision=precision, batch=4, int8_method=method, timed_calls=3,
                             warmup_calls=1)
    progress, report = run(compile_target("tiny", target, settings, fp=FP, root=tmp_path))
    assert [p.fraction for p in progress] == sorted(p.fraction for p in progress)
    assert progress[-1].fraction == 1.0
    name = f"tiny-net_cpu_{precision}_b4.onnx"
    assert report.path == tmp_path / name and report.path.is_file()
    assert report.verification.passed and report.timing.engine_ms > 0 and report.timing.speedup > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, name + ".json"]  # no build folder left

    record = json.loads((tmp_path / (name + ".json")).read_text())
    assert record["versions"]["torch"] == torch.__version__ and record["versions"]["onnxruntime"]
    assert record["input_shapes"] == [[4, 13]] and record["arch"] == "cpu"
    assert record["verification"]["passed"] and record["verification"]["psnr_db"] >= 30
    if precision == "int8":
        assert record["details"]["int8_method"] == method
        assert record["details"]["integer_nodes"] + record["details"]["quantize_nodes"] > 0

    entry = cache.find_engine("tiny", target, precision, 4, fp=FP, root=tmp_path)
    assert entry is not None and entry.ready and entry.backend == "onnxruntime"
    fn = load_engine(entry, target, fp=FP)
    x = torch.randn(7, 13)  # another batch than the engine's: the export's batch dimension is dynamic
    with torch.no_grad():
        ref = target.module(x)
    got = fn(x)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert float((got - ref).abs().max()) < (1e-3 if precision == "fp32" else 8.0)


def test_a_ready_engine_is_not_rebuilt(tmp_path) -> None:
    target = tiny_target()
    settings = BuildSettings(backend="onnxruntime", batch=4, timed_calls=2, warmup_calls=0)
    _, first = run(compile_target("tiny", target, settings, fp=FP, root=tmp_path))
    stamp = first.path.stat().st_mtime_ns
    _, again = run(compile_target("tiny", target, settings, fp=FP, root=tmp_path))
    assert again.cached and again.path.stat().st_mtime_ns == stamp
    # Other weights (another anchor, another release) under the same name: rebuilt, not reused.
    _, other = run(compile_target("tiny", tiny_target(seed=1), settings, fp=FP, root=tmp_path))
    assert not other.cached
    assert cache.find_engine("tiny", target, "fp32", 4, fp=FP, root=tmp_path) is None
    assert cache.find_engine("tiny", tiny_target(seed=1), "fp32", 4, fp=FP, root=tmp_path) is not None


class _FakeGenerator:
    """The generator side of the contract: compile targets in, engines installed."""

    def __init__(self, target) -> None:
        self.target = target
        self.installed = {}

    def compile_targets(self):
        return [self.target]

    def install_engine(self, name, fn) -> None:
        self.installed[name] = fn


def test_install_cached_picks_the_ready_engine(tmp_path) -> None:
    from studio.compile.jobs import install_cached

    target = tiny_target()
    gen = _FakeGenerator(target)
    before = install_cached("tiny", gen, "fp32", 4, fp=FP, root=tmp_path)
    assert gen.installed == {} and before[0].engine == "" and "eager" in before[0].message
    run(compile_target("tiny", target, BuildSettings(backend="onnxruntime", batch=4, timed_calls=2,
                                                     warmup_calls=0), fp=FP, root=tmp_path))
    slower = install_cached("tiny", gen, "fp32", 4, fp=FP, root=tmp_path, min_speedup=float("inf"))
    assert gen.installed == {} and "measured" in slower[0].message  # an engine no faster than eager stays unused
    after = install_cached("tiny", gen, "fp32", 4, fp=FP, root=tmp_path, min_speedup=0.0)
    assert after[0].engine == "tiny-net_cpu_fp32_b4.onnx" and "onnxruntime" in after[0].message
    x = torch.randn(3, 13)
    with torch.no_grad():
        assert float((gen.installed["net"](x) - target.module(x)).abs().max()) < 1e-3


class _Bound(torch.nn.Module):
    """A wrapper in the style of a generator's compile target: ``forward(*args)`` calls a bound method of the module
    that owns the weights (left in training mode: compiling puts targets in eval mode)."""

    def __init__(self, owner: torch.nn.Module) -> None:
        super().__init__()
        self.owner = owner

    def forward(self, *args):
        return self.owner(args[0]) + args[1].mean()


def test_a_varargs_wrapper_exports_with_a_dynamic_batch(tmp_path) -> None:
    inner = tiny_target().module
    target = CompileTarget("wrapped", _Bound(inner), (torch.randn(4, 13), torch.randn(4, 5)))
    settings = BuildSettings(backend="onnxruntime", batch=4, timed_calls=2, warmup_calls=0)
    _, report = run(compile_target("tiny", target, settings, fp=FP, root=tmp_path))
    assert report.verification.passed and not target.module.training
    fn = load_engine(cache.find_engine("tiny", target, "fp32", 4, fp=FP, root=tmp_path), target, fp=FP)
    x, y = torch.randn(6, 13), torch.randn(6, 5)
    with torch.no_grad():
        assert float((fn(x, y) - target.module(x, y)).abs().max()) < 1e-3
