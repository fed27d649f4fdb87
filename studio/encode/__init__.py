"""Encoding: the atomic MP4 writer (H.264 + AAC, zero A/V offset), the recorder, encoders, streams, probes.

The names below load on first use (PEP 562): PyAV is imported only by what encodes or probes, so that the parts of
the package that do not need it (colour conversion on the GPU, recovery) work on a machine without it.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "Mp4Writer": "studio.encode.mp4", "partial_path_for": "studio.encode.mp4", "recover_partial": "studio.encode.mp4",
    "MediaInfo": "studio.encode.probe", "available_video_encoders": "studio.encode.probe",
    "probe_mp4": "studio.encode.probe", "EncodeSettings": "studio.encode.settings",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'studio.encode' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
