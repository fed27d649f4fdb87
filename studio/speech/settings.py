"""Settings of the speech subsystem (text-to-speech engines)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SpeechSettings:
    """How scripts are spoken. Units are in the field names."""

    default_voice: str = field(default="piper:joe", metadata={"label": "Voice", "help": "engine:voice"})
    length_scale: float = field(
        default=1.0, metadata={"label": "Slowness", "min": 0.5, "max": 2.0, "help": "> 1 speaks slower"}
    )
    sentence_silence_s: float = field(
        default=0.1, metadata={"label": "Pause between sentences (s)", "min": 0.0, "max": 2.0}
    )
    peak_level: float = field(
        default=0.89, metadata={"label": "Peak level (0..1)", "min": 0.1, "max": 1.0, "help": "0.89 = -1 dBFS"}
    )
    espeak_rate_wpm: int = field(default=165, metadata={"label": "eSpeak rate (words/min)", "min": 80, "max": 450})
    espeak_pitch: int = field(default=45, metadata={"label": "eSpeak pitch (0..100)", "min": 0, "max": 100})
    onnx_threads: int = field(
        default=0, metadata={"label": "Neural TTS threads", "min": 0, "max": 64,
                             "help": "0 = ONNX Runtime's choice; 1 leaves the other cores to rendering (studio)"}
    )

    def __post_init__(self) -> None:
        if not 0.1 <= self.length_scale <= 10.0:
            raise ValueError(f"length_scale must be in 0.1..10, got {self.length_scale}")
        if self.sentence_silence_s < 0:
            raise ValueError(f"sentence_silence_s must be >= 0, got {self.sentence_silence_s}")
        if not 0.0 < self.peak_level <= 1.0:
            raise ValueError(f"peak_level must be in (0, 1], got {self.peak_level}")
