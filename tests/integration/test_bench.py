"""`python main.py bench` end to end on the CPU: a tiny run, the JSON's shape, every ablation row measured."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_bench_cpu_tiny(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "main.py", "bench", "--device", "cpu", "--seconds", "2", "--size", "128",
                           "--repeats", "1", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    names = {row["optimization"] for row in r["ablation"]}
    assert {"pyramidal", "frame_interpolation", "async_pipeline", "silence_sieve"} <= names
    allowed = {"pyramidal", "audio_cache", "frame_interpolation", "kv_cache", "async_pipeline", "silence_sieve",
               "gpu_encode"}
    assert names <= allowed
    for row in r["ablation"]:
        assert row["baseline_ms_per_frame"] > 0 and row["optimized_ms_per_frame"] > 0
        if "scope" in row:  # the neural engine's rows time that engine alone, with their own repeats
            assert any(k.startswith("repeats_") and v for k, v in row.items())
        else:
            assert len(row["repeats_ms_per_frame"]) == 1  # measured, not assumed
        assert math.isclose(row["saved_fraction"], 1 - row["optimized_ms_per_frame"] / row["baseline_ms_per_frame"])
    assert set(r["stages"]["plain"]) == {"motion", "generate", "post_encode"}
    for st in r["stages"]["optimized"].values():
        assert st["p95_ms"] >= st["median_ms"] >= 0
    assert math.isclose(r["compute_saved"], 1 - r["optimized_ms_per_frame"] / r["plain_ms_per_frame"])
    assert r["machine"]["cpu_count"] >= 1 and r["frames"] == 60
    q = r["quality"]
    assert q["interpolation"]["motion_space"]["psnr_db"] > 0 and "psnr_db" in q["interpolation"]["rife"]
    assert 0 < q["pyramidal"]["warp_field"]["ssim_face"] <= 1
    assert Path(r["chart"]).stat().st_size > 1000
    assert "compute saved" in proc.stderr


def test_bench_rejects_bad_arguments():
    proc = subprocess.run([sys.executable, "main.py", "bench", "--device", "cpu", "--seconds", "0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error:")
