"""The engine cache: names, sidecars, and that stale, foreign, failed or corrupt engines are rebuilt, never loaded."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from compile_fixtures import FP, run, tiny_target

from studio.compile import cache
from studio.compile.jobs import compile_target
from studio.compile.settings import BuildSettings


def test_names_follow_the_scheme() -> None:
    assert cache.engine_name("builtin", "renderer", "sm_90", "fp16", 16, "plan") == \
        "builtin-renderer_sm_90_fp16_b16.plan"
    assert cache.engine_name("musetalk-1.5", "vae_decoder", "cpu", "int8", 1, "onnx") == \
        "musetalk-1.5-vae-decoder_cpu_int8_b1.onnx"
    assert cache.engine_name("wan2.1-1.3b", "wan2.1-1.3b", "sm_80", "bf16", 64, "inductor") == \
        "wan2.1-1.3b_sm_80_bf16_b64.inductor"
    parsed = cache.parse_name("musetalk-1.5-vae-decoder_sm_89_fp8_b32.plan")
    assert parsed == {"model": "musetalk-1.5-vae-decoder", "arch": "sm_89", "precision": "fp8", "batch": 32,
                      "ext": "plan"}
    assert cache.parse_name("README.md") is None
    assert cache.parse_name("x_sm_90_fp64_b1.onnx") is None


def test_module_digest_tells_weights_apart() -> None:
    a, b = tiny_target(seed=0), tiny_target(seed=0)
    assert cache.module_digest(a) == cache.module_digest(b)
    with torch.no_grad():
        b.module.fc2.bias[0] += 1.0
    assert cache.module_digest(a) != cache.module_digest(b)


def _built(tmp_path: Path):
    target = tiny_target()
    settings = BuildSettings(backend="onnxruntime", batch=4, timed_calls=2, warmup_calls=0)
    _, report = run(compile_target("tiny", target, settings, fp=FP, root=tmp_path))
    return target, settings, report


def _edit(sidecar: Path, **changes) -> None:
    rec = json.loads(sidecar.read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            rec[key].update(value)
        else:
            rec[key] = value
    sidecar.write_text(json.dumps(rec))


def test_stale_versions_are_rebuilt(tmp_path) -> None:
    target, settings, report = _built(tmp_path)
    _edit(report.sidecar, versions={"torch": "0.0.1"})
    entry = cache.read_entry(report.sidecar, FP)
    assert entry.status.startswith("stale:") and "torch 0.0.1 ->" in entry.status
    assert cache.find_engine("tiny", target, "fp32", 4, fp=FP, root=tmp_path) is None
    progress, again = run(compile_target("tiny", target, settings, fp=FP, root=tmp_path))
    assert not again.cached and any("stale" in p.log for p in progress)
    assert cache.find_engine("tiny", target, "fp32", 4, fp=FP, root=tmp_path) is not None


def test_foreign_arch_is_never_loaded(tmp_path) -> None:
    target, settings, report = _built(tmp_path)
    _edit(report.sidecar, arch="sm_90")
    entry = cache.read_entry(report.sidecar, FP)
    assert entry.status.startswith("foreign:") and "sm_90" in entry.status
    assert cache.find_engine("tiny", target, "fp32", 4, fp=FP, root=tmp_path) is None
    _, again = run(compile_target("tiny", target, settings, fp=FP, root=tmp_path))
    assert not again.cached


def test_corrupt_or_missing_files_are_not_used(tmp_path) -> None:
    target, _, report = _built(tmp_path)
    data = bytearray(report.path.read_bytes())
    data[-1] ^= 0xFF
    report.path.write_bytes(bytes(data))
    from studio.compile.jobs import load_engine
    from studio.errors import CompileError

    entry = cache.read_entry(report.sidecar, FP)
    assert entry.ready  # the listing checks sizes only; loading checks the hash
    try:
        load_engine(entry, target, fp=FP)
    except CompileError as exc:
        assert "corrupt" in str(exc)
    else:
        raise AssertionError("a corrupt engine was loaded")
    report.path.unlink()
    assert cache.read_entry(report.sidecar, FP).status.startswith("missing file")
    assert cache.find_engine("tiny", target, "fp32", 4, fp=FP, root=tmp_path) is None


def test_in_process_engines_keep_a_sidecar_only(tmp_path) -> None:
    target = tiny_target()
    settings = BuildSettings(backend="eager", batch=4, timed_calls=2, warmup_calls=0)
    _, report = run(compile_target("tiny", target, settings, fp=FP, root=tmp_path))
    assert not report.serializable and not report.path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-net_cpu_fp32_b4.eager.json"]
    entry = cache.find_engine("tiny", target, "fp32", 4, fp=FP, root=tmp_path)
    assert entry is not None and "rebuilt in-process" in entry.describe()
