"""The studio's rundown room with a cast: each segment in its speaker's voice, naming its speaker's row, and nothing
placed on the programme while the cast's faces are still being built (``hold``)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from studio.pipeline import commands as cmd
from studio.pipeline.cast import Member
from studio.pipeline.commands import PreviewMode
from studio.pipeline.rundown import Segment
from studio.pipeline.settings import CoreSettings
from studio.runtime.events import Outbox
from studio.runtime.rundown import RundownRoom
from studio.runtime.settings import StudioSettings


class _Timeline:
    """Stands in for the programme's source: keeps what is scheduled on it."""

    def __init__(self) -> None:
        self.items: list = []

    def cut(self, slot: int) -> int:
        return slot

    def schedule(self, item) -> None:
        item.start_slot = sum(x.n_slots for x in self.items)
        self.items.append(item)


def _poll_until(room: RundownRoom, what, timeout_s: float = 60.0) -> None:
    """Poll the room until ``what()`` (a bounded wait for a condition, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "gave up waiting"
        room.poll()
        time.sleep(0.02)


def test_each_segment_in_its_speakers_voice_after_the_cast_is_up() -> None:
    timeline = _Timeline()
    supervisor = SimpleNamespace(core_settings=CoreSettings(fps=25.0), program_source=timeline,
                                 mode=PreviewMode.SCRIPT, clock_s=lambda: 0.0, interview_source=None)
    events: list = []
    room = RundownRoom(StudioSettings(warm_up_voice=False, default_voice="espeak:en-us"), supervisor,
                       Outbox(events.append))
    building = [True]
    asked: list[int] = []

    def hold() -> bool:  # asked only once the first segment's speech is ready
        asked.append(1)
        return building[0]

    room.hold = hold
    cast = (Member("Anna", None, None), Member("Ben", None, "espeak:en-gb"))
    segments = (Segment("One", "Good evening.", "espeak:en-us", anchor="Anna"),
                Segment("Two", "Thank you, Anna.", "espeak:en-us", anchor="Ben"),
                Segment("Three", "Good night.", "espeak:en-us"))
    try:
        room.go_live(cmd.GoLive(segments), cast)
        _poll_until(room, lambda: asked)
        for _ in range(5):
            room.poll()
        assert timeline.items == [] and room.items == []  # ready, and held while the faces are built
        building[0] = False
        _poll_until(room, lambda: len(timeline.items) == 3)
    finally:
        room.close()
    got = [(it.on_air.row, it.on_air.speaker, it.voice) for it in timeline.items]
    assert got == [(0, 0, "espeak:en-us"), (1, 1, "espeak:en-gb"), (2, 0, "espeak:en-us")]
    assert not [e for e in events if isinstance(e, (cmd.Error, cmd.SegmentFailed))]
