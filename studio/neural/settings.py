"""Settings of the neural audio-to-motion engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from studio.neural.kvcache import CacheDType
from studio.paths import RESOURCES

MODEL_DIR = RESOURCES / "models" / "audio2motion"
EVAL_TRANSCRIPTS = MODEL_DIR / "eval_transcripts.json"  # the human clips' transcripts (evaluation only)


class Backend(Enum):
    TORCH = "torch"
    ONNX = "onnx"


@dataclass(frozen=True)
class NeuralSettings:
    weights_path: Path = field(default=MODEL_DIR / "audio2motion.pt", metadata={"label": "Weights"})
    onnx_dir: Path | None = field(
        default=None, metadata={"label": "ONNX folder (encoder.onnx, step.onnx); default: exported into the cache"}
    )
    backend: Backend = field(default=Backend.ONNX, metadata={"label": "Backend"})
    cache_dtype: CacheDType = field(default=CacheDType.INT8, metadata={"label": "KV cache precision"})
    fingerprint_capacity: int = field(
        default=50_000, metadata={"label": "Audio fingerprint cache (windows; 0 = off)", "min": 0}
    )
    onnx_threads: int = field(default=1, metadata={"label": "ONNX Runtime threads", "min": 1, "max": 64})
    vad_gate: bool = field(
        default=True,
        metadata={"label": "Rest the mouth where Silero VAD hears no speech (within the frame and its look-ahead)"},
    )
    pbm_closure: bool = field(
        default=True,
        metadata={"label": "Close the lips on frames the viseme head calls p/b/m"},
    )
    # 0.1: picked on the human-speech validation split by the rule in metrics.json validation_split.
    pbm_threshold: float = field(
        default=0.1,
        metadata={"label": "Also close them where P(p/b/m) reaches this (0 = only where p/b/m is the top viseme)",
                  "min": 0.0, "max": 1.0},
    )
