"""Engines on the GPU (run on the device machine: `pytest -s -m gpu tests/gpu/test_compile_cuda.py`): TorchInductor
and CUDA-graph engines of the built-in renderer and of the heavy engines' timing twins build, match eager output and
are timed against it; their cache files follow the naming scheme. Figures are printed (-s), never asserted as
times."""

from __future__ import annotations

import math

import pytest
import torch

from studio.bench.compile_renderer import renderer_target
from studio.compile import cache
from studio.compile.jobs import compile_generator, compile_target, load_engine
from studio.compile.settings import BuildSettings
from studio.compile.silicon import fingerprint, supported_precisions

pytestmark = pytest.mark.gpu

EXT = {"inductor": "inductor", "cuda_graphs": "cudagraph"}


def _drive(job):
    while True:
        try:
            p = next(job)
        except StopIteration as stop:
            return stop.value
        if p.log:
            print("   ", p.log)


def test_fingerprint_names_the_gpu() -> None:
    fp = fingerprint("cuda")
    major, minor = torch.cuda.get_device_capability()
    assert fp.arch == f"sm_{major}{minor}" and fp.memory_gib > 0 and fp.name == torch.cuda.get_device_name()
    print(fp.summary(), supported_precisions(fp))
    if (major, minor) >= (9, 0):
        assert fp.generation in ("Hopper", "Blackwell")
        assert all(r is None for r in supported_precisions(fp).values())


@pytest.mark.parametrize("backend", ["inductor", "cuda_graphs"])
@pytest.mark.parametrize("size", [512, 1080])
def test_renderer_engine(default_anchor, tmp_path, backend, size) -> None:
    fp = fingerprint("cuda")
    target = renderer_target(default_anchor, size, 8, "cuda")
    settings = BuildSettings(backend=backend, precision="fp32", batch=8, timed_calls=30)
    report = _drive(compile_target("builtin", target, settings, fp=fp, root=tmp_path))
    print(f"renderer {size} px {report.summary()}")
    assert report.verification.passed, report.verification.summary()
    assert math.isfinite(report.timing.speedup) and report.timing.engine_ms > 0
    name = f"builtin-renderer_{fp.arch}_fp32_b8.{EXT[backend]}"
    assert report.path.name == name and (tmp_path / (name + ".json")).is_file()

    entry = cache.find_engine("builtin", target, "fp32", 8, backend=backend, fp=fp, root=tmp_path)
    assert entry is not None and entry.ready
    fn = load_engine(entry, target, fp=fp)  # rebuilt in the process and verified again
    c = target.example_inputs[0][:5]  # fewer frames than the engine's batch: padded, then sliced
    with torch.inference_mode():
        ref, got = target.module(c), fn(c)
    assert got.shape == ref.shape
    assert float((got - ref).abs().mean()) < 0.25


@pytest.mark.parametrize("name", ["wav2lip", "liveportrait", "ditto", "musetalk-1.5"])
@pytest.mark.parametrize("backend", ["inductor", "cuda_graphs"])
def test_heavy_engine_twins(default_anchor, tmp_path, name, backend) -> None:
    from studio.generators import missing_packages
    from studio.contracts import GENERATORS, GeneratorSettings

    gen = GENERATORS.create(name)
    lacking = missing_packages(gen)
    if lacking:
        pytest.skip(f"{name} needs {', '.join(lacking)} (carry the wheels to the device machine)")
    if backend not in gen.info.compile_backends:
        pytest.skip(f"{name} does not offer {backend}")
    fp = fingerprint("cuda")
    gen.open(default_anchor, GeneratorSettings(device="cuda", size_px=gen.info.native_px, precision="fp16",
                                               batch_frames=8))
    try:
        settings = BuildSettings(backend=backend, precision="fp16", batch=8, timed_calls=20)
        reports = _drive(compile_generator(name, gen, settings, fp=fp, root=tmp_path))
    finally:
        gen.close()
    assert reports
    for r in reports:
        print(f"{name} {r.summary()}")
        assert r.verification.passed, r.verification.summary()
        assert r.path.name.startswith(cache.model_key(name, r.target) + f"_{fp.arch}_fp16_b8.")
        assert math.isfinite(r.timing.speedup)
