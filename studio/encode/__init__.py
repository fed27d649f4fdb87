"""Encoding: the atomic MP4 writer (H.264 + AAC, zero A/V offset) and encoder / file probes."""

from studio.encode.mp4 import Mp4Writer, partial_path_for, recover_partial
from studio.encode.probe import MediaInfo, available_video_encoders, probe_mp4
from studio.encode.settings import EncodeSettings

__all__ = [
    "EncodeSettings",
    "MediaInfo",
    "Mp4Writer",
    "available_video_encoders",
    "partial_path_for",
    "probe_mp4",
    "recover_partial",
]
