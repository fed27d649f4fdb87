"""The cast room: the open rundown's cast on the programme.

A cast of two or more anchors goes on the programme as the rundown shows it (two-shot or cut to the speaker): their
faces are built on a worker of this room's own, one after another at the presenter's size of that layout, with
progress; then the supervisor restarts the one core on them (``CoreSupervisor.set_cast``), the anchors rows of one
generator call with their own motion (``studio.pipeline.programme``, as ``render --rundown``). The faces on the
programme stay until the new ones are ready; a portrait that cannot be used is reported in one line naming its
anchor, and the programme keeps what it had. A cast of fewer than two leaves the one anchor (the anchor room's) on
air. The members' voices and names are what the rundown room speaks and straps (``members``; a cast of one
too, whose face is not shown).
"""

from __future__ import annotations

import concurrent.futures as cf
import threading

from studio.contracts import CastLayout
from studio.errors import CastMemberError, StudioError
from studio.pipeline import commands as cmd
from studio.runtime.events import Outbox
from studio.runtime.supervisor import CoreSupervisor
from studio.runtime.workers import lower_thread_priority


class _Cancelled(Exception):
    """A newer cast was asked for while this one was being built."""


class CastRoom:
    """See the module docstring. Only the control loop calls it."""

    def __init__(self, supervisor: CoreSupervisor, outbox: Outbox) -> None:
        self.supervisor = supervisor
        self.outbox = outbox
        self.members: tuple = ()  # studio.pipeline.cast.Member, in cast order
        self.layout = CastLayout.TWO_SHOT
        self._key: tuple | None = None  # (portraits, presenter px) of the faces on the programme or being built
        self._future: cf.Future | None = None
        self._cancel = threading.Event()
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="cast",
                                           initializer=lower_thread_priority)

    @property
    def building(self) -> bool:
        return self._future is not None

    @property
    def on_air(self) -> bool:
        return self.supervisor.cast is not None

    def set(self, members, layout: CastLayout) -> None:
        """The rundown's cast is now ``members`` shown as ``layout`` (module docstring)."""
        self.members, self.layout = tuple(members), layout
        self.refresh()

    def refresh(self) -> None:
        """Build the faces the cast needs at the presenter's size now (after a format change too), or put the ones
        on the programme in the layout asked for."""
        from studio.pipeline.factory import presenter_px
        from studio.pipeline.programme import programme_settings

        if len(self.members) < 2:
            self._cancel_build()
            self._key = None
            if self.supervisor.cast is not None:
                self.supervisor.set_cast(None, self.layout)
                self.outbox.emit(cmd.CastOnAir(()))
            return
        px = presenter_px(programme_settings(self.supervisor.core_settings, len(self.members), self.layout))
        key = (tuple(m.portrait for m in self.members), px)
        if key == self._key:
            if self._future is None and self.supervisor.cast_layout is not self.layout:
                self.supervisor.set_cast(self.supervisor.cast, self.layout)  # the same faces, shown otherwise
            return
        self._cancel_build()
        self._key = key
        self._cancel = threading.Event()
        self._future = self._pool.submit(self._build, self.members, px, self._cancel)

    def _cancel_build(self) -> None:
        self._cancel.set()
        if self._future is not None:
            self._future.cancel()
        self._future = None

    def _build(self, members: tuple, px: int, cancel: threading.Event) -> tuple:
        """Worker: every member's face, one after another (a cancelled cast stops between them)."""
        from studio.pipeline.programme import member_pack

        n = len(members)
        packs = []
        for i, m in enumerate(members):
            if cancel.is_set():
                raise _Cancelled()

            def progress(f: float, message: str, i: int = i, name: str = m.name) -> None:
                if not cancel.is_set():
                    self.outbox.emit(cmd.CastProgress((i + float(f)) / n, f"{name}: {message}"))

            packs.append(member_pack(m, px, progress=progress))
        return tuple(packs)

    def poll(self) -> bool:
        """Put a finished cast on the programme; True when one went on just now."""
        fut = self._future
        if fut is None or not fut.done():
            return False
        self._future = None
        try:
            packs = fut.result()
        except (cf.CancelledError, _Cancelled):
            return False
        except CastMemberError as exc:
            self._key = None  # the same portraits are tried again at the next change
            self.outbox.fail(str(exc), cmd.CastFailed(exc.member, str(exc)))
            return False
        except StudioError as exc:
            self._key = None
            self.outbox.fail(str(exc), cmd.CastFailed("", str(exc)))
            return False
        try:
            self.supervisor.set_cast(packs, self.layout)
        except StudioError as exc:
            self._key = None
            self.outbox.fail(str(exc), cmd.CastFailed("", str(exc)))
            return False
        self.outbox.emit(cmd.CastOnAir(tuple(m.name for m in self.members)))
        return True

    def close(self) -> None:
        self._cancel_build()
        self._pool.shutdown(wait=True, cancel_futures=True)
