"""The rundown: the ordered list of segments a presenter speaks (a title, a block of text and a voice each).

Stored as JSON ``{"version": 2, "graphics": {...}, "cast": {...}, "segments": [{"title": ..., "text": ...,
"voice": ..., "anchor": ..., "graphics": {...}}, ...]}``: the broadcast graphics of the programme and of each segment (``studio.graphics.look``;
a segment's take the programme's where left out) and the cast with each segment's speaker (``studio.pipeline.cast``:
a file without one has one anchor). Version 1 files (no graphics) still load. The default ships in
``resources/rundown.json``; the studio keeps the producer's edited copy in the data folder.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from studio.errors import InputError
from studio.graphics.look import Graphics, graphics_from_dict
from studio.paths import RESOURCES, data_dir

log = logging.getLogger(__name__)

RUNDOWN_VERSION = 2
DEFAULT_RUNDOWN = RESOURCES / "rundown.json"
DEFAULT_VOICE = "piper:joe"


@dataclass(frozen=True)
class Segment:
    """One block of the rundown."""

    title: str
    text: str
    voice: str = DEFAULT_VOICE  # engine:voice, e.g. piper:joe or espeak:en-us
    graphics: Graphics | None = None  # this segment's graphics over the programme's (None: the programme's)
    anchor: str | None = None  # the cast member who speaks it (``studio.pipeline.cast``; None: the first)

    @property
    def word_count(self) -> int:
        return len(self.text.split())


def user_rundown_path() -> Path:
    """Where the studio saves the producer's rundown."""
    return data_dir() / "rundown.json"


def parse_rundown(data: object, source: str = "rundown") -> list[Segment]:
    """Segments from decoded JSON; raises InputError saying what is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        raise InputError(f"{source} is not a rundown: expected an object with a 'segments' list.")
    out: list[Segment] = []
    for i, item in enumerate(data["segments"]):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise InputError(f"Segment {i + 1} of {source} has no 'text': give each segment a text.")
        title = item.get("title") if isinstance(item.get("title"), str) else f"Segment {i + 1}"
        voice = item.get("voice") if isinstance(item.get("voice"), str) and item.get("voice") else DEFAULT_VOICE
        g = graphics_from_dict(item.get("graphics"), f"segment {i + 1} of {source}")
        who = item.get("anchor")
        if who is not None and (not isinstance(who, str) or not who.strip()):
            raise InputError(f"'anchor' of segment {i + 1} of {source} must be the name of a cast member.")
        out.append(Segment(title=title, text=item["text"], voice=voice, graphics=g,
                           anchor=who.strip() if who else None))
    return out


def parse_programme_graphics(data: object, source: str = "rundown") -> Graphics:
    """The programme-wide graphics of decoded rundown JSON (empty for a file without them)."""
    got = graphics_from_dict(data.get("graphics"), source) if isinstance(data, dict) else None
    return got or Graphics()


def load_programme_graphics(path: Path | None = None) -> Graphics:
    """The programme-wide graphics of a rundown file (empty when it has none)."""
    path = DEFAULT_RUNDOWN if path is None else Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"Cannot read {path.name} as a rundown (JSON): {exc}. Fix or replace the file.") from exc
    return parse_programme_graphics(data, path.name)


def load_rundown(path: Path | None = None) -> list[Segment]:
    """Read a rundown file (default: the shipped one)."""
    path = DEFAULT_RUNDOWN if path is None else Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError(f"Rundown not found: {path}. Check the path.") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"Cannot read {path.name} as a rundown (JSON): {exc}. Fix or replace the file.") from exc
    return parse_rundown(data, path.name)


def load_cast(path: Path | None = None) -> tuple:
    """The cast of a rundown file (``studio.pipeline.cast.Member``s, portraits resolved against its folder; empty
    when it names none), with every segment's speaker checked against it."""
    from studio.pipeline.cast import check_speakers, parse_cast

    path = DEFAULT_RUNDOWN if path is None else Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"Cannot read {path.name} as a rundown (JSON): {exc}. Fix or replace the file.") from exc
    cast = parse_cast(data, path.name, base=path.parent)
    check_speakers(cast, [s.anchor for s in parse_rundown(data, path.name)], path.name)
    return cast


def load_user_rundown() -> list[Segment]:
    """The producer's saved rundown, or the shipped default when there is none or it is unreadable."""
    path = user_rundown_path()
    if path.is_file():
        try:
            return load_rundown(path)
        except InputError as exc:
            log.warning("ignoring the saved rundown: %s", exc)
    return load_rundown(DEFAULT_RUNDOWN)


def _segment_dict(s: Segment) -> dict:
    out = {k: v for k, v in asdict(s).items() if k not in ("graphics", "anchor")}
    if s.anchor is not None:
        out["anchor"] = s.anchor
    if s.graphics is not None and s.graphics.to_dict():
        out["graphics"] = s.graphics.to_dict()
    return out


def user_programme_graphics() -> Graphics:
    """The programme graphics of the producer's saved rundown (of the shipped one when there is none)."""
    path = user_rundown_path()
    try:
        return load_programme_graphics(path if path.is_file() else DEFAULT_RUNDOWN)
    except InputError as exc:
        log.warning("ignoring the saved rundown's graphics: %s", exc)
        return Graphics()


def user_cast() -> tuple:
    """The cast of the producer's saved rundown (of the shipped one when there is none); empty when it names none
    or cannot be read (the segments then load alone, as ``load_user_rundown`` does)."""
    path = user_rundown_path()
    try:
        return load_cast(path if path.is_file() else DEFAULT_RUNDOWN)
    except InputError as exc:
        log.warning("ignoring the saved rundown's cast: %s", exc)
        return ()


def save_rundown(segments: list[Segment], path: Path | None = None, graphics: Graphics | None = None,
                 cast: tuple | None = None) -> Path:
    """Write ``segments`` (and the programme's ``graphics`` and ``cast``) as JSON (atomically: a temporary file
    renamed onto ``path``; portraits relative to its folder where they lie under it). ``cast`` None keeps the cast
    the file at ``path`` already has (an editor that does not show the cast does not lose it)."""
    from studio.pipeline.cast import cast_to_dict

    path = user_rundown_path() if path is None else Path(path)
    payload: dict = {"version": RUNDOWN_VERSION}
    if graphics is not None and graphics.to_dict():
        payload["graphics"] = graphics.to_dict()
    if cast is None:
        try:
            kept = json.loads(path.read_text(encoding="utf-8")).get("cast")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            kept = None
        if isinstance(kept, dict) and kept:
            payload["cast"] = kept
    elif cast:
        payload["cast"] = cast_to_dict(tuple(cast), path.parent)
    payload["segments"] = [_segment_dict(s) for s in segments]
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise InputError(f"Cannot save the rundown to {path}: {exc.strerror}. Choose a folder you may write to.") \
            from exc
    return path
