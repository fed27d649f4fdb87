"""The interview room: the guest's portrait and the cast of two the interview mode runs on.

An interview needs both faces framed at the two-shot's presenter size, the host's (the portrait on air) and the
guest's (the producer's choice, or the built-in guest). They are built on the anchor room's worker when the
interview is asked for, and when the guest or the host's portrait changes (the picture format does not change during
an interview); the mode starts (or the interview on air takes the new faces) when they are ready (``poll``).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
from pathlib import Path

from studio.errors import StudioError
from studio.pipeline import commands as cmd
from studio.pipeline.commands import PreviewMode
from studio.runtime.anchor import AnchorRoom
from studio.runtime.events import Outbox
from studio.runtime.supervisor import CoreSupervisor

log = logging.getLogger(__name__)


class InterviewRoom:
    """See the module docstring."""

    def __init__(self, supervisor: CoreSupervisor, anchors: AnchorRoom, outbox: Outbox) -> None:
        self.supervisor = supervisor
        self.anchors = anchors
        self.outbox = outbox
        self.guest_path: Path | None = None  # None: the built-in guest
        self._cast: tuple | None = None
        self._cast_key: tuple | None = None
        self._future: cf.Future | None = None
        self._future_key: tuple | None = None

    def _key(self) -> tuple:
        from studio.pipeline.factory import presenter_px

        return self.anchors.path, self.guest_path, presenter_px(self.supervisor.interview_settings())

    def cast(self) -> tuple | None:
        """(host, guest) packs for the faces and size asked for now, or None while they are being built."""
        return self._cast if self._cast_key == self._key() else None

    @property
    def preparing(self) -> bool:
        return self._future is not None

    def prepare(self) -> None:
        """Build the packs for the faces and size asked for now (unless they are built or being built)."""
        from studio.pipeline.interview import interview_anchors

        key = self._key()
        if self._cast_key == key or self._future_key == key:
            return
        if self._future is not None:
            self._future.cancel()
        self._future_key = key
        self._future = self.anchors.submit(interview_anchors, key[0], key[1], key[2])

    def set_guest(self, path: Path | None) -> None:
        self.guest_path = path
        if self.supervisor.mode is PreviewMode.INTERVIEW:
            self.prepare()  # the interview on air takes the new guest when the face is ready

    def refresh(self) -> None:
        """The host's portrait changed: an interview on air gets its faces again."""
        if self.supervisor.mode is PreviewMode.INTERVIEW:
            self.prepare()

    def poll(self) -> bool:
        """Take finished packs; True when a new cast is ready just now (an interview on air has taken it)."""
        fut = self._future
        if fut is None or not fut.done():
            return False
        self._future, key = None, self._future_key
        self._future_key = None
        try:
            cast = fut.result()
        except cf.CancelledError:
            return False
        except (StudioError, ValueError, OSError) as exc:
            msg = str(exc) if isinstance(exc, StudioError) else f"Cannot use this portrait ({exc}): try another."
            self.outbox.fail(msg, cmd.GuestChanged(self.guest_path, msg))
            if self.supervisor.mode is not PreviewMode.INTERVIEW:
                self.outbox.emit(cmd.ModeChanged(PreviewMode.INTERVIEW, self.supervisor.mode,
                                                 f"The interview cannot start: {msg}"))
            return False
        self._cast, self._cast_key = cast, key
        self.outbox.emit(cmd.GuestChanged(self.guest_path, ""))
        if self.supervisor.mode is PreviewMode.INTERVIEW and key == self._key():
            self.supervisor.set_interview_cast(cast)
        return True
