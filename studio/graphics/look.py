"""What the programme looks like, as data: the set, where the presenter stands, and the graphics per segment.

``Graphics`` holds the broadcast graphics of a programme or of one segment (a segment's fields left at ``None`` take
the programme's). ``CanvasStyle`` is the whole look the canvas is opened with. Both are plain data: the rundown file
keeps them (``to_dict`` / ``graphics_from_dict``) and the command line builds them from its flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from studio.errors import InputError

PLACES = ("centre", "left", "right")
TRANSITIONS = ("cut", "dissolve")
VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v")


@dataclass(frozen=True)
class Graphics:
    """Broadcast graphics; ``None`` = not set here (a segment then takes the programme's)."""

    name: str | None = None  # the name strap's first line (the presenter's name)
    role: str | None = None  # its second line
    ticker: tuple[str, ...] | None = None  # the crawl's lines, in order
    clock: bool | None = None  # a clock beside the ticker
    logo: str | None = None  # an image file: the channel's bug, top right
    headline: str | None = None  # the over-the-shoulder box's text (beside the presenter, left or right placement)
    box_image: str | None = None  # or its image
    transition: str | None = None  # into this segment: "cut" or "dissolve"

    def over(self, base: "Graphics") -> "Graphics":
        """These fields where set, ``base``'s elsewhere."""
        mine = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(base, **{k: v for k, v in mine.items() if v is not None})

    def to_dict(self) -> dict:
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None:
                out[f.name] = list(v) if isinstance(v, tuple) else v
        return out


def graphics_from_dict(data: object, where: str) -> Graphics | None:
    """``Graphics`` from a rundown's JSON object (unknown keys ignored); raises InputError naming ``where``."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise InputError(f"The graphics of {where} are not an object: write them as {{\"name\": ..., ...}}.")
    kw: dict = {}
    for key in ("name", "role", "logo", "headline", "box_image"):
        v = data.get(key)
        if v is not None:
            if not isinstance(v, str):
                raise InputError(f"'{key}' in the graphics of {where} must be text.")
            kw[key] = v
    if data.get("ticker") is not None:
        t = data["ticker"]
        if not isinstance(t, list) or not all(isinstance(x, str) for x in t):
            raise InputError(f"'ticker' in the graphics of {where} must be a list of lines of text.")
        kw["ticker"] = tuple(t)
    if data.get("clock") is not None:
        if not isinstance(data["clock"], bool):
            raise InputError(f"'clock' in the graphics of {where} must be true or false.")
        kw["clock"] = data["clock"]
    if data.get("transition") is not None:
        if data["transition"] not in TRANSITIONS:
            raise InputError(f"'transition' in the graphics of {where} must be one of {', '.join(TRANSITIONS)}.")
        kw["transition"] = data["transition"]
    return Graphics(**kw)


@dataclass(frozen=True)
class CanvasStyle:
    """The 16:9 programme: the set, the presenter's place, the graphics (programme-wide, and per rundown row)."""

    background_rgb: tuple[int, int, int] | None = None  # a plain-colour set
    background_image: Path | None = None  # the producer's image or looping video as the set
    set_name: str = "builtin"  # the project's own news set when no colour or file is given
    place: str = "centre"  # the presenter: centre, or the left / right third (the box on the other side)
    accent_rgb: tuple[int, int, int] = (200, 30, 45)
    show_lower_third: bool = True  # the segment title
    graphics: Graphics = field(default_factory=Graphics)
    segments: tuple[Graphics | None, ...] = ()  # per rundown row (OnAir.row)
    dissolve_s: float = 0.5
    use_matte: bool = True  # False: the framed photo even where the portrait's matte is good

    @property
    def set_kind(self) -> str:
        """"video", "image", "colour" or "builtin"."""
        if self.background_image is not None:
            return "video" if Path(self.background_image).suffix.lower() in VIDEO_SUFFIXES else "image"
        if self.background_rgb is not None:
            return "colour"
        return "builtin"

    def graphics_for(self, row: int) -> Graphics:
        seg = self.segments[row] if 0 <= row < len(self.segments) else None
        return seg.over(self.graphics) if seg is not None else self.graphics


def rows_graphics(rows, segments) -> tuple[Graphics | None, ...]:
    """The per-row table ``CanvasStyle.segments`` for the rundown ``rows`` of ``segments`` (each with a
    ``graphics`` attribute, or None)."""
    table: list[Graphics | None] = [None] * (max(rows, default=-1) + 1)
    for row, seg in zip(rows, segments):
        table[row] = getattr(seg, "graphics", None)
    return tuple(table)


def parse_colour(text: str, what: str = "--background") -> tuple[int, int, int]:
    """``#RRGGBB`` -> (r, g, b); raises InputError saying how to write it."""
    try:
        if len(text) != 7 or not text.startswith("#"):
            raise ValueError(text)
        return tuple(int(text[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]
    except ValueError:
        raise InputError(f"{what} {text} is not a colour: write it as #RRGGBB, e.g. #10203a.") from None
