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
    # one flag at a time on top of plain: every flag that applies to the CPU, and nothing else
    assert names == {"pyramidal", "frame_interpolation", "async_pipeline", "silence_sieve", "audio_cache", "kv_cache"}
    base = r["plain_ms_per_frame"]
    for row in r["ablation"]:
        assert row["baseline_ms_per_frame"] == base > 0 and row["optimized_ms_per_frame"] > 0
        assert len(row["repeats_ms_per_frame"]) == 1  # measured, not assumed
        assert math.isclose(row["saved_fraction"], 1 - row["optimized_ms_per_frame"] / row["baseline_ms_per_frame"])
        assert row["helps"] == (row["optimized_ms_per_frame"] < base)  # a flag that does not help says so
    assert r["minus_one"] == [] and r["settings"]["configs"] == "ablation"  # all-but-one rows: --configs all
    # the flags that helped alone here, then each other flag tried beside them (kept when the set got faster),
    # measured together in the same run (or none helped: said so)
    helped = sorted(row["optimization"] for row in r["ablation"] if row["helps"])
    assert r["helpful_alone"] == helped
    kept = [t["optimization"] for t in r["helpful_tried"] if t["kept"]]
    assert all(t["with_ms_per_frame"] < t["before_ms_per_frame"] for t in r["helpful_tried"] if t["kept"])
    assert r["helpful_flags"] == sorted(helped + kept)
    if helped:
        assert sorted(t["optimization"] for t in r["helpful_tried"]) == sorted(names - set(helped))
    if r["helpful_flags"] and len(r["helpful_flags"]) < len(names):
        assert r["helpful_ms_per_frame"] > 0 and len(r["repeats"]["helpful"]) == 1
    assert set(r["stages"]["plain"]) == set(r["stages"]["optimized"]) == {"motion", "generate", "post"}
    for st in r["stages"]["optimized"].values():
        assert st["p95_ms"] >= st["median_ms"] >= 0
    assert math.isclose(r["compute_saved"], 1 - r["optimized_ms_per_frame"] / r["plain_ms_per_frame"])
    assert r["gpu_ms_per_frame"] is None and r["floor"] is None  # CUDA figures only where there is CUDA
    assert set(r["motion_stats"]) == {"plain", "optimized", "audio_cache", "kv_cache"}
    assert r["motion_stats"]["audio_cache"]["audio_cache_hits"] + r["motion_stats"]["audio_cache"][
        "audio_cache_misses"] > 0  # the audio cache row used the cache...
    assert r["motion_stats"]["plain"]["audio_cache_hits"] == r["motion_stats"]["plain"]["audio_cache_misses"] == 0
    assert r["motion_stats"]["kv_cache"]["kv_cache_bytes"] > 0  # ...and the KV cache row the KV cache
    assert r["optimized_run"]["frames_produced"] == r["frames"] == 60 and r["optimized_run"]["frames_dropped"] == 0
    assert r["machine"]["cpu_count"] >= 1
    q = r["quality"]
    assert q["interpolation"]["motion_space"]["psnr_db"] > 0 and "psnr_db" in q["interpolation"]["rife"]
    assert 0 < q["pyramidal"]["warp_field"]["ssim_face"] <= 1
    assert Path(r["chart"]).stat().st_size > 1000
    assert "compute saved" in proc.stderr


def test_bench_rejects_bad_arguments():
    proc = subprocess.run([sys.executable, "main.py", "bench", "--device", "cpu", "--seconds", "0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error:")
