"""Settings of the live audio side: microphone capture, silence sieve, phone recognizer, mic-driven motion.

Frozen dataclasses with units in the field names; the settings UI can be generated from the field metadata
(``metadata["help"]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from studio.contracts.formats import PROGRAM_RATE_HZ

PIPELINE_RATE_HZ = 16000  # every consumer of live audio (sieve, recognizer, features) works at this rate


@dataclass(frozen=True)
class CaptureSettings:
    """How the microphone is opened and buffered."""

    device: str | None = field(default=None, metadata={"help": "Input device name (substring), or None for default"})
    ring_rate_hz: int = field(default=PROGRAM_RATE_HZ, metadata={
        "help": "Rate of the capture ring: the program's, so that the program's sound is the microphone's own"})
    block_ms: float = field(default=10.0, metadata={"help": "PortAudio callback block length"})
    ring_seconds: float = field(default=10.0, metadata={"help": "Audio kept in memory for readers"})
    latency: str = field(default="low", metadata={"help": "PortAudio latency hint: 'low' or 'high'"})
    stall_timeout_ms: float = field(
        default=3000.0, metadata={"help": "No callback for this long while running means the device is lost"}
    )
    retry_interval_ms: float = field(default=1000.0, metadata={"help": "Pause between reopen attempts (bounded)"})
    supervise_interval_ms: float = field(default=100.0, metadata={"help": "How often the watchdog looks"})


@dataclass(frozen=True)
class SieveSettings:
    """The silence sieve: a cheap RMS gate, then Silero VAD on what passes, with a hangover."""

    rms_gate_dbfs: float = field(default=-50.0, metadata={"help": "Frames quieter than this skip the VAD"})
    vad_threshold: float = field(default=0.5, metadata={"help": "Silero speech probability above which = speech"})
    hangover_ms: float = field(default=300.0, metadata={"help": "Keep 'speaking' this long after the last speech"})
    frame_samples: int = 512  # Silero's frame at 16 kHz (32 ms); fixed by the model
    context_samples: int = 64  # Silero's left context at 16 kHz; fixed by the model
    sample_rate_hz: int = PIPELINE_RATE_HZ
    onnx_threads: int = 1


@dataclass(frozen=True)
class RecognizerSettings:
    """Pocketsphinx allphone recognition (context-independent phones: 40x faster than triphones, same labels)."""

    sample_rate_hz: int = PIPELINE_RATE_HZ
    beam: float = 1e-20
    pbeam: float = 1e-20
    language_weight: float = 2.0
    max_utterance_s: float = field(default=10.0, metadata={"help": "Force an utterance break to bound memory/time"})
    frame_rate_hz: int = 100  # pocketsphinx feature frames (10 ms)


class AudioEngine(Enum):
    """Which engine turns recorded / live audio into mouth motion."""

    NEURAL = "neural"  # the project's audio-to-motion model (studio.neural)
    POCKETSPHINX = "pocketsphinx"  # phone recognition + coarticulation


# The default for live and recorded audio input: the neural engine, since its shipped weights (an ensemble of two
# models, with p/b/m closure) beat pocketsphinx on human speech on both viseme accuracy and p/b/m lip closure
# (0.703 / 0.609 vs 0.697 / 0.543: resources/models/audio2motion/metrics.json, human_speech_eval).
# Pocketsphinx stays selectable: the baseline, and about 0.1 s quicker to show the mouth live.
DEFAULT_AUDIO_ENGINE = AudioEngine.NEURAL


@dataclass(frozen=True)
class MicMotionSettings:
    """How live audio turns into mouth motion."""

    fps: float = 25.0
    preroll_ms: float = field(default=200.0, metadata={"help": "Audio before the sieve's speech onset fed to ASR"})
    envelope_window_ms: float = field(default=40.0, metadata={"help": "RMS window of the loudness envelope"})
    envelope_floor_dbfs: float = field(default=-50.0, metadata={"help": "Loudness mapped to 0"})
    envelope_ceiling_dbfs: float = field(default=-12.0, metadata={"help": "Loudness mapped to 1"})
    envelope_min_jaw: float = field(default=0.35, metadata={"help": "Jaw opening from energy alone (0..1 at ceiling)"})
    coart_lookahead_s: float = 0.06
    seed: int = 0
