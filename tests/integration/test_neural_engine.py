"""Neural engine: PyTorch vs ONNX Runtime on the shipped weights; `render --audio` of a human clip meets the
lip-sync targets (measured with the forced-aligned phones of its transcript)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from studio.neural.settings import MODEL_DIR, Backend, NeuralSettings

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_torch_and_onnx_backends_agree(tmp_path: Path) -> None:
    """Same graphs, same numbers: the encoder (no cache) to float precision. The step graphs keep an INT8 cache: a
    last-digit difference between the two runtimes can round a cached value to the next INT8 step, so the motion
    is bounded by a fraction of the 0..1 range and the visemes must agree."""
    from studio.neural.engine import NeuralMotionEngine
    from studio.neural.export import export

    a = NeuralMotionEngine(NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0, vad_gate=False))
    export(a.model, tmp_path)
    b = NeuralMotionEngine(NeuralSettings(backend=Backend.ONNX, onnx_dir=tmp_path, fingerprint_capacity=0,
                                          vad_gate=False),
                           model=a.model)
    t = np.arange(16000 * 3) / 16000
    audio = (0.2 * np.sin(2 * np.pi * 180 * t) * (np.sin(2 * np.pi * 3 * t) > 0)).astype(np.float32)
    window = np.random.default_rng(0).normal(-5.0, 2.0, (20, a.model.cfg.n_mels)).astype(np.float32)
    assert np.abs(a.backend.encode(window) - b.backend.encode(window)).max() < 1e-4
    x, y = a.motion(audio), b.motion(audio)
    assert x.mouth.shape == y.mouth.shape == (75, 5)
    assert np.abs(x.mouth - y.mouth).max() < 0.02
    assert (x.visemes == y.visemes).mean() > 0.98


@pytest.mark.parametrize("engine", ["pocketsphinx", "neural"])
def test_render_audio_of_human_speech_meets_lipsync_targets(tmp_path: Path, engine: str) -> None:
    from studio.audio.recognizer import align
    from studio.bench.lipsync import measure_lipsync
    from studio.neural.training.evaluate import clip_path
    from studio.audio.io import load_audio_file

    clip = clip_path("moonshine:beckett.wav") or pytest.skip("moonshine-voice not installed")
    text = json.loads((MODEL_DIR / "eval_transcripts.json").read_text())["moonshine:beckett.wav"]
    out = tmp_path / "beckett.mp4"
    subprocess.run([sys.executable, str(REPO / "main.py"), "render", "--audio", str(clip), "--size", "256",
                    "--audio-engine", engine, "--out", str(out)], check=True, cwd=REPO, timeout=600)
    audio, rate = load_audio_file(clip)
    report = measure_lipsync(out, align(audio, rate, text), max_lag_frames=5)
    assert report.best_corr is not None and report.best_corr >= 0.5
    assert report.best_lag_frames is not None and abs(report.best_lag_frames) <= 2
    assert report.phones.pbm_over_open is not None and report.phones.pbm_over_open < 0.35


def test_cache_precision_bench_measures_the_model_not_the_vad_gate() -> None:
    """``bench int8`` feeds synthetic audio that Silero calls silence; with the gate on every frame would be the rest
    pose and INT8, FP16 and FP32 would agree exactly. The bench must compare the model's own outputs."""
    from studio.neural.training.bench import bench_int8_vs_fp16

    r = bench_int8_vs_fp16(MODEL_DIR / "audio2motion.pt", seconds=4.0, human=False)
    assert r["int8_vs_fp32"]["max_abs"] > 0.0
    assert r["fp16_vs_fp32"]["max_abs"] < r["int8_vs_fp32"]["max_abs"]
    assert r["int8_vs_fp16"]["viseme_agreement"] > 0.9
