"""One error tree for NewsStudio.

Every error the user can cause carries a message that says what to do. Foreign errors (torch, CUDA,
FFmpeg/PyAV, PortAudio, ONNX Runtime, MediaPipe) are translated at the boundary with
``raise OurError(...) from exc``.

    StudioError
    ├── InputError            bad command-line arguments or files given by the user
    ├── AnchorError           unreadable portrait, no face found, bad anchor cache
    │   └── CastMemberError      the same, of one anchor of a rundown's cast (``member`` names it)
    ├── SpeechError           empty script, TTS failure
    │   └── VoiceNotFoundError   unknown voice name
    ├── AudioDeviceError      no input/output device, device vanished (PortAudio)
    ├── ModelLoadError        missing or corrupt weights
    ├── RenderError           the renderer failed (shape, device, out of memory)
    ├── CompileError          an engine build failed
    └── EncoderError          video/audio encoding or muxing failed
        └── OutputPathError      output path not writable, disk full
"""

from __future__ import annotations


class StudioError(Exception):
    """Base of every error NewsStudio raises on purpose; ``str(err)`` is a user-facing sentence."""


class InputError(StudioError):
    """Bad arguments or input files given by the user."""


class AnchorError(StudioError):
    """The portrait cannot be turned into an anchor (unreadable, no face, ...)."""


class CastMemberError(AnchorError):
    """A cast member's portrait cannot be turned into an anchor; ``member`` is the anchor's name."""

    def __init__(self, member: str, message: str) -> None:
        super().__init__(message)
        self.member = member

    def __reduce__(self):  # pickled whole (a farm task's error travels to the driver this way)
        return type(self), (self.member, str(self))


class SpeechError(StudioError):
    """Text-to-speech failed or was given nothing to say."""


class VoiceNotFoundError(SpeechError):
    """The requested voice is not installed."""


class AudioDeviceError(StudioError):
    """An audio device is missing, busy or disappeared."""


class ModelLoadError(StudioError):
    """Model weights are missing or cannot be loaded."""


class RenderError(StudioError):
    """The presenter renderer failed."""


class CompileError(StudioError):
    """Building an inference engine failed."""


class EncoderError(StudioError):
    """Encoding or muxing the output failed."""


class OutputPathError(EncoderError):
    """The output file cannot be written (permissions, missing folder, disk full)."""
