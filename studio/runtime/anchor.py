"""The anchor room: builds the face from a portrait on a worker of its own, then hands it to the core's supervisor."""

from __future__ import annotations

import concurrent.futures as cf
from pathlib import Path

from studio.contracts import Layout
from studio.errors import StudioError
from studio.pipeline import commands as cmd
from studio.runtime.events import Outbox
from studio.runtime.supervisor import CoreSupervisor
from studio.runtime.workers import lower_thread_priority


class AnchorRoom:
    """One anchor build at a time (a newer request cancels the older); the face on air stays until the new one is
    ready. Its worker also runs the start-up warm-ups (``background``), away from the speech worker."""

    def __init__(self, supervisor: CoreSupervisor, outbox: Outbox) -> None:
        self.supervisor = supervisor
        self.outbox = outbox
        self.name = ""  # the anchor on air
        self._path: Path | None = None
        self._future: cf.Future | None = None
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="anchor",
                                           initializer=lower_thread_priority)

    @property
    def loading(self) -> bool:
        return self._future is not None

    def background(self, fn, *args) -> None:
        self._pool.submit(fn, *args)

    def submit(self, fn, *args) -> cf.Future:
        """``fn(*args)`` on this room's worker (after the builds asked for before it)."""
        return self._pool.submit(fn, *args)

    @property
    def path(self) -> Path | None:
        """The portrait of the anchor on air or being built (None: the built-in one)."""
        return self._path

    def rebuild_for_format(self) -> None:
        """Build the anchor on air again at the presenter's new size (a pack is framed, and its face detail added,
        at one output size); the old face stays on air until the new one is ready."""
        if self.supervisor.anchor is not None or self._future is not None:
            self.load(self._path)

    def load(self, path: Path | None) -> None:
        from studio.pipeline.factory import presenter_px
        from studio.presenter.anchor import build_anchor

        if self._future is not None:
            self._future.cancel()
        self._path = path
        progress = lambda f, m: self.outbox.emit(cmd.AnchorProgress(float(f), str(m)))  # noqa: E731
        self._future = self._pool.submit(build_anchor, path, progress=progress,
                                         output_px=presenter_px(self.supervisor.core_settings))

    def poll(self) -> bool:
        """Put a finished anchor on air; True when a new one went on air just now."""
        fut = self._future
        if fut is None or not fut.done():
            return False
        self._future = None
        path = self._path
        try:
            anchor = fut.result()
        except cf.CancelledError:
            return False
        except (StudioError, ValueError, OSError) as exc:
            msg = str(exc) if isinstance(exc, StudioError) else f"Cannot use this portrait ({exc}): try another."
            self.outbox.fail(msg, cmd.AnchorFailed(path, msg, self.name))
            return False
        self.name = anchor.name
        try:
            self.supervisor.set_anchor(anchor)
        except StudioError as exc:
            self.outbox.fail(str(exc), cmd.AnchorFailed(path, str(exc), ""))
            return False
        self.outbox.emit(cmd.AnchorLoaded(anchor.name, path))
        matte = anchor.matte
        if matte is not None and matte.poor and self.supervisor.core_settings.layout is Layout.CANVAS:
            self.outbox.emit(cmd.Notice(matte.note))
        return True

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
