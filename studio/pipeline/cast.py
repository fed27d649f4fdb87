"""The cast of a rundown: up to four anchors (a portrait and a voice each) and who speaks each segment.

Stored in the rundown's JSON as ``"cast": {"Anna": {"portrait": "anna.png", "voice": "piper:joe"}, ...}`` (portrait
paths relative to the rundown file; a member without a portrait is the built-in presenter) and ``"anchor": "Anna"``
per segment (left out: the first member). A rundown without a cast has one anchor, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from studio.errors import InputError

MAX_CAST = 4


@dataclass(frozen=True)
class Member:
    """One anchor of the cast."""

    name: str
    portrait: Path | None = None  # None: the built-in presenter
    voice: str | None = None  # engine:voice; None: each segment's own voice

    def resolved(self) -> "Member":
        """This member with its portrait as an absolute path (for a file read from another folder or process)."""
        return replace(self, portrait=Path(self.portrait).resolve()) if self.portrait is not None else self

    def to_dict(self, base: Path | None = None) -> dict:
        out: dict = {}
        if self.portrait is not None:
            p = Path(self.portrait)
            if base is not None:
                try:
                    p = p.resolve().relative_to(Path(base).resolve())
                except ValueError:
                    pass
            out["portrait"] = p.as_posix()
        if self.voice:
            out["voice"] = self.voice
        return out


def parse_cast(data: object, source: str = "rundown", base: Path | None = None) -> tuple[Member, ...]:
    """The cast of decoded rundown JSON (empty when it has none); ``base``: the folder portraits are relative to."""
    if not isinstance(data, dict) or data.get("cast") is None:
        return ()
    cast = data["cast"]
    if not isinstance(cast, dict):
        raise InputError(f"'cast' in {source} must be an object: {{\"Anna\": {{\"portrait\": \"anna.png\"}}, ...}}.")
    if len(cast) > MAX_CAST:
        raise InputError(f"{source} names {len(cast)} anchors in its cast: up to {MAX_CAST} share a programme; "
                         "remove some.")
    out: list[Member] = []
    for name, spec in cast.items():
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"A cast member of {source} has an empty name: give each anchor a name.")
        spec = {} if spec is None else spec
        if not isinstance(spec, dict):
            raise InputError(f"Cast member {name!r} of {source} must be an object with 'portrait' and 'voice'.")
        portrait = spec.get("portrait")
        voice = spec.get("voice")
        if portrait is not None and (not isinstance(portrait, str) or not portrait):
            raise InputError(f"'portrait' of {name!r} in {source} must be an image path (relative to the rundown).")
        if voice is not None and (not isinstance(voice, str) or not voice):
            raise InputError(f"'voice' of {name!r} in {source} must be a voice name such as piper:joe.")
        path = None
        if portrait is not None:
            path = Path(portrait)
            if base is not None and not path.is_absolute():
                path = Path(base) / path
        out.append(Member(name=name.strip(), portrait=path, voice=voice))
    return tuple(out)


def speaker_problem(cast: tuple[Member, ...], who: str | None, index: int, source: str = "rundown") -> str | None:
    """Why segment ``index`` (0-based) cannot be spoken by ``who`` (a rundown without a cast names none), or None."""
    if who is None:
        return None
    if not cast:
        return (f"Segment {index + 1} of {source} names the anchor {who!r} but the rundown has no cast: add a 'cast' "
                "or remove 'anchor'.")
    names = {m.name for m in cast}
    if who not in names:
        return (f"Segment {index + 1} of {source} names the anchor {who!r}, who is not in the cast "
                f"({', '.join(sorted(names))}): fix the name.")
    return None


def check_speakers(cast: tuple[Member, ...], speakers: list[str | None], source: str = "rundown") -> None:
    """Every segment's speaker is a member of the cast (a rundown without a cast names none)."""
    for i, who in enumerate(speakers):
        problem = speaker_problem(cast, who, i, source)
        if problem is not None:
            raise InputError(problem)


def portrait_problem(member: Member) -> str | None:
    """Why ``member``'s portrait cannot be read (it names a file that does not exist), or None."""
    if member.portrait is not None and not Path(member.portrait).is_file():
        return (f"The portrait of {member.name}, {member.portrait}, does not exist: check the path (relative to the "
                "rundown file).")
    return None


def check_portraits(cast: tuple[Member, ...]) -> None:
    """Every portrait named exists (before any work)."""
    for m in cast:
        problem = portrait_problem(m)
        if problem is not None:
            raise InputError(problem)


def speaker_index(cast: tuple[Member, ...], who: str | None) -> int:
    """The cast row of a segment's speaker (the first member when none is named)."""
    for i, m in enumerate(cast):
        if m.name == who:
            return i
    return 0


def segment_voice(seg, cast: tuple[Member, ...]) -> str:
    """The voice that speaks ``seg`` (a ``studio.pipeline.rundown.Segment``): its speaker's, else its own."""
    if not cast:
        return seg.voice
    return cast[speaker_index(cast, seg.anchor)].voice or seg.voice


def cast_to_dict(cast: tuple[Member, ...], base: Path | None = None) -> dict:
    return {m.name: m.to_dict(base) for m in cast}
