"""The studio runtime: the pipeline core behind the window, driven by commands, reporting by events. No Qt.

A package above the pipeline: it composes the core, the recorder and the streams, the speech engines and the
microphone into a studio, and only the window (``studio.ui``) drives it. One module per room; ``runtime`` has the
command loop and says which room does what.
"""

from studio.runtime.recording import recover_recordings, recording_name
from studio.runtime.runtime import StudioRuntime
from studio.runtime.settings import AudioOutputMode, StudioSettings

__all__ = ["AudioOutputMode", "StudioRuntime", "StudioSettings", "recover_recordings", "recording_name"]
