"""The studio runtime's settings (the core's own settings are ``CoreSettings``, carried as ``core``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine
from studio.pipeline.settings import CoreSettings


class AudioOutputMode:
    AUTO = "auto"  # play through the default output device when there is one
    NONE = "none"  # never open an output device (kiosks, tests): the preview runs on its own clock


@dataclass(frozen=True)
class StudioSettings:
    """How the studio runtime renders, paces and records (the core's settings are ``core``)."""

    core: CoreSettings = CoreSettings(size_px=512, fps=25.0, device="cpu", chunk_frames=4, batch_frames=4,
                                      measure_baseline=True)
    audio_output: str = AudioOutputMode.AUTO
    output_latency_s: float = 0.08  # PortAudio latency hint for playback
    speech_lead_ms: float = 250.0  # a segment starts at least this long after it is ready (audio buffers ahead)
    segment_gap_ms: float = 500.0  # silence between two segments
    record_preset: str = "ultrafast"  # libx264 preset for live recordings (leave CPU to the renderer)
    record_queue_frames: int = 100  # recorder backlog before frames are dropped (and repeated in the file)
    audio_engine: AudioEngine = DEFAULT_AUDIO_ENGINE
    default_voice: str = "piper:joe"
    warm_up_voice: bool = True  # speak one word at start-up so that loading the voice model never stalls a show
    warm_up_microphone: bool = True  # load the microphone's audio engine at start-up, so that the switch is instant
    trim_memory_every_s: float = 10.0  # hand freed heap memory back to the system this often (0: never; ~20 ms)
    canvas_background: Path | None = None
    # measure a new picture format on this machine before applying it, and refuse one it cannot keep up with
    check_format_speed: bool = True
    restart_backoff_s: float = 1.0  # after a core failure, wait this long before restarting it (doubled each time)
    restart_backoff_max_s: float = 30.0  # the longest wait before a restart
    restart_attempts: int = 5  # restarts in a row; when the last fails too, the core stays stopped (and says so)
    restart_reset_s: float = 60.0  # a core that ran this long before failing starts the count of failures again
