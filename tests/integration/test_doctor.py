"""`main.py doctor` reports what this machine offers, probed at run time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_doctor_reports_every_item():
    proc = subprocess.run([sys.executable, str(REPO / "main.py"), "doctor", "--json"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["python"].startswith("3.")
    gpu = r["gpu"]
    assert gpu["torch"] and (gpu["device"] == "cpu" or gpu["arch"].startswith("sm_"))
    assert "inputs" in r["audio"] and "outputs" in r["audio"]
    assert "piper:joe" in r["voices"]
    assert "libx264" in r["video_encoders"]
    assert "CPUExecutionProvider" in r["onnxruntime"]["providers"]
    assert isinstance(r["tensorrt"]["available"], bool)


def test_doctor_text_says_what_is_missing():
    proc = subprocess.run([sys.executable, str(REPO / "main.py"), "doctor"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0
    for label in ("Python", "torch", "GPU", "microphones", "audio outputs", "voices", "encoders", "onnxruntime",
                  "TensorRT"):
        assert label in proc.stdout
    assert proc.stderr.strip() == "", proc.stderr  # no encoder banners or native log noise
