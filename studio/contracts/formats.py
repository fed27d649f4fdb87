"""The program's picture and sound formats, and what is on air: the facts every role is opened with."""

from __future__ import annotations

import enum
from dataclasses import dataclass

PROGRAM_RATE_HZ = 48_000  # program audio: what is played, recorded and streamed (broadcast rate)
ANALYSIS_RATE_HZ = 16_000  # what motion sources, the silence sieve and the audio encoders hear


# -- formats ------------------------------------------------------------------------------------------------------------

class Layout(enum.Enum):
    """What the program picture is."""

    SQUARE = "square"  # the presenter alone, size x size
    CANVAS = "canvas"  # 16:9: the presenter over a background, with a lower third


class CastLayout(enum.Enum):
    """How a cast of several anchors is shown."""

    TWO_SHOT = "two-shot"  # every anchor on the set side by side, each matted and sized alike (roundtable)
    CUT = "cut"  # the programme cuts to whoever speaks


@dataclass(frozen=True)
class ProgramFormat:
    """The program's picture and sound, as every output receives it."""

    width: int
    height: int
    fps: float
    audio_rate_hz: int = PROGRAM_RATE_HZ
    layout: Layout = Layout.SQUARE
    presenter_px: int = 512  # the square presenter's size (on a canvas: its size inside the canvas)
    rows: int = 1  # anchors of the cast: rows of one generator call (frames carry each row's channels in turn)
    cast_layout: CastLayout = CastLayout.TWO_SHOT

    @property
    def frame_s(self) -> float:
        return 1.0 / self.fps

    def samples_at(self, slot: int) -> int:
        """Program sample where frame slot ``slot`` starts (slot k is shown at k / fps)."""
        return int(round(slot * self.audio_rate_hz / self.fps))


@dataclass(frozen=True)
class OnAir:
    """What is on air during a chunk (the lower third's title, the rundown row, the words being spoken)."""

    title: str = ""
    row: int = -1  # rundown row; -1: none (idle, microphone, a file)
    speaker: int = 0  # the cast row of the anchor who speaks (0: the first, or the only one)
