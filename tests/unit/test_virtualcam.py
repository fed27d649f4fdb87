"""The virtual camera output. pyvirtualcam ships no fake backend; it has its own extension point for backends
(``pyvirtualcam.register_backend``), so the test registers one that records what the camera is sent and drives the
real ``pyvirtualcam.Camera`` through it. Where no v4l2loopback device exists, the one-line message."""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from studio.encode.virtualcam import VirtualCamOutput, virtualcam_status
from studio.errors import EncoderError
from studio.contracts import OutputState, ProgramBatch, ProgramFormat

pyvirtualcam = pytest.importorskip("pyvirtualcam", reason="pyvirtualcam is optional: pip install pyvirtualcam")

FMT = ProgramFormat(64, 48, 25.0)


class RecordingBackend:
    """A pyvirtualcam backend (its documented duck-typed interface) that keeps the frames it is sent."""

    sent: ClassVar[list[np.ndarray]] = []

    def __init__(self, *, width: int, height: int, fps: float, fourcc: int, device: str | None, **kw) -> None:
        self.width, self.height, self._device = width, height, device or "recording"
        RecordingBackend.sent = []

    def send(self, frame: np.ndarray) -> None:
        RecordingBackend.sent.append(frame.reshape(self.height, self.width, 3).copy())

    def device(self) -> str:
        return self._device

    def native_fourcc(self):
        return None

    def close(self) -> None:
        pass


def test_frames_reach_the_camera_in_order() -> None:
    pyvirtualcam.register_backend("newsstudio-test", RecordingBackend)
    out = VirtualCamOutput(backend="newsstudio-test", queue_frames=100)
    out.open(FMT)
    assert out.stats().state is OutputState.ON
    slots = np.arange(6)
    frames = np.stack([np.full((FMT.height, FMT.width, 3), 10 * (i + 1), np.uint8) for i in slots])
    out.write(ProgramBatch(slots=slots, pts_s=slots / FMT.fps, frames=frames, audio=np.zeros(0, np.float32),
                           audio_start=0))
    frames[:] = 0  # the core may reuse its buffers once write() returns
    deadline = time.monotonic() + 30
    while out.frames < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    out.close()
    assert [int(f[0, 0, 0]) for f in RecordingBackend.sent] == [10, 20, 30, 40, 50, 60]
    assert out.stats().state is OutputState.OFF


@pytest.mark.skipif(Path("/sys/module/v4l2loopback").exists(), reason="v4l2loopback is loaded on this machine")
def test_without_v4l2loopback_one_line_says_how_to_load_it() -> None:
    ok, line = virtualcam_status()
    assert not ok and "modprobe v4l2loopback" in line and "\n" not in line
    out = VirtualCamOutput()
    with pytest.raises(EncoderError, match="modprobe v4l2loopback"):
        out.open(FMT)
    assert out.stats().state is OutputState.FAILED
