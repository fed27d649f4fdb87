"""The program as a camera that video-call tools can pick: pyvirtualcam (v4l2loopback on Linux, OBS's virtual camera
on Windows and macOS).

Where no virtual camera device exists, ``virtualcam_status`` says so in one line with how to get one (on Linux:
load the v4l2loopback kernel module), and the output fails with that line instead of the program stopping. Frames go
to the camera as RGB on a thread of its own behind a bounded queue (a full queue drops the oldest frame, counted);
dropped slots repeat nothing (a camera shows its last picture until the next).
"""

from __future__ import annotations

import logging
import platform
import threading
from collections import deque
from pathlib import Path

import numpy as np

from studio.errors import EncoderError
from studio.contracts import Output, OutputState, OutputStats, ProgramBatch, ProgramFormat, RateMeter

log = logging.getLogger(__name__)

LINUX_HOWTO = ("no virtual camera: load v4l2loopback, e.g. 'sudo apt-get install v4l2loopback-dkms && "
               "sudo modprobe v4l2loopback devices=1 exclusive_caps=1 card_label=NewsStudio'")
OTHER_HOWTO = "no virtual camera: install OBS Studio and start its virtual camera once"


def virtualcam_status() -> tuple[bool, str]:
    """(usable, one line): whether a virtual camera can be opened here, and if not how to get one."""
    try:
        import pyvirtualcam  # noqa: F401
    except ImportError:
        return False, "pyvirtualcam is not installed: pip install 'newsstudio[virtualcam]'"
    if platform.system() == "Linux":
        loaded = Path("/sys/module/v4l2loopback").exists()
        if not loaded:
            return False, LINUX_HOWTO
        devices = sorted(Path("/sys/devices/virtual/video4linux").glob("video*"))
        if not devices:
            return False, LINUX_HOWTO
        return True, f"v4l2loopback loaded ({', '.join('/dev/' + d.name for d in devices)})"
    return True, "OBS virtual camera backend"


class VirtualCamOutput(Output):
    """See the module docstring. ``backend`` / ``device``: pyvirtualcam's (None: the first that opens)."""

    name = "virtual camera"
    retains_frames = False  # it copies what it queues

    def __init__(self, device: str | None = None, backend: str | None = None, queue_frames: int = 4) -> None:
        self.device = device
        self.backend = backend
        self.queue_frames = queue_frames
        self._cam = None
        self._q: deque[np.ndarray] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing = False
        self.frames = 0
        self.dropped = 0
        self.meter = RateMeter()
        self.state = OutputState.OFF
        self.detail = ""
        self.error: BaseException | None = None

    def open(self, fmt: ProgramFormat) -> None:
        super().open(fmt)
        if self._cam is not None:
            return
        try:
            import pyvirtualcam
        except ImportError as exc:
            raise EncoderError(virtualcam_status()[1]) from exc
        if self.backend is None:
            ok, line = virtualcam_status()
            if not ok:
                self.state, self.detail = OutputState.FAILED, line
                raise EncoderError(line[0].upper() + line[1:])
        try:
            self._cam = pyvirtualcam.Camera(fmt.width, fmt.height, fmt.fps, fmt=pyvirtualcam.PixelFormat.RGB,
                                            device=self.device, backend=self.backend)
        except (RuntimeError, ValueError, OSError) as exc:  # pyvirtualcam reports every backend's failure this way
            line = f"the virtual camera does not open ({exc}); {virtualcam_status()[1]}"
            self.state, self.detail = OutputState.FAILED, line
            raise EncoderError(line[0].upper() + line[1:]) from exc
        self.state, self.detail = OutputState.ON, f"{self._cam.backend}: {self._cam.device}"
        self._thread = threading.Thread(target=self._loop, name="virtualcam", daemon=True)
        self._thread.start()

    def write(self, batch: ProgramBatch) -> None:
        if self._cam is None or self._closing:
            return
        with self._cond:
            for frame in batch.frames:
                if len(self._q) >= self.queue_frames:
                    self._q.popleft()
                    self.dropped += 1
                self._q.append(frame.copy())
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._q and not self._closing:
                    self._cond.wait(0.5)
                if not self._q:
                    return
                frame = self._q.popleft()
            try:
                self._cam.send(frame)
            except (RuntimeError, ValueError, OSError) as exc:
                self.error = exc
                self.state, self.detail = OutputState.FAILED, f"the virtual camera stopped: {exc}"
                log.warning("%s", self.detail)
                return
            self.frames += 1
            self.meter.tick()

    def close(self) -> object:
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(5)
        if self._cam is not None:
            self._cam.close()
            self._cam = None
            if self.state is OutputState.ON:
                self.state = OutputState.OFF
        return None

    def stats(self) -> OutputStats:
        return OutputStats(self.name, self.state, frames=self.frames, dropped=self.dropped, fps=self.meter.rate(),
                           detail=self.detail)
