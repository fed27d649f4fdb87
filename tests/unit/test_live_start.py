"""`live` loads the microphone's audio engine before the core starts (its first load beside a running core, which
exports the model's ONNX files on a fresh install, made the core skip frames)."""

from __future__ import annotations

import pytest

import studio.pipeline.live as live
import studio.pipeline.motion as motion
import studio.presenter.anchor as anchor
from studio.audio.settings import AudioEngine
from studio.pipeline.settings import CoreSettings


def test_the_audio_engine_is_warm_before_the_presenter_is_built(monkeypatch) -> None:
    calls: list[str] = []

    class Capture:
        def __init__(self, settings) -> None:
            pass

        def start(self) -> None:
            calls.append("capture")

        def stop(self) -> None:
            pass

    def stop_here(*args, **kwargs):
        calls.append("anchor")
        raise KeyboardInterrupt  # nothing past the set-up is under test

    monkeypatch.setattr(live, "MicCapture", Capture)
    monkeypatch.setattr(motion, "warm_microphone", lambda engine: calls.append(f"warm {engine.value}"))
    monkeypatch.setattr(anchor, "build_anchor", stop_here)
    with pytest.raises(KeyboardInterrupt):
        live.run_live(CoreSettings(size_px=128), 1.0, audio_engine=AudioEngine.NEURAL)
    assert calls == ["capture", "warm neural", "anchor"]
